//go:build cgo

package cuda_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/xpu-go/xpu"
	"github.com/xpu-go/xpu/backends/cuda"
	"github.com/xpu-go/xpu/executor"
	"github.com/xpu-go/xpu/memspace"
	"github.com/xpu-go/xpu/transfer"
)

// gpu is an open backend of one device, with a stream.
type gpu struct {
	b      *xpu.Backend
	dev    *cuda.Space
	pinned *cuda.Space
	x      *cuda.Executor
	s      executor.Stream
}

func openGPU(t *testing.T, device string) *gpu {
	t.Helper()
	b, err := xpu.Open(context.Background(), cuda.Name, xpu.Options{cuda.OptDevice: device})
	require.NoError(t, err)
	t.Cleanup(func() { assert.NoError(t, b.Close(), "closing the backend (a leak is reported here)") })
	g := &gpu{b: b, dev: b.Spaces[0].(*cuda.Space), pinned: b.Spaces[1].(*cuda.Space), x: b.Exec.(*cuda.Executor)}
	g.s, err = g.x.NewStream()
	require.NoError(t, err)
	return g
}

// upload allocates a device buffer holding vals.
func upload[T any](t *testing.T, g *gpu, vals []T) *memspace.Buffer[T] {
	t.Helper()
	whole, err := memspace.Alloc[T](g.dev, max(len(vals), 1))
	require.NoError(t, err)
	t.Cleanup(func() { assert.NoError(t, whole.Free()) })
	buf, err := whole.Slice(0, len(vals))
	require.NoError(t, err)
	if len(vals) > 0 {
		src, err := memspace.FromSlice(vals)
		require.NoError(t, err)
		require.NoError(t, transfer.Copy(context.Background(), buf, src))
	}
	return buf
}

// download copies a device buffer back to the host, after the stream.
func download[T any](t *testing.T, g *gpu, buf *memspace.Buffer[T]) []T {
	t.Helper()
	require.NoError(t, g.s.Synchronize(context.Background()))
	out := make([]T, buf.Len())
	dst, err := memspace.FromSlice(out)
	require.NoError(t, err)
	require.NoError(t, transfer.Copy(context.Background(), dst, buf))
	return out
}
