package comm_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/xpu-go/xpu/backends/local"
	"github.com/xpu-go/xpu/comm"
	"github.com/xpu-go/xpu/internal/tooling/testwait"
	"github.com/xpu-go/xpu/memspace"
)

func TestInvalidArguments(t *testing.T) {
	cs := newGroup(t, 3, local.Options{})
	c := cs[1] // not the root in the cases below, unless said
	ctx := testwait.Ctx(t)
	f := func(n int) *memspace.Buffer[float64] { return buf(t, make([]float64, n)) }
	x := func(n int) *memspace.Buffer[complex64] { return buf(t, make([]complex64, n)) }
	big := f(12)
	overlapA, _ := big.Slice(0, 8)
	overlapB, _ := big.Slice(4, 12)
	notSlot, _ := big.Slice(1, 5) // overlaps an allgather receive of 12, not as a slot
	var nilCtx context.Context
	cases := []struct {
		name string
		call func() error
	}{
		{"nil comm", func() error { return comm.Allreduce(ctx, nil, f(1), f(1), comm.Sum) }},
		{"nil *local.Comm", func() error { return comm.Barrier(ctx, (*local.Comm)(nil)) }},
		{"nil *local.Comm reduce", func() error { return comm.Reduce(ctx, (*local.Comm)(nil), f(1), f(1), comm.Sum, 0) }},
		{"nil *local.Comm scatter", func() error { return comm.Scatter(ctx, (*local.Comm)(nil), f(3), f(1), 0) }},
		{"nil context", func() error { return comm.Barrier(nilCtx, c) }},
		{"nil send", func() error { return comm.Allreduce(ctx, c, nil, f(1), comm.Sum) }},
		{"nil recv", func() error { return comm.Allreduce(ctx, c, f(1), nil, comm.Sum) }},
		{"allreduce sizes", func() error { return comm.Allreduce(ctx, c, f(2), f(3), comm.Sum) }},
		{"allreduce partial overlap", func() error { return comm.Allreduce(ctx, c, overlapA, overlapB, comm.Sum) }},
		{"unknown op", func() error { return comm.Allreduce(ctx, c, f(1), f(1), comm.Op(99)) }},
		{"zero op", func() error { return comm.Allreduce(ctx, c, f(1), f(1), 0) }},
		{"complex min", func() error { return comm.Allreduce(ctx, c, x(1), x(1), comm.Min) }},
		{"complex max", func() error { return comm.Reduce(ctx, c, x(1), x(1), comm.Max, 0) }},
		{"bcast nil", func() error { return comm.Bcast[float64](ctx, c, nil, 0) }},
		{"bcast root -1", func() error { return comm.Bcast(ctx, c, f(1), -1) }},
		{"bcast root 3", func() error { return comm.Bcast(ctx, c, f(1), 3) }},
		{"reduce root", func() error { return comm.Reduce(ctx, c, f(1), f(1), comm.Sum, 7) }},
		{"reduce nil recv at root", func() error { return comm.Reduce(ctx, c, f(1), nil, comm.Sum, 1) }},
		{"reduce sizes at root", func() error { return comm.Reduce(ctx, c, f(2), f(1), comm.Sum, 1) }},
		{"gather recv size", func() error { return comm.Gather(ctx, c, f(2), f(5), 1) }},
		{"gather nil recv at root", func() error { return comm.Gather(ctx, c, f(2), nil, 1) }},
		{"gather root", func() error { return comm.Gather(ctx, c, f(2), nil, -2) }},
		{"scatter send size", func() error { return comm.Scatter(ctx, c, f(5), f(2), 1) }},
		{"scatter nil recv", func() error { return comm.Scatter(ctx, c, f(6), nil, 1) }},
		{"allgather recv size", func() error { return comm.Allgather(ctx, c, f(4), f(8)) }},
		{"allgather overlap", func() error { return comm.Allgather(ctx, c, notSlot, big) }},
		{"alltoall sizes", func() error { return comm.Alltoall(ctx, c, f(3), f(6)) }},
		{"alltoall not a multiple", func() error { return comm.Alltoall(ctx, c, f(4), f(4)) }},
		{"alltoall in place", func() error { return comm.Alltoall(ctx, c, big, big) }},
		{"reduce-scatter sizes", func() error { return comm.ReduceScatter(ctx, c, f(7), f(2), comm.Sum) }},
		{"reduce-scatter overlap", func() error { return comm.ReduceScatter(ctx, c, big, overlapA4(big), comm.Sum) }},
		{"block not whole elements", func() error {
			return comm.AllreduceBlock(ctx, c, buf(t, make([]byte, 7)).Block(), buf(t, make([]byte, 7)).Block(), comm.Float64, comm.Sum)
		}},
		{"bad dtype", func() error {
			return comm.AllreduceBlock(ctx, c, big.Block(), big.Block(), comm.DType(200), comm.Sum)
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.call()
			require.ErrorIs(t, err, comm.ErrInvalidArgument)
		})
	}
	// Nothing was sent: the group still works.
	for r, err := range onRanks(t, ctx, cs, func(ctx context.Context, c comm.Comm) error { return comm.Barrier(ctx, c) }) {
		require.NoError(t, err, "rank %d", r)
	}
}

