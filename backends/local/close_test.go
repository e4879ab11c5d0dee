package local_test

import (
	"context"
	"errors"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/xpu-go/xpu/backends/local"
	"github.com/xpu-go/xpu/comm"
	"github.com/xpu-go/xpu/internal/tooling/testwait"
)

// leavers are the two ways a rank leaves.
var leavers = []struct {
	name  string
	leave func(*local.Comm)
}{
	{"close", func(c *local.Comm) { _ = c.Close() }},
	{"kill", func(c *local.Comm) { c.Kill() }},
}

func TestUseAfterClose(t *testing.T) {
	cs := group(t, 2, local.Options{EagerLimit: -1})
	c := cs[0]
	// Pending requests of the closing rank fail with ErrClosed.
	rr := irecv(t, c, make([]byte, 1), 1, 1)
	rAny := irecv(t, c, make([]byte, 1), comm.AnySource, 3)
	sr := isend(t, c, []byte{1}, 1, 1)
	selfSend := isend(t, c, []byte{1}, 0, 2)
	require.NoError(t, c.Close())
	for _, r := range []comm.Request{rr, rAny, sr, selfSend} {
		_, err := wait(t, r)
		require.ErrorIs(t, err, comm.ErrClosed)
	}
	// Later calls fail with ErrClosed; Close is idempotent.
	_, err := c.Isend(blk(t, []byte{1}), 1, 1)
	require.ErrorIs(t, err, comm.ErrClosed)
	_, err = c.Irecv(blk(t, []byte{1}), 1, 1)
	require.ErrorIs(t, err, comm.ErrClosed)
	err = comm.Send(testwait.Ctx(t), c, blk(t, []byte{1}), 1, 1)
	require.ErrorIs(t, err, comm.ErrClosed)
	require.NoError(t, c.Close())
	c.Kill()
	assert.Equal(t, 0, c.Rank())
	assert.Equal(t, 2, c.Size())
	// Bad arguments are still reported as such.
	_, err = c.Isend(blk(t, []byte{1}), 5, 1)
	require.ErrorIs(t, err, comm.ErrInvalidArgument)
}

// TestPeerLost: operations that need a rank that left fail with
// ErrPeerLost, pending ones and new ones, for both ways of leaving.
func TestPeerLost(t *testing.T) {
	for _, l := range leavers {
		t.Run(l.name, func(t *testing.T) {
			cs := group(t, 3, local.Options{EagerLimit: -1})
			gone := cs[2]
			// Pending operations of rank 0 that need rank 2.
			recvFrom := irecv(t, cs[0], make([]byte, 1), 2, 1)
			sendTo := isend(t, cs[0], []byte{1}, 2, 1) // rendezvous: pending
			anySrc := irecv(t, cs[0], make([]byte, 1), comm.AnySource, 1)
			// A pending rendezvous send of rank 2 to rank 0 fails on rank 2's
			// side with ErrClosed and is withdrawn.
			goneSend := isend(t, gone, []byte{1}, 0, 7)
			pending(t, recvFrom)
			l.leave(gone)
			for _, r := range []comm.Request{recvFrom, sendTo} {
				_, err := wait(t, r)
				require.ErrorIs(t, err, comm.ErrPeerLost)
			}
			_, err := wait(t, goneSend)
			require.ErrorIs(t, err, comm.ErrClosed)
			// Rank 1 is alive: the AnySource receive still waits.
			pending(t, anySrc)

			// New operations that need rank 2 fail at once.
			_, err = cs[0].Irecv(blk(t, make([]byte, 1)), 2, 1)
			require.ErrorIs(t, err, comm.ErrPeerLost)
			_, err = cs[0].Isend(blk(t, []byte{1}), 2, 1)
			require.ErrorIs(t, err, comm.ErrPeerLost)
			_, err = comm.Recv(testwait.Ctx(t), cs[1], blk(t, make([]byte, 1)), 2, comm.AnyTag)
			require.ErrorIs(t, err, comm.ErrPeerLost)
			// The withdrawn message never arrives.
			r7 := irecv(t, cs[0], make([]byte, 1), comm.AnySource, 7)
			pending(t, r7)

			// When rank 1 leaves too, rank 0's AnySource receives fail.
			l.leave(cs[1])
			for _, r := range []comm.Request{anySrc, r7} {
				_, err = wait(t, r)
				require.ErrorIs(t, err, comm.ErrPeerLost)
			}
			_, err = cs[0].Irecv(blk(t, make([]byte, 1)), comm.AnySource, comm.AnyTag)
			require.ErrorIs(t, err, comm.ErrPeerLost)
			// Self-messages still work for the last rank standing.
			isend(t, cs[0], []byte{4}, 0, 4)
			got := make([]byte, 1)
			_, err = wait(t, irecv(t, cs[0], got, 0, 4))
			require.NoError(t, err)
			assert.Equal(t, byte(4), got[0])
		})
	}
}

