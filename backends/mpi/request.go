//go:build mpi

package mpi

import (
	"context"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"

	"github.com/xpu-go/xpu/comm"
	"github.com/xpu-go/xpu/flight"
	"github.com/xpu-go/xpu/memspace"
	"github.com/xpu-go/xpu/xerr"
)

// req is a nonblocking point-to-point operation: a send (MPI_Isend) or a
// receive, which waits in its communicator's queue until a probe matches
// a message to it, and then runs as MPI_Imrecv (see Irecv). The buffer
// stays alive, and pinned when it is Go memory, until the request
// completes.
//
// mu guards the fields below it and every MPI call on mr, so that two
// goroutines never test or cancel one MPI request at once (MPI forbids
// it) and a request is never touched after MPI has freed it. Lock order:
// recvq.mu, then mu, then the communicator's pmu and callMu.
type req struct {
	c    *Comm
	send bool
	peer int    // send: the destination; receive: the source asked for
	tag  int    // the tag asked for (user view)
	wsrc int    // receive: the source on the wire (MPI_ANY_SOURCE mapped)
	wire int    // receive: the tag on the wire
	n    int    // bytes
	h    handle // the MPI communicator it runs on
	buf  memspace.Block
	pin  runtime.Pinner

	mu       sync.Mutex
	mr       request
	posted   bool     // the MPI request runs (a send; a matched receive)
	scr      *scratch // a receive matched to a longer message: its memory
	scrPin   runtime.Pinner
	full     int  // that message's length
	done     bool // complete: st and err are final
	canceled bool // Cancel was called
	closed   bool // Close canceled it
	mpiCanc  bool // it ended canceled
	st       comm.Status
	err      error
	fl       flight.Ticket // the request's flight record
}

var _ comm.Request = (*req)(nil)

func (c *Comm) newReq(buf memspace.Block, send bool, peer, tag, n int, h handle, t flight.Ticket) *req {
	r := &req{c: c, send: send, peer: peer, tag: tag, n: n, h: h, buf: buf, fl: t}
	if p := buf.HostPointer(); p != nil && n > 0 {
		// MPI keeps the pointer after the call returns: Go memory must stay
		// where it is (a no-op for memory outside the Go heap).
		r.pin.Pin(p)
	}
	return r
}

// started records the outcome of MPI_Isend.
func (c *Comm) started(r *req, mr request, rc int) (comm.Request, error) {
	if rc != 0 {
		r.pin.Unpin()
		err := mpiError("isend", rc)
		r.fl.End(err, false)
		return nil, err
	}
	r.mr, r.posted = mr, true
	c.pmu.Lock()
	c.pending[r] = struct{}{}
	c.pmu.Unlock()
	return r, nil
}

func (r *req) op() string {
	if r.send {
		return "send"
	}
	return "recv"
}

// recvq holds the receives of the process not yet matched to a message,
// in the order they were started (see Irecv); n counts them. While it is
// not empty, no call blocks inside MPI — only polling loops match
// receives, as MPI's progress would match posted ones — so every wait
// calls match (backoff.pause).
var recvq struct {
	mu   sync.Mutex
	list []*req
	n    atomic.Int64
}

