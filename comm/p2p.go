package comm

import (
	"context"
	"errors"
	"time"

	"github.com/xpu-go/xpu/flight"
	"github.com/xpu-go/xpu/impl"
	"github.com/xpu-go/xpu/memspace"
)

// Send sends buf to dest with tag and returns when the send has completed
// (the buffer may be reused). On ctx done the send is canceled where it has
// not yet completed and ctx.Err() is returned once it has settled, or after
// a short grace: a send the backend cannot cancel (MPI) and the peer has
// not taken by then stays in flight, still reading buf, as for Sendrecv.
//
// A buf the host cannot touch (device memory) is copied to host memory
// first, and that copy is sent (see Device memory in the package
// documentation), as the package function Isend does.
func Send(ctx context.Context, c Comm, buf memspace.Block, dest, tag int) error {
	if err := impl.CheckTag(tag, false); err != nil {
		return err
	}
	if h, ok := c.(hostDirect); ok {
		if b, err := buf.Bytes(); err == nil {
			return h.SendBytes(ctx, b, dest, tag)
		}
	}
	if d, ok := c.(direct); ok && buf.HostPointer() != nil {
		return d.Send(ctx, buf, dest, tag)
	}
	if !recordsItself(c) {
		return sendRecorded(ctx, c, buf, dest, tag)
	}
	return send(ctx, c, buf, dest, tag)
}

// direct is a communicator that blocks and records its own requests:
// Send and Recv of host memory go straight to its methods, with one type
// assertion where the general path makes three (recordsItself, Blocking,
// and the device check's), on the path of every small message.
type direct interface {
	Blocking
	Recording
}

// HostPointToPoint is implemented by a communicator whose blocking Send
// and Recv also take host memory as bytes. Send and Recv hand it the bytes
// of a host Block (nil for the zero Block) when it also records its own
// requests (Recording): a Block is five words, and each layer it passes
// through by value copies it through memory (ADR 45). Only the
// communicator's own methods count, as for HostCollectives (and a wrapper
// struct that embeds such a communicator and overrides Send or Recv must
// override these too). The methods check the rank and tag as Send and Recv
// of Blocking do.
type HostPointToPoint interface {
	SendBytes(ctx context.Context, buf []byte, dest, tag int) error
	RecvBytes(ctx context.Context, buf []byte, source, tag int) (Status, error)
}

// hostDirect is a communicator that takes host bytes point to point and
// records its own requests.
type hostDirect interface {
	HostPointToPoint
	Recording
}

// sendRecorded is Send on a communicator that does not record its own
// requests: package comm records it.
func sendRecorded(ctx context.Context, c Comm, buf memspace.Block, dest, tag int) error {
	t := postP2P(c, flight.OpSend, dest, tag, buf.Len())
	err := send(ctx, c, buf, dest, tag)
	endFlight(t, err)
	return err
}

func send(ctx context.Context, c Comm, buf memspace.Block, dest, tag int) error {
	if !takesDevice(c, buf) {
		return sendStaged(ctx, c, buf, dest, tag)
	}
	if b, ok := c.(Blocking); ok {
		return b.Send(ctx, buf, dest, tag)
	}
	r, err := c.Isend(buf, dest, tag)
	if err != nil {
		return err
	}
	_, err = Await(ctx, r)
	return err
}

// Recv receives into buf from source (or AnySource) with tag (or AnyTag).
// On ctx done the receive is canceled where no message has matched yet and
// ctx.Err() is returned.
//
// A buf the host cannot touch (device memory) receives through host
// memory: what arrived (Status.Count bytes, also when the message was
// truncated) is copied into buf before Recv returns, as the request of
// the package function Irecv does when it completes.
func Recv(ctx context.Context, c Comm, buf memspace.Block, source, tag int) (Status, error) {
	if err := impl.CheckTag(tag, true); err != nil {
		return Status{}, err
	}
	if h, ok := c.(hostDirect); ok {
		if b, err := buf.Bytes(); err == nil {
			return h.RecvBytes(ctx, b, source, tag)
		}
	}
	if d, ok := c.(direct); ok && buf.HostPointer() != nil {
		return d.Recv(ctx, buf, source, tag)
	}
	if !recordsItself(c) {
		return recvRecorded(ctx, c, buf, source, tag)
	}
	return recv(ctx, c, buf, source, tag)
}

// recvRecorded is Recv on a communicator that does not record its own
// requests: package comm records it.
func recvRecorded(ctx context.Context, c Comm, buf memspace.Block, source, tag int) (Status, error) {
	t := postP2P(c, flight.OpRecv, source, tag, buf.Len())
	st, err := recv(ctx, c, buf, source, tag)
	endFlight(t, err)
	return st, err
}

func recv(ctx context.Context, c Comm, buf memspace.Block, source, tag int) (Status, error) {
	if !takesDevice(c, buf) {
		return recvStaged(ctx, c, buf, source, tag)
	}
	if b, ok := c.(Blocking); ok {
		return b.Recv(ctx, buf, source, tag)
	}
	r, err := c.Irecv(buf, source, tag)
	if err != nil {
		return Status{}, err
	}
	return Await(ctx, r)
}

