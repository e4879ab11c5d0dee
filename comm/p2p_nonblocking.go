package comm

import (
	"context"
	"errors"
	"sync"

	"github.com/xpu-go/xpu/memspace"
	"github.com/xpu-go/xpu/xerr"
)

// Isend starts sending buf to rank dest with tag, as c.Isend does, and
// takes also a buf the host cannot touch (device memory) that c does not
// move itself: such a buf is copied into a host stand-in (in the space
// its space's memspace.Stager names, else on the Go heap) before Isend
// returns, and the stand-in is sent; the request frees it once the send
// has settled (completed, failed or canceled), so buf may be reused as
// soon as Isend returns. A host block, the zero Block, and a device block
// c takes (DeviceNative) go to c.Isend as they are, at no extra cost.
//
// Tags are those of c.Isend (reserved ones included). The copy of a
// staged buf is a local transfer, bounded by the device and not by a
// peer; a failed copy, or no transfer path to the host, fails Isend with
// an error of component "comm", op "isend", matching the cause (see
// Device memory in the package documentation). Nothing is then sent.
func Isend(c Comm, buf memspace.Block, dest, tag int) (Request, error) {
	if c == nil {
		return nil, nilCommErr("isend")
	}
	if takesDevice(c, buf) {
		return c.Isend(buf, dest, tag)
	}
	return isendStaged(c, buf, dest, tag)
}

// Irecv starts receiving into buf from source (or AnySource) with tag (or
// AnyTag), as c.Irecv does, and takes also a buf the host cannot touch
// (device memory) that c does not move itself: such a buf receives into a
// host stand-in, and the request copies what arrived (Status.Count bytes,
// the delivered prefix of a truncated message included) into buf when it
// completes — in Wait, in Test, or in whatever waits on it (WaitAll,
// Await) — exactly once, before it reports completion, then frees the
// stand-in. A copy that fails fails the request with an error of
// component "comm", op "irecv", matching the cause. Cancel frees the
// stand-in once the receive has settled. A host block, the zero Block,
// and a device block c takes (DeviceNative) go to c.Irecv as they are, at
// no extra cost.
func Irecv(c Comm, buf memspace.Block, source, tag int) (Request, error) {
	if c == nil {
		return nil, nilCommErr("irecv")
	}
	if takesDevice(c, buf) {
		return c.Irecv(buf, source, tag)
	}
	return irecvStaged(c, buf, source, tag)
}

//go:noinline
func nilCommErr(name string) error {
	return xerr.Detail(ErrInvalidArgument, "comm: %s on a nil communicator", name)
}

// isendStaged is Isend of a buf the host cannot touch: it sends a host
// copy, freed by the request once the send has settled.
func isendStaged(c Comm, buf memspace.Block, dest, tag int) (Request, error) {
	s := &staging{name: "isend"}
	h, err := s.standIn(buf)
	if err != nil {
		return nil, err
	}
	s.in(h, buf)
	// The copy is from the device, which no peer holds up: it is not
	// bounded by a context, as the copy out of a staged receive is not.
	if err := s.start(context.Background()); err != nil { // unbounded: a local device copy
		_ = s.free()
		return nil, err
	}
	r, err := c.Isend(h, dest, tag)
	if err != nil {
		_ = s.free()
		return nil, err
	}
	return &stagedRequest{r: r, s: s}, nil
}

// irecvStaged is Irecv into a buf the host cannot touch: it receives into
// a host stand-in, which the request copies into buf on completion.
func irecvStaged(c Comm, buf memspace.Block, source, tag int) (Request, error) {
	s := &staging{name: "irecv"}
	h, err := s.standIn(buf)
	if err != nil {
		return nil, err
	}
	if buf.Len() > 0 {
		if err := checkPath(s.name, buf.Space(), h.Space()); err != nil {
			_ = s.free()
			return nil, err
		}
	}
	r, err := c.Irecv(h, source, tag)
	if err != nil {
		_ = s.free()
		return nil, err
	}
	return &stagedRequest{r: r, s: s, recv: true, buf: buf, h: h}, nil
}

// stagedRequest is the request of a staged Isend or Irecv: the backend's
// request r on the host stand-in, and what to do when it settles — copy
// the stand-in out (a receive) and free it. Settling happens once, under
// mu, by whichever of Wait, Test or Cancel first sees r complete; the
// others then report the same result.
type stagedRequest struct {
	r      Request
	s      *staging
	recv   bool
	buf, h memspace.Block // a receive's buffer and its stand-in

	mu      sync.Mutex
	settled bool
	st      Status
	err     error
}

// Wait waits for the request and, for a receive, copies what arrived into
// the caller's buffer before it returns. On ctx done the request stays
// pending, as the backend's does.
func (q *stagedRequest) Wait(ctx context.Context) (Status, error) {
	if st, err, ok := q.result(); ok {
		return st, err
	}
	st, err := q.r.Wait(ctx)
	if err != nil && ctx.Err() != nil && errors.Is(err, ctx.Err()) {
		// The context ended: the request is pending unless it completed
		// meanwhile.
		tst, done, terr := q.r.Test()
		if !done {
			return Status{}, err
		}
		st, err = tst, terr
	}
	return q.settle(st, err)
}

// Test reports whether the request has completed; a receive that has is
// copied out before Test reports it.
func (q *stagedRequest) Test() (Status, bool, error) {
	if st, err, ok := q.result(); ok {
		return st, true, err
	}
	st, done, err := q.r.Test()
	if !done {
		return Status{}, false, nil
	}
	st, err = q.settle(st, err)
	return st, true, err
}

// Cancel cancels the backend's request and settles it at once where it
// has settled: a receive that completed before the cancel took hold is
// copied out, and the stand-in is freed. A request the backend could not
// cancel at once (a send MPI cannot withdraw) is settled when it
// completes.
func (q *stagedRequest) Cancel() error {
	if _, _, ok := q.result(); ok {
		return nil
	}
	err := q.r.Cancel()
	if st, done, terr := q.r.Test(); done {
		_, _ = q.settle(st, terr)
		return err
	}
	go func() {
		st, werr := q.r.Wait(context.Background()) // unbounded: the backend still owns the stand-in until it settles
		_, _ = q.settle(st, werr)
	}()
	return err
}

// result returns the settled result, if any.
func (q *stagedRequest) result() (Status, error, bool) {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.st, q.err, q.settled
}

// settle copies a receive's arrived bytes out and frees the stand-in,
// once: later calls return the result of the first.
func (q *stagedRequest) settle(st Status, err error) (Status, error) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.settled {
		return q.st, q.err
	}
	if q.recv {
		st, err = deliverStaged(context.Background(), q.s.name, q.buf, q.h, st, err)
	}
	if ferr := q.s.free(); err == nil && ferr != nil {
		st, err = Status{}, ferr
	}
	q.st, q.err, q.settled = st, err, true
	return st, err
}
