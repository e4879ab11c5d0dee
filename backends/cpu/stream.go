package cpu

import (
	"context"
	"fmt"
	"runtime/debug"
	"sync"
	"sync/atomic"
	"time"

	"github.com/xpu-go/xpu/executor"
	"github.com/xpu-go/xpu/xerr"
)

// Compile-time checks.
var (
	_ executor.Stream     = (*Stream)(nil)
	_ executor.Event      = (*Event)(nil)
	_ executor.TimedEvent = (*Event)(nil)
)

// NewStream returns a new stream served by a goroutine of its own, which
// exits when the stream is closed. It returns executor.ErrClosed after the
// executor is closed.
func (e *Executor) NewStream() (executor.Stream, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.closed.Load() {
		return nil, xerr.Op(Name, "new-stream", executor.ErrClosed)
	}
	s := newStream(e)
	e.streams[s] = struct{}{}
	return s, nil
}

// Stream is an ordered queue of host work (see executor.Stream): functions,
// event records and waits run one after the other, in the order they were
// enqueued, on the stream's own goroutine.
//
// Errors are sticky: after a function fails (returns an error or panics),
// the functions enqueued after it are skipped and the events recorded after
// it complete with its error, until Synchronize returns the error and
// clears it. A WaitEvent on an event that completes with an error makes
// that error the stream's sticky error too, since the work after the wait
// depends on the work that failed.
type Stream struct {
	e      *Executor
	ctx    context.Context // given to functions; canceled once the stream has closed
	cancel context.CancelFunc

	mu     sync.Mutex
	q      []item
	spare  []item
	closed bool
	signal chan struct{} // cap 1: the queue has items (or the stream closed)
	exited chan struct{}

	sticky error // touched by the stream goroutine only
}

// item is one entry of a stream's queue: exactly one field is set.
type item struct {
	fn   func(ctx context.Context) error
	rec  *Event
	wait executor.Event
	sync *syncMark
}

// syncMark is the handshake between Synchronize and the stream goroutine,
// so that a sticky error is cleared only when a caller receives it.
type syncMark struct {
	state atomic.Int32 // markPending, markTaken (err sent), markAbandoned (caller gave up)
	err   chan error   // cap 1
}

const (
	markPending = iota
	markTaken
	markAbandoned
)

func newStream(e *Executor) *Stream {
	ctx, cancel := context.WithCancel(context.Background())
	s := &Stream{e: e, ctx: ctx, cancel: cancel,
		signal: make(chan struct{}, 1), exited: make(chan struct{})}
	go s.serve()
	return s
}

func (s *Stream) push(op string, it item) error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return xerr.Op(Name, "stream "+op, executor.ErrClosed)
	}
	s.q = append(s.q, it)
	s.mu.Unlock()
	select {
	case s.signal <- struct{}{}:
	default:
	}
	return nil
}

// Enqueue adds fn to the stream. fn runs after everything enqueued before
// it, unless the stream holds a sticky error.
func (s *Stream) Enqueue(fn func(ctx context.Context) error) error {
	if fn == nil {
		return xerr.Errorf(Name, "stream enqueue", executor.ErrInvalidArgument, "nil function")
	}
	return s.push("enqueue", item{fn: fn})
}

// Record returns an event that completes, with the stream's sticky error
// at that point, once the work enqueued before it has finished.
func (s *Stream) Record() (executor.Event, error) {
	ev := &Event{done: make(chan struct{})}
	if err := s.push("record", item{rec: ev}); err != nil {
		return nil, err
	}
	return ev, nil
}

// WaitEvent makes the work enqueued after it wait for ev, an event of any
// stream of any executor.
func (s *Stream) WaitEvent(ev executor.Event) error {
	if ev == nil {
		return xerr.Errorf(Name, "stream wait-event", executor.ErrInvalidArgument, "nil event")
	}
	return s.push("wait-event", item{wait: ev})
}

// Synchronize waits for the work enqueued before it and returns the sticky
// error, clearing it. When ctx is done first it returns ctx.Err(), the
// work goes on and the sticky error stays.
func (s *Stream) Synchronize(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	m := &syncMark{err: make(chan error, 1)}
	if err := s.push("synchronize", item{sync: m}); err != nil {
		return err
	}
	select {
	case err := <-m.err:
		return err
	case <-ctx.Done():
		if m.state.CompareAndSwap(markPending, markAbandoned) {
			return ctx.Err()
		}
		// The stream took the mark first and cleared its error for us.
		return <-m.err
	}
}