// Sendrecv sends sbuf to dest and receives rbuf from source at once, the
// deadlock-free exchange of MPI_Sendrecv. On ctx done both are canceled
// and given a short grace to settle before ctx.Err() is returned; a send
// the backend cannot cancel (MPI) and the peer has not taken by then stays
// in flight, still reading sbuf: keep sbuf allocated and unchanged until
// the peer has received it or the communicator is closed.
//
// Buffers the host cannot touch (device memory) are staged through host
// memory as by Send and Recv.
func Sendrecv(ctx context.Context, c Comm, sbuf memspace.Block, dest, stag int,
	rbuf memspace.Block, source, rtag int) (st Status, err error) {
	if !recordsItself(c) {
		rt := postP2P(c, flight.OpRecv, source, rtag, rbuf.Len())
		stt := postP2P(c, flight.OpSend, dest, stag, sbuf.Len())
		defer func() {
			endFlight(stt, err)
			endFlight(rt, err)
		}()
	}
	if !takesDevice(c, sbuf) || !takesDevice(c, rbuf) {
		return sendrecvStaged(ctx, c, sbuf, dest, stag, rbuf, source, rtag)
	}
	rr, err := c.Irecv(rbuf, source, rtag)
	if err != nil {
		return Status{}, err
	}
	sr, err := c.Isend(sbuf, dest, stag)
	if err != nil {
		_ = rr.Cancel()
		_, _ = rr.Wait(context.Background())
		return Status{}, err
	}
	return waitAll2(ctx, rr, sr)
}

// WaitAll waits for every request. It returns the first error; on ctx done
// it cancels the requests still pending and returns ctx.Err() once they
// have settled, or after a short grace: a send the backend cannot cancel
// (MPI) and its receiver has not taken stays pending, and Wait on it
// reports when it completes.
func WaitAll(ctx context.Context, reqs ...Request) error {
	var first error
	for i, r := range reqs {
		if r == nil {
			continue
		}
		if _, err := r.Wait(ctx); err != nil {
			if ctx.Err() != nil && errors.Is(err, ctx.Err()) {
				cancelRest(reqs[i:])
				return err
			}
			if first == nil {
				first = err
			}
		}
	}
	return first
}

func waitAll2(ctx context.Context, recv, send Request) (Status, error) {
	st, err := recv.Wait(ctx)
	if err != nil && ctx.Err() != nil {
		cancelRest([]Request{recv, send})
		return Status{}, err
	}
	if _, serr := send.Wait(ctx); serr != nil {
		if ctx.Err() != nil {
			cancelRest([]Request{send})
		}
		if err == nil {
			err = serr
		}
	}
	return st, err
}

// cancelGrace bounds how long cancelRest waits, in all, for canceled
// requests to settle. Cancel promises that Wait returns promptly
// afterwards, but a backend may be unable to keep that promise for a send:
// MPI cannot cancel a send its receiver has not taken (Open MPI never
// cancels one), and such a send completes only if the peer receives it.
// The caller's context is done by then, so the wait is bounded rather than
// left to a peer that may never come.
const cancelGrace = 100 * time.Millisecond

// cancelRest cancels requests and waits, for up to cancelGrace in all, for
// each to settle. It reports whether all of them did. A request that did
// not is left to its backend, which still owns its buffer: a send may
// still be read from it, and delivered, when its receiver takes it; the
// buffer must then stay allocated (and unchanged, for the peer to receive
// what was sent) until the request completes or the communicator is
// closed.
func cancelRest(reqs []Request) (settled bool) {
	for _, r := range reqs {
		if r != nil {
			_ = r.Cancel()
		}
	}
	ctx, stop := context.WithTimeout(context.Background(), cancelGrace)
	defer stop()
	settled = true
	for _, r := range reqs {
		if r == nil {
			continue
		}
		if _, err := r.Wait(ctx); err != nil && ctx.Err() != nil && errors.Is(err, ctx.Err()) {
			settled = false
		}
	}
	return settled
}

// Await waits for r as Send and Recv do. On ctx done it cancels r and
// gives it a short grace to settle: a completion that wins the race is
// reported as such, else ctx.Err() is returned, and a request that has not
// settled by then (a send MPI cannot cancel) stays with its backend, still
// using its buffer. Backends that implement Blocking use it for the calls
// they cannot finish at once.
func Await(ctx context.Context, r Request) (Status, error) {
	st, err := r.Wait(ctx)
	if err == nil || ctx.Err() == nil || !errors.Is(err, ctx.Err()) {
		return st, err
	}
	_ = r.Cancel()
	gctx, stop := context.WithTimeout(context.Background(), cancelGrace)
	defer stop()
	st, werr := r.Wait(gctx)
	if werr == nil {
		// It completed before the cancel took hold: report success.
		return st, nil
	}
	return Status{}, err
}
