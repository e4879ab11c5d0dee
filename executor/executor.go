package executor

import (
	"context"
	"time"

	"github.com/xpu-go/xpu/xerr"
)

// Errors returned by executors; the values of package xerr.
var (
	ErrInvalidArgument = xerr.ErrInvalidArgument
	ErrClosed          = xerr.ErrClosed
	ErrNotSupported    = xerr.ErrNotSupported
	// ErrDeviceLost reports that the device an executor runs work on has
	// failed, with the work queued on it: a device backend whose device
	// failed returns it, and the fault-injecting wrappers inject it.
	ErrDeviceLost = xerr.ErrDeviceLost
	// ErrPanic reports that user code panicked; the error carries the panic
	// value and stack.
	ErrPanic = xerr.NewKind("panic in user code", nil)
)

// Executor runs work. Every executor can run a function and wait for it.
type Executor interface {
	// Name identifies the executor, e.g. "cpu".
	Name() string
	// Execute runs fn on the executor and waits for it to return. A panic in
	// fn comes back as an error matching ErrPanic. If ctx is done before fn
	// starts, fn is not run and ctx.Err() is returned.
	Execute(ctx context.Context, fn func(ctx context.Context) error) error
}

// Parallel is an executor that runs data-parallel loops.
//
// ParallelRange splits [0, n) into chunks [k*grain, min((k+1)*grain, n))
// — exactly those, so a chunk's index is lo/grain — and calls body once per
// chunk, possibly concurrently. grain <= 0 lets the executor choose
// (SuggestedGrain). ParallelFor calls body once per index. Both return when
// every chunk that was started has finished.
//
// A panic in body stops the scheduling of new chunks and comes back as an
// error matching ErrPanic. When ctx is done, no new chunk starts and
// ctx.Err() is returned. n < 0 is ErrInvalidArgument; n == 0 returns at
// once. Calls may nest: a ParallelFor inside a body runs without deadlock
// (at worst on the calling goroutine alone).
type Parallel interface {
	Executor
	ParallelFor(ctx context.Context, n int, body func(i int)) error
	ParallelRange(ctx context.Context, n, grain int, body func(lo, hi int)) error
	// MaxParallelism is the number of chunks that can run at once.
	MaxParallelism() int
	// SuggestedGrain is the grain ParallelRange uses for n when given none.
	SuggestedGrain(n int) int
}

// Streamer is an executor that has streams.
type Streamer interface {
	NewStream() (Stream, error)
}

// Stream is an ordered asynchronous queue of work: each function runs after
// every function enqueued before it on the same stream has finished.
//
// Errors are sticky: when a function fails (returns an error or panics),
// work enqueued after it is skipped and events recorded after it complete
// with the error, until Synchronize reports the error and clears it.
//
// Close waits for enqueued work to finish, then releases the stream; later
// calls return ErrClosed. A stream is safe for concurrent use, though the
// order of functions enqueued concurrently is the order Enqueue returned in.
type Stream interface {
	// Enqueue adds fn to the stream and returns at once. fn receives a
	// context that is never canceled while the stream is open.
	Enqueue(fn func(ctx context.Context) error) error
	// Record returns an event that completes when all work enqueued before
	// it has finished.
	Record() (Event, error)
	// WaitEvent makes work enqueued after it wait for ev, which may come
	// from another stream or another executor.
	WaitEvent(ev Event) error
	// Synchronize waits for all enqueued work and returns (and clears) the
	// stream's sticky error. On ctx done it returns ctx.Err() and the work
	// goes on.
	Synchronize(ctx context.Context) error
	Close() error
}

// Event marks a point in a stream.
type Event interface {
	// Wait blocks until the event completes and returns the error of the
	// work before it, or ctx.Err().
	Wait(ctx context.Context) error
	// Query reports whether the event has completed, without blocking.
	Query() (done bool, err error)
}

// TimedEvent is an event that knows when it completed.
type TimedEvent interface {
	Event
	// Since returns the time between start's completion and this event's.
	// Both must be complete.
	Since(start Event) (time.Duration, error)
}

// Elapsed returns the time between two completed events, when end is a
// TimedEvent; ErrNotSupported otherwise.
func Elapsed(start, end Event) (time.Duration, error) {
	te, ok := end.(TimedEvent)
	if !ok {
		return 0, xerr.Op("executor", "elapsed", ErrNotSupported)
	}
	return te.Since(start)
}

// Unwrapper is implemented by wrappers so capabilities are found through
// them.
type Unwrapper interface {
	Unwrap() Executor
}

// As finds the first executor in the Unwrap chain of e that implements T.
func As[T any](e Executor) (T, bool) {
	for e != nil {
		if t, ok := e.(T); ok {
			return t, true
		}
		u, ok := e.(Unwrapper)
		if !ok {
			break
		}
		e = u.Unwrap()
	}
	var zero T
	return zero, false
}
