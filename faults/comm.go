package faults

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/xpu-go/xpu/comm"
	"github.com/xpu-go/xpu/memspace"
	"github.com/xpu-go/xpu/xerr"
)

// Comm wraps a communicator and consults an injector before each Isend
// (Kind Isend) and Irecv (Kind Irecv): it can fail a call, delay or drop a
// message, or lose a peer. Once a peer is lost (by a Fault with LosePeer,
// or by LosePeer), every pending and later operation of this rank that
// names it fails with an error matching comm.ErrPeerLost — the failure
// contract every backend must meet, so the same tests can hold each backend
// to it.
//
// Comm implements comm.Collectives by declining every method
// (comm.ErrFallback), so collectives run the shared algorithms over the
// wrapper's point-to-point calls and the faults reach them. Other
// capabilities of the inner communicator are found through Unwrap.
type Comm struct {
	inner comm.Comm
	inj   Injector

	mu       sync.Mutex
	lost     map[int]context.Context
	loseFns  map[int]context.CancelFunc
	closed   bool
	stop     context.Context // canceled by Close: stops delayed sends
	stopFn   context.CancelFunc
	inflight sync.WaitGroup
}

var (
	_ comm.Comm        = (*Comm)(nil)
	_ comm.Unwrapper   = (*Comm)(nil)
	_ comm.Collectives = (*Comm)(nil)
)

// WrapComm returns c wrapped with inj.
func WrapComm(c comm.Comm, inj Injector) *Comm {
	stop, stopFn := context.WithCancel(context.Background())
	return &Comm{inner: c, inj: inj, lost: map[int]context.Context{}, loseFns: map[int]context.CancelFunc{}, stop: stop, stopFn: stopFn}
}

// Rank returns the inner communicator's rank.
func (c *Comm) Rank() int { return c.inner.Rank() }

// Size returns the inner communicator's size.
func (c *Comm) Size() int { return c.inner.Size() }

// Unwrap returns the inner communicator.
func (c *Comm) Unwrap() comm.Comm { return c.inner }

// peerCtx returns the context that is canceled when peer p is lost.
func (c *Comm) peerCtx(p int) context.Context {
	c.mu.Lock()
	defer c.mu.Unlock()
	ctx, ok := c.lost[p]
	if !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithCancel(context.Background())
		c.lost[p] = ctx
		c.loseFns[p] = cancel
	}
	return ctx
}

// LosePeer makes rank p lost for this rank: pending operations naming it
// are released with comm.ErrPeerLost and later ones fail at once.
func (c *Comm) LosePeer(p int) {
	c.peerCtx(p)
	c.mu.Lock()
	cancel := c.loseFns[p]
	c.mu.Unlock()
	cancel()
}

func (c *Comm) isLost(p int) bool {
	if p < 0 {
		return false
	}
	return c.peerCtx(p).Err() != nil
}

func (c *Comm) errLost(p int) error {
	return xerr.Errorf(Name, "", comm.ErrPeerLost, "rank %d lost peer %d", c.inner.Rank(), p)
}

func (c *Comm) begin(op Op) (Fault, error) {
	c.mu.Lock()
	closed := c.closed
	c.mu.Unlock()
	if closed {
		return Fault{}, xerr.Op(Name, op.Kind.String(), comm.ErrClosed)
	}
	if c.isLost(op.Peer) {
		return Fault{}, c.errLost(op.Peer)
	}
	f := c.inj.Inject(op)
	if f.LosePeer && op.Peer >= 0 {
		c.LosePeer(op.Peer)
		return Fault{}, c.errLost(op.Peer)
	}
	if f.Err != nil {
		return Fault{}, inject(op, f.Err)
	}
	if f.LoseDevice {
		return Fault{}, inject(op, xerr.ErrDeviceLost)
	}
	return f, nil
}

// Isend sends through the inner communicator unless a fault says otherwise.
func (c *Comm) Isend(buf memspace.Block, dest, tag int) (comm.Request, error) {
	op := Op{Kind: Isend, Rank: c.inner.Rank(), Peer: dest, Tag: tag, Size: buf.Len()}
	f, err := c.begin(op)
	if err != nil {
		return nil, err
	}
	if f.Drop {
		return done{st: comm.Status{Source: dest, Tag: tag, Count: buf.Len()}}, nil
	}
	start := func() (comm.Request, error) { return c.inner.Isend(buf, dest, tag) }
	if f.Delay > 0 {
		return c.delayed(f.Delay, dest, start), nil
	}
	r, err := start()
	if err != nil {
		return nil, err
	}
	return c.watch(r, dest), nil
}

// Irecv receives through the inner communicator unless a fault says
// otherwise. A delay holds back the posting of the receive.
func (c *Comm) Irecv(buf memspace.Block, source, tag int) (comm.Request, error) {
	op := Op{Kind: Irecv, Rank: c.inner.Rank(), Peer: source, Tag: tag, Size: buf.Len()}
	f, err := c.begin(op)
	if err != nil {
		return nil, err
	}
	start := func() (comm.Request, error) { return c.inner.Irecv(buf, source, tag) }
	if f.Delay > 0 {
		return c.delayed(f.Delay, source, start), nil
	}
	r, err := start()
	if err != nil {
		return nil, err
	}
	return c.watch(r, source), nil
}

// Close stops delayed operations, then closes the inner communicator,
// which fails this rank's pending requests with comm.ErrClosed. Closing
// this rank loses no peer: a request pending at Close, or waited for after
// it, reports what the inner communicator says (ErrClosed), as it would
// unwrapped.
func (c *Comm) Close() error {
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return nil
	}
	c.closed = true
	c.mu.Unlock()
	c.stopFn()
	c.inflight.Wait()
	return c.inner.Close()
}

