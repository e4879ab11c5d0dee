package nodecoll_test

import (
	"context"
	"encoding/binary"
	"errors"
	"math"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/xpu-go/xpu/backends/local"
	"github.com/xpu-go/xpu/comm"
	"github.com/xpu-go/xpu/internal/nodecoll"
	"github.com/xpu-go/xpu/internal/shm"
	"github.com/xpu-go/xpu/internal/tooling/testwait"
	"github.com/xpu-go/xpu/memspace"
	"github.com/xpu-go/xpu/xerr"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// host is the smallest Host: ranks of a local group (goroutines of this
// process, which map the region as the processes of one machine would),
// with no abort protocol but a loss the test can set.
type host struct {
	*local.Comm
	lost  *atomic.Pointer[error]
	idles *atomic.Int64
}

func (h host) Begin(ctx context.Context, name string, light bool) (context.Context, error) {
	return ctx, nil
}
func (h host) End(ctx context.Context, name string, light bool, err error) error { return err }
func (h host) Aborted() error                                                    { return nil }
func (h host) Closed() error                                                     { return xerr.ErrClosed }
func (h host) Idle()                                                             { h.idles.Add(1) }
func (h host) Lost() error {
	if e := h.lost.Load(); e != nil {
		return *e
	}
	return nil
}

// group sets up the node collectives of n ranks that all share this
// machine, each found by Members from its node key.
func group(t *testing.T, n int) ([]*nodecoll.Node, *atomic.Pointer[error], *atomic.Int64) {
	t.Helper()
	cs, err := local.NewGroup(n, local.Options{})
	require.NoError(t, err)
	lost, idles := &atomic.Pointer[error]{}, &atomic.Int64{}
	nodes := make([]*nodecoll.Node, n)
	onEvery(t, n, func(ctx context.Context, r int) error {
		h := host{Comm: cs[r], lost: lost, idles: idles}
		members, err := nodecoll.Members(ctx, h, shm.NodeKey("test"))
		if err != nil {
			return err
		}
		if len(members) != n {
			return errors.New("the ranks of one process are not one node")
		}
		nodes[r], err = nodecoll.Setup(ctx, h, members, nodecoll.Options{Spin: 20 * time.Microsecond})
		return err
	})
	t.Cleanup(func() {
		for r := range n {
			if nodes[r] != nil {
				nodes[r].Close()
			}
			_ = cs[r].Close()
		}
	})
	for r := range n {
		require.NotNil(t, nodes[r], "rank %d has no region", r)
		require.True(t, nodes[r].OneNode())
	}
	return nodes, lost, idles
}

// onEvery runs f on every rank at once, within 20 s, and fails on the
// first error.
func onEvery(t *testing.T, n int, f func(ctx context.Context, r int) error) []error {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	errs := make([]error, n)
	var wg sync.WaitGroup
	for r := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[r] = f(ctx, r)
		}()
	}
	testwait.Group(t, &wg, "every rank's f")
	return errs
}

func floats(v ...float64) []byte {
	b := make([]byte, 8*len(v))
	for i, x := range v {
		binary.LittleEndian.PutUint64(b[8*i:], math.Float64bits(x))
	}
	return b
}

func block(t *testing.T, b []byte) memspace.Block {
	buf, err := memspace.FromSlice(b)
	require.NoError(t, err)
	return buf.Block()
}

