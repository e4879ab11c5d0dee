package rdma_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/xpu-go/xpu/backends/procs"
	"github.com/xpu-go/xpu/backends/rdma"
	"github.com/xpu-go/xpu/backends/rdma/internal/fabric/sim"
	"github.com/xpu-go/xpu/comm"
	"github.com/xpu-go/xpu/internal/tooling/testwait"
	"github.com/xpu-go/xpu/memspace"
)

// joinSim joins n ranks in this process over a simulated fabric, as
// processes of one machine join (the tcp bootstrap with links), and closes
// them at the end of the test.
func joinSim(t *testing.T, fab *sim.Network, n int, links procs.LinkMode) []*rdma.Comm {
	t.Helper()
	prov := fab.Provider("10.0.0.9")
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	port := freePort(t)
	cs := make([]*rdma.Comm, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			cs[i], errs[i] = rdma.JoinOn(ctx, prov, "10.0.0.9", procs.Config{
				Rank: i, Size: n, MasterAddr: fmt.Sprintf("127.0.0.1:%d", port),
				Secret: []byte("the job's secret"), Links: links,
			}, rdma.Config{})
		})
	}
	testwait.Group(t, &wg, "the ranks' Dials")
	t.Cleanup(func() {
		for _, c := range cs {
			if c != nil {
				_ = c.Close()
			}
		}
	})
	require.NoError(t, errors.Join(errs...))
	return cs
}

// joinOneMachine joins n ranks of one machine on a fresh simulated fabric,
// checks that they share a node, and returns them with a 30 s context.
func joinOneMachine(t *testing.T, n int) ([]*rdma.Comm, context.Context) {
	t.Helper()
	cs := joinSim(t, sim.New(), n, procs.LinkAuto)
	require.True(t, cs[0].OneNode())
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	t.Cleanup(cancel)
	return cs, ctx
}

// onEvery runs f on every rank at once and returns their errors joined.
func onEvery[C any](t testing.TB, cs []C, f func(me int, c C) error) error {
	errs := make([]error, len(cs))
	var wg sync.WaitGroup
	for me, c := range cs {
		wg.Go(func() { errs[me] = f(me, c) })
	}
	testwait.Group(t, &wg, "every rank's f")
	return errors.Join(errs...)
}

// TestOneMachineCollectivesInSharedMemory joins 4 ranks of one machine:
// they keep the bootstrap's region for their collectives, and a checked
// allreduce of 1 MiB moves no byte over the fabric; with links forced to
// TCP, the same allreduce runs over the queue pairs.
func TestOneMachineCollectivesInSharedMemory(t *testing.T) {
	const n, count = 4, 1 << 17
	for _, tc := range []struct {
		name   string
		links  procs.LinkMode
		onNode bool
	}{{"links=auto", procs.LinkAuto, true}, {"links=tcp", procs.LinkTCP, false}} {
		t.Run(tc.name, func(t *testing.T) {
			fab := sim.New()
			cs := joinSim(t, fab, n, tc.links)
			for _, c := range cs {
				require.Equal(t, tc.onNode, c.OneNode(), "rank %d", c.Rank())
			}
			ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
			defer cancel()
			before := fab.Stats()
			err := onEvery(t, cs, func(me int, c *rdma.Comm) error {
				v := make([]float64, count)
				for i := range v {
					v[i] = float64(me*1000 + i%13)
				}
				b, _ := memspace.FromSlice(v)
				if err := comm.Allreduce(ctx, c, b, b, comm.Sum); err != nil {
					return err
				}
				for i, x := range v {
					if want := float64(1000*n*(n-1)/2 + n*(i%13)); x != want {
						return fmt.Errorf("rank %d: element %d is %v, want %v", me, i, x, want)
					}
				}
				return nil
			})
			require.NoError(t, err)
			after := fab.Stats()
			moved := after.SendBytes + after.WriteBytes + after.ReadBytes -
				before.SendBytes - before.WriteBytes - before.ReadBytes
			t.Logf("the fabric moved %d bytes during the allreduce", moved)
			if tc.onNode {
				require.Less(t, moved, uint64(64<<10), "a collective in shared memory moved bytes over the fabric")
			} else {
				require.GreaterOrEqual(t, moved, uint64(8*count), "the allreduce did not run over the queue pairs")
			}
			// Point-to-point messages go over the queue pairs either way.
			before = fab.Stats()
			require.NoError(t, onEvery(t, cs[:2], func(me int, c *rdma.Comm) error {
				buf := make([]byte, 100)
				if me == 0 {
					return comm.Send(ctx, c, blk(buf), 1, 5)
				}
				_, err := comm.Recv(ctx, c, blk(buf), 0, 5)
				return err
			}))
			require.GreaterOrEqual(t, fab.Stats().SendBytes-before.SendBytes, uint64(100))
		})
	}
}

// TestOneMachineCollectivesRevoked fails a queue pair while three ranks wait
// in a barrier in shared memory for the fourth: the revocation that the
// lost queue pair starts ends the waits on every rank with ErrPeerLost,
// long before their context, and later collectives fail at once.
func TestOneMachineCollectivesRevoked(t *testing.T) {
	const n = 4
	cs, ctx := joinOneMachine(t, n)
	errs := make(chan error, n-1)
	for _, c := range cs[1:] {
		go func() { errs <- c.Barrier(ctx) }()
	}
	time.Sleep(50 * time.Millisecond) // let them wait in the region
	failed := time.Now()
	require.NoError(t, rdma.FailLink(cs[0], 1))
	for range n - 1 {
		err := testwait.Recv(t, errs, "a waiting rank, after the link failed")
		require.ErrorIs(t, err, comm.ErrPeerLost)
		require.NoError(t, ctx.Err(), "a rank waited for its context: %v", err)
	}
	t.Logf("every waiting rank failed %v after the queue pair", time.Since(failed).Round(time.Millisecond))
	for _, c := range cs {
		err := comm.Barrier(ctx, c)
		require.ErrorIs(t, err, comm.ErrPeerLost, "rank %d", c.Rank())
	}
}

// A rank that closes while the others run a collective in the region ends
// their waits with ErrPeerLost, and their later collectives fail alike:
// the goodbye reaches a progress engine that a sleeping waiter woke.
func TestOneMachineCollectivesPeerClosed(t *testing.T) {
	const n = 3
	cs, ctx := joinOneMachine(t, n)
	var closing atomic.Int64
	errs := make([]error, n)
	failed := make([]time.Duration, n)
	_ = onEvery(t, cs, func(me int, c *rdma.Comm) error {
		if me == n-1 {
			time.Sleep(50 * time.Millisecond)
			closing.Store(time.Now().UnixNano())
			errs[me] = c.Close()
			return nil
		}
		v := make([]float64, 1<<16)
		b, _ := memspace.FromSlice(v)
		errs[me] = comm.Allreduce(ctx, c, b, b, comm.Sum)
		failed[me] = time.Duration(time.Now().UnixNano() - closing.Load())
		return nil
	})
	require.NoError(t, errs[n-1])
	for me := range n - 1 {
		require.ErrorIs(t, errs[me], comm.ErrPeerLost, "rank %d", me)
	}
	require.NoError(t, ctx.Err(), "a rank waited for its context")
	t.Logf("the allreduce failed %v and %v after the close began", failed[0].Round(time.Millisecond), failed[1].Round(time.Millisecond))
	for _, c := range cs[:n-1] {
		require.ErrorIs(t, comm.Barrier(ctx, c), comm.ErrPeerLost, "rank %d", c.Rank())
	}
}
