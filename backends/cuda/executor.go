package cuda

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"sync"

	"github.com/xpu-go/xpu/backends/cuda/internal/cu"
	"github.com/xpu-go/xpu/executor"
	"github.com/xpu-go/xpu/xerr"
)

var (
	_ executor.Executor = (*Executor)(nil)
	_ executor.Streamer = (*Executor)(nil)
)

// Executor runs work on one device: its streams are CUDA streams, its
// events CUDA events, and kernels launch on them. Execute runs a function
// on the calling goroutine (the host's part of the work). Its methods are
// safe for concurrent use.
type Executor struct {
	d dev

	// mu guards closed and the sets below; held for reading by every call
	// that uses a driver handle the executor owns, so Close cannot destroy
	// one under it.
	mu      sync.RWMutex
	closed  bool
	spareMu sync.Mutex // guards live and spare
	streams map[*Stream]struct{}
	live    map[cu.Event]struct{} // events handed out, not yet collected
	spare   []cu.Event            // events to reuse
	modules map[*Module]struct{}

	builtinMu  sync.Mutex
	builtinMod *Module // the built-in kernels, loaded on first use
}

// NewExecutor opens the executor of device index with the driver library
// at library ("" for the default). Close releases it.
func NewExecutor(library string, index int) (*Executor, error) {
	lib, err := load(library)
	if err != nil {
		return nil, err
	}
	return newExecutor(lib, index)
}

func newExecutor(lib *cu.Lib, index int) (*Executor, error) {
	d, err := retain(lib, index)
	if err != nil {
		return nil, err
	}
	return &Executor{d: d, streams: map[*Stream]struct{}{}, live: map[cu.Event]struct{}{},
		modules: map[*Module]struct{}{}}, nil
}

// Name is "cuda:N".
func (x *Executor) Name() string { return fmt.Sprintf("%s:%d", Name, x.d.idx) }

// Device is the device index.
func (x *Executor) Device() int { return x.d.idx }

// Execute runs fn on the calling goroutine with ctx, after checking the
// executor is open; a panic in fn returns as an error matching
// executor.ErrPanic.
func (x *Executor) Execute(ctx context.Context, fn func(ctx context.Context) error) error {
	if fn == nil {
		return xerr.Dev(Name, x.d.idx, "execute", xerr.Detail(executor.ErrInvalidArgument, "nil function"))
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	x.mu.RLock()
	closed := x.closed
	x.mu.RUnlock()
	if closed {
		return xerr.Dev(Name, x.d.idx, "execute", executor.ErrClosed)
	}
	return executor.Catch(func() error { return fn(ctx) })
}

// Synchronize waits until the device has finished all work (every stream,
// of this executor and others on the device).
func (x *Executor) Synchronize(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	return x.use("synchronize", func() error { return x.d.lib.CtxSynchronize(x.d.ctx) })
}

// use runs f, a call with the executor's handles, unless the executor has
// closed; f's driver error comes back in the project's shape.
func (x *Executor) use(op string, f func() error) error {
	x.mu.RLock()
	defer x.mu.RUnlock()
	if x.closed {
		return xerr.Dev(Name, x.d.idx, op, executor.ErrClosed)
	}
	return devErr(x.d.idx, op, f())
}

// newEvent returns an Event with a driver event, reused when one is
// spare; the driver event returns to the spares once the Event is
// garbage. The caller holds x.mu for reading.
func (x *Executor) newEvent() (*Event, error) {
	var h cu.Event
	x.spareMu.Lock()
	if n := len(x.spare); n > 0 {
		h = x.spare[n-1]
		x.spare = x.spare[:n-1]
	}
	x.spareMu.Unlock()
	if h.IsZero() {
		var err error
		if h, err = x.d.lib.EventCreate(x.d.ctx, cu.EventBlockingSync); err != nil {
			return nil, err
		}
	}
	x.spareMu.Lock()
	x.live[h] = struct{}{}
	x.spareMu.Unlock()
	ev := &Event{x: x, h: h}
	runtime.AddCleanup(ev, x.recycle, h)
	return ev, nil
}

// recycle makes the driver event of a collected Event spare.
func (x *Executor) recycle(h cu.Event) {
	x.spareMu.Lock()
	defer x.spareMu.Unlock()
	if _, ok := x.live[h]; !ok { // destroyed by Close
		return
	}
	delete(x.live, h)
	x.spare = append(x.spare, h)
}

// Close closes the streams (their work finishes first), unloads the
// modules, destroys the events and releases the device. Events recorded
// before answer ErrClosed afterwards.
func (x *Executor) Close() error {
	x.mu.Lock()
	if x.closed {
		x.mu.Unlock()
		return xerr.Dev(Name, x.d.idx, "close", executor.ErrClosed)
	}
	streams := make([]*Stream, 0, len(x.streams))
	for s := range x.streams {
		streams = append(streams, s)
	}
	x.mu.Unlock()
	var errs []error
	for _, s := range streams {
		if err := s.Close(); err != nil && !errors.Is(err, executor.ErrClosed) {
			errs = append(errs, err)
		}
	}
	x.mu.Lock()
	x.closed = true
	for m := range x.modules {
		if err := closing(x.d.lib.ModuleUnload(x.d.ctx, m.h)); err != nil {
			errs = append(errs, devErr(x.d.idx, "close", err))
		}
	}
	x.modules = map[*Module]struct{}{}
	x.spareMu.Lock()
	for h := range x.live {
		x.spare = append(x.spare, h)
	}
	x.live = map[cu.Event]struct{}{}
	for _, h := range x.spare {
		if err := closing(x.d.lib.EventDestroy(x.d.ctx, h)); err != nil {
			errs = append(errs, devErr(x.d.idx, "close", err))
		}
	}
	x.spare = nil
	x.spareMu.Unlock()
	x.mu.Unlock()
	if err := x.d.release(); err != nil {
		errs = append(errs, err)
	}
	if len(errs) > 0 {
		return errs[0]
	}
	return nil
}
