package local_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/xpu-go/xpu/comm"
	"github.com/xpu-go/xpu/internal/tooling/testwait"
	"github.com/xpu-go/xpu/memspace"
)

const reserved = comm.MaxTag + 1

func zblk(t *testing.T, n int) memspace.Block {
	b, err := memspace.FromSlice(make([]byte, n))
	require.NoError(t, err)
	return b.Block()
}

// A crash fails collective traffic that waits on every rank, even between
// two ranks that never talk to the one that crashed.
func TestKillRevokesCollectives(t *testing.T) {
	for _, p := range protocols {
		t.Run(p.name, func(t *testing.T) {
			g := group(t, 3, p.opts)
			r1, err := g[1].Irecv(zblk(t, 8), 2, reserved)
			require.NoError(t, err)
			s2, err := g[2].Isend(zblk(t, 1<<20), 1, reserved+1) // rendezvous: no receive matches
			require.NoError(t, err)
			u1, err := g[1].Irecv(zblk(t, 8), 2, 5) // user traffic is not revoked
			require.NoError(t, err)

			g[0].Kill()
			ctx, cancel := context.WithTimeout(context.Background(), guard)
			defer cancel()
			_, err = r1.Wait(ctx)
			assert.ErrorIs(t, err, comm.ErrPeerLost)
			if p.name == "rendezvous" {
				_, err = s2.Wait(ctx)
				assert.ErrorIs(t, err, comm.ErrPeerLost)
			}
			// Later collective traffic that would wait fails at once.
			_, err = g[2].Irecv(zblk(t, 8), 1, reserved)
			assert.ErrorIs(t, err, comm.ErrPeerLost)

			// User point-to-point between survivors goes on.
			require.NoError(t, comm.Send(ctx, g[2], zblk(t, 8), 1, 5))
			_, err = u1.Wait(ctx)
			assert.NoError(t, err)
		})
	}
}

// A rank that closes after finishing its part does not revoke: the others
// still complete the collective among themselves, and messages it sent
// before leaving are still received.
func TestGracefulCloseDoesNotRevoke(t *testing.T) {
	g := group(t, 3, protocols[0].opts)
	ctx, cancel := context.WithTimeout(context.Background(), guard)
	defer cancel()
	require.NoError(t, comm.Send(ctx, g[0], zblk(t, 8), 2, 0)) // user tag, eager
	s, err := g[0].Isend(zblk(t, 8), 1, reserved)              // eager collective message
	require.NoError(t, err)
	_, err = s.Wait(ctx)
	require.NoError(t, err)
	require.NoError(t, g[0].Close())

	_, err = comm.Recv(ctx, g[2], zblk(t, 8), 0, 0)
	assert.NoError(t, err, "an eager message sent before Close is delivered")
	r, err := g[1].Irecv(zblk(t, 8), 0, reserved)
	require.NoError(t, err, "a collective message already delivered is still received")
	_, err = r.Wait(ctx)
	assert.NoError(t, err)

	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		s, err := g[1].Isend(zblk(t, 8), 2, reserved+2)
		if assert.NoError(t, err) {
			_, err = s.Wait(ctx)
			assert.NoError(t, err)
		}
	}()
	r, err = g[2].Irecv(zblk(t, 8), 1, reserved+2)
	require.NoError(t, err)
	_, err = r.Wait(ctx)
	assert.NoError(t, err, "the survivors' collective traffic is not revoked")
	testwait.Group(t, &wg, "rank 1's send to rank 2")
}

// An allreduce on ranks that never exchange data with a crashed rank still
// fails everywhere within the bound, not at the context deadline.
func TestAllreduceFailsEverywhereAfterKill(t *testing.T) {
	const n = 5
	g := group(t, n, protocols[1].opts)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	start := time.Now()
	var wg sync.WaitGroup
	errs := make([]error, n)
	for r := 1; r < n; r++ { // rank 0 never joins
		wg.Add(1)
		go func() {
			defer wg.Done()
			buf, _ := memspace.FromSlice(make([]float64, 1<<15))
			errs[r] = comm.Allreduce(ctx, g[r], buf, buf, comm.Sum)
		}()
	}
	time.Sleep(50 * time.Millisecond)
	g[0].Kill()
	testwait.Group(t, &wg, "the survivors' Allreduce, after rank 0 was killed")
	for r := 1; r < n; r++ {
		assert.ErrorIs(t, errs[r], comm.ErrPeerLost, "rank %d", r)
	}
	assert.Less(t, time.Since(start), guard, "every rank learns of the failure promptly")
}

// A rank that leaves while its own collective is still pending revokes
// the group's collectives.
func TestCloseMidCollectiveRevokes(t *testing.T) {
	g := group(t, 3, protocols[0].opts)
	_, err := g[0].Irecv(zblk(t, 8), 1, reserved)
	require.NoError(t, err)
	r, err := g[1].Irecv(zblk(t, 8), 2, reserved)
	require.NoError(t, err)
	require.NoError(t, g[0].Close())
	ctx, cancel := context.WithTimeout(context.Background(), guard)
	defer cancel()
	_, err = r.Wait(ctx)
	assert.ErrorIs(t, err, comm.ErrPeerLost)
}