// overlapA4 returns the first four elements of b.
func overlapA4(b *memspace.Buffer[float64]) *memspace.Buffer[float64] {
	s, _ := b.Slice(0, 4)
	return s
}

func TestFreedBuffer(t *testing.T) {
	cs := newGroup(t, 1, local.Options{})
	sp := &ledgerSpace{}
	b, err := memspace.Alloc[int32](sp, 4)
	require.NoError(t, err)
	require.NoError(t, b.Free())
	require.ErrorIs(t, comm.Allreduce(testwait.Ctx(t), cs[0], b, b, comm.Sum), comm.ErrClosed)
	require.ErrorIs(t, comm.Bcast(testwait.Ctx(t), cs[0], b, 0), comm.ErrClosed)
}

func TestDoneContextStartsNothing(t *testing.T) {
	cs := newGroup(t, 2, local.Options{})
	tr := &tracker{Comm: cs[0]}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	s := buf(t, []float64{1, 2})
	require.ErrorIs(t, comm.Allreduce(ctx, tr, s, s, comm.Sum), context.Canceled)
	require.ErrorIs(t, comm.Barrier(ctx, tr), context.Canceled)
	require.ErrorIs(t, comm.Bcast(ctx, tr, s, 1), context.Canceled)
	started, _ := tr.pending()
	assert.Zero(t, started, "a collective under a done context started requests")
}

func TestZeroElementsSendNothing(t *testing.T) {
	// Empty collectives are legal and need no message: one rank alone
	// returns at once, having started no request.
	cs := newGroup(t, 3, local.Options{})
	tr := &tracker{Comm: cs[1]}
	ctx, cancel := context.WithTimeout(context.Background(), guard)
	defer cancel()
	e := buf(t, []float32{})
	require.NoError(t, comm.Allreduce(ctx, tr, e, e, comm.Max))
	require.NoError(t, comm.Reduce(ctx, tr, e, e, comm.Sum, 1))
	require.NoError(t, comm.Bcast(ctx, tr, e, 0))
	require.NoError(t, comm.Gather(ctx, tr, e, e, 1))
	require.NoError(t, comm.Scatter(ctx, tr, e, e, 1))
	require.NoError(t, comm.Allgather(ctx, tr, e, e))
	require.NoError(t, comm.Alltoall(ctx, tr, e, e))
	require.NoError(t, comm.ReduceScatter(ctx, tr, e, e, comm.Prod))
	started, _ := tr.pending()
	assert.Zero(t, started)
}

// ledgerSpace is a host space on the Go heap that allocates for real, so
// that buffers can be freed.
type ledgerSpace struct {
	mu   sync.Mutex
	live map[memspace.Addr][]uint64
}

func (s *ledgerSpace) Name() string { return "test-host" }
func (s *ledgerSpace) Properties() memspace.Properties {
	return memspace.Properties{Kind: "host", Device: -1, HostAccessible: true, Alignment: 8}
}
func (s *ledgerSpace) Allocate(size, align int) (memspace.Block, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.live == nil {
		s.live = map[memspace.Addr][]uint64{}
	}
	w := make([]uint64, (size+7)/8)
	b, err := memspace.FromSlice(w)
	if err != nil {
		return memspace.Block{}, err
	}
	blk := memspace.NewBlock(s, b.Block().Addr(), size, b.Block().HostPointer())
	s.live[blk.Addr()] = w
	return blk, nil
}
func (s *ledgerSpace) Free(b memspace.Block) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.live[b.Addr()]; !ok {
		return memspace.ErrDoubleFree
	}
	delete(s.live, b.Addr())
	return nil
}

