//go:build cgo

package cuda_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/xpu-go/xpu"
	"github.com/xpu-go/xpu/backends/cpu"
	"github.com/xpu-go/xpu/backends/cuda"
	"github.com/xpu-go/xpu/backends/cuda/internal/fakecuda"
	"github.com/xpu-go/xpu/xerr"
)

// No library, no device, a driver too old: Open is ErrUnavailable with
// the reason, Info says it, and a fallback chain moves on to cpu saying
// why.
func TestUnavailable(t *testing.T) {
	needFake(t)
	ctx := context.Background()
	missing := filepath.Join(t.TempDir(), "libcuda.so.1")
	noDevice, err := fakecuda.Copy(t.TempDir())
	require.NoError(t, err)
	tooOld, err := fakecuda.Copy(t.TempDir())
	require.NoError(t, err)
	for _, c := range []struct {
		name, lib, env, value, reason string
	}{
		{"no library", missing, "", "", "cannot load"},
		{"no device", noDevice, "FAKECUDA_NO_DEVICE", "1", "CUDA_ERROR_NO_DEVICE"},
		{"driver too old", tooOld, "FAKECUDA_DRIVER_VERSION", "11080", "driver too old"},
	} {
		t.Run(c.name, func(t *testing.T) {
			if c.env != "" {
				t.Setenv(c.env, c.value)
			}
			_, err := xpu.Open(ctx, cuda.Name, xpu.Options{cuda.OptLibrary: c.lib})
			require.ErrorIs(t, err, xpu.ErrUnavailable)
			assert.Contains(t, err.Error(), c.reason)
			assert.NotContains(t, err.Error(), "\n")

			t.Setenv(cuda.EnvLibrary, c.lib)
			info, err := xpu.Describe(ctx, cuda.Name)
			require.NoError(t, err)
			assert.False(t, info.Available)
			assert.Contains(t, info.Reason, c.reason)

			t.Setenv("XPU_BACKEND", "cuda,cpu")
			b, skipped, err := xpu.OpenDefault(ctx, nil)
			require.NoError(t, err)
			defer b.Close()
			assert.Equal(t, cpu.Name, b.Name)
			require.Len(t, skipped, 1)
			assert.ErrorIs(t, skipped[0], xpu.ErrUnavailable)
			assert.Contains(t, skipped[0].Error(), c.reason)
		})
	}
}

// Info of the fake machine: its devices with names, memory, compute
// capability, PCI address and UUID; Open of a device it lacks is a clear
// error.
func TestInfo(t *testing.T) {
	needFake(t)
	info, err := xpu.Describe(context.Background(), cuda.Name)
	require.NoError(t, err)
	require.True(t, info.Available, info.Reason)
	require.Len(t, info.Devices, 2)
	assert.Contains(t, info.Library, "driver API 12.4")
	for i, d := range info.Devices {
		assert.Equal(t, i, d.Index)
		assert.NotEmpty(t, d.Name)
		assert.Equal(t, "9.0", d.ComputeCapability)
		assert.NotEmpty(t, d.PCIBusID)
		assert.Regexp(t, `^GPU-[0-9a-f]{8}-`, d.UUID)
		assert.Positive(t, d.MemoryTotal)
		assert.Positive(t, d.MemoryFree)
	}
	assert.NotEqual(t, info.Devices[0].UUID, info.Devices[1].UUID)

	_, err = xpu.Open(context.Background(), cuda.Name, xpu.Options{cuda.OptDevice: "2"})
	assert.ErrorIs(t, err, cuda.ErrNoSuchDevice)
	_, err = xpu.Open(context.Background(), cuda.Name, xpu.Options{cuda.OptDevice: "-1"})
	assert.ErrorIs(t, err, xpu.ErrInvalidArgument)
	_, err = xpu.Open(context.Background(), cuda.Name, xpu.Options{"devcie": "1"})
	assert.ErrorIs(t, err, xpu.ErrUnknownOption)
	_, err = cuda.NewSpace("", "cuda-texture", 0)
	assert.ErrorIs(t, err, xerr.ErrInvalidArgument)
}

var _ = errors.Is
var _ = os.Getenv
