package procs

import (
	"context"
	"io"

	"github.com/xpu-go/xpu/comm"
	"github.com/xpu-go/xpu/impl"
	"github.com/xpu-go/xpu/internal/p2p"
	"github.com/xpu-go/xpu/xerr"
)

// Notifications (comm.Notifier). A notification is a frame on the link
// to the target (frameNotify), and the target's link reader queues it in
// the rank's onesided.Notes. The link's frames are read in the order they
// were written, and the reader places a chunk of a Put before it reads the
// next frame, so a notification written after the chunks of a Put is
// queued after the Put's bytes are in place: Notify need not wait for
// those. It waits for the transfers whose bytes do not travel in the
// link's order before the notification — a Get (its answer is read at
// the origin), and a single copy (made by a system call, of the target or
// of the origin, and answered) — so that the target is notified once they
// are over too.

var _ comm.Notifier = (*Comm)(nil)

// Notify sends msg to rank once every Put and Get this rank started to
// it is complete there: it waits, within ctx, for the Gets and single
// copies under way to rank, then writes the notification behind the
// chunks of Puts already queued.
func (c *Comm) Notify(ctx context.Context, rank int, msg []byte) error {
	if ctx == nil {
		return xerr.Errorf(Name, "notify", comm.ErrInvalidArgument, "nil context")
	}
	if err := impl.CheckRank(rank, c.size, false); err != nil {
		return xerr.Op(Name, "notify", err)
	}
	if len(msg) > comm.MaxNotification {
		return xerr.Errorf(Name, "notify", comm.ErrInvalidArgument, "rank %d: a notification of %d bytes, more than %d", c.rank, len(msg), comm.MaxNotification)
	}
	if c.shut.Load() {
		return c.closedErr()
	}
	own := append([]byte(nil), msg...)
	if rank == c.rank {
		if !c.notes.Push(c.rank, own) {
			return c.closedErr()
		}
		c.noteArrived()
		return nil
	}
	l := c.links[rank]
	if err := l.awaitUnordered(ctx); err != nil {
		return err
	}
	if err := l.sendNotify(own); err != nil {
		return xerr.Errorf(Name, "notify", comm.ErrPeerLost, "rank %d: %w", c.rank, err)
	}
	return nil
}

// awaitUnordered waits for the transfers under way on l whose bytes do
// not move in the link's order: every one but the chunked Puts. Their
// own errors are theirs to report; ctx's, or the link's loss, fail the
// notification.
func (l *link) awaitUnordered(ctx context.Context) error {
	l.one.mu.Lock()
	var wait []*oneOp
	for _, r := range l.one.ops {
		if !r.ordered {
			wait = append(wait, r)
		}
	}
	l.one.mu.Unlock()
	for _, r := range wait {
		if _, err := r.Wait(ctx); err != nil && ctx.Err() != nil {
			return xerr.Errorf(Name, "notify", ctx.Err(), "rank %d: waiting for a transfer to rank %d", l.c.rank, l.peer)
		}
	}
	return nil
}

// sendNotify writes the notification msg on l, from the calling goroutine
// when the link is idle (as tryInline writes a small Put), else behind
// what is queued.
func (l *link) sendNotify(msg []byte) error {
	f := &outFrame{payload: msg}
	frame{typ: frameNotify, a: uint64(len(msg))}.encode(f.hdr[:])
	l.w.mu.Lock()
	if err := l.w.writable(); err != nil {
		l.w.mu.Unlock()
		return err
	}
	if l.w.inlineLocked(headerSize + len(msg)) {
		if err := l.w.writeInline(f.hdr[:], msg); err != nil && !l.closing() {
			return err
		}
		return nil
	}
	l.w.mu.Unlock()
	return l.w.queueFrames([]*outFrame{f})
}

// onNotify takes a notification of n bytes and queues it for this rank.
func (l *link) onNotify(n int) error {
	msg := make([]byte, n)
	if _, err := io.ReadFull(l.rd.br, msg); err != nil {
		return err
	}
	l.c.notes.Push(l.peer, msg) // dropped once this rank closes
	l.c.noteArrived()
	return nil
}

// noteArrived completes the wait of a goroutine that reads a link itself
// for a notification (WaitNotification), and kicks it off that link when
// it is blocked there: the notification came another way.
func (c *Comm) noteArrived() {
	w := c.noteWait.Swap(nil)
	if w == nil || !w.d.Begin(comm.Status{}, nil) {
		return
	}
	if w.l.role.atBoundary.Load() {
		// The waiter is blocked reading its link (not this frame's
		// reader, which is past the boundary): as request.complete does.
		w.l.role.kickWaiter()
	}
	w.d.Publish()
}

// noteWaiter is a goroutine that waits for a notification reading link l
// itself, until d completes.
type noteWaiter struct {
	d p2p.Done
	l *link
}

// WaitNotification returns the oldest notification this rank received
// and has not returned yet, waiting for one until ctx ends; with a
// context that has ended it returns one already received, or ctx's
// error. Every link is read meanwhile.
func (c *Comm) WaitNotification(ctx context.Context) (comm.Notification, error) {
	if ctx == nil {
		return comm.Notification{}, xerr.Errorf(Name, "wait notification", comm.ErrInvalidArgument, "nil context")
	}
	if got, ok, err := c.notes.TryPop(); ok || err != nil {
		return got, err
	}
	if l := c.soleLink(); l != nil {
		// Two ranks: read the peer's link for the notification, as a
		// receive's waiter does (ADR 10), a wake-up less per notification.
		for ctx.Err() == nil && !l.closing() {
			w := &noteWaiter{l: l}
			if !c.noteWait.CompareAndSwap(nil, w) {
				break // another goroutine reads for one
			}
			if got, ok, err := c.notes.TryPop(); ok || err != nil {
				c.noteWait.CompareAndSwap(w, nil)
				return got, err
			}
			held := l.readFor(ctx, &w.d, nil)
			c.noteWait.CompareAndSwap(w, nil)
			if got, ok, err := c.notes.TryPop(); ok || err != nil {
				return got, err
			}
			if !held {
				break
			}
		}
	}
	c.parked.Add(1)
	defer c.parked.Add(-1)
	for _, l := range c.links {
		if l != nil {
			l.role.wakeReader()
		}
	}
	return c.notes.Wait(ctx)
}

// soleLink returns the one link of a communicator of two ranks, nil for
// others.
func (c *Comm) soleLink() *link {
	if c.size != 2 {
		return nil
	}
	return c.links[1-c.rank]
}
