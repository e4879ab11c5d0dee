package cuda

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"

	"github.com/xpu-go/xpu/backends/cuda/internal/cu"
	"github.com/xpu-go/xpu/executor"
	"github.com/xpu-go/xpu/xerr"
)

var (
	_ executor.Stream     = (*Stream)(nil)
	_ executor.Event      = (*Event)(nil)
	_ executor.TimedEvent = (*Event)(nil)
)

// Stream is a CUDA stream (non-blocking with respect to the legacy default
// stream). Copies, kernels, event records and waits on CUDA events are
// submitted to the driver at once and run in order on the device, no host
// thread blocked per operation.
//
// Host work (Enqueue) and waits on events of other backends run in stream
// order without ever calling the driver from a driver callback: while one
// is pending, later operations queue in the stream, and one goroutine
// waits for the device to reach the host work (cuStreamSynchronize), runs
// it, then submits what queued behind it, after which the stream submits
// directly again. A failing function, or a failed event waited on, makes
// the stream sticky as the executor contract says: later work is skipped,
// events recorded after it carry the error, and Synchronize returns it and
// clears it. A failure of the device itself (a faulting kernel, a lost
// device) is the driver's sticky error: every call after it fails with an
// error matching xerr.ErrDeviceLost until the backend is reopened.
type Stream struct {
	x      *Executor
	h      cu.Stream
	ctx    context.Context // given to host functions; canceled once the stream has closed
	cancel context.CancelFunc

	mu       sync.Mutex
	closed   bool
	q        []sop         // operations behind host work; non-empty only while draining
	draining bool          // a goroutine runs q; until it ends, every operation queues
	drained  chan struct{} // closed when that goroutine ends
	sticky   error
	stage    *stager  // pinned buffer for stream-ordered pageable copies
	red      *reducer // scratch of the reductions
}

// sop is one queued operation: exactly one field is set.
type sop struct {
	gpu  func() error // submits device work
	host func(ctx context.Context) error
	rec  *Event
	wait executor.Event
	sync *syncMark
}

type syncMark struct {
	state atomic.Int32 // markPending, markTaken, markAbandoned
	err   chan error   // cap 1
}

const (
	markPending = iota
	markTaken
	markAbandoned
)

// NewStream creates a CUDA stream on the executor's device.
func (x *Executor) NewStream() (executor.Stream, error) {
	return x.newStream()
}

func (x *Executor) newStream() (*Stream, error) {
	x.mu.Lock()
	defer x.mu.Unlock()
	if x.closed {
		return nil, xerr.Dev(Name, x.d.idx, "new-stream", executor.ErrClosed)
	}
	h, err := x.d.lib.StreamCreate(x.d.ctx)
	if err != nil {
		return nil, devErr(x.d.idx, "new-stream", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	s := &Stream{x: x, h: h, ctx: ctx, cancel: cancel}
	x.streams[s] = struct{}{}
	return s, nil
}

// Device is the device index of the stream.
func (s *Stream) Device() int { return s.x.d.idx }

func (s *Stream) closedErr(op string) error {
	return xerr.Dev(Name, s.x.d.idx, "stream "+op, executor.ErrClosed)
}

// nilArgErr is the error of the stream operation op given a nil what.
func (s *Stream) nilArgErr(op, what string) error {
	return xerr.Dev(Name, s.x.d.idx, "stream "+op, xerr.Detail(executor.ErrInvalidArgument, "nil %s", what))
}

// submit runs f, which submits device work to s.h, in stream order: now,
// or queued behind pending host work. A failure to submit now is the
// caller's error; a failure once queued makes the stream sticky.
func (s *Stream) submit(op string, f func() error) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return s.closedErr(op)
	}
	if s.draining {
		s.q = append(s.q, sop{gpu: f})
		return nil
	}
	if s.sticky != nil {
		return nil // skipped, as work after a failure is; Synchronize reports the failure
	}
	return s.x.use(op, f)
}

