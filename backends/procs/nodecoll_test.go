package procs_test

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/xpu-go/xpu/backends/procs"
	"github.com/xpu-go/xpu/comm"
	"github.com/xpu-go/xpu/internal/tooling/testwait"
	"github.com/xpu-go/xpu/memspace"
)

// TestNodeCollectivesChosen: a job whose ranks all share a node runs its
// collectives in the node's region; a mixed job or one over TCP does not.
func TestNodeCollectivesChosen(t *testing.T) {
	for name, tc := range map[string]struct {
		cfg  procs.Config
		want bool
	}{
		"shm":   {procs.Config{}, true},
		"tcp":   {procs.Config{Links: procs.LinkTCP}, false},
		"mixed": {procs.WithNodes(procs.Config{}, func(r int) string { return strconv.Itoa(r % 2) }), true},
		"apart": {procs.WithNodes(procs.Config{}, strconv.Itoa), false},
	} {
		t.Run(name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			cs := group(t, 3, tc.cfg)
			// The nodes' regions are set up at the first collective.
			require.NoError(t, errors.Join(onEach(t, cs, func(c *procs.Comm) error { return comm.Barrier(ctx, c) })...))
			for _, c := range cs {
				require.Equal(t, tc.want, procs.NodeCollectives(c), "rank %d", c.Rank())
			}
		})
	}
}

// onEach runs body on every rank of cs at once and returns their errors.
func onEach(t testing.TB, cs []*procs.Comm, body func(c *procs.Comm) error) []error {
	errs := make([]error, len(cs))
	var wg sync.WaitGroup
	for i, c := range cs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = body(c)
		}()
	}
	testwait.Group(t, &wg, "every rank's body")
	return errs
}

// TestNodeAllreduceChunks checks allreduces in the node's region across
// the sizes that change its path — one step up to 16 KiB, then chunks of
// 256 KiB each reduced in parts by every rank, with a short last chunk —
// in place and not, for a float and an integer type, against the sums
// computed here.
func TestNodeAllreduceChunks(t *testing.T) {
	t.Run("one-node", func(t *testing.T) { testNodeAllreduceChunks(t, procs.Config{}, 3) })
	// Nodes {0, 3}, {1, 4}, {2}: within each node, then across the
	// leaders 0, 1 and 2, then within each node again.
	t.Run("three-nodes", func(t *testing.T) {
		testNodeAllreduceChunks(t, procs.WithNodes(procs.Config{}, func(r int) string { return strconv.Itoa(r % 3) }), 5)
	})
}

func testNodeAllreduceChunks(t *testing.T, cfg procs.Config, p int) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cs := group(t, p, cfg)
	for _, n := range []int{1, 7, 2048, 2049, 32768, 32769, 100_003} {
		for _, inPlace := range []bool{false, true} {
			errs := onEach(t, cs, func(c *procs.Comm) error {
				f, u := reductionInputs(c.Rank(), n)
				fo, uo := f, u
				if !inPlace {
					fo, uo = make([]float64, n), make([]int32, n)
				}
				if err := comm.AllreduceBlock(ctx, c, blk(f), blk(fo), comm.Float64, comm.Sum); err != nil {
					return err
				}
				if err := comm.AllreduceBlock(ctx, c, blk(u), blk(uo), comm.Int32, comm.Max); err != nil {
					return err
				}
				return checkReductions(p, fo, uo)
			})
			require.NoError(t, errors.Join(errs...), "%d elements, in place %v", n, inPlace)
		}
	}
	for _, c := range cs {
		require.True(t, procs.NodeCollectives(c), "rank %d", c.Rank())
	}
	// A broadcast of several chunks from each root.
	for root := range cs {
		errs := onEach(t, cs, func(c *procs.Comm) error {
			b := make([]byte, 600_001)
			if c.Rank() == root {
				for i := range b {
					b[i] = byte(i*7 + root)
				}
			}
			if err := comm.BcastBlock(ctx, c, blk(b), root); err != nil {
				return err
			}
			for i := range b {
				if b[i] != byte(i*7+root) {
					return errors.New("bcast byte " + strconv.Itoa(i))
				}
			}
			return comm.Barrier(ctx, c)
		})
		require.NoError(t, errors.Join(errs...), "root %d", root)
	}
}

