//go:build cgo

package cuda_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/xpu-go/xpu"
	"github.com/xpu-go/xpu/backends/cuda"
	"github.com/xpu-go/xpu/backends/cuda/internal/fakecuda"
	"github.com/xpu-go/xpu/backends/cuda/internal/kernels"
	"github.com/xpu-go/xpu/internal/tooling/testwait"
	"github.com/xpu-go/xpu/memspace"
	"github.com/xpu-go/xpu/transfer"
	"github.com/xpu-go/xpu/xerr"
)

// The device runs out of memory: a clear error, the ledger unchanged, and
// the next allocation works.
func TestFaultOutOfMemory(t *testing.T) {
	f := needFake(t)
	noDriverLeaks(t)
	g := openGPU(t, "0")
	for _, sp := range g.b.Spaces {
		before, _ := memspace.StatsOf(sp)
		f.Inject(fakecuda.FaultOOM, 0, 1)
		_, err := sp.Allocate(4096, 0)
		require.ErrorIs(t, err, xerr.ErrOutOfMemory, sp.Name())
		after, _ := memspace.StatsOf(sp)
		assert.Equal(t, before, after, "the ledger of %s", sp.Name())
		b, err := sp.Allocate(4096, 0)
		require.NoError(t, err)
		require.NoError(t, sp.Free(b))
	}
	// More than the device has, without injection.
	_, err := g.dev.Allocate(1<<40, 0)
	assert.ErrorIs(t, err, xerr.ErrOutOfMemory)
}

// A kernel that faults (an illegal address, a launch failure, a lost
// device): the error surfaces at the next synchronize and event as
// ErrDeviceLost, never a hang; host work behind it does not run; every
// later call fails the same way; Close still releases everything; a
// reopened backend works.
func TestFaultStickyDevice(t *testing.T) {
	f := needFake(t)
	for _, c := range []struct {
		name   string
		inject func()
	}{
		{"illegal address", func() {}},
		{"launch failure", func() { f.Inject(fakecuda.FaultLaunch, 0, 1) }},
		{"device lost", func() { f.Inject(fakecuda.FaultDeviceLost, 0, 0) }},
	} {
		t.Run(c.name, func(t *testing.T) {
			defer f.Reset()
			ctx := context.Background()
			b, err := xpu.Open(ctx, cuda.Name, nil)
			require.NoError(t, err)
			g := &gpu{b: b, dev: b.Spaces[0].(*cuda.Space), x: b.Exec.(*cuda.Executor)}
			g.s, err = g.x.NewStream()
			require.NoError(t, err)
			k := testKernels(t, g)
			buf, err := memspace.Alloc[uint64](g.dev, 16)
			require.NoError(t, err)
			require.NoError(t, k[kernels.TestSleep].Launch(g.s, one, uint64(20*time.Millisecond)))
			c.inject()
			if c.name == "illegal address" {
				require.NoError(t, k[kernels.TestStore].Launch(g.s, one, uint64(0xdead0000), uint64(1)), "errors of a kernel are asynchronous")
			} else {
				err := k[kernels.TestStore].Launch(g.s, one, buf, uint64(1))
				if err != nil {
					require.ErrorIs(t, err, xerr.ErrDeviceLost)
				}
			}
			ran := false
			require.NoError(t, g.s.Enqueue(func(context.Context) error { ran = true; return nil }))
			ev, err := g.s.Record()
			if err == nil {
				wctx, cancel := context.WithTimeout(ctx, 10*time.Second)
				werr := returned(t, "an event after the fault", func() error { return ev.Wait(wctx) })
				assert.ErrorIs(t, werr, xerr.ErrDeviceLost, "an event after the fault")
				cancel()
			}
			sctx, cancel := context.WithTimeout(ctx, 10*time.Second)
			defer cancel()
			err = returned(t, "the stream after the fault", func() error { return g.s.Synchronize(sctx) })
			require.ErrorIs(t, err, xerr.ErrDeviceLost)
			assert.NotErrorIs(t, err, context.DeadlineExceeded)
			assert.False(t, ran, "host work behind a fault ran")
			t.Log(err)

			_, err = g.dev.Allocate(64, 0)
			assert.ErrorIs(t, err, xerr.ErrDeviceLost, "allocation after the fault")
			assert.ErrorIs(t, cuda.Fill(g.s, buf, 1), xerr.ErrDeviceLost, "launch after the fault")

			assert.NoError(t, g.dev.Free(buf.Block()), "freeing on a failed device: the block goes with the context")
			require.NoError(t, b.Close(), "closing a backend whose device failed")

			assert.Zero(t, f.Stats().Live(), "what the driver still holds after Close: %+v", f.Stats())
			f.Reset()
			g2 := openGPU(t, "0")
			out := upload(t, g2, []uint64{1, 2, 3})
			require.NoError(t, cuda.Scale(g2.s, out, 2))
			assert.Equal(t, []uint64{2, 4, 6}, download(t, g2, out))
		})
	}
}