// queue appends an operation and makes sure a goroutine runs the queue.
// The caller holds s.mu.
func (s *Stream) queue(o sop) {
	s.q = append(s.q, o)
	if !s.draining {
		s.draining = true
		s.drained = make(chan struct{})
		go s.drain(s.drained)
	}
}

// Enqueue runs fn on the host once the work before it has completed;
// later work waits for fn.
func (s *Stream) Enqueue(fn func(ctx context.Context) error) error {
	if fn == nil {
		return s.nilArgErr("enqueue", "function")
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return s.closedErr("enqueue")
	}
	s.queue(sop{host: fn})
	return nil
}

// Record returns an event that completes when the work enqueued so far
// has.
func (s *Stream) Record() (executor.Event, error) {
	return s.record()
}

func (s *Stream) record() (*Event, error) {
	s.x.mu.RLock()
	if s.x.closed {
		s.x.mu.RUnlock()
		return nil, s.closedErr("record")
	}
	ev, err := s.x.newEvent()
	s.x.mu.RUnlock()
	if err != nil {
		return nil, devErr(s.x.d.idx, "stream record", err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil, s.closedErr("record")
	}
	switch {
	case s.draining:
		ev.resolved = make(chan struct{})
		s.q = append(s.q, sop{rec: ev})
	case s.sticky != nil:
		ev.err = s.sticky
	default:
		if err := s.x.use("stream record", func() error { return s.x.d.lib.EventRecord(s.x.d.ctx, ev.h, s.h) }); err != nil {
			return nil, err
		}
	}
	return ev, nil
}

// WaitEvent makes later work wait for ev: on the device for a CUDA event
// (of any device), on the host (in stream order) for another backend's.
func (s *Stream) WaitEvent(ev executor.Event) error {
	if ev == nil {
		return s.nilArgErr("wait-event", "event")
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return s.closedErr("wait-event")
	}
	ce, ok := ev.(*Event)
	if !ok || s.draining || !ce.isResolved() {
		s.queue(sop{wait: ev})
		return nil
	}
	if s.sticky != nil {
		return nil
	}
	if ce.err != nil {
		s.sticky = waitFailed(s.x.d.idx, ce.err)
		return nil
	}
	return s.waitDevice(ce)
}

func waitFailed(dev int, err error) error {
	return xerr.Dev(Name, dev, "stream wait-event", fmt.Errorf("the event failed: %w", err))
}

// waitDevice submits cuStreamWaitEvent for a resolved CUDA event.
func (s *Stream) waitDevice(ev *Event) error {
	err := use2("stream wait-event", s.x, ev.x, func() error { return s.x.d.lib.StreamWaitEvent(s.x.d.ctx, s.h, ev.h) })
	runtime.KeepAlive(ev)
	return err
}

// Synchronize waits until the work enqueued so far has completed and
// returns the stream's sticky error (clearing it), or the device's.
func (s *Stream) Synchronize(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return s.closedErr("synchronize")
	}
	if s.draining {
		m := &syncMark{err: make(chan error, 1)}
		s.q = append(s.q, sop{sync: m})
		s.mu.Unlock()
		select {
		case err := <-m.err:
			return err
		case <-ctx.Done():
			if m.state.CompareAndSwap(markPending, markAbandoned) {
				return ctx.Err()
			}
			return <-m.err
		}
	}
	sticky := s.sticky
	s.sticky = nil
	s.mu.Unlock()
	ev, err := s.record()
	if err == nil {
		err = ev.Wait(ctx)
	}
	if err != nil && errors.Is(err, ctx.Err()) && sticky != nil {
		s.mu.Lock()
		if s.sticky == nil {
			s.sticky = sticky
		}
		s.mu.Unlock()
		return err
	}
	if sticky != nil {
		return sticky
	}
	return err
}

