//go:build cgo

package cuda_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/xpu-go/xpu"
	"github.com/xpu-go/xpu/backends/cuda"
	"github.com/xpu-go/xpu/backends/cuda/internal/fakecuda"
	"github.com/xpu-go/xpu/backends/local"
	"github.com/xpu-go/xpu/backends/procs"
	"github.com/xpu-go/xpu/comm"
	"github.com/xpu-go/xpu/internal/tooling/testwait"
	"github.com/xpu-go/xpu/memspace"
	"github.com/xpu-go/xpu/transfer"
	"github.com/xpu-go/xpu/xerr"
)

// The communicators of package comm stage device buffers through host
// memory (ADR 21): these tests run them between local ranks on CUDA device
// memory, each rank on device 0 or 1 in turn.

// onLocalRanks runs fn on every rank of a new local group of p ranks,
// under a time limit, and requires every rank to succeed.
func onLocalRanks(t *testing.T, p int, fn func(ctx context.Context, c comm.Comm) error) {
	t.Helper()
	cs, err := local.NewGroup(p, local.Options{})
	require.NoError(t, err)
	defer func() {
		for _, c := range cs {
			assert.NoError(t, c.Close())
		}
	}()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	errs := make([]error, p)
	var wg sync.WaitGroup
	for i, c := range cs {
		wg.Go(func() { errs[i] = fn(ctx, c) })
	}
	testwait.Group(t, &wg, "every rank's part")
	for r, err := range errs {
		require.NoError(t, err, "rank %d of %d", r, p)
	}
}

// rankValues is rank r's n float32s: small integers, so that sums are
// exact.
func rankValues(r, n int) []float32 {
	v := make([]float32, n)
	for j := range v {
		v[j] = float32((r*7+j*3)%11 - 5)
	}
	return v
}

// sameValues checks that got is want, quickly for long vectors (testify's
// reflection takes seconds over a million elements under the race
// detector).
func sameValues(t *testing.T, want, got []float32, msgAndArgs ...any) {
	t.Helper()
	if slices.Equal(want, got) {
		return
	}
	i := 0
	for i < min(len(want), len(got)) && want[i] == got[i] {
		i++
	}
	t.Errorf("%s: %d values, want %d; first difference at %d", fmt.Sprintf(msgAndArgs[0].(string), msgAndArgs[1:]...), len(got), len(want), i)
}

// checkStagingIdle checks that the staging spaces of the devices hold no
// block.
func checkStagingIdle(t *testing.T, gs []*gpu) {
	t.Helper()
	for _, g := range gs {
		st := g.dev.StagingSpace()
		require.NotNil(t, st)
		stats, err := memspace.StatsOf(st)
		require.NoError(t, err)
		assert.Zero(t, stats.Live, "blocks left in %s", st.Name())
		assert.Zero(t, stats.InUse, "bytes left in %s", st.Name())
	}
}

func TestStagingSpace(t *testing.T) {
	noDriverLeaks(t)
	g := openGPU(t, "1")
	st := g.dev.StagingSpace()
	require.NotNil(t, st)
	assert.Same(t, st, g.dev.StagingSpace(), "one staging space per device space")
	p := st.Properties()
	assert.True(t, p.HostAccessible && p.Pinned, "%+v", p)
	assert.Equal(t, cuda.KindPinned, p.Kind)
	assert.Equal(t, 1, p.Device)
	for _, sp := range g.b.Spaces[1:] {
		assert.Nil(t, sp.(*cuda.Space).StagingSpace(), "%s is host-accessible", sp.Name())
	}
	b, err := st.Allocate(1000, 0)
	require.NoError(t, err)
	require.NotNil(t, b.HostPointer())
	require.NoError(t, st.Free(b))
	// Found through a pool over the device memory.
	pool, err := memspace.NewPool(g.dev, memspace.PoolOptions{})
	require.NoError(t, err)
	defer func() { assert.NoError(t, pool.Close()) }()
	s, ok := memspace.As[memspace.Stager](pool)
	require.True(t, ok)
	assert.Same(t, st, s.StagingSpace())
}