// match matches waiting receives to messages, unless another goroutine is
// at it. It probes for each receive in the order they were started, and
// gives a message it finds to the earliest waiting receive the message
// fits — an earlier one whose probe found nothing may fit a message that
// arrived since — so a message goes to the earliest receive it fits, and
// messages of one source and tag are taken in order, as MPI matches posted
// receives.
func match() {
	if recvq.n.Load() == 0 || !recvq.mu.TryLock() {
		return
	}
	defer recvq.mu.Unlock()
	alive.RLock()
	defer alive.RUnlock()
	if finalized.Load() {
		return
	}
	// Every queued receive waits (Cancel and Close take theirs out of the
	// queue); taken marks those this pass matches or fails, whose state
	// other goroutines may change as soon as r.mu is released.
	list := recvq.list
	taken := make([]bool, len(list))
	for i, r := range list {
		for !taken[i] {
			lock()
			pr, rc := cImprobe(r.wsrc, r.wire, r.h)
			unlock()
			if rc != 0 {
				r.mu.Lock()
				r.finish(comm.Status{}, mpiError("recv", rc))
				r.mu.Unlock()
				taken[i] = true
				break
			}
			if !pr.found {
				break
			}
			t := i
			for j, q := range list[:i] {
				if !taken[j] && q.h == r.h && q.fits(pr.st.source, pr.st.tag) {
					t = j
					break
				}
			}
			q := list[t]
			q.mu.Lock()
			q.receive(pr)
			q.mu.Unlock()
			taken[t] = true
		}
	}
	live := list[:0]
	for i, r := range list {
		if !taken[i] {
			live = append(live, r)
		}
	}
	recvq.n.Add(int64(len(live) - len(list)))
	clear(list[len(live):])
	recvq.list = live
}

// fits reports whether a message from source src with tag tag (on the
// wire) matches the receive.
func (r *req) fits(src, tag int) bool {
	return (r.wsrc == cAnySource || r.wsrc == src) && (r.wire == cAnyTag || r.wire == tag)
}

// receive starts receiving the matched message pr (with recvq.mu and r.mu
// held): into the buffer when it fits, else into memory of its length.
func (r *req) receive(pr probed) {
	var mr request
	var rc int
	lock()
	switch {
	case pr.len >= 0 && pr.len <= r.n:
		mr, rc = cImrecv(r.buf.HostPointer(), r.n, pr.msg)
	case pr.len > r.n:
		r.scr, r.full = getScratch(pr.len), pr.len
		r.scrPin.Pin(r.scr.ptr())
		mr, rc = cImrecv(r.scr.ptr(), pr.len, pr.msg)
	default:
		unlock()
		r.finish(comm.Status{Source: pr.st.source}, xerr.Errorf(Name, "recv", comm.ErrNotSupported, "a message from rank %d longer than 2 GiB - 1 bytes", pr.st.source))
		return
	}
	unlock()
	if rc != 0 {
		r.finish(comm.Status{}, mpiError("recv", rc))
		return
	}
	r.mr, r.posted = mr, true
}

// Test reports without blocking whether the request has completed (it
// matches waiting receives first, then tests the MPI request once), and
// if so its status and error.
func (r *req) Test() (comm.Status, bool, error) {
	r.mu.Lock()
	if !r.done && !r.posted {
		r.mu.Unlock()
		match()
		r.mu.Lock()
	}
	r.testLocked()
	defer r.mu.Unlock()
	if !r.done {
		return comm.Status{}, false, nil
	}
	return r.st, true, r.err
}

// testLocked tests the running MPI request once, with r.mu held.
func (r *req) testLocked() {
	if r.done || !r.posted {
		return
	}
	alive.RLock()
	if finalized.Load() {
		alive.RUnlock()
		// MPI is gone and took the request with it. Its memory stays pinned
		// and referenced: MPI may never have let go of it.
		abandon(r)
		r.done, r.err = true, xerr.Errorf(Name, r.op(), comm.ErrClosed, "MPI finalized with the request pending")
		return
	}
	lock()
	next, done, st, rc := cTest(r.mr)
	unlock()
	alive.RUnlock()
	r.mr = next
	if !done {
		return
	}
	var cs comm.Status
	var err error
	switch {
	case r.send:
		cs = comm.Status{Source: r.peer, Tag: r.tag, Count: r.n}
	default:
		cs = comm.Status{Source: st.source, Tag: r.c.userTag(r.h, st.tag), Count: min(st.count, r.n)}
	}
	switch {
	case rc != 0:
		err = mpiError(r.op(), rc)
	case st.cancelled:
		r.mpiCanc = true
		cs, err = comm.Status{}, r.cancelErr()
	case r.scr != nil:
		if r.n > 0 {
			dst, _ := r.buf.Bytes()
			copy(dst, r.scr.bytes())
		}
		cs.Count = r.n
		err = truncated(st.source, r.full, r.n)
	}
	r.finish(cs, err)
}

