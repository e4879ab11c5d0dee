package p2p

import (
	"context"
	"sync/atomic"

	"github.com/xpu-go/xpu/comm"
	"github.com/xpu-go/xpu/flight"
	"github.com/xpu-go/xpu/impl"
	"github.com/xpu-go/xpu/xerr"
)

// closed is a closed channel: the channel of every completed request.
var closed = func() chan struct{} {
	ch := make(chan struct{})
	close(ch)
	return ch
}()

// doneSig is Done.sig once the outcome is recorded.
var doneSig = &closed

// Done is a request's completion: pending until the one call of Begin (or
// Complete) that takes effect records its outcome, done once Publish has
// made the outcome visible. A goroutine that blocks gets a channel (Chan),
// closed by Publish; a request nobody blocks on costs none. Embed it in a
// request; the zero Done is pending.
//
// The outcome is written before Publish and read only after IsDone, so
// that whoever completes a request may hand it back to its owner, who
// reuses it (a blocking Recv), as soon as Publish returns.
type Done struct {
	fin atomic.Bool
	// sig is nil while the request is pending and nobody asked for a
	// channel, the channel of a goroutine that blocks on it, or doneSig
	// once the outcome is recorded.
	sig atomic.Pointer[chan struct{}]
	st  comm.Status
	err error
	// Flight is the request's entry in its communicator's flight
	// recorder, which the outcome ends; the zero Ticket records nothing.
	// Set it before the request is shared.
	Flight flight.Ticket
}

// Begin records the outcome if no other call has, and reports whether it
// did: the caller then owns the request until Publish. Only the first call
// takes effect.
func (d *Done) Begin(st comm.Status, err error) bool {
	if !d.fin.CompareAndSwap(false, true) {
		return false
	}
	d.st, d.err = st, err
	if d.Flight.Valid() { // no call where nothing is recorded
		d.Flight.Finish(err)
	}
	return true
}

// Publish makes the outcome Begin recorded visible and wakes the
// goroutines blocked on the request. Nothing of the request may be
// touched after it.
func (d *Done) Publish() {
	if p := d.sig.Swap(doneSig); p != nil && p != doneSig {
		close(*p)
	}
}

// Complete records the outcome and wakes waiters (Begin then Publish);
// only the first call has an effect, and it reports whether it was that
// one.
func (d *Done) Complete(st comm.Status, err error) bool {
	if !d.Begin(st, err) {
		return false
	}
	d.Publish()
	return true
}

// Completed marks a request that was never shared done with its outcome.
func (d *Done) Completed(st comm.Status, err error) {
	d.st, d.err = st, err
	if d.Flight.Valid() { // no call where nothing is recorded
		d.Flight.Finish(err)
	}
	d.fin.Store(true)
	d.sig.Store(doneSig)
}

// Finishing reports whether a Begin has taken effect: the request is done,
// or about to be.
func (d *Done) Finishing() bool { return d.fin.Load() }

// IsDone reports whether the outcome is recorded and visible.
func (d *Done) IsDone() bool { return d.sig.Load() == doneSig }

// Chan returns a channel closed once the request is done.
func (d *Done) Chan() <-chan struct{} {
	for {
		if p := d.sig.Load(); p != nil {
			return *p
		}
		ch := make(chan struct{})
		if d.sig.CompareAndSwap(nil, &ch) {
			return ch
		}
	}
}

// Result returns the outcome of a done request.
func (d *Done) Result() (comm.Status, error) { return d.st, d.err }

// Forget drops the error of a done request, which a reused request must
// not keep alive.
func (d *Done) Forget() { d.err = nil }

// Test reports without blocking whether the request is done, and its
// outcome if so.
func (d *Done) Test() (comm.Status, bool, error) {
	if d.IsDone() {
		return d.st, true, d.err
	}
	return comm.Status{}, false, nil
}

// Wait blocks until the request is done, or ctx ends: it then returns an
// error matching ctx.Err() and the request stays pending. A nil ctx is an
// error of backend's operation wait.
func (d *Done) Wait(ctx context.Context, backend string) (comm.Status, error) {
	if d.IsDone() {
		return d.st, d.err
	}
	if ctx == nil {
		return comm.Status{}, xerr.Errorf(backend, "wait", comm.ErrInvalidArgument, "nil context")
	}
	if err := impl.WaitDone(ctx, d.Chan()); err != nil {
		return comm.Status{}, err
	}
	return d.st, d.err
}