func TestStagingSpaceClosesWithItsSpace(t *testing.T) {
	noDriverLeaks(t)
	sp, err := cuda.NewSpace("", cuda.KindDevice, 0)
	require.NoError(t, err)
	st := sp.StagingSpace()
	require.NotNil(t, st)
	b, err := st.Allocate(4096, 0)
	require.NoError(t, err)
	require.NoError(t, st.Free(b))
	require.NoError(t, sp.Close())
	assert.Nil(t, sp.StagingSpace(), "a closed space stages nothing")
	_, err = st.Allocate(4096, 0)
	assert.ErrorIs(t, err, memspace.ErrClosed)
}

func TestCommOnDeviceBuffers(t *testing.T) {
	noDriverLeaks(t)
	gs := []*gpu{openGPU(t, "0"), openGPU(t, "1")}
	// A small vector, and one of 4 MiB and a bit.
	for _, n := range []int{1000, 1<<20 + 12345} {
		for _, p := range []int{2, 3} {
			t.Run(fmt.Sprintf("p=%d/n=%d", p, n), func(t *testing.T) {
				want := make([]float32, n)
				for r := range p {
					for j, v := range rankValues(r, n) {
						want[j] += v
					}
				}
				on := func(r int) *gpu { return gs[r%2] }
				send := make([]*memspace.Buffer[float32], p)
				recv := make([]*memspace.Buffer[float32], p)
				inplace := make([]*memspace.Buffer[float32], p)
				bc := make([]*memspace.Buffer[float32], p)
				for r := range p {
					send[r] = upload(t, on(r), rankValues(r, n))
					recv[r] = upload(t, on(r), make([]float32, n))
					inplace[r] = upload(t, on(r), rankValues(r, n))
					if r == p-1 {
						bc[r] = upload(t, on(r), rankValues(r, n))
					} else {
						bc[r] = upload(t, on(r), make([]float32, n))
					}
				}
				onLocalRanks(t, p, func(ctx context.Context, c comm.Comm) error {
					r := c.Rank()
					if err := comm.Allreduce(ctx, c, send[r], recv[r], comm.Sum); err != nil {
						return err
					}
					if err := comm.Allreduce(ctx, c, inplace[r], inplace[r], comm.Sum); err != nil {
						return err
					}
					return comm.Bcast(ctx, c, bc[r], p-1)
				})
				for r := range p {
					sameValues(t, want, download(t, on(r), recv[r]), "allreduce on rank %d", r)
					sameValues(t, want, download(t, on(r), inplace[r]), "in-place allreduce on rank %d", r)
					sameValues(t, rankValues(p-1, n), download(t, on(r), bc[r]), "bcast on rank %d", r)
					sameValues(t, rankValues(r, n), download(t, on(r), send[r]), "send buffer of rank %d", r)
				}
				checkStagingIdle(t, gs)
			})
		}
	}
}