// Close lets queued work finish, destroys the stream and removes it from
// its executor.
func (s *Stream) Close() error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return s.closedErr("close")
	}
	s.closed = true
	drained := s.drained
	s.mu.Unlock()
	if drained != nil {
		<-drained
	}
	s.cancel()
	err := devErr(s.x.d.idx, "stream close", closing(s.x.d.lib.StreamDestroy(s.x.d.ctx, s.h)))
	if s.stage != nil {
		s.stage.close()
	}
	if s.red != nil {
		s.red.close()
	}
	s.x.mu.Lock()
	delete(s.x.streams, s)
	s.x.mu.Unlock()
	return err
}

// drain runs the queue until it is empty, then lets the stream submit
// directly again.
func (s *Stream) drain(drained chan struct{}) {
	defer close(drained)
	for {
		s.mu.Lock()
		if len(s.q) == 0 {
			s.q = nil
			s.draining = false
			s.drained = nil
			s.mu.Unlock()
			return
		}
		o := s.q[0]
		s.q[0] = sop{}
		s.q = s.q[1:]
		sticky := s.sticky
		s.mu.Unlock()
		s.run(o, sticky)
	}
}

func (s *Stream) setSticky(err error) {
	s.mu.Lock()
	if s.sticky == nil {
		s.sticky = err
	}
	s.mu.Unlock()
}

// idle waits until the device has run everything submitted to the stream.
func (s *Stream) idle() error {
	return s.x.use("stream synchronize", func() error { return s.x.d.lib.StreamSynchronize(s.h) })
}

func (s *Stream) run(o sop, sticky error) {
	switch {
	case o.gpu != nil:
		if sticky == nil {
			if err := s.x.use("stream submit", o.gpu); err != nil {
				s.setSticky(err)
			}
		}
	case o.host != nil:
		if sticky != nil {
			return
		}
		err := s.idle()
		if err == nil {
			fn := o.host
			err = executor.Catch(func() error { return fn(s.ctx) })
		}
		if err != nil {
			s.setSticky(err)
		}
	case o.rec != nil:
		ev := o.rec
		if sticky != nil {
			ev.err = sticky
		} else {
			ev.err = s.x.use("stream record", func() error { return s.x.d.lib.EventRecord(s.x.d.ctx, ev.h, s.h) })
		}
		close(ev.resolved)
	case o.wait != nil:
		if sticky != nil {
			return
		}
		var err error
		if ce, ok := o.wait.(*Event); ok {
			select {
			case <-ce.resolved:
			case <-s.ctx.Done():
			}
			if !ce.isResolved() {
				err = xerr.Dev(Name, s.x.d.idx, "stream wait-event", executor.ErrClosed)
			} else if ce.err != nil {
				err = waitFailed(s.x.d.idx, ce.err)
			} else {
				err = s.waitDevice(ce)
			}
		} else if werr := o.wait.Wait(s.ctx); werr != nil {
			err = waitFailed(s.x.d.idx, werr)
		}
		if err != nil {
			s.setSticky(err)
		}
	case o.sync != nil:
		err := s.idle()
		if !o.sync.state.CompareAndSwap(markPending, markTaken) {
			return // its caller gave up; the sticky error stays for the next
		}
		s.mu.Lock()
		if s.sticky != nil {
			err = s.sticky
			s.sticky = nil
		}
		s.mu.Unlock()
		o.sync.err <- err
	}
}

// Event is a CUDA event recorded on a Stream.
type Event struct {
	x        *Executor
	h        cu.Event
	resolved chan struct{} // nil, or closed once the record has been submitted
	err      error         // the stream's sticky error at the record, or the record's failure
}

func (e *Event) isResolved() bool {
	if e.resolved == nil {
		return true
	}
	select {
	case <-e.resolved:
		return true
	default:
		return false
	}
}