// TestPendingSendToClosingRank: a rendezvous send waiting in the queue of a
// rank that leaves fails with ErrPeerLost; eager messages it held are
// dropped and their sends stay successful.
func TestPendingSendToClosingRank(t *testing.T) {
	cs := group(t, 2, local.Options{EagerLimit: 4})
	eager := isend(t, cs[0], []byte{1}, 1, 1)
	rdv := isend(t, cs[0], make([]byte, 100), 1, 1)
	pending(t, rdv)
	require.NoError(t, cs[1].Close())
	_, err := wait(t, rdv)
	require.ErrorIs(t, err, comm.ErrPeerLost)
	_, err = wait(t, eager)
	require.NoError(t, err)
}

// TestCloseKeepsEagerMessages: a graceful Close leaves the eager messages
// already sent deliverable; a Kill loses them.
func TestCloseKeepsEagerMessages(t *testing.T) {
	for _, l := range leavers {
		t.Run(l.name, func(t *testing.T) {
			cs := group(t, 2, local.Options{})
			isend(t, cs[1], []byte{1}, 0, 1)
			isend(t, cs[1], []byte{2}, 0, 2)
			l.leave(cs[1])
			got := make([]byte, 1)
			for _, tc := range []struct{ source, tag int }{{1, 1}, {comm.AnySource, comm.AnyTag}} {
				r, err := cs[0].Irecv(blk(t, got), tc.source, tc.tag)
				if l.name == "kill" {
					require.ErrorIs(t, err, comm.ErrPeerLost)
					continue
				}
				require.NoError(t, err)
				st, err := wait(t, r)
				require.NoError(t, err)
				assert.Equal(t, 1, st.Source)
				assert.Equal(t, byte(st.Tag), got[0])
			}
			// Nothing left: the next receive fails.
			_, err := cs[0].Irecv(blk(t, got), 1, comm.AnyTag)
			require.ErrorIs(t, err, comm.ErrPeerLost)
		})
	}
}

// TestCloseUnblocksWaiters: goroutines blocked in Recv and Send on every
// rank return once the ranks they need leave, with ErrPeerLost or
// ErrClosed, never a hang.
func TestCloseUnblocksWaiters(t *testing.T) {
	for _, l := range leavers {
		t.Run(l.name, func(t *testing.T) {
			const n = 4
			cs := group(t, n, local.Options{EagerLimit: -1})
			ctx, cancel := context.WithTimeout(context.Background(), guard)
			defer cancel()
			var wg sync.WaitGroup
			errs := make(chan error, 3*n*n)
			for i := range n {
				for j := range n {
					if i == j {
						continue
					}
					wg.Go(func() {
						_, err := comm.Recv(ctx, cs[i], blk(t, make([]byte, 8)), j, 1)
						errs <- err
					})
					wg.Go(func() { errs <- comm.Send(ctx, cs[i], blk(t, make([]byte, 8)), j, 2) })
				}
				wg.Go(func() {
					_, err := comm.Recv(ctx, cs[i], blk(t, make([]byte, 8)), comm.AnySource, 3)
					errs <- err
				})
			}
			for _, c := range cs {
				l.leave(c)
			}
			testwait.Group(t, &wg, "the ranks' receives and sends, after every rank left")
			close(errs)
			count := 0
			for err := range errs {
				count++
				require.Error(t, err)
				require.NotErrorIs(t, err, context.DeadlineExceeded)
				require.True(t, errorIsOneOf(err, comm.ErrPeerLost, comm.ErrClosed), "got %v", err)
			}
			assert.Equal(t, n*(2*(n-1)+1), count)
		})
	}
}

// TestCloseRace closes ranks while others send and receive at full speed:
// every call returns, with success or one of the documented errors.
func TestCloseRace(t *testing.T) {
	const n = 4
	for _, l := range leavers {
		t.Run(l.name, func(t *testing.T) {
			cs := group(t, n, local.Options{EagerLimit: 32})
			ctx, cancel := context.WithTimeout(context.Background(), guard)
			defer cancel()
			var wg sync.WaitGroup
			for i := range n {
				wg.Go(func() {
					for k := 0; ; k++ {
						dst := (i + 1 + k%(n-1)) % n
						err := comm.Send(ctx, cs[i], blk(t, make([]byte, 8+k%64)), dst, 1)
						if err != nil {
							assert.True(t, errorIsOneOf(err, comm.ErrPeerLost, comm.ErrClosed), "send: %v", err)
							return
						}
					}
				})
				wg.Go(func() {
					buf := make([]byte, 128)
					for {
						_, err := comm.Recv(ctx, cs[i], blk(t, buf), comm.AnySource, 1)
						if err != nil {
							assert.True(t, errorIsOneOf(err, comm.ErrPeerLost, comm.ErrClosed), "recv: %v", err)
							return
						}
					}
				})
			}
			// Let traffic flow: rank 0 must receive a few messages first.
			for range 50 {
				_, err := comm.Recv(ctx, cs[0], blk(t, make([]byte, 128)), comm.AnySource, 1)
				require.NoError(t, err)
			}
			for _, c := range cs {
				l.leave(c)
			}
			testwait.Group(t, &wg, "the ranks' traffic, after every rank left")
		})
	}
}

func errorIsOneOf(err error, targets ...error) bool {
	for _, target := range targets {
		if errors.Is(err, target) {
			return true
		}
	}
	return false
}