// isClosed reports whether Close has been called.
func (c *Comm) isClosed() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.closed
}

func (c *Comm) watch(r comm.Request, peer int) comm.Request {
	if peer < 0 {
		return r
	}
	return &watched{c: c, r: r, peer: peer, lost: c.peerCtx(peer)}
}

// watched releases a request with ErrPeerLost when its peer is lost.
type watched struct {
	c    *Comm
	r    comm.Request
	peer int
	lost context.Context
}

// Wait waits for the inner request, or for the loss of its peer.
func (w *watched) Wait(ctx context.Context) (comm.Status, error) {
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	stop := context.AfterFunc(w.lost, cancel)
	defer stop()
	st, err := w.r.Wait(wctx)
	if err == nil || ctx.Err() != nil || w.lost.Err() == nil {
		return st, err
	}
	return w.settleLost()
}

func (w *watched) settleLost() (comm.Status, error) {
	_ = w.r.Cancel()
	st, err := w.r.Wait(context.Background())
	switch {
	case err == nil:
		return st, nil // it completed before the loss took hold
	case errors.Is(err, comm.ErrClosed) && w.c.isClosed():
		return comm.Status{}, err // this rank closed: that is the cause
	}
	return comm.Status{}, w.c.errLost(w.peer)
}

func (w *watched) Test() (comm.Status, bool, error) {
	st, ok, err := w.r.Test()
	if ok || w.lost.Err() == nil {
		return st, ok, err
	}
	st, err = w.settleLost()
	return st, true, err
}

func (w *watched) Cancel() error { return w.r.Cancel() }

// done is a request that completed when it was made.
type done struct{ st comm.Status }

func (d done) Wait(context.Context) (comm.Status, error) { return d.st, nil }
func (d done) Test() (comm.Status, bool, error)          { return d.st, true, nil }
func (d done) Cancel() error                             { return nil }

// delayedReq starts its operation after a delay unless canceled first.
type delayedReq struct {
	c       *Comm
	peer    int
	ready   chan struct{} // closed once r or err is set
	mu      sync.Mutex
	cancel  bool
	r       comm.Request
	err     error
	timerCh chan struct{}
}

func (c *Comm) delayed(d time.Duration, peer int, start func() (comm.Request, error)) comm.Request {
	q := &delayedReq{c: c, peer: peer, ready: make(chan struct{}), timerCh: make(chan struct{})}
	lost := c.peerCtx(peer)
	if peer < 0 {
		lost = context.Background()
	}
	c.inflight.Add(1)
	go func() {
		defer c.inflight.Done()
		t := time.NewTimer(d)
		defer t.Stop()
		var err error
		select {
		case <-t.C:
		case <-q.timerCh:
			err = xerr.Errorf(Name, "", comm.ErrCanceled, "delayed operation")
		case <-c.stop.Done():
			err = xerr.Errorf(Name, "", comm.ErrClosed, "delayed operation")
		case <-lost.Done():
			err = c.errLost(peer)
		}
		var r comm.Request
		if err == nil {
			r, err = start()
		}
		q.mu.Lock()
		if r != nil {
			q.r = c.watch(r, peer)
		}
		q.err = err
		q.mu.Unlock()
		close(q.ready)
	}()
	return q
}

func (q *delayedReq) Wait(ctx context.Context) (comm.Status, error) {
	select {
	case <-q.ready:
	case <-ctx.Done():
		return comm.Status{}, ctx.Err()
	}
	if q.err != nil {
		return comm.Status{}, q.err
	}
	return q.r.Wait(ctx)
}

func (q *delayedReq) Test() (comm.Status, bool, error) {
	select {
	case <-q.ready:
	default:
		return comm.Status{}, false, nil
	}
	if q.err != nil {
		return comm.Status{}, true, q.err
	}
	return q.r.Test()
}

func (q *delayedReq) Cancel() error {
	q.mu.Lock()
	if !q.cancel {
		q.cancel = true
		close(q.timerCh)
	}
	q.mu.Unlock()
	<-q.ready
	if q.r != nil {
		return q.r.Cancel()
	}
	return nil
}

// The collectives decline, so the shared algorithms run over the wrapper.

// Barrier declines with comm.ErrFallback.
func (c *Comm) Barrier(context.Context) error { return comm.ErrFallback }

// Bcast declines with comm.ErrFallback.
func (c *Comm) Bcast(context.Context, memspace.Block, int) error { return comm.ErrFallback }

// Reduce declines with comm.ErrFallback.
func (c *Comm) Reduce(context.Context, memspace.Block, memspace.Block, comm.DType, comm.Op, int) error {
	return comm.ErrFallback
}

// Allreduce declines with comm.ErrFallback.
func (c *Comm) Allreduce(context.Context, memspace.Block, memspace.Block, comm.DType, comm.Op) error {
	return comm.ErrFallback
}

// Gather declines with comm.ErrFallback.
func (c *Comm) Gather(context.Context, memspace.Block, memspace.Block, int) error {
	return comm.ErrFallback
}

// Scatter declines with comm.ErrFallback.
func (c *Comm) Scatter(context.Context, memspace.Block, memspace.Block, int) error {
	return comm.ErrFallback
}

// Allgather declines with comm.ErrFallback.
func (c *Comm) Allgather(context.Context, memspace.Block, memspace.Block) error {
	return comm.ErrFallback
}

// Alltoall declines with comm.ErrFallback.
func (c *Comm) Alltoall(context.Context, memspace.Block, memspace.Block) error {
	return comm.ErrFallback
}

// ReduceScatter declines with comm.ErrFallback.
func (c *Comm) ReduceScatter(context.Context, memspace.Block, memspace.Block, comm.DType, comm.Op) error {
	return comm.ErrFallback
}