func TestSendRecvOnDeviceBuffers(t *testing.T) {
	noDriverLeaks(t)
	gs := []*gpu{openGPU(t, "0"), openGPU(t, "1")}
	const n = 3000
	for _, p := range []int{2, 3} {
		t.Run(fmt.Sprintf("p=%d", p), func(t *testing.T) {
			on := func(r int) *gpu { return gs[r%2] }
			send := make([]*memspace.Buffer[float32], p)
			recv := make([]*memspace.Buffer[float32], p)
			short := make([]*memspace.Buffer[float32], p)
			for r := range p {
				send[r] = upload(t, on(r), rankValues(r, n))
				recv[r] = upload(t, on(r), make([]float32, n))
				short[r] = upload(t, on(r), make([]float32, n/2))
			}
			// A ring: rank r sends to r+1; then a message too long for
			// its buffer, from the last rank to rank 0.
			onLocalRanks(t, p, func(ctx context.Context, c comm.Comm) error {
				r := c.Rank()
				next, prev := (r+1)%p, (r+p-1)%p
				st, err := comm.Sendrecv(ctx, c, send[r].Block(), next, 1, recv[r].Block(), prev, 1)
				if err != nil {
					return err
				}
				if st.Count != 4*n || st.Source != prev {
					return fmt.Errorf("sendrecv status %+v", st)
				}
				switch r {
				case p - 1:
					return comm.Send(ctx, c, send[r].Block(), 0, 2)
				case 0:
					st, err := comm.Recv(ctx, c, short[r].Block(), p-1, 2)
					if !errors.Is(err, comm.ErrTruncated) || st.Count != 4*(n/2) {
						return fmt.Errorf("truncated recv: status %+v, error %w", st, err)
					}
				}
				return nil
			})
			for r := range p {
				assert.Equal(t, rankValues((r+p-1)%p, n), download(t, on(r), recv[r]), "rank %d", r)
			}
			assert.Equal(t, rankValues(p-1, n)[:n/2], download(t, on(0), short[0]), "the delivered part of a truncated message")
			checkStagingIdle(t, gs)
		})
	}
}

// The pinned staging memory runs out: the call fails with
// ErrOutOfMemory in the project's shape, nothing is sent and nothing
// leaks; the next call works.
func TestStagingOutOfMemory(t *testing.T) {
	f := needFake(t)
	noDriverLeaks(t)
	g := openGPU(t, "0")
	b := upload(t, g, rankValues(0, 1000))
	cs, err := local.NewGroup(2, local.Options{})
	require.NoError(t, err)
	defer func() {
		for _, c := range cs {
			assert.NoError(t, c.Close())
		}
	}()
	ctx := waitCtx(t)
	f.Inject(fakecuda.FaultOOM, 0, 3) // the pool's segment, its retry, its exact-size try
	err = comm.Send(ctx, cs[0], b.Block(), 1, 0)
	f.Reset()
	require.ErrorIs(t, err, memspace.ErrOutOfMemory)
	var xe *xerr.Error
	require.ErrorAs(t, err, &xe)
	assert.Equal(t, "comm", xe.Backend)
	checkStagingIdle(t, []*gpu{g})

	out := make([]float32, 1000)
	hb, err := memspace.FromSlice(out)
	require.NoError(t, err)
	require.NoError(t, comm.Send(ctx, cs[0], b.Block(), 1, 0))
	_, err = comm.Recv(ctx, cs[1], hb.Block(), 0, 0)
	require.NoError(t, err)
	assert.Equal(t, rankValues(0, 1000), out, "the first message was never sent")
	checkStagingIdle(t, []*gpu{g})
}