// deviceSpace is memory the host cannot touch: its blocks have no host
// mapping.
type deviceSpace struct{}

func (deviceSpace) Name() string { return "fake-device" }
func (deviceSpace) Properties() memspace.Properties {
	return memspace.Properties{Kind: "fake-device", Device: 0, DeviceAccessible: true, Alignment: 256}
}
func (d deviceSpace) Allocate(size, align int) (memspace.Block, error) {
	return memspace.NewBlock(d, 0x1000, size, nil), nil
}
func (deviceSpace) Free(memspace.Block) error { return nil }

func TestDeviceMemoryWithoutNativeIsNotSupported(t *testing.T) {
	cs := newGroup(t, 2, local.Options{})
	d, err := memspace.Alloc[float32](deviceSpace{}, 8)
	require.NoError(t, err)
	h := buf(t, make([]float32, 16))
	ctx := testwait.Ctx(t)
	c := cs[0]
	for name, call := range map[string]func() error{
		"allreduce":      func() error { return comm.Allreduce(ctx, c, d, d, comm.Sum) },
		"bcast":          func() error { return comm.Bcast(ctx, c, d, 0) },
		"reduce":         func() error { return comm.Reduce(ctx, c, d, d, comm.Sum, 0) },
		"allgather":      func() error { return comm.Allgather(ctx, c, d, h) },
		"gather":         func() error { return comm.Gather(ctx, c, d, h, 0) },
		"scatter":        func() error { return comm.Scatter(ctx, c, h, d, 0) },
		"alltoall":       func() error { return comm.Alltoall(ctx, c, d, buf(t, make([]float32, 8))) },
		"reduce-scatter": func() error { return comm.ReduceScatter(ctx, c, h, d, comm.Sum) },
	} {
		require.ErrorIs(t, call(), comm.ErrNotSupported, name)
	}
}

// native is a communicator with native collectives: each method records
// its call and, unless it declines with ErrFallback, writes a marker so
// the test can tell which path ran.
type native struct {
	comm.Comm
	decline bool
	fail    error
	mu      sync.Mutex
	calls   []string
}

var _ comm.Collectives = (*native)(nil)

func (n *native) did(name string, b memspace.Block) error {
	n.mu.Lock()
	n.calls = append(n.calls, name)
	n.mu.Unlock()
	if n.fail != nil {
		return n.fail
	}
	if n.decline {
		return fmt.Errorf("native %s: %w", name, comm.ErrFallback)
	}
	if p, err := b.Bytes(); err == nil {
		for i := range p {
			p[i] = 0xAB
		}
	}
	return nil
}

func (n *native) Barrier(ctx context.Context) error { return n.did("barrier", memspace.Block{}) }
func (n *native) Bcast(ctx context.Context, buf memspace.Block, root int) error {
	return n.did("bcast", buf)
}
func (n *native) Reduce(ctx context.Context, send, recv memspace.Block, dt comm.DType, op comm.Op, root int) error {
	return n.did("reduce", recv)
}
func (n *native) Allreduce(ctx context.Context, send, recv memspace.Block, dt comm.DType, op comm.Op) error {
	return n.did("allreduce", recv)
}
func (n *native) Gather(ctx context.Context, send, recv memspace.Block, root int) error {
	return n.did("gather", recv)
}
func (n *native) Scatter(ctx context.Context, send, recv memspace.Block, root int) error {
	return n.did("scatter", recv)
}
func (n *native) Allgather(ctx context.Context, send, recv memspace.Block) error {
	return n.did("allgather", recv)
}
func (n *native) Alltoall(ctx context.Context, send, recv memspace.Block) error {
	return n.did("alltoall", recv)
}
func (n *native) ReduceScatter(ctx context.Context, send, recv memspace.Block, dt comm.DType, op comm.Op) error {
	return n.did("reduce-scatter", recv)
}

// wrapper hides nothing: capabilities are found through Unwrap.
type wrapper struct{ comm.Comm }

func (w wrapper) Unwrap() comm.Comm { return w.Comm }