// withHandle runs f with ev's driver event unless x (ev's executor) has
// closed, which destroyed it.
func (x *Executor) withHandle(op string, ev *Event, f func(h cu.Event) error) error {
	x.mu.RLock()
	defer x.mu.RUnlock()
	if x.closed {
		return xerr.Dev(Name, x.d.idx, op, executor.ErrClosed)
	}
	err := f(ev.h)
	runtime.KeepAlive(ev) // the handle is recycled once ev is garbage
	return err
}

// use2 runs f holding the read locks of executors a and b (taken in
// address order, so two such calls cannot deadlock), unless either has
// closed; f's driver error comes back on a's device.
func use2(op string, a, b *Executor, f func() error) error {
	if a == b {
		return a.use(op, f)
	}
	first, second := a, b
	if uintptr(unsafe.Pointer(a)) > uintptr(unsafe.Pointer(b)) {
		first, second = b, a
	}
	first.mu.RLock()
	defer first.mu.RUnlock()
	second.mu.RLock()
	defer second.mu.RUnlock()
	if a.closed || b.closed {
		return xerr.Dev(Name, a.d.idx, op, executor.ErrClosed)
	}
	return devErr(a.d.idx, op, f())
}

// Query reports whether the work before the record has completed, without
// blocking.
func (e *Event) Query() (done bool, err error) {
	if !e.isResolved() {
		return false, nil
	}
	if e.err != nil {
		return true, e.err
	}
	var r error
	err = e.x.withHandle("event query", e, func(h cu.Event) error {
		r = e.x.d.lib.EventQuery(h)
		return nil
	})
	if err != nil {
		return true, err
	}
	if q, ok := cu.ResultOf(r); ok && q == cu.ErrNotReady {
		return false, nil
	}
	if r != nil {
		return true, devErr(e.x.d.idx, "event query", r)
	}
	return true, nil
}

// spinFor is how long Wait polls before it blocks in the driver.
const spinFor = 20 * time.Microsecond

// Wait blocks until the work before the record has completed or ctx ends.
func (e *Event) Wait(ctx context.Context) error {
	if e.resolved != nil {
		select {
		case <-e.resolved:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	start := time.Now()
	for {
		done, err := e.Query()
		if done {
			return err
		}
		if err := ctx.Err(); err != nil {
			return err
		}
		if time.Since(start) > spinFor {
			break
		}
		runtime.Gosched()
	}
	block := func() error {
		return e.x.withHandle("event wait", e, func(h cu.Event) error {
			return devErr(e.x.d.idx, "event wait", e.x.d.lib.EventSynchronize(h))
		})
	}
	if ctx.Done() == nil {
		return block()
	}
	done := make(chan error, 1)
	go func() { done <- block() }()
	select {
	case err := <-done:
		return err
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Since is the device time from start's completion to e's; both must be
// completed CUDA events of one device.
func (e *Event) Since(start executor.Event) (time.Duration, error) {
	st, ok := start.(*Event)
	if !ok {
		return 0, xerr.Dev(Name, e.x.d.idx, "event since", xerr.Detail(executor.ErrInvalidArgument, "start event %T is not a cuda event", start))
	}
	if st.x.d.idx != e.x.d.idx {
		return 0, xerr.Dev(Name, e.x.d.idx, "event since", xerr.Detail(executor.ErrInvalidArgument, "start event is of device %d", st.x.d.idx))
	}
	for _, ev := range []*Event{st, e} {
		done, err := ev.Query()
		if err != nil {
			return 0, err
		}
		if !done {
			return 0, xerr.Dev(Name, e.x.d.idx, "event since", xerr.Detail(executor.ErrInvalidArgument, "event has not completed"))
		}
	}
	var ms float32
	err := use2("event since", e.x, st.x, func() error {
		var err error
		ms, err = e.x.d.lib.EventElapsed(st.h, e.h)
		return err
	})
	runtime.KeepAlive(st)
	runtime.KeepAlive(e)
	return time.Duration(float64(ms) * float64(time.Millisecond)), err
}