// BenchmarkAllreduceDevice measures a 64 MiB float32 Allreduce between two
// local ranks on device buffers of device 0, staged whole through pinned
// memory, and beside it the bound staging cannot beat on one
// device: a 64 MiB copy from the device to pinned memory and back. It
// reports the Allreduce's rate (GB/s, of the 64 MiB vector), the copy
// pair's (bound-GB/s) and their ratio (x-bound). Against the fake driver
// (make test) it is a smoke run; with XPU_CUDA_TEST_REAL=1 it measures
// the GPU.
func BenchmarkAllreduceDevice(b *testing.B) {
	const size = 64 << 20
	const n = size / 4
	gs := benchGPU(b)
	ctx := context.Background()

	// The bound: the copy pair, timed a few times, the best kept.
	dev, err := memspace.Alloc[float32](gs.dev, n)
	require.NoError(b, err)
	defer func() { assert.NoError(b, dev.Free()) }()
	pin, err := memspace.Alloc[float32](gs.pinned, n)
	require.NoError(b, err)
	defer func() { assert.NoError(b, pin.Free()) }()
	bound := time.Duration(1<<63 - 1)
	for range 3 {
		start := time.Now()
		require.NoError(b, transfer.Copy(ctx, pin, dev))
		require.NoError(b, transfer.Copy(ctx, dev, pin))
		bound = min(bound, time.Since(start))
	}

	cs, err := local.NewGroup(2, local.Options{})
	require.NoError(b, err)
	defer func() {
		for _, c := range cs {
			assert.NoError(b, c.Close())
		}
	}()
	var send, recv [2]*memspace.Buffer[float32]
	for r := range 2 {
		send[r], err = memspace.Alloc[float32](gs.dev, n)
		require.NoError(b, err)
		recv[r], err = memspace.Alloc[float32](gs.dev, n)
		require.NoError(b, err)
		require.NoError(b, transfer.Copy(ctx, send[r], pin))
	}
	defer func() {
		for r := range 2 {
			assert.NoError(b, send[r].Free())
			assert.NoError(b, recv[r].Free())
		}
	}()
	allreduce := func() {
		var wg sync.WaitGroup
		errs := make([]error, 2)
		for r, c := range cs {
			wg.Go(func() { errs[r] = comm.Allreduce(ctx, c, send[r], recv[r], comm.Sum) })
		}
		wg.Wait()
		for _, err := range errs {
			require.NoError(b, err)
		}
	}
	allreduce() // warm the staging pool
	b.SetBytes(size)
	start := time.Now()
	for b.Loop() {
		allreduce()
	}
	elapsed := time.Since(start)
	// Each rate is of the 64 MiB vector: a staged Allreduce copies it down
	// and up at least once, so it cannot beat the copy pair.
	rate := float64(size) * float64(b.N) / elapsed.Seconds() / 1e9
	boundRate := float64(size) / bound.Seconds() / 1e9
	b.ReportMetric(rate, "GB/s")
	b.ReportMetric(boundRate, "bound-GB/s")
	b.ReportMetric(rate/boundRate, "x-bound")
}

// benchGPU opens device 0 for a benchmark, closed when it ends (no
// stream: openGPU is for tests).
func benchGPU(b *testing.B) *gpu {
	b.Helper()
	be, err := xpu.Open(context.Background(), cuda.Name, xpu.Options{cuda.OptDevice: "0"})
	require.NoError(b, err)
	b.Cleanup(func() { assert.NoError(b, be.Close()) })
	return &gpu{b: be, dev: be.Spaces[0].(*cuda.Space), pinned: be.Spaces[1].(*cuda.Space)}
}

// A freed device block handed to a communicator fails the call with an
// error naming the block, matching ErrInvalidArgument; nothing is sent,
// and the driver is not left with a sticky error.
func TestSendFreedDeviceBlock(t *testing.T) {
	noDriverLeaks(t)
	ctx := testwait.Ctx(t)
	b, err := xpu.Open(ctx, cuda.Name, nil)
	require.NoError(t, err)
	defer func() { assert.NoError(t, b.Close()) }()
	cs, err := procs.NewLoopbackGroup(ctx, 2)
	require.NoError(t, err)
	defer func() {
		for _, c := range cs {
			assert.NoError(t, c.Close())
		}
	}()
	blk, err := b.Memory.Allocate(4096, 0)
	require.NoError(t, err)
	require.NoError(t, b.Memory.Free(blk))

	_, err = comm.Isend(cs[0], blk, 1, 3)
	require.ErrorIs(t, err, xerr.ErrInvalidArgument)
	assert.Contains(t, err.Error(), "not allocated")
	err = comm.Send(ctx, cs[0], blk, 1, 3)
	require.ErrorIs(t, err, xerr.ErrInvalidArgument)

	// Nothing reached rank 1: a receive finds no message, and the device
	// still works.
	probe, err := memspace.Alloc[byte](b.Memory, 4096)
	require.NoError(t, err)
	defer func() { assert.NoError(t, probe.Free()) }()
	r, err := comm.Irecv(cs[1], probe.Block(), 0, 3)
	require.NoError(t, err)
	_, done, err := r.Test()
	require.NoError(t, err)
	assert.False(t, done, "a message of a freed block arrived")
	require.NoError(t, r.Cancel())
	require.NoError(t, transfer.Copy(ctx, probe, probe))
}
