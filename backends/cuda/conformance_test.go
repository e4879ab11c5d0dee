//go:build cgo

package cuda_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/xpu-go/xpu"
	"github.com/xpu-go/xpu/backends/cpu"
	"github.com/xpu-go/xpu/backends/cuda"
	"github.com/xpu-go/xpu/backends/procs"
	"github.com/xpu-go/xpu/comm"
	"github.com/xpu-go/xpu/conformance"
	"github.com/xpu-go/xpu/executor"
	"github.com/xpu-go/xpu/memspace"
)

// The whole backend, as `xpu conformance` runs it: the device, pinned and
// managed spaces (with a pool over device memory), the executor and its
// streams, and the transfers between every pair of spaces.
func TestConformance(t *testing.T) {
	noDriverLeaks(t)
	conformance.RunDriver(t, cuda.Name, nil)
}

// The second device, whose spaces and streams are another context.
func TestConformanceDevice1(t *testing.T) {
	noDriverLeaks(t)
	conformance.RunDriver(t, cuda.Name, xpu.Options{cuda.OptDevice: "1"})
}

// Transfers between host memory, both devices' memory and pinned memory,
// with CUDA streams and with CPU streams: peer copies and the cpu space's
// pageable memory. A case copies every size between every pair of five
// spaces, which takes longer than the suite's default bound on two busy
// cores under the race detector.
func TestConformancePeerAndHost(t *testing.T) {
	noDriverLeaks(t)
	open := func(t *testing.T, dev string) *xpu.Backend {
		b, err := xpu.Open(context.Background(), cuda.Name, xpu.Options{cuda.OptDevice: dev})
		require.NoError(t, err)
		t.Cleanup(func() { assert.NoError(t, b.Close()) })
		return b
	}
	conformance.TestTransfer(t, func(t *testing.T) []memspace.Space {
		b0, b1 := open(t, "0"), open(t, "1")
		host := cpu.NewSpace(cpu.SpaceOptions{})
		t.Cleanup(func() { _ = host.Close() })
		return []memspace.Space{b0.Spaces[0], host, b1.Spaces[0], b1.Spaces[1]}
	}, conformance.Streams(func(t *testing.T) executor.Streamer {
		return open(t, "0").Exec.(executor.Streamer)
	}), conformance.Timeout(30*time.Second))
	conformance.TestTransfer(t, func(t *testing.T) []memspace.Space {
		b0 := open(t, "0")
		host := cpu.NewSpace(cpu.SpaceOptions{})
		t.Cleanup(func() { _ = host.Close() })
		return []memspace.Space{b0.Spaces[0], host}
	}, conformance.Streams(func(t *testing.T) executor.Streamer {
		e := cpu.NewExecutor(2)
		t.Cleanup(func() { _ = e.Close() })
		return e
	}), conformance.Timeout(30*time.Second))
}

// The communicator suite over procs ranks of this process, with buffers of
// both devices' memory in its comm/device section: every rank is in one
// process, where the driver refuses to open a handle its own process
// exported, so each device message takes the staged path of a
// shared-memory link after the receiver's refusal (ADR 41);
// TestJobDeviceBuffers runs the mapped path between processes.
func TestConformanceCommDevice(t *testing.T) {
	noDriverLeaks(t)
	ctx := context.Background()
	b0, err := xpu.Open(ctx, cuda.Name, nil)
	require.NoError(t, err)
	t.Cleanup(func() { assert.NoError(t, b0.Close()) })
	b1, err := xpu.Open(ctx, cuda.Name, xpu.Options{cuda.OptDevice: "1"})
	require.NoError(t, err)
	t.Cleanup(func() { assert.NoError(t, b1.Close()) })
	conformance.TestComm(t, func(t *testing.T, n int) []comm.Comm {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		cs, err := procs.NewLoopbackGroup(ctx, n)
		require.NoError(t, err)
		out := make([]comm.Comm, n)
		for i, c := range cs {
			out[i] = c
		}
		return out
	}, conformance.DeviceSpaces(b0.Memory, b1.Memory))
}
