package procs

import (
	"context"
	"sync/atomic"

	"github.com/xpu-go/xpu/comm"
	"github.com/xpu-go/xpu/internal/match"
	"github.com/xpu-go/xpu/internal/p2p"
	"github.com/xpu-go/xpu/memspace"
	"github.com/xpu-go/xpu/xerr"
)

// Kinds of request, and of entry in the unexpected queue.
const (
	kindRecv      = iota // a receive
	kindSend             // a send to another rank
	kindSelf             // a send to this rank waiting for its receive (rendezvous)
	kindEagerMsg         // unexpected: an eager message (payload held in buf)
	kindRTSMsg           // unexpected: a peer's announcement of a large message
	kindCompleted        // a request complete when started
)

// request is a send or receive in flight, and also an entry of the
// unexpected queue (a message that arrived before its receive).
//
// The fields above the divider are set before the request is shared. The
// queue fields are guarded by Comm.mu. A matched rendezvous receive
// (reader.inbound) is owned by the holder of its link's read role, a send
// handed to a link by its writer: only they complete it, so that a buffer
// is never in use after its request completes.
type request struct {
	c    *Comm
	kind int
	peer int    // receive: source wanted (or AnySource); send: destination; message: source
	tag  int    // receive: tag wanted (or AnyTag); otherwise the message tag
	buf  []byte // receive: the buffer; send: the message; eager message: its payload
	// red, when set, makes a receive fold what arrives into buf
	// (buf = incoming op own) instead of copying it: the ring allreduce.
	red *reduction
	// pooled is the pool handle of an eager message's payload.
	pooled *[]byte
	// dev, when set, is the state of a send or receive of a block the
	// host cannot touch, or of an announcement by description
	// (device.go).
	dev *devState
	// ---
	// Entry is the request's place in Comm.tbl (posted or unexpected).
	match.Entry[request]

	// Rendezvous state. For a send: id names it to the peer; addr is the
	// address of buf the announcement carried (0: none), for the peer to
	// copy the message itself (cma.go); token and accept come with the
	// clear-to-send, sent counts bytes handed to the socket, cancelReq
	// says a cancel was asked of the peer (guarded by the link's
	// writer.mu). For a receive: size is the message length, accept what
	// it takes, got what has arrived (owned by the holder of the read
	// role, or by the goroutine that copies it). For an RTS entry: id,
	// size and via.
	id        uint64
	addr      uint64
	token     uint64
	size      int
	accept    int
	sent, got int
	cancelReq bool
	via       *link

	// other is the rank a request involves, set before it is shared: the
	// source a receive was posted for (or comm.AnySource), the destination
	// of a send. direct is the link whose read role a goroutine waiting
	// for the request holds (readrole.go).
	other  int
	direct atomic.Pointer[link]

	// Done is the request's completion (package internal/p2p): a request
	// whose waiters poll or read the link themselves (most receives)
	// costs no channel.
	p2p.Done
}

// reduction describes how a receive folds incoming bytes into its buffer.
type reduction struct {
	dst memspace.Block // the receive region (buf's block)
	own memspace.Block // this rank's operand, same length (may equal dst)
	dt  comm.DType
	op  comm.Op
}

var _ comm.Request = (*request)(nil)

// complete records the outcome and wakes waiters. Only the first call has
// an effect; it reports whether it was that one.
func (r *request) complete(st comm.Status, err error) bool {
	if r.dev != nil {
		// A device request: its stand-in is copied out and freed
		// before it completes, by the one caller that claims it.
		if r.dev.claim.Swap(true) {
			return false
		}
		st, err = r.dev.settle(r, st, err)
	}
	if !r.Begin(st, err) {
		return false
	}
	if l := r.direct.Load(); l != nil && l.role.atBoundary.Load() {
		// The waiter reads the socket itself and may be blocked there.
		l.role.kickWaiter()
	}
	// Nothing touches r after this: its owner may reuse it (Comm.Recv).
	r.Publish()
	return true
}

// Wait blocks until the request completes and returns its status: for a
// receive the source, tag and bytes delivered; for a send the destination,
// tag and message length. On ctx done it returns ctx.Err() and the request
// stays pending.
func (r *request) Wait(ctx context.Context) (comm.Status, error) {
	if r.IsDone() {
		return r.Result()
	}
	if ctx == nil {
		return comm.Status{}, xerr.Errorf(Name, "wait", comm.ErrInvalidArgument, "nil context")
	}
	if l := r.readsFrom(); l != nil && l.waitDirect(ctx, r) {
		if r.IsDone() {
			return r.Result()
		}
		if err := ctx.Err(); err != nil {
			return comm.Status{}, err
		}
		// The link went down: r completes with its error below.
	}
	c := r.c
	c.parked.Add(1)
	defer c.parked.Add(-1)
	r.wakeReaders()
	// Every link is read while this goroutine sleeps, not only r's: r may
	// complete only once a peer progresses, and the peer only once its
	// data is read from here — in a ring each rank waits for its send to
	// the right while its left neighbour, doing the same, needs it to read
	// the left link. A link whose role a waiter freed before this wait
	// began would otherwise wait for its reader's idle check.
	for _, l := range c.links {
		if l != nil {
			l.role.wakeReader()
		}
	}
	return r.Done.Wait(ctx, Name)
}

// Test reports without blocking whether the request has completed.
func (r *request) Test() (comm.Status, bool, error) {
	if r.IsDone() {
		return r.Done.Test()
	}
	r.wakeReaders()
	return comm.Status{}, false, nil
}

// readsFrom returns the link a goroutine waiting for r may read itself: a
// receive posted for one other rank.
func (r *request) readsFrom() *link {
	if r.kind != kindRecv || r.other == comm.AnySource || r.other == r.c.rank {
		return nil
	}
	return r.c.links[r.other]
}

// wakeReaders makes sure the links r needs are read while its owner waits
// without reading: the source's link for a receive (every link for
// AnySource), the destination's for a send (its clear-to-send).
func (r *request) wakeReaders() {
	c := r.c
	switch {
	case r.kind == kindRecv && r.other == comm.AnySource:
		for _, l := range c.links {
			if l != nil {
				l.role.wakeReader()
			}
		}
	case r.kind == kindRecv, r.kind == kindSend:
		if r.other != c.rank {
			if l := c.links[r.other]; l != nil {
				l.role.wakeReader()
			}
		}
	}
}

// Cancel cancels the request where no message has matched it yet, and it
// then fails with comm.ErrCanceled: a posted receive, a send to this rank
// no receive has taken, or a rendezvous send the peer has not matched (the
// peer is asked, and answers within a round trip; Wait returns then). A
// request already matched completes normally. Cancel returns nil.
func (r *request) Cancel() error {
	switch r.kind {
	case kindRecv, kindSelf:
		c := r.c
		c.mu.Lock()
		if !r.Queued() {
			c.mu.Unlock()
			return nil
		}
		if r.kind == kindRecv {
			c.tbl.Unpost(r)
		} else {
			c.unqueue(r)
		}
		c.mu.Unlock()
		op := "send"
		if r.kind == kindRecv {
			op = "recv"
		}
		r.complete(comm.Status{}, xerr.Errorf(Name, op, comm.ErrCanceled, "rank %d", c.rank))
	case kindSend:
		if r.via != nil {
			r.via.w.cancel(r)
		}
	}
	return nil
}

// sendStatus is the status of the completed send r.
func (r *request) sendStatus() comm.Status { return p2p.SendStatus(r.peer, r.tag, len(r.buf)) }
