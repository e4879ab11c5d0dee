package rdma

import (
	"context"

	"github.com/xpu-go/xpu/comm"
	"github.com/xpu-go/xpu/impl"
	"github.com/xpu-go/xpu/xerr"
)

// Notifications (comm.Notifier). A notification is a SEND of its own kind
// (kNotify, its bytes behind the header in a slot, as an eager message's)
// on the queue pair to the target: it matches no receive, user's or
// collective's. It goes after the WRITEs of the Puts started before it —
// queued behind them, it is posted once they are — so RC's order places
// their bytes before the target sees it. A READ is not ordered so (the
// target's memory may be read again on a retry after the SEND is seen),
// so Notify first waits for the Gets to the target to complete. The target
// queues what arrives; WaitNotification takes it.

var _ comm.Notifier = (*Comm)(nil)

// Notify sends msg (at most comm.MaxNotification bytes) to rank, which
// receives it after every Put and Get this rank started to it before the
// call is complete there. It waits, within ctx, for the Gets to rank (and
// for the transfers whose key rank has not yet confirmed), then queues
// msg behind the Puts. A bad rank or a msg too long fails with
// ErrInvalidArgument, a lost rank with ErrPeerLost, a closed rank with
// ErrClosed.
func (c *Comm) Notify(ctx context.Context, rank int, msg []byte) error {
	if err := impl.CheckRank(rank, c.size, false); err != nil {
		return xerr.Op(Name, "notify", err)
	}
	if ctx == nil {
		return xerr.Errorf(Name, "notify", comm.ErrInvalidArgument, "nil context")
	}
	if len(msg) > comm.MaxNotification {
		return xerr.Errorf(Name, "notify", comm.ErrInvalidArgument, "a notification of %d bytes, more than %d", len(msg), comm.MaxNotification)
	}
	c.mu.Lock()
	wait := c.pendingTo(rank, false)
	c.mu.Unlock()
	for _, w := range wait {
		if err := impl.WaitDone(ctx, w.Chan()); err != nil {
			return err
		}
	}
	note := append([]byte(nil), msg...)
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return c.closedErr("notify")
	}
	if rank == c.rank {
		c.deliverNote(rank, note)
		return nil
	}
	p := c.peers[rank]
	if p.lost != nil {
		return xerr.Errorf(Name, "notify", comm.ErrPeerLost, "rank %d: %v", c.rank, p.lost)
	}
	p.queue = append(p.queue, out{h: header{kind: kNotify, size: uint64(len(note)), id: p.opSeq}, note: note})
	c.flush(p)
	return nil
}

// deliverNote queues a notification from rank and wakes the waiters.
// c.mu is held.
func (c *Comm) deliverNote(rank int, msg []byte) {
	c.notes = append(c.notes, comm.Notification{Source: rank, Msg: msg})
	close(c.noteWake)
	c.noteWake = make(chan struct{})
}

// onNotify takes a notification from p. false: p broke the protocol.
// c.mu is held.
func (c *Comm) onNotify(p *peer, payload []byte) bool {
	if len(payload) > comm.MaxNotification {
		c.protocolError(p, xerr.Detail(ErrProtocol, "rank %d sent a notification of %d bytes", p.rank, len(payload)))
		return false
	}
	if !c.closed {
		c.deliverNote(p.rank, append([]byte(nil), payload...))
	}
	return true
}

// WaitNotification returns the oldest notification received and not yet
// returned, waiting for one until ctx ends; with a context that has ended
// it looks at what has arrived (a poll) and returns ctx's error when
// nothing has. After Close it fails with ErrClosed.
func (c *Comm) WaitNotification(ctx context.Context) (comm.Notification, error) {
	if ctx == nil {
		return comm.Notification{}, xerr.Errorf(Name, "wait notification", comm.ErrInvalidArgument, "nil context")
	}
	polled := false
	for {
		c.mu.Lock()
		if c.closed {
			c.mu.Unlock()
			return comm.Notification{}, c.closedErr("wait notification")
		}
		if len(c.notes) > 0 {
			n := c.notes[0]
			c.notes[0] = comm.Notification{}
			c.notes = c.notes[1:]
			c.mu.Unlock()
			return n, nil
		}
		wake := c.noteWake
		c.mu.Unlock()
		if err := ctx.Err(); err != nil {
			if polled || !c.progressStarted {
				return comm.Notification{}, err
			}
			// Take what the completion queue holds, once.
			c.pollOnce()
			polled = true
			continue
		}
		c.waiters.Add(1)
		c.armForWaiter()
		select {
		case <-wake:
		case <-ctx.Done():
		}
		c.waiters.Add(-1)
	}
}