func TestNativeCollectivesAreUsedThroughWrappers(t *testing.T) {
	cs := newGroup(t, 2, local.Options{})
	n := &native{Comm: cs[0]}
	var c comm.Comm = wrapper{wrapper{n}}
	ctx := testwait.Ctx(t)
	b := buf(t, make([]uint8, 4))
	b2 := buf(t, make([]uint8, 8))
	require.NoError(t, comm.Barrier(ctx, c))
	require.NoError(t, comm.Bcast(ctx, c, b, 1))
	require.NoError(t, comm.Allreduce(ctx, c, b, b, comm.Sum))
	require.NoError(t, comm.Reduce(ctx, c, b, b, comm.Sum, 0))
	require.NoError(t, comm.Gather(ctx, c, b, b2, 0))
	require.NoError(t, comm.Scatter(ctx, c, b2, b, 0))
	require.NoError(t, comm.Allgather(ctx, c, b, b2))
	require.NoError(t, comm.Alltoall(ctx, c, b, buf(t, make([]uint8, 4))))
	require.NoError(t, comm.ReduceScatter(ctx, c, b2, b, comm.Sum))
	assert.Equal(t, []string{"barrier", "bcast", "allreduce", "reduce", "gather", "scatter", "allgather", "alltoall", "reduce-scatter"}, n.calls)
	got, _ := b.Host()
	assert.Equal(t, []uint8{0xAB, 0xAB, 0xAB, 0xAB}, got, "the native method wrote the result")

	// Device memory is the native method's business.
	d, err := memspace.Alloc[float32](deviceSpace{}, 8)
	require.NoError(t, err)
	require.NoError(t, comm.Allreduce(ctx, c, d, d, comm.Sum))

	// An error other than ErrFallback is returned as it is.
	boom := errors.New("boom")
	n.fail = boom
	require.ErrorIs(t, comm.Allreduce(ctx, c, b, b, comm.Sum), boom)
}

func TestNativeFallbackRunsSharedAlgorithm(t *testing.T) {
	const p, cnt = 3, 5
	cs := newGroup(t, p, local.Options{})
	natives := make([]*native, p)
	want := reference[int32](comm.Sum, p, cnt)
	for r, err := range onRanks(t, context.Background(), cs, func(ctx context.Context, c comm.Comm) error {
		n := &native{Comm: c, decline: true}
		natives[c.Rank()] = n
		w := wrapper{n}
		s := buf(t, inputs[int32](comm.Sum, c.Rank(), cnt))
		if err := comm.Allreduce(ctx, w, s, s, comm.Sum); err != nil {
			return err
		}
		got, _ := s.Host()
		if !assert.Equal(t, want, got) {
			return errors.New("wrong result")
		}
		return comm.Barrier(ctx, w)
	}) {
		require.NoError(t, err, "rank %d", r)
	}
	for _, n := range natives {
		assert.Equal(t, []string{"allreduce", "barrier"}, n.calls)
	}

	// Device memory declined by the native method: not supported.
	d, err := memspace.Alloc[float32](deviceSpace{}, 8)
	require.NoError(t, err)
	require.ErrorIs(t, comm.Allreduce(testwait.Ctx(t), natives[0], d, d, comm.Sum), comm.ErrNotSupported)
}

func TestAnyTagNeverSeesCollectiveTraffic(t *testing.T) {
	const p = 4
	cs := newGroup(t, p, local.Options{})
	// Rank 0 posts a wildcard receive before the collectives and keeps it
	// posted through them.
	user := make([]byte, 64)
	wild, err := cs[0].Irecv(buf(t, user).Block(), comm.AnySource, comm.AnyTag)
	require.NoError(t, err)
	defer comm.SetRingChunk(64)()
	for r, err := range onRanks(t, context.Background(), cs, func(ctx context.Context, c comm.Comm) error {
		s := buf(t, inputs[float64](comm.Sum, c.Rank(), 2000))
		if err := comm.Allreduce(ctx, c, s, s, comm.Sum); err != nil {
			return err
		}
		v := buf(t, make([]float64, 3))
		if err := comm.Bcast(ctx, c, v, 3); err != nil {
			return err
		}
		if err := comm.Allgather(ctx, c, v, buf(t, make([]float64, 3*p))); err != nil {
			return err
		}
		return comm.Barrier(ctx, c)
	}) {
		require.NoError(t, err, "rank %d", r)
	}
	_, done, _ := wild.Test()
	require.False(t, done, "the AnyTag receive matched collective traffic")
	// It still gets the user's message.
	require.NoError(t, comm.Send(testwait.Ctx(t), cs[2], buf(t, []byte("hello")).Block(), 0, 7))
	ctx, cancel := context.WithTimeout(context.Background(), guard)
	defer cancel()
	st, err := wild.Wait(ctx)
	require.NoError(t, err)
	assert.Equal(t, comm.Status{Source: 2, Tag: 7, Count: 5}, st)
	assert.Equal(t, "hello", string(user[:5]))
}