// TestCollectivesInTheRegion runs every collective of a one-node job, at
// sizes through the control line, the slots and several chunks, and
// checks every rank's result.
func TestCollectivesInTheRegion(t *testing.T) {
	const n = 3
	nodes, _, _ := group(t, n)
	for _, elems := range []int{1, 100, 3000, 100_000} {
		send := make([][]byte, n)
		recv := make([][]byte, n)
		want := make([]float64, elems)
		for r := range n {
			v := make([]float64, elems)
			for i := range v {
				v[i] = float64(r*elems + i)
				want[i] += v[i]
			}
			send[r], recv[r] = floats(v...), make([]byte, 8*elems)
		}
		errs := onEvery(t, n, func(ctx context.Context, r int) error {
			if err := nodes[r].Allreduce(ctx, block(t, send[r]), block(t, recv[r]), comm.Float64, comm.Sum); err != nil {
				return err
			}
			return nodes[r].Barrier(ctx)
		})
		require.NoError(t, errors.Join(errs...), "allreduce of %d", elems)
		for r := range n {
			require.Equal(t, floats(want...), recv[r], "allreduce of %d on rank %d", elems, r)
		}

		root := elems % n
		bc := make([][]byte, n)
		for r := range n {
			bc[r] = make([]byte, 8*elems)
		}
		copy(bc[root], send[root])
		rd := make([]byte, 8*elems)
		errs = onEvery(t, n, func(ctx context.Context, r int) error {
			if err := nodes[r].Bcast(ctx, block(t, bc[r]), root); err != nil {
				return err
			}
			var into memspace.Block
			if r == root {
				into = block(t, rd)
			}
			return nodes[r].Reduce(ctx, block(t, send[r]), into, comm.Float64, comm.Sum, root)
		})
		require.NoError(t, errors.Join(errs...), "bcast and reduce of %d", elems)
		for r := range n {
			require.Equal(t, send[root], bc[r], "bcast of %d from %d on rank %d", elems, root, r)
		}
		require.Equal(t, floats(want...), rd, "reduce of %d on root %d", elems, root)
	}

	// Allgather and Alltoall: rank r's part j is the byte 16r+j.
	const part = 5000
	ag := make([][]byte, n)
	at := make([][]byte, n)
	errs := onEvery(t, n, func(ctx context.Context, r int) error {
		mine := make([]byte, part)
		for i := range mine {
			mine[i] = byte(r)
		}
		parts := make([]byte, n*part)
		for j := range n {
			for i := range part {
				parts[j*part+i] = byte(16*r + j)
			}
		}
		ag[r], at[r] = make([]byte, n*part), make([]byte, n*part)
		if err := nodes[r].Allgather(ctx, block(t, mine), block(t, ag[r])); err != nil {
			return err
		}
		return nodes[r].Alltoall(ctx, block(t, parts), block(t, at[r]))
	})
	require.NoError(t, errors.Join(errs...))
	for r := range n {
		for j := range n {
			for i := range part {
				require.Equal(t, byte(j), ag[r][j*part+i], "allgather: rank %d, part %d", r, j)
				require.Equal(t, byte(16*j+r), at[r][j*part+i], "alltoall: rank %d, part %d", r, j)
			}
		}
	}
}

// TestDisagreement has the ranks call an allreduce with different lengths:
// every rank fails with ErrInvalidArgument, none waits for the others.
func TestDisagreement(t *testing.T) {
	const n = 3
	nodes, _, _ := group(t, n)
	errs := onEvery(t, n, func(ctx context.Context, r int) error {
		b := make([]byte, 8*(1+r%2))
		return nodes[r].Allreduce(ctx, block(t, b), block(t, make([]byte, len(b))), comm.Float64, comm.Sum)
	})
	for r, err := range errs {
		require.ErrorIs(t, err, xerr.ErrInvalidArgument, "rank %d", r)
	}
}

// TestLostPeerEndsTheWait has two ranks wait in a barrier for a third that
// never comes: once the host says a peer is lost, both fail with it within
// a second, not at their context's end.
func TestLostPeerEndsTheWait(t *testing.T) {
	const n = 3
	nodes, lost, idles := group(t, n)
	idles.Store(0)
	cause := xerr.Detail(xerr.ErrPeerLost, "rank 2 died")
	time.AfterFunc(100*time.Millisecond, func() { lost.Store(&cause) })
	start := time.Now()
	errs := onEvery(t, n-1, func(ctx context.Context, r int) error { return nodes[r].Barrier(ctx) })
	for r, err := range errs {
		require.ErrorIs(t, err, xerr.ErrPeerLost, "rank %d", r)
	}
	require.Less(t, time.Since(start), 2*time.Second, "the loss did not end the wait")
	require.Positive(t, idles.Load(), "the waits slept without telling the host")
}

// TestDisagreementThroughTheRing: steps through the ring check their
// arguments in the entry's stamp — a broadcast's readers see a root that
// sent a different length, and a reduction's root sees a rank that passed
// another operation — and fail with ErrInvalidArgument, not a hang.
func TestDisagreementThroughTheRing(t *testing.T) {
	const n = 3
	nodes, _, _ := group(t, n)
	errs := onEvery(t, n, func(ctx context.Context, r int) error {
		b := make([]byte, 8*(1+min(r, 1))) // the root sends 8 bytes, the others want 16
		return nodes[r].Bcast(ctx, block(t, b), 0)
	})
	require.NoError(t, errs[0], "the root does not wait")
	for r := 1; r < n; r++ {
		require.ErrorIs(t, errs[r], xerr.ErrInvalidArgument, "rank %d", r)
	}
	nodes, _, _ = group(t, n)
	errs = onEvery(t, n, func(ctx context.Context, r int) error {
		op := comm.Sum
		if r == 2 {
			op = comm.Max
		}
		b := floats(float64(r))
		return nodes[r].Reduce(ctx, block(t, b), block(t, make([]byte, len(b))), comm.Float64, op, 0)
	})
	require.ErrorIs(t, errs[0], xerr.ErrInvalidArgument, "the root")
}
