package rdma

import (
	"context"

	"github.com/xpu-go/xpu/backends/rdma/internal/fabric"
	"github.com/xpu-go/xpu/comm"
	"github.com/xpu-go/xpu/internal/match"
	"github.com/xpu-go/xpu/internal/p2p"
	"github.com/xpu-go/xpu/memspace"
	"github.com/xpu-go/xpu/xerr"
)

// Kinds of request, and of entry in the unexpected queue.
const (
	kindRecv     = iota // a receive
	kindSend            // a send to another rank
	kindSelf            // a send to this rank waiting for its receive
	kindEagerMsg        // unexpected: an eager message, its payload in buf
	kindRTSMsg          // unexpected: a peer's announcement of a large message
)

// request is a send or receive in flight, and also an entry of the
// unexpected queue (a message that arrived before its receive). Every
// field below buf is guarded by Comm.mu until the request completes.
type request struct {
	c    *Comm
	kind int
	peer int    // receive: the source wanted (or AnySource); send: destination; message: source
	tag  int    // receive: the tag wanted (or AnyTag); otherwise the message's
	buf  []byte // receive: the buffer; send: the message; eager message: its payload

	match.Entry[request]

	// Rendezvous. A send: id names it to the peer, mr registers buf, pin
	// keeps a Go-heap buf in place, queued says it waits in the peer's
	// queue, announced that its RTS went, cancelAsked that a cancel did. An
	// RTS entry: size, id, addr and rkey of the sender's buffer. A matched
	// rendezvous receive: the same, plus accept (bytes it takes), posted
	// and finished READs of chunk bytes, and its own rid in Comm.reads.
	id          uint64
	size        int
	addr        uint64
	rkey        uint32
	accept      int
	posted      int
	finished    int
	rid         uint64
	src         int
	blk         memspace.Block // the buffer, as given
	mr          *fabric.MR
	unreg       func() // releases mr
	queued      bool
	announced   bool
	cancelAsked bool
	failed      error // a read's outcome, recorded until its READs settle
	keyWait     bool  // a one-sided transfer waiting for its key's answer

	p2p.Done
}

var _ comm.Request = (*request)(nil)

// spinMax is the largest request, in bytes, whose waiter polls for it
// (Config.Spin): where latency is the cost. A larger transfer takes far
// longer than a wakeup, and a spinning waiter would take from the device
// (or, for soft-RoCE, the kernel) the CPU that moves the bytes. A batch's
// waiter polls nonetheless (batchRun.Wait): there the wakeups it spares
// are the refills of the send queue, measured to matter more.
const spinMax = 64 << 10

// complete records the outcome and wakes waiters; only the first call
// counts.
func (r *request) complete(st comm.Status, err error) bool { return r.Complete(st, err) }

// Wait blocks until the request completes, or ctx ends (the request then
// stays pending). A waiter for at most spinMax bytes polls the completion
// queue first (Config.Spin).
func (r *request) Wait(ctx context.Context) (comm.Status, error) {
	if r.IsDone() {
		return r.Result()
	}
	if ctx == nil {
		return comm.Status{}, xerr.Errorf(Name, "wait", comm.ErrInvalidArgument, "nil context")
	}
	if len(r.buf) <= spinMax {
		if ctx.Err() == nil && r.c.spinWait(ctx, r, false) {
			return r.Result()
		}
	} else {
		r.c.armForWaiter()
	}
	return r.Done.Wait(ctx, Name)
}

// Test reports without blocking whether the request has completed. It
// polls the completion queue once first, so a loop of Tests makes
// progress without waking the engine.
func (r *request) Test() (comm.Status, bool, error) {
	if r.IsDone() {
		return r.Done.Test()
	}
	if r.c.progressStarted {
		var wcs [8]fabric.Completion
		_, _ = r.c.poll(wcs[:])
	}
	return r.Done.Test()
}

// Cancel cancels the request where no message has matched it yet; it then
// fails with comm.ErrCanceled. A posted receive and a send to this rank
// are taken back at once; a send still queued for want of credits too; a
// rendezvous send already announced is canceled by asking the peer, which
// answers within a round trip (Wait returns then). A request already
// matched completes normally. Cancel returns nil.
func (r *request) Cancel() error {
	c := r.c
	c.mu.Lock()
	defer c.mu.Unlock()
	if r.Finishing() {
		return nil
	}
	canceled := xerr.Errorf(Name, "cancel", comm.ErrCanceled, "rank %d", c.rank)
	switch r.kind {
	case kindRecv:
		if r.Queued() {
			c.tbl.Unpost(r)
			r.complete(comm.Status{}, canceled)
		}
	case kindSelf:
		if r.Queued() {
			c.tbl.Unqueue(r)
			r.complete(comm.Status{}, canceled)
		}
	case kindSend:
		p := c.peers[r.peer]
		if r.queued {
			p.unqueue(r)
			c.finishSend(r, comm.Status{}, canceled)
			return nil
		}
		if r.announced && !r.cancelAsked && p.lost == nil {
			r.cancelAsked = true
			p.ctrl = append(p.ctrl, out{h: header{kind: kCancel, id: r.id}})
			c.flush(p)
		}
	}
	return nil
}

// sendStatus is the status of the completed send r.
func (r *request) sendStatus() comm.Status { return p2p.SendStatus(r.peer, r.tag, len(r.buf)) }