// Close waits for the work already enqueued, then stops the stream's
// goroutine. Later calls, Close included, return executor.ErrClosed.
func (s *Stream) Close() error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return xerr.Op(Name, "stream close", executor.ErrClosed)
	}
	s.closed = true
	s.mu.Unlock()
	select {
	case s.signal <- struct{}{}:
	default:
	}
	<-s.exited
	s.cancel()
	s.e.mu.Lock()
	delete(s.e.streams, s)
	s.e.mu.Unlock()
	return nil
}

// serve is the stream's goroutine.
func (s *Stream) serve() {
	var rest []item // the batch items not yet run
	normal := false
	defer func() {
		if normal {
			close(s.exited)
			return
		}
		// User code called runtime.Goexit, ending this goroutine: fail the
		// stream as for a panic and go on serving on a new goroutine.
		if s.sticky == nil {
			s.sticky = &executor.PanicError{Value: errGoexit, Stack: debug.Stack()}
		}
		s.mu.Lock()
		s.q = append(append([]item(nil), rest...), s.q...)
		s.mu.Unlock()
		go s.serve()
	}()
	for {
		s.mu.Lock()
		for len(s.q) == 0 {
			if s.closed {
				s.mu.Unlock()
				normal = true
				return
			}
			s.mu.Unlock()
			<-s.signal
			s.mu.Lock()
		}
		batch := s.q
		s.q, s.spare = s.spare[:0], nil
		s.mu.Unlock()
		for i := range batch {
			rest = batch[i+1:]
			s.run(&batch[i])
			batch[i] = item{} // drop references for the garbage collector
		}
		rest = nil
		s.mu.Lock()
		if s.spare == nil {
			s.spare = batch[:0]
		}
		s.mu.Unlock()
	}
}

func (s *Stream) run(it *item) {
	switch {
	case it.fn != nil:
		if s.sticky != nil {
			return
		}
		fn := it.fn
		if err := executor.Catch(func() error { return fn(s.ctx) }); err != nil {
			s.sticky = err
		}
	case it.rec != nil:
		it.rec.complete(s.sticky)
	case it.wait != nil:
		var err error
		if ev, ok := it.wait.(*Event); ok {
			<-ev.done
			err = ev.err
		} else {
			err = it.wait.Wait(s.ctx)
		}
		if err != nil && s.sticky == nil {
			s.sticky = xerr.Op(Name, "stream wait-event", fmt.Errorf("the event failed: %w", err))
		}
	case it.sync != nil:
		if it.sync.state.CompareAndSwap(markPending, markTaken) {
			it.sync.err <- s.sticky
			s.sticky = nil
		}
	}
}

// Event is a point in a Stream. It completes when the work enqueued before
// it has finished, and records when (Since).
type Event struct {
	done chan struct{}
	err  error     // set before done is closed
	at   time.Time // completion time, set before done is closed
}

func (ev *Event) complete(err error) {
	ev.err = err
	ev.at = time.Now()
	close(ev.done)
}

// Wait blocks until the event completes and returns the error of the work
// before it (the stream's sticky error), or ctx.Err() if ctx is done first.
func (ev *Event) Wait(ctx context.Context) error {
	select {
	case <-ev.done:
		return ev.err
	default:
	}
	select {
	case <-ev.done:
		return ev.err
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Query reports whether the event has completed and, if so, its error.
func (ev *Event) Query() (bool, error) {
	select {
	case <-ev.done:
		return true, ev.err
	default:
		return false, nil
	}
}

// Time returns when the event completed; ok is false while it has not.
func (ev *Event) Time() (t time.Time, ok bool) {
	select {
	case <-ev.done:
		return ev.at, true
	default:
		return time.Time{}, false
	}
}

// Since returns the time from start's completion to ev's. start must be an
// Event of this package; both must have completed. Otherwise it returns an
// error matching executor.ErrInvalidArgument.
func (ev *Event) Since(start executor.Event) (time.Duration, error) {
	st, ok := start.(*Event)
	if !ok {
		return 0, xerr.Errorf(Name, "event since", executor.ErrInvalidArgument, "start event %T is not a cpu event", start)
	}
	t1, ok1 := st.Time()
	t2, ok2 := ev.Time()
	if !ok1 || !ok2 {
		return 0, xerr.Errorf(Name, "event since", executor.ErrInvalidArgument, "event has not completed")
	}
	return t2.Sub(t1), nil
}