// A copy the driver fails returns the driver's error, matching
// xerr.ErrDeviceLost, never nil, in every direction the path serves
// (host, pinned memory and the device's own memory to and from the device,
// and device to device across devices): from the synchronous copy, and in
// stream order from the copy's event and the stream's Synchronize.
func TestFaultCopy(t *testing.T) {
	f := needFake(t)
	noDriverLeaks(t)
	ctx := testwait.Ctx(t)
	const n = 4096
	// side returns a block of n bytes: pageable host memory, pinned
	// memory of g's device, or its device memory.
	side := func(t *testing.T, g *gpu, kind string) memspace.Block {
		if kind == "host" {
			b, err := memspace.FromSlice(make([]byte, n))
			require.NoError(t, err)
			return b.Block()
		}
		sp := g.dev
		if kind == "pinned" {
			sp = g.pinned
		}
		b, err := sp.Allocate(n, 0)
		require.NoError(t, err)
		t.Cleanup(func() { assert.NoError(t, sp.Free(b)) })
		return b
	}
	for _, async := range []bool{false, true} {
		for _, c := range []struct{ dst, src string }{
			{"device", "host"}, {"host", "device"}, {"device", "device"},
			{"device", "pinned"}, {"pinned", "device"}, {"device 1", "device"},
		} {
			name := c.dst + "<-" + c.src
			if async {
				name += " in stream order"
			}
			t.Run(name, func(t *testing.T) {
				defer f.Reset()
				gs := []*gpu{openGPU(t, "0")}
				dg := gs[0]
				if c.dst == "device 1" {
					dg = openGPU(t, "1")
					gs = append(gs, dg)
				}
				// "device 1" is device memory of the second backend.
				dst, src := side(t, dg, strings.TrimSuffix(c.dst, " 1")), side(t, gs[0], c.src)
				s := dg.s
				if async {
					k := testKernels(t, dg)
					require.NoError(t, k[kernels.TestSleep].Launch(s, one, uint64(50*time.Millisecond)),
						"work ahead of the copy, so that it fails after its event is recorded")
				}
				// Every device the copy involves takes the fault: the
				// copy fails in whichever context makes it.
				for i := range gs {
					f.Inject(fakecuda.FaultCopy, i, 1)
				}
				if !async {
					err := transfer.CopyBlock(ctx, dst, src)
					require.ErrorIs(t, err, xerr.ErrDeviceLost, "a copy the driver failed must return the driver's error, never nil")
					t.Log(err)
					return
				}
				ev, err := transfer.CopyBlockAsync(s, dst, src)
				if err == nil {
					wctx, cancel := context.WithTimeout(ctx, 10*time.Second)
					err = ev.Wait(wctx)
					cancel()
				}
				require.ErrorIs(t, err, xerr.ErrDeviceLost, "a copy in stream order the driver failed must fail its event with the driver's error, never nil")
				assert.NotErrorIs(t, err, context.DeadlineExceeded)
				sctx, cancel := context.WithTimeout(ctx, 10*time.Second)
				defer cancel()
				err = s.Synchronize(sctx)
				require.ErrorIs(t, err, xerr.ErrDeviceLost, "the stream's Synchronize after a copy the driver failed must return the driver's error, never nil")
				assert.NotErrorIs(t, err, context.DeadlineExceeded)
			})
		}
	}
}