// reductionInputs returns rank r's operands of the reductions the node
// tests check: n float64s to sum and n int32s to take the maximum of.
func reductionInputs(r, n int) ([]float64, []int32) {
	f := make([]float64, n)
	u := make([]int32, n)
	for i := range f {
		f[i] = float64(r*1000 + i%977)
		u[i] = int32(r - i%13)
	}
	return f, u
}

// checkReductions checks the sum and the maximum over p ranks of their
// reductionInputs.
func checkReductions(p int, sum []float64, maxes []int32) error {
	for i := range sum {
		if want := float64(1000*p*(p-1)/2 + p*(i%977)); sum[i] != want {
			return errors.New("sum of " + strconv.Itoa(len(sum)) + " at " + strconv.Itoa(i) + ": " + strconv.FormatFloat(sum[i], 'g', -1, 64))
		}
		if want := int32(p - 1 - i%13); maxes[i] != want {
			return errors.New("max of " + strconv.Itoa(len(maxes)) + " at " + strconv.Itoa(i))
		}
	}
	return nil
}

func blk[T any](s []T) memspace.Block {
	b, err := memspace.FromSlice(s)
	if err != nil {
		panic(err)
	}
	return b.Block()
}

// TestNodeExchange checks Allgather and Alltoall in a one-node job's
// region, with pieces that take one step and several (a slot's share per
// pair is 256 KiB / 3 for Alltoall, 256 KiB for Allgather).
func TestNodeExchange(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	const p = 3
	cs := group(t, p, procs.Config{})
	for _, k := range []int{1, 7, 87_381, 100_000, 300_001} {
		errs := onEach(t, cs, func(c *procs.Comm) error {
			r := c.Rank()
			send, recv := make([]byte, p*k), make([]byte, p*k)
			for j := range p {
				for i := range k {
					send[j*k+i] = byte(r*31 + j*7 + i)
				}
			}
			if err := comm.AlltoallBlock(ctx, c, blk(send), blk(recv)); err != nil {
				return err
			}
			for j := range p {
				for i := range k {
					if recv[j*k+i] != byte(j*31+r*7+i) {
						return errors.New("alltoall " + strconv.Itoa(k) + ": from rank " + strconv.Itoa(j) + " at " + strconv.Itoa(i))
					}
				}
			}
			mine := send[:k]
			if err := comm.AllgatherBlock(ctx, c, blk(mine), blk(recv)); err != nil {
				return err
			}
			for j := range p {
				for i := range k {
					if recv[j*k+i] != byte(j*31+i) {
						return errors.New("allgather " + strconv.Itoa(k) + ": from rank " + strconv.Itoa(j) + " at " + strconv.Itoa(i))
					}
				}
			}
			return nil
		})
		require.NoError(t, errors.Join(errs...), "%d bytes per pair", k)
	}
	require.True(t, procs.NodeCollectives(cs[0]))
}

// TestNodeCollectivesDisagree: ranks that pass different lengths to one
// allreduce all get ErrInvalidArgument — no hang, no corruption.
func TestNodeCollectivesDisagree(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	cs := group(t, 2, procs.Config{})
	errs := onEach(t, cs, func(c *procs.Comm) error {
		v := make([]float64, 4+4*c.Rank())
		return comm.AllreduceBlock(ctx, c, blk(v), blk(v), comm.Float64, comm.Sum)
	})
	for r, err := range errs {
		require.ErrorIs(t, err, comm.ErrInvalidArgument, "rank %d", r)
	}
	require.NoError(t, ctx.Err(), "the ranks waited for the context")
}

