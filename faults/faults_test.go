package faults_test

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/xpu-go/xpu/backends/cpu"
	"github.com/xpu-go/xpu/backends/local"
	"github.com/xpu-go/xpu/comm"
	"github.com/xpu-go/xpu/faults"
	"github.com/xpu-go/xpu/internal/tooling/testwait"
	"github.com/xpu-go/xpu/memspace"
	"github.com/xpu-go/xpu/xerr"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestInjectors(t *testing.T) {
	boom := faults.Fault{Err: errors.New("boom")}
	op := faults.Op{Kind: faults.Isend, Peer: 1}

	nth := faults.Nth(3, boom)
	var got []bool
	for range 5 {
		got = append(got, !nth.Inject(op).IsZero())
	}
	assert.Equal(t, []bool{false, false, true, false, false}, got)

	from := faults.From(2, boom)
	got = nil
	for range 4 {
		got = append(got, !from.Inject(op).IsZero())
	}
	assert.Equal(t, []bool{false, true, true, true}, got)

	assert.True(t, faults.OnKind(faults.Free, faults.Always(boom)).Inject(op).IsZero())
	assert.False(t, faults.OnKind(faults.Isend, faults.Always(boom)).Inject(op).IsZero())
	assert.True(t, faults.OnPeer(2, faults.Always(boom)).Inject(op).IsZero())
	assert.False(t, faults.OnPeer(1, faults.Always(boom)).Inject(op).IsZero())

	sw := faults.NewSwitch(faults.Always(boom))
	assert.True(t, sw.Inject(op).IsZero())
	sw.On()
	assert.False(t, sw.Inject(op).IsZero())
	sw.Off()
	assert.True(t, sw.Inject(op).IsZero())

	any := faults.Any(faults.None, faults.Always(faults.Fault{Drop: true}), faults.Always(boom))
	assert.True(t, any.Inject(op).Drop)

	// Random repeats for a seed and hits roughly p of the time.
	count := func() int {
		r := faults.Random(0.25, 42, boom)
		n := 0
		for range 4000 {
			if !r.Inject(op).IsZero() {
				n++
			}
		}
		return n
	}
	n := count()
	assert.Equal(t, n, count(), "same seed, same faults")
	assert.InDelta(t, 1000, n, 150)
}

func TestSpaceFaults(t *testing.T) {
	inner := cpu.NewSpace(cpu.SpaceOptions{})
	t.Cleanup(func() { require.NoError(t, inner.Close()) })
	s := faults.WrapSpace(inner, faults.Any(
		faults.OnKind(faults.Alloc, faults.Nth(2, faults.Fault{Err: memspace.ErrOutOfMemory})),
		faults.OnKind(faults.Free, faults.Nth(1, faults.Fault{Err: memspace.ErrInvalidArgument})),
	))

	a, err := memspace.Alloc[float64](s, 16)
	require.NoError(t, err)
	assert.Same(t, memspace.Space(s), a.Space(), "blocks are the wrapper's")

	_, err = memspace.Alloc[float64](s, 16)
	require.Error(t, err)
	assert.ErrorIs(t, err, faults.ErrInjected)
	assert.ErrorIs(t, err, memspace.ErrOutOfMemory)

	// The first Free is failed and the block stays allocated; the second
	// goes through.
	err = a.Free()
	assert.ErrorIs(t, err, faults.ErrInjected)
	st, err := memspace.StatsOf(s)
	require.NoError(t, err, "the ledger is found through Unwrap")
	assert.EqualValues(t, 1, st.Live)
	require.NoError(t, a.Free())
	st, _ = memspace.StatsOf(s)
	assert.EqualValues(t, 0, st.Live)

	// A block of the inner space is foreign to the wrapper.
	b, err := inner.Allocate(64, 0)
	require.NoError(t, err)
	assert.ErrorIs(t, s.Free(b), memspace.ErrForeignBlock)
	require.NoError(t, inner.Free(b))
	assert.Equal(t, "faults:"+inner.Name(), s.Name())
}

// An injected error names the wrapper and the operation, matches
// ErrInjected and the sentinel, and is one line.
func TestInjectedErrorShape(t *testing.T) {
	inner := cpu.NewSpace(cpu.SpaceOptions{})
	t.Cleanup(func() { require.NoError(t, inner.Close()) })
	s := faults.WrapSpace(inner, faults.Always(faults.Fault{Err: memspace.ErrOutOfMemory}))
	_, err := s.Allocate(64, 0)
	require.Error(t, err)
	assert.Equal(t, "faults alloc: injected fault: out of memory", err.Error())
	assert.ErrorIs(t, err, faults.ErrInjected)
	assert.ErrorIs(t, err, memspace.ErrOutOfMemory)
	var xe *xerr.Error
	require.ErrorAs(t, err, &xe)
	assert.Equal(t, faults.Name, xe.Backend)
	assert.Equal(t, "alloc", xe.Op)
}