// cancelErr is the error of a request canceled by Cancel or Close.
func (r *req) cancelErr() error {
	if r.closed {
		return xerr.Errorf(Name, r.op(), comm.ErrClosed, "communicator closed")
	}
	return xerr.Errorf(Name, r.op(), comm.ErrCanceled, "rank %d", r.c.rank)
}

// finish records the outcome, releases the memory and forgets the
// request (with r.mu held).
func (r *req) finish(st comm.Status, err error) {
	r.done, r.st, r.err = true, st, err
	r.fl.End(err, r.canceled || r.closed)
	r.pin.Unpin()
	r.buf = memspace.Block{}
	if r.scr != nil {
		r.scrPin.Unpin()
		putScratch(r.scr)
		r.scr = nil
	}
	r.c.pmu.Lock()
	delete(r.c.pending, r)
	r.c.pmu.Unlock()
}

// Wait waits for the request to complete, testing it with a short spin
// and then a growing backoff, and returns its status. On ctx done it
// returns ctx.Err() and the request stays pending: wait again, or Cancel
// it. Waiting never blocks inside MPI, so Cancel and Close take effect
// from other goroutines.
func (r *req) Wait(ctx context.Context) (comm.Status, error) {
	if ctx == nil {
		return comm.Status{}, xerr.Errorf(Name, "wait", comm.ErrInvalidArgument, "nil context")
	}
	return r.wait(ctx, true)
}

func (r *req) wait(ctx context.Context, wrap bool) (comm.Status, error) {
	done := ctx.Done()
	var b backoff
	for {
		if st, ok, err := r.Test(); ok {
			return st, err
		}
		if done != nil {
			select {
			case <-done:
				// Report a completion that raced with the context.
				if st, ok, err := r.Test(); ok {
					return st, err
				}
				if wrap {
					return comm.Status{}, xerr.Op(Name, "wait", ctx.Err())
				}
				return comm.Status{}, ctx.Err()
			default:
			}
		}
		b.pause()
	}
}

// Cancel cancels the request if it can. A receive no message has matched
// leaves the queue and its Wait returns comm.ErrCanceled; a matched one
// completes normally. A send is canceled with MPI_Cancel, which MPI may
// refuse: Open MPI never cancels a send, nor does MPICH over UCX, and its
// Wait then returns when the receiver has taken the message. A request that
// has completed is left as it is.
func (r *req) Cancel() error {
	if !r.send {
		r.cancelRecv(false)
		return nil
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.cancelSend()
}

// cancelRecv takes a waiting receive out of the queue and completes it
// canceled (closed: by Close).
func (r *req) cancelRecv(closed bool) {
	recvq.mu.Lock()
	defer recvq.mu.Unlock()
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.done || r.posted {
		return
	}
	if i := slices.Index(recvq.list, r); i >= 0 {
		recvq.list = slices.Delete(recvq.list, i, i+1)
		recvq.n.Add(-1)
	}
	r.canceled, r.closed, r.mpiCanc = true, closed, true
	r.finish(comm.Status{}, r.cancelErr())
}

// cancelSend asks MPI to cancel a send (with r.mu held).
func (r *req) cancelSend() error {
	if r.done || r.canceled {
		return nil
	}
	r.canceled = true
	alive.RLock()
	defer alive.RUnlock()
	if finalized.Load() {
		return nil
	}
	lock()
	rc := cCancel(r.mr)
	unlock()
	return mpiError("cancel", rc)
}

// closeCancel cancels the request for Close.
func (r *req) closeCancel() {
	if !r.send {
		r.cancelRecv(true)
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.done {
		return
	}
	r.closed = true
	_ = r.cancelSend()
	r.testLocked()
}

// wasCanceled reports whether the request completed canceled.
func (r *req) wasCanceled() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.done && r.mpiCanc
}