// TestNodeCollectivesPeerLost: a rank that closes instead of joining an
// allreduce makes the others' fail with ErrPeerLost, promptly.
func TestNodeCollectivesPeerLost(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	cs := group(t, 3, procs.Config{})
	start := time.Now()
	errs := onEach(t, cs, func(c *procs.Comm) error {
		if c.Rank() == 2 {
			time.Sleep(50 * time.Millisecond)
			return c.Close()
		}
		v := make([]float64, 1<<16)
		return comm.AllreduceBlock(ctx, c, blk(v), blk(v), comm.Float64, comm.Sum)
	})
	require.NoError(t, errs[2])
	require.ErrorIs(t, errs[0], comm.ErrPeerLost)
	require.ErrorIs(t, errs[1], comm.ErrPeerLost)
	require.Less(t, time.Since(start), 10*time.Second)
	// The first collective sets up the node's region on the way: its
	// failure speaks of the Allreduce the program called, not of the
	// setup, which it never called. A survivor learns of the loss from
	// its link, or from the other survivor's abort.
	for r := range 2 {
		assert.Contains(t, []string{
			fmt.Sprintf("procs allreduce: rank %d: link to rank 2: the peer closed its communicator: peer lost", r),
			fmt.Sprintf("procs allreduce: rank %d: collective #1 aborted by rank %d, which lost a peer: peer lost", r, 1-r),
		}, errs[r].Error(), "rank %d", r)
	}
	// The region the node's leader made is nobody's once the setup failed:
	// nothing of it stays open after the ranks have closed.
	closeAll(t, cs)
	if runtime.GOOS == "linux" {
		require.Empty(t, memFiles(t), "memory files left open by a node setup that lost a rank")
	}
}

// TestNodeReduce checks Reduce in a one-node job's region to every root,
// through the ring (up to NodeTiny bytes) and through the slots (one step up
// to 256 KiB, then chunks), in place and not, for a float and an integer
// type, against the results computed here.
func TestNodeReduce(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	const p = 3
	cs := group(t, p, procs.Config{})
	for _, n := range []int{1, 7, procs.NodeTiny / 8, procs.NodeTiny/8 + 1, 32768, 32769, 100_003} {
		for root := range p {
			for _, inPlace := range []bool{false, true} {
				errs := onEach(t, cs, func(c *procs.Comm) error {
					r := c.Rank()
					f, u := reductionInputs(r, n)
					fo, uo := make([]float64, n), make([]int32, n)
					if inPlace && r == root {
						fo, uo = f, u
					}
					if err := comm.ReduceBlock(ctx, c, blk(f), blk(fo), comm.Float64, comm.Sum, root); err != nil {
						return err
					}
					if err := comm.ReduceBlock(ctx, c, blk(u), blk(uo), comm.Int32, comm.Max, root); err != nil {
						return err
					}
					if r == root {
						return checkReductions(p, fo, uo)
					}
					for i := range n {
						if fo[i] != 0 || uo[i] != 0 {
							return errors.New("a rank other than the root received at " + strconv.Itoa(i))
						}
					}
					return nil
				})
				require.NoError(t, errors.Join(errs...), "%d elements to root %d, in place %v", n, root, inPlace)
			}
		}
	}
	require.True(t, procs.NodeCollectives(cs[0]))
}

// nodeGroup makes a group of n ranks of this machine, with the default
// settings, and runs a barrier on them, after which their node's
// collectives are up: what a test of a node collective starts from.
func nodeGroup(t *testing.T, n int) []*procs.Comm {
	t.Helper()
	cs := group(t, n, procs.Config{})
	each(t, cs, func(ctx context.Context, c *procs.Comm) error { return comm.Barrier(ctx, c) })
	require.True(t, procs.NodeCollectives(cs[0]))
	return cs
}

