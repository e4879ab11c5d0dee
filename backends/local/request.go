package local

import (
	"context"
	"errors"

	"github.com/xpu-go/xpu/comm"
	"github.com/xpu-go/xpu/internal/match"
	"github.com/xpu-go/xpu/internal/p2p"
	"github.com/xpu-go/xpu/xerr"
)

// request is a send or a receive in flight, and also the message of an
// eager send waiting in a receiver's unexpected queue.
//
// The fields above the divider are set before the request is shared and
// never change, except buf, which an eager send replaces with its private
// copy before queueing. The queue fields are guarded by the mutex of the
// receiving rank (dst.mu), in whose queues the request may sit. st and err
// are written once, by whoever takes the request out of its queue (or by
// the starter for a request that never queues): Done.
type request struct {
	recv  bool
	src   int    // send: the sender; receive: the source wanted (or AnySource)
	dst   *Comm  // the receiving rank, whose mutex guards the queue fields
	owner *Comm  // the rank that started the request
	tag   int    // send: the message tag; receive: the tag wanted (or AnyTag)
	buf   []byte // send: the message; receive: the buffer
	eager bool   // a send that has completed; buf is a private copy
	// pooled is the pool handle of an eager copy, given back once the copy
	// has been delivered or dropped; nil when not pooled.
	pooled *[]byte
	// ---
	// Entry is the request's place in dst.tbl (posted or unexpected).
	match.Entry[request]

	p2p.Done
}

var _ comm.Request = (*request)(nil)

// complete records the outcome and wakes waiters. It is called exactly once
// per request, by whoever took it out of its queue.
func (r *request) complete(st comm.Status, err error) {
	if err != nil && errors.Is(err, comm.ErrPeerLost) {
		r.owner.sawLoss.Store(true)
	}
	r.Complete(st, err)
}

// Wait blocks until the request completes and returns its status. For a
// receive the status holds the source, tag and bytes delivered; for a send
// the destination, tag and message length. On ctx done it returns ctx.Err()
// and the request stays pending.
func (r *request) Wait(ctx context.Context) (comm.Status, error) { return r.Done.Wait(ctx, Name) }

// Test reports without blocking whether the request has completed.
func (r *request) Test() (comm.Status, bool, error) { return r.Done.Test() }

// Cancel cancels the request if no message has matched it yet: an
// unmatched receive, or an unmatched rendezvous send. It then fails with
// ErrCanceled. A request that has matched completes normally, promptly (its
// copy is under way); an eager send has already completed. Cancel always
// returns nil.
func (r *request) Cancel() error {
	if r.dst == nil || (!r.recv && r.eager) {
		return nil
	}
	d := r.dst
	d.mu.Lock()
	if !r.Queued() {
		d.mu.Unlock()
		return nil
	}
	if r.recv {
		d.tbl.Unpost(r)
	} else {
		d.unqueue(r)
	}
	d.mu.Unlock()
	op := "send"
	if r.recv {
		op = "recv"
	}
	r.complete(comm.Status{}, xerr.Errorf(Name, op, comm.ErrCanceled, "rank %d", r.owner.rank))
	return nil
}