// A lost device fails the operation that lost it and every later one of
// the space, without asking the injector again, with ErrDeviceLost.
func TestSpaceLoseDevice(t *testing.T) {
	inner := cpu.NewSpace(cpu.SpaceOptions{})
	t.Cleanup(func() { require.NoError(t, inner.Close()) })
	var asked atomic.Int64
	count := faults.InjectorFunc(func(faults.Op) faults.Fault { asked.Add(1); return faults.Fault{} })
	s := faults.WrapSpace(inner, faults.Any(count, faults.OnKind(faults.Alloc, faults.Nth(2, faults.Fault{LoseDevice: true}))))

	a, err := memspace.Alloc[float32](s, 16)
	require.NoError(t, err)
	assert.False(t, s.DeviceLost())

	_, err = memspace.Alloc[float32](s, 16)
	require.Error(t, err)
	assert.ErrorIs(t, err, xerr.ErrDeviceLost)
	assert.ErrorIs(t, err, faults.ErrInjected)
	assert.Equal(t, "faults alloc: injected fault: device lost", err.Error())
	assert.True(t, s.DeviceLost())
	assert.EqualValues(t, 2, asked.Load())

	// Lost for good: allocations and frees fail, the injector is not asked.
	for range 3 {
		_, err = s.Allocate(64, 0)
		assert.ErrorIs(t, err, xerr.ErrDeviceLost)
	}
	err = a.Free()
	assert.ErrorIs(t, err, xerr.ErrDeviceLost)
	assert.Equal(t, "faults free: injected fault: device lost", err.Error())
	assert.EqualValues(t, 2, asked.Load())

	// The block stays allocated in the inner space, which frees it.
	st, err := memspace.StatsOf(s)
	require.NoError(t, err)
	assert.EqualValues(t, 1, st.Live)
	blk := a.Block()
	require.NoError(t, inner.Free(memspace.NewBlock(inner, blk.Addr(), blk.Len(), blk.HostPointer())))

	// LoseDevice does the same by hand.
	s2 := faults.WrapSpace(inner, faults.None)
	b, err := s2.Allocate(64, 0)
	require.NoError(t, err)
	s2.LoseDevice()
	assert.ErrorIs(t, s2.Free(b), xerr.ErrDeviceLost)
	_, err = s2.Allocate(64, 0)
	assert.ErrorIs(t, err, xerr.ErrDeviceLost)
	require.NoError(t, inner.Free(memspace.NewBlock(inner, b.Addr(), b.Len(), b.HostPointer())))

	assert.False(t, faults.Fault{LoseDevice: true}.IsZero())
}

// A communicator has no device: a LoseDevice fault fails the one operation.
func TestCommLoseDevice(t *testing.T) {
	g := faultyPair(t, faults.OnKind(faults.Isend, faults.Nth(1, faults.Fault{LoseDevice: true})))
	ctx := testwait.Ctx(t)
	_, err := g[0].Isend(bytesBuf(t, 8).Block(), 1, 2)
	assert.ErrorIs(t, err, xerr.ErrDeviceLost)
	assert.ErrorIs(t, err, faults.ErrInjected)
	assert.Equal(t, "faults isend: injected fault: device lost", err.Error())
	go func() { _ = comm.Send(ctx, g[0], bytesBuf(t, 8).Block(), 1, 2) }()
	_, err = comm.Recv(ctx, g[1], bytesBuf(t, 8).Block(), 0, 2)
	assert.NoError(t, err, "the next send goes through")
}

func group(t *testing.T, n int, inj func(rank int) faults.Injector) []*faults.Comm {
	t.Helper()
	g, err := local.NewGroup(n, local.Options{})
	require.NoError(t, err)
	out := make([]*faults.Comm, n)
	for i := range g {
		out[i] = faults.WrapComm(g[i], inj(i))
	}
	t.Cleanup(func() {
		for _, c := range out {
			assert.NoError(t, c.Close())
		}
	})
	return out
}

// faultyPair opens a group of two whose rank 0 has inj and rank 1 no faults.
func faultyPair(t *testing.T, inj faults.Injector) []*faults.Comm {
	t.Helper()
	return group(t, 2, func(rank int) faults.Injector {
		if rank == 0 {
			return inj
		}
		return faults.None
	})
}

func bytesBuf(t *testing.T, n int) *memspace.Buffer[byte] {
	b, err := memspace.FromSlice(make([]byte, n))
	require.NoError(t, err)
	return b
}

func TestCommFailNth(t *testing.T) {
	boom := errors.New("link flap")
	g := faultyPair(t, faults.OnKind(faults.Isend, faults.Nth(2, faults.Fault{Err: boom})))
	buf := bytesBuf(t, 8)
	ctx := testwait.Ctx(t)
	go func() { _, _ = comm.Recv(ctx, g[1], bytesBuf(t, 8).Block(), 0, 7) }()
	require.NoError(t, comm.Send(ctx, g[0], buf.Block(), 1, 7))
	err := comm.Send(ctx, g[0], buf.Block(), 1, 7)
	assert.ErrorIs(t, err, boom)
	assert.ErrorIs(t, err, faults.ErrInjected)
}