// TestNodeRingRunsAhead: small broadcasts and reductions go through each
// rank's ring, so a root finishes nodeRing-1 of them while a rank has not
// even begun the first — then that rank catches up, the ring wraps around
// many times under a mix of roots, sizes and collectives, and every value
// arrives.
func TestNodeRingRunsAhead(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	const p = 3
	cs := nodeGroup(t, p)
	ahead := procs.NodeRing - 1
	late := make(chan struct{})
	bcast := func(c *procs.Comm, i, root, size int) error {
		b := make([]byte, size)
		if c.Rank() == root {
			for k := range b {
				b[k] = byte(i + k)
			}
		}
		if err := comm.BcastBlock(ctx, c, blk(b), root); err != nil {
			return err
		}
		for k := range b {
			if b[k] != byte(i+k) {
				return errors.New("bcast " + strconv.Itoa(i) + ": byte " + strconv.Itoa(k))
			}
		}
		return nil
	}
	errs := onEach(t, cs, func(c *procs.Comm) error {
		if c.Rank() == 2 {
			select {
			case <-late:
			case <-ctx.Done():
				return ctx.Err()
			}
		}
		for i := range ahead {
			if err := bcast(c, i, 0, 8); err != nil {
				return err
			}
		}
		if c.Rank() == 0 {
			// Every broadcast of the root is out, with rank 2 not started.
			close(late)
		}
		for i := range 3 * procs.NodeRing { // the ring wraps around three times more
			root := i % p
			var err error
			switch i % 5 {
			case 0, 1:
				err = bcast(c, i, root, 1+i%procs.NodeTiny)
			case 2:
				v := []int64{int64(c.Rank() + i), int64(i)}
				out := make([]int64, 2)
				if err = comm.ReduceBlock(ctx, c, blk(v), blk(out), comm.Int64, comm.Sum, root); err == nil && c.Rank() == root &&
					(out[0] != int64(p*(p-1)/2+p*i) || out[1] != int64(p*i)) {
					err = errors.New("reduce " + strconv.Itoa(i))
				}
			case 3:
				v := []float64{float64(c.Rank())}
				if err = comm.AllreduceBlock(ctx, c, blk(v), blk(v), comm.Float64, comm.Max); err == nil && v[0] != p-1 {
					err = errors.New("allreduce " + strconv.Itoa(i))
				}
			case 4:
				if i%20 == 4 {
					err = comm.Barrier(ctx, c)
				} else {
					err = bcast(c, i, root, 4000)
				}
			}
			if err != nil {
				return err
			}
		}
		return nil
	})
	require.NoError(t, errors.Join(errs...))
}

// TestNodeCollectiveClosedWhileWaiting: a rank closed while its node
// collective waits for a rank that never joins ends that collective with
// ErrClosed at once, not when its context ends: Close aborts the run of the
// node's collectives, which registers itself without a lock.
func TestNodeCollectiveClosedWhileWaiting(t *testing.T) {
	cs := nodeGroup(t, 2)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	done := make(chan error, 1)
	go func() {
		v := []float64{1}
		done <- comm.AllreduceBlock(ctx, cs[0], blk(v), blk(v), comm.Float64, comm.Sum)
	}()
	time.Sleep(100 * time.Millisecond) // the allreduce waits for rank 1, which never joins
	start := time.Now()
	require.NoError(t, cs[0].Close())
	err := testwait.Recv(t, done, "the allreduce of a closed rank")
	require.ErrorIs(t, err, comm.ErrClosed)
	require.Less(t, time.Since(start), 10*time.Second)
	require.NoError(t, ctx.Err(), "the allreduce waited for its context")
	v := []float64{1}
	require.ErrorIs(t, comm.AllreduceBlock(ctx, cs[0], blk(v), blk(v), comm.Float64, comm.Sum), comm.ErrClosed)
}

// An abort that reaches a rank waiting in a node collective ends the
// wait: ranks 0 and 1 wait in an allreduce for rank 2, which never joins;
// rank 1's link from rank 2 breaks, so rank 1 aborts the collective and
// tells the others. Rank 0's links are whole: only the abort can end its
// wait, and it must, long before its context.
func TestNodeCollectiveAbortedWhileWaiting(t *testing.T) {
	cs := nodeGroup(t, 3)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	pending, err := cs[1].Irecv(bytesBlock(make([]byte, 8)), 2, 3) // rank 1 reads from rank 2
	require.NoError(t, err)
	done := make([]chan error, 2)
	for r := range done {
		done[r] = make(chan error, 1)
		go func() {
			v := []float64{1}
			done[r] <- comm.AllreduceBlock(ctx, cs[r], blk(v), blk(v), comm.Float64, comm.Sum)
		}()
	}
	time.Sleep(100 * time.Millisecond) // both wait for rank 2
	start := time.Now()
	require.True(t, procs.CorruptShm(cs[1], 2))
	_, err = comm.Await(ctx, pending)
	require.ErrorIs(t, err, comm.ErrPeerLost)
	for r := range done {
		err := testwait.Recv(t, done[r], fmt.Sprintf("rank %d's allreduce", r))
		require.ErrorIs(t, err, comm.ErrPeerLost, "rank %d", r)
	}
	require.Less(t, time.Since(start), 10*time.Second)
	require.NoError(t, ctx.Err(), "an allreduce waited for its context")
}
