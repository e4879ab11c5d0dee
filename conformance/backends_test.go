package conformance_test

import (
	"context"
	"errors"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/xpu-go/xpu"
	"github.com/xpu-go/xpu/backends/cpu"
	"github.com/xpu-go/xpu/backends/local"
	"github.com/xpu-go/xpu/comm"
	"github.com/xpu-go/xpu/conformance"
	"github.com/xpu-go/xpu/executor"
	"github.com/xpu-go/xpu/memspace"
)

// openBackend returns a factory that opens the registered backend name.
func openBackend(name string, opts xpu.Options) func(t *testing.T) *xpu.Backend {
	return func(t *testing.T) *xpu.Backend {
		t.Helper()
		b, err := xpu.Open(context.Background(), name, opts)
		require.NoError(t, err, "open %s", name)
		t.Cleanup(func() {
			// The suite closes some components itself (space/close): a
			// second Close may say so.
			if err := b.Close(); err != nil && !errors.Is(err, xpu.ErrClosed) {
				t.Errorf("close %s: %v", name, err)
			}
		})
		return b
	}
}

// TestCPU runs every suite over the reference host backend, opened by
// name, and checks what its driver's Info claims.
func TestCPU(t *testing.T) {
	conformance.RunDriver(t, "cpu", xpu.Options{"workers": "4"})
}

// TestLocal runs the communicator suite over the in-process backend, as
// registered (eager messages up to the default limit), and checks what its
// driver's Info claims. Its ranks also expose regions of memory the host
// cannot touch (the suite's own device) and of a host space, and pass
// blocks of two such devices to the calls of package comm (comm/device).
func TestLocal(t *testing.T) {
	conformance.RunDriver(t, local.Name, nil, conformance.RegionSpaces(newFakeDevice(), newHostSpace(t)),
		conformance.DeviceSpaces(newFakeDevice(), newFakeDevice()))
}

// TestLocalRendezvous runs the communicator suite over groups that send
// every message by rendezvous, a transport with no buffering at all.
func TestLocalRendezvous(t *testing.T) {
	conformance.TestComm(t, func(t *testing.T, n int) []comm.Comm {
		return localRanks(t, n, local.Options{EagerLimit: -1}, nil)
	}, conformance.MaxRanks(5))
}

// TestFakeDevice runs the space, pool and transfer suites over memory the
// host cannot touch, reached only through transfer paths: the suite's own
// paths for device memory.
func TestFakeDevice(t *testing.T) {
	conformance.TestSpace(t, func(*testing.T) *fakeSpace { return newFakeDevice() })
	conformance.TestPool(t, func(*testing.T) memspace.Space { return newFakeDevice() })
	conformance.TestTransfer(t, func(t *testing.T) []memspace.Space {
		return []memspace.Space{newFakeDevice(), newHostSpace(t), newFakeDevice()}
	}, conformance.Streams(func(t *testing.T) executor.Streamer { return newCPUExec(t) }))
}

// TestSmallSpace runs the space, pool and transfer suites over a host
// space of MinCapacity bytes (a limit it reports through Available): the
// suites scale their blocks to it, and every case passes.
func TestSmallSpace(t *testing.T) {
	small := func(t *testing.T) memspace.Space {
		s := cpu.NewSpace(cpu.SpaceOptions{Limit: conformance.MinCapacity})
		t.Cleanup(func() { _ = s.Close() })
		return s
	}
	conformance.TestSpace(t, small)
	conformance.TestPool(t, small)
	conformance.TestTransfer(t, func(t *testing.T) []memspace.Space { return []memspace.Space{small(t), small(t)} })
}