// tracker records every request a communicator starts, so a test can check
// that none is left pending.
type tracker struct {
	comm.Comm
	mu   sync.Mutex
	reqs []comm.Request
}

func (t *tracker) Unwrap() comm.Comm { return t.Comm }

func (t *tracker) Isend(b memspace.Block, dest, tag int) (comm.Request, error) {
	r, err := t.Comm.Isend(b, dest, tag)
	t.add(r)
	return r, err
}

func (t *tracker) Irecv(b memspace.Block, source, tag int) (comm.Request, error) {
	r, err := t.Comm.Irecv(b, source, tag)
	t.add(r)
	return r, err
}

func (t *tracker) add(r comm.Request) {
	if r != nil {
		t.mu.Lock()
		t.reqs = append(t.reqs, r)
		t.mu.Unlock()
	}
}

// pending returns how many requests have not completed (or been canceled).
func (t *tracker) pending() (started, pending int) {
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, r := range t.reqs {
		if _, done, _ := r.Test(); !done {
			pending++
		}
	}
	return len(t.reqs), pending
}

func TestCancellationSettlesEveryRequest(t *testing.T) {
	// Rank p-1 never joins, so the collective cannot finish: every other
	// rank must return ctx.Err() with no request left pending, and the
	// communicator must still carry user messages.
	collectives := map[string]func(ctx context.Context, c comm.Comm) error{
		"allreduce-small": func(ctx context.Context, c comm.Comm) error {
			s := buf(t, make([]float64, 5))
			return comm.Allreduce(ctx, c, s, s, comm.Sum)
		},
		"allreduce-ring": func(ctx context.Context, c comm.Comm) error {
			s := buf(t, make([]float64, 1<<16))
			return comm.Allreduce(ctx, c, s, buf(t, make([]float64, 1<<16)), comm.Sum)
		},
		"bcast": func(ctx context.Context, c comm.Comm) error {
			return comm.Bcast(ctx, c, buf(t, make([]byte, 100)), 3)
		},
		"reduce-binomial": func(ctx context.Context, c comm.Comm) error {
			s := buf(t, make([]int64, 100))
			return comm.Reduce(ctx, c, s, s, comm.Sum, 0)
		},
		"reduce-ring": func(ctx context.Context, c comm.Comm) error {
			s := buf(t, make([]int64, 1<<18))
			return comm.Reduce(ctx, c, s, s, comm.Sum, 0)
		},
		"allgather": func(ctx context.Context, c comm.Comm) error {
			return comm.Allgather(ctx, c, buf(t, make([]byte, 1<<15)), buf(t, make([]byte, 4<<15)))
		},
		"alltoall": func(ctx context.Context, c comm.Comm) error {
			return comm.Alltoall(ctx, c, buf(t, make([]byte, 400)), buf(t, make([]byte, 400)))
		},
		"reduce-scatter": func(ctx context.Context, c comm.Comm) error {
			return comm.ReduceScatter(ctx, c, buf(t, make([]int32, 400)), buf(t, make([]int32, 100)), comm.Sum)
		},
		"barrier": func(ctx context.Context, c comm.Comm) error { return comm.Barrier(ctx, c) },
	}
	for name, coll := range collectives {
		for _, proto := range protocols {
			t.Run(name+"/"+proto.name, func(t *testing.T) {
				const p = 4
				cs := newGroup(t, p, proto.opts)
				ts := make([]comm.Comm, p-1)
				for i := range ts {
					ts[i] = &tracker{Comm: cs[i]}
				}
				ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
				defer cancel()
				// A rank whose part does not need the missing one may finish
				// (a leaf of a tree); the others must give up.
				gaveUp := 0
				for r, err := range onRanks(t, ctx, ts, coll) {
					if err != nil {
						require.ErrorIs(t, err, context.DeadlineExceeded, "rank %d", r)
						gaveUp++
					}
					started, pending := ts[r].(*tracker).pending()
					assert.Zero(t, pending, "rank %d left %d of %d requests pending", r, pending, started)
				}
				assert.Positive(t, gaveUp)
				// User traffic still flows between the ranks that were in it.
				msg := buf(t, make([]byte, 3))
				for r, err := range onRanks(t, context.Background(), cs[:2], func(ctx context.Context, c comm.Comm) error {
					if c.Rank() == 0 {
						return comm.Send(ctx, c, buf(t, []byte("abc")).Block(), 1, 1)
					}
					_, err := comm.Recv(ctx, c, msg.Block(), 0, 1)
					return err
				}) {
					require.NoError(t, err, "rank %d", r)
				}
				got, _ := msg.Host()
				assert.Equal(t, "abc", string(got))
			})
		}
	}
}