func TestCommDrop(t *testing.T) {
	g := faultyPair(t, faults.OnKind(faults.Isend, faults.Nth(1, faults.Fault{Drop: true})))
	ctx := testwait.Ctx(t)
	src := bytesBuf(t, 4)
	h, _ := src.Host()
	copy(h, "drop")
	require.NoError(t, comm.Send(ctx, g[0], src.Block(), 1, 1), "a dropped send still completes")
	copy(h, "keep")
	require.NoError(t, comm.Send(ctx, g[0], src.Block(), 1, 1))

	dst := bytesBuf(t, 4)
	st, err := comm.Recv(ctx, g[1], dst.Block(), 0, 1)
	require.NoError(t, err)
	d, _ := dst.Host()
	assert.Equal(t, "keep", string(d), "the first message was dropped")
	assert.Equal(t, 4, st.Count)

	// Nothing else arrives.
	tctx, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
	defer cancel()
	_, err = comm.Recv(tctx, g[1], dst.Block(), 0, 1)
	assert.ErrorIs(t, err, context.DeadlineExceeded)
}

func TestCommDelay(t *testing.T) {
	const delay = 80 * time.Millisecond
	g := faultyPair(t, faults.OnKind(faults.Isend, faults.Always(faults.Fault{Delay: delay})))
	ctx := testwait.Ctx(t)
	start := time.Now()
	r, err := g[0].Isend(bytesBuf(t, 8).Block(), 1, 3)
	require.NoError(t, err)
	assert.Less(t, time.Since(start), delay, "Isend returns before the delay")
	_, err = comm.Recv(ctx, g[1], bytesBuf(t, 8).Block(), 0, 3)
	require.NoError(t, err)
	assert.GreaterOrEqual(t, time.Since(start), delay, "the message is held back")
	_, err = r.Wait(ctx)
	require.NoError(t, err)

	// A delayed send canceled before it starts is never delivered.
	r, err = g[0].Isend(bytesBuf(t, 8).Block(), 1, 4)
	require.NoError(t, err)
	require.NoError(t, r.Cancel())
	_, err = r.Wait(ctx)
	assert.ErrorIs(t, err, comm.ErrCanceled)
}

func TestCommLosePeer(t *testing.T) {
	g := group(t, 3, func(int) faults.Injector { return faults.None })
	ctx := testwait.Ctx(t)

	// A pending receive from the peer is released when it is lost.
	r, err := g[0].Irecv(bytesBuf(t, 8).Block(), 2, 0)
	require.NoError(t, err)
	time.AfterFunc(20*time.Millisecond, func() { g[0].LosePeer(2) })
	wctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	_, err = r.Wait(wctx)
	assert.ErrorIs(t, err, comm.ErrPeerLost)

	// Later operations naming it fail at once; others still work.
	_, err = g[0].Isend(bytesBuf(t, 8).Block(), 2, 0)
	assert.ErrorIs(t, err, comm.ErrPeerLost)
	assert.Equal(t, "faults: rank 0 lost peer 2: peer lost", err.Error())
	go func() { _ = comm.Send(ctx, g[1], bytesBuf(t, 8).Block(), 0, 5) }()
	_, err = comm.Recv(wctx, g[0], bytesBuf(t, 8).Block(), 1, 5)
	assert.NoError(t, err)
}

// A peer lost in the middle of an allreduce fails the collective on every
// rank within a bound: the rank that sees the loss errors out and leaves,
// and the local backend reports its departure to the others.
func TestAllreducePeerLost(t *testing.T) {
	const n = 4
	g := group(t, n, func(rank int) faults.Injector {
		if rank == 1 {
			return faults.OnKind(faults.Isend, faults.Nth(3, faults.Fault{LosePeer: true}))
		}
		return faults.None
	})
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	var wg sync.WaitGroup
	errs := make([]error, n)
	for r := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			buf := make([]float64, 1<<16)
			b, _ := memspace.FromSlice(buf)
			for range 10 {
				if err := comm.Allreduce(ctx, g[r], b, b, comm.Sum); err != nil {
					errs[r] = err
					_ = g[r].Close()
					return
				}
			}
		}()
	}
	testwait.Group(t, &wg, "the ranks' Allreduces")
	require.NoError(t, ctx.Err(), "no rank may hang")
	assert.ErrorIs(t, errs[1], comm.ErrPeerLost)
	for r, err := range errs {
		assert.Error(t, err, "rank %d", r)
		assert.True(t, errors.Is(err, comm.ErrPeerLost) || errors.Is(err, comm.ErrClosed), "rank %d: %v", r, err)
	}
}
