package procs_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/xpu-go/xpu/backends/procs"
	"github.com/xpu-go/xpu/comm"
)

// Two ranks bounce Puts with notifications, each waiting for the other's
// notification before it answers: every notification is read by the
// goroutine that waits for it, over either kind of link.
func TestNotifyPingPong(t *testing.T) {
	for _, links := range []procs.LinkMode{procs.LinkAuto, procs.LinkTCP} {
		t.Run(links.String(), func(t *testing.T) { notifyPingPong(t, links) })
	}
}

// exposeEach exposes n bytes on each rank of cs, until the test ends, and
// returns their keys.
func exposeEach(t *testing.T, cs []*procs.Comm, n int) []comm.RemoteKey {
	keys := make([]comm.RemoteKey, len(cs))
	for i, c := range cs {
		reg, err := c.Expose(blk(make([]byte, n)))
		require.NoError(t, err)
		t.Cleanup(func() { _ = reg.Close() })
		keys[i] = reg.Key()
	}
	return keys
}

func notifyPingPong(t *testing.T, links procs.LinkMode) {
	cs := group(t, 2, procs.Config{Links: links})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	keys := exposeEach(t, cs, 64)
	const rounds = 2000
	err := errors.Join(onEach(t, cs, func(c *procs.Comm) error {
		me := c.Rank()
		src := blk(make([]byte, 8))
		wait := func(i int) error {
			if _, err := c.WaitNotification(ctx); err != nil {
				return fmt.Errorf("rank %d, round %d: WaitNotification: %w", me, i, err)
			}
			return nil
		}
		for i := range rounds {
			if me == 1 {
				if err := wait(i); err != nil {
					return err
				}
			}
			r, err := comm.PutNotify(ctx, c, src, keys[1-me], 0, nil)
			if err != nil {
				return err
			}
			if me == 0 {
				if err := wait(i); err != nil {
					return err
				}
			}
			if _, err := r.Wait(ctx); err != nil {
				return fmt.Errorf("rank %d, round %d: the Put: %w", me, i, err)
			}
		}
		return nil
	})...)
	require.NoError(t, err)
}

// A Put whose answer is read before its writer is done with it completes
// in the writer, which must kick the goroutine that waits for it reading
// the link (a regression: over TCP, ping-pongs of a Put and a message
// stalled until their context ended). The ranks Put, send a message, and
// wait for the Put once the peer's message is in.
func TestOneSidedPutThenMessagePingPong(t *testing.T) {
	for _, links := range []procs.LinkMode{procs.LinkAuto, procs.LinkTCP} {
		t.Run(links.String(), func(t *testing.T) { putThenMessage(t, links) })
	}
}

func putThenMessage(t *testing.T, links procs.LinkMode) {
	cs := group(t, 2, procs.Config{Links: links})
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	keys := exposeEach(t, cs, 64)
	const rounds = 3000
	err := errors.Join(onEach(t, cs, func(c *procs.Comm) error {
		me := c.Rank()
		src := blk(make([]byte, 8))
		msg := blk(make([]byte, 8))
		for i := range rounds {
			if me == 1 {
				if _, err := comm.Recv(ctx, c, msg, 0, 5); err != nil {
					return fmt.Errorf("rank %d round %d recv: %w", me, i, err)
				}
			}
			r, err := c.Put(src, keys[1-me], 0)
			if err != nil {
				return err
			}
			if err := comm.Send(ctx, c, msg, 1-me, 5); err != nil {
				return fmt.Errorf("rank %d round %d send: %w", me, i, err)
			}
			if me == 0 {
				if _, err := comm.Recv(ctx, c, msg, 1, 5); err != nil {
					return fmt.Errorf("rank %d round %d recv: %w", me, i, err)
				}
			}
			if _, err := r.Wait(ctx); err != nil {
				return fmt.Errorf("rank %d round %d put: %w", me, i, err)
			}
		}
		return nil
	})...)
	require.NoError(t, err)
}