func TestPeerLost(t *testing.T) {
	// A rank that left fails the collective of the ranks that talk to it.
	cs := newGroup(t, 2, local.Options{})
	require.NoError(t, cs[1].Close())
	ctx, cancel := context.WithTimeout(context.Background(), guard)
	defer cancel()
	require.ErrorIs(t, comm.Barrier(ctx, cs[0]), comm.ErrPeerLost)
	s := buf(t, make([]float64, 4))
	require.ErrorIs(t, comm.Allreduce(ctx, cs[0], s, s, comm.Sum), comm.ErrPeerLost)

	// In a larger group, the ranks that do not talk to the dead one may
	// wait for ranks that gave up: here the first rank to see the loss
	// cancels the others, as an application would.
	const p = 4
	cs = newGroup(t, p, local.Options{EagerLimit: -1})
	ctx, cancel = context.WithCancel(context.Background())
	defer cancel()
	ts := make([]comm.Comm, p)
	for i := range ts {
		ts[i] = &tracker{Comm: cs[i]}
	}
	errs := onRanks(t, ctx, ts, func(ctx context.Context, c comm.Comm) error {
		if c.Rank() == 2 {
			cs[2].(*local.Comm).Kill()
			return nil
		}
		s := buf(t, make([]float64, 1<<14))
		err := comm.Allreduce(ctx, c, s, s, comm.Sum)
		if errors.Is(err, comm.ErrPeerLost) {
			cancel()
		}
		return err
	})
	lost := 0
	for r, err := range errs {
		if r == 2 {
			continue
		}
		if errors.Is(err, comm.ErrPeerLost) {
			lost++
		} else {
			require.ErrorIs(t, err, context.Canceled, "rank %d", r)
		}
		_, pending := ts[r].(*tracker).pending()
		assert.Zero(t, pending, "rank %d", r)
	}
	assert.Positive(t, lost, "some rank must see the peer lost")
}

func TestConcurrentCommunicators(t *testing.T) {
	// Several groups run collectives at the same time, from goroutines of
	// the same test: each gets its own results.
	const groups, p, rounds = 3, 4, 5
	defer comm.SetRingChunk(256)()
	var wg sync.WaitGroup
	errs := make([]error, groups)
	for g := range groups {
		cs := newGroup(t, p, protocols[g%2].opts)
		wg.Go(func() {
			for r, err := range onRanks(t, context.Background(), cs, func(ctx context.Context, c comm.Comm) error {
				for i := range rounds {
					n := 1 + 997*((g+i)%3)
					want := reference[int64](comm.Sum, p, n)
					// Each group adds its own offset, so results of
					// another group would show.
					in := inputs[int64](comm.Sum, c.Rank(), n)
					in[0] += int64(g)
					want[0] += int64(g * p)
					s := buf(t, in)
					if err := comm.Allreduce(ctx, c, s, s, comm.Sum); err != nil {
						return err
					}
					got, _ := s.Host()
					if !assert.Equal(t, want, got) {
						return errors.New("wrong result")
					}
					if err := comm.Barrier(ctx, c); err != nil {
						return err
					}
				}
				return nil
			}) {
				if err != nil {
					errs[g] = fmt.Errorf("group %d rank %d: %w", g, r, err)
				}
			}
		})
	}
	testwait.Group(t, &wg, "the groups' collectives")
	for _, err := range errs {
		require.NoError(t, err)
	}
}
