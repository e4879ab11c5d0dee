//go:build cgo

package cuda_test

import (
	"context"
	"testing"
	"time"
	"unsafe"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/xpu-go/xpu"
	"github.com/xpu-go/xpu/backends/cuda"
	"github.com/xpu-go/xpu/backends/cuda/internal/fakecuda"
	"github.com/xpu-go/xpu/backends/local"
	"github.com/xpu-go/xpu/backends/procs"
	"github.com/xpu-go/xpu/comm"
	"github.com/xpu-go/xpu/conformance"
	"github.com/xpu-go/xpu/memspace"
	"github.com/xpu-go/xpu/xerr"
)

// One-sided transfers into and out of device memory: the one-sided cases
// of the communicator suite, "comm/onesided/regions" among them, over
// local groups and over procs groups whose links are shared memory or
// TCP, with regions in the device memory of two devices of the driver.
// The host cannot touch that memory (the fake driver maps it
// inaccessible), so every byte into or out of a region goes through the
// driver's copies.

// oneSidedOnly declares every section of the communicator suite but the
// one-sided one: the others run in the communicators' own packages.
var oneSidedOnly = func() []conformance.Option {
	var opts []conformance.Option
	for _, sec := range []string{"group", "p2p", "requests", "context", "close", "coll", "algorithms"} {
		opts = append(opts, conformance.Declare("comm/"+sec, "this test checks regions in device memory; the section runs in the communicator's own tests"))
	}
	return opts
}()

func TestOneSidedDeviceRegions(t *testing.T) {
	noDriverLeaks(t)
	gs := []*gpu{openGPU(t, "0"), openGPU(t, "1")}
	opts := append([]conformance.Option{conformance.RegionSpaces(gs[0].dev, gs[1].dev)}, oneSidedOnly...)
	t.Run("local", func(t *testing.T) {
		conformance.TestComm(t, func(t *testing.T, n int) []comm.Comm {
			cs, err := local.NewGroup(n, local.Options{})
			require.NoError(t, err)
			out := make([]comm.Comm, n)
			for i, c := range cs {
				out[i] = c
			}
			return out
		}, opts...)
	})
	for _, links := range []procs.LinkMode{procs.LinkShm, procs.LinkTCP} {
		t.Run("procs-"+links.String(), func(t *testing.T) {
			conformance.TestComm(t, func(t *testing.T, n int) []comm.Comm {
				ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
				defer cancel()
				cs, err := procs.NewLoopbackGroupConfig(ctx, n, procs.Config{Links: links})
				require.NoError(t, err)
				out := make([]comm.Comm, n)
				for i, c := range cs {
					out[i] = c
				}
				return out
			}, opts...)
		})
	}
	checkStagingIdle(t, gs)
}

// A device that fails under a region: a Put into it, and a Get out of it,
// fail at the origin with ErrDeviceLost, naming the target's copy, and the
// link goes on carrying transfers to the target's other regions.
func TestOneSidedDeviceRegionFails(t *testing.T) {
	f := needFake(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for _, links := range []procs.LinkMode{procs.LinkShm, procs.LinkTCP} {
		t.Run(links.String(), func(t *testing.T) {
			defer f.Reset()
			b, err := xpu.Open(ctx, cuda.Name, xpu.Options{cuda.OptDevice: "1"})
			require.NoError(t, err)
			dev := b.Spaces[0].(*cuda.Space)
			cs, err := procs.NewLoopbackGroupConfig(ctx, 2, procs.Config{Links: links})
			require.NoError(t, err)
			defer func() {
				for _, c := range cs {
					assert.NoError(t, c.Close())
				}
			}()
			blk, err := dev.Allocate(4096, 0)
			require.NoError(t, err)
			reg, err := cs[1].Expose(blk)
			require.NoError(t, err)
			host := make([]byte, 4096)
			hreg, err := cs[1].Expose(memspace.NewBlock(memspace.GoHeap, memspace.Addr(uintptr(unsafe.Pointer(&host[0]))), len(host), unsafe.Pointer(&host[0])))
			require.NoError(t, err)

			f.Inject(fakecuda.FaultDeviceLost, 1, 0)
			src := []byte("bytes for a failed device")
			srcBuf, err := memspace.FromSlice(src)
			require.NoError(t, err)
			err = comm.Put(ctx, cs[0], srcBuf.Block(), reg.Key(), 100)
			require.ErrorIs(t, err, xerr.ErrDeviceLost, "a Put into the region of a failed device")
			t.Log(err)
			dst, err := memspace.FromSlice(make([]byte, 64))
			require.NoError(t, err)
			require.ErrorIs(t, comm.Get(ctx, cs[0], dst.Block(), reg.Key(), 0), xerr.ErrDeviceLost, "a Get out of it")

			require.NoError(t, comm.Put(ctx, cs[0], srcBuf.Block(), hreg.Key(), 100), "a Put into a host region of the same rank")
			assert.Equal(t, src, host[100:100+len(src)])
			require.NoError(t, reg.Close())
			require.NoError(t, hreg.Close())
			assert.NoError(t, dev.Free(blk), "freeing on a failed device: the block goes with the context")
			require.NoError(t, b.Close(), "closing a backend whose device failed")
		})
	}
}
