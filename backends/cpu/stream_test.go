package cpu_test

import (
	"context"
	"errors"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/xpu-go/xpu/backends/cpu"
	"github.com/xpu-go/xpu/executor"
	"github.com/xpu-go/xpu/internal/tooling/testwait"
)

func newStream(t *testing.T, e *cpu.Executor) executor.Stream {
	t.Helper()
	s, err := e.NewStream()
	require.NoError(t, err)
	t.Cleanup(func() { _ = s.Close() })
	return s
}

func TestStreamOrder(t *testing.T) {
	e := newExec(t, 2)
	s := newStream(t, e)
	var got []int // touched only by the stream's goroutine until Synchronize
	for i := range 1000 {
		require.NoError(t, s.Enqueue(func(context.Context) error {
			got = append(got, i)
			return nil
		}))
	}
	require.NoError(t, testwait.Call(t, "s.Synchronize", s.Synchronize))
	require.Len(t, got, 1000)
	for i, v := range got {
		require.Equal(t, i, v)
	}
}

func TestStreamConcurrentEnqueue(t *testing.T) {
	e := newExec(t, 2)
	s := newStream(t, e)
	var count atomic.Int64
	var wg sync.WaitGroup
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 200 {
				_ = s.Enqueue(func(context.Context) error { count.Add(1); return nil })
			}
		}()
	}
	testwait.Group(t, &wg, "the goroutines enqueueing")
	require.NoError(t, testwait.Call(t, "s.Synchronize", s.Synchronize))

	assert.Equal(t, int64(1600), count.Load())
}

func TestStreamStickyError(t *testing.T) {
	e := newExec(t, 1)
	s := newStream(t, e)
	boom := errors.New("boom")
	ran := make([]bool, 3)
	require.NoError(t, s.Enqueue(func(context.Context) error { ran[0] = true; return nil }))
	before, err := s.Record()
	require.NoError(t, err)
	require.NoError(t, s.Enqueue(func(context.Context) error { return boom }))
	require.NoError(t, s.Enqueue(func(context.Context) error { ran[1] = true; return nil }))
	after, err := s.Record()
	require.NoError(t, err)
	ctx := testwait.Ctx(t)
	assert.NoError(t, before.Wait(ctx), "an event before the failure is clean")
	assert.ErrorIs(t, after.Wait(ctx), boom, "an event after the failure carries it")
	done, qerr := after.Query()
	assert.True(t, done)
	assert.ErrorIs(t, qerr, boom)
	assert.ErrorIs(t, s.Synchronize(ctx), boom)
	assert.False(t, ran[1], "work after the failure is skipped")
	// Cleared: the stream runs again.
	require.NoError(t, s.Enqueue(func(context.Context) error { ran[2] = true; return nil }))
	require.NoError(t, s.Synchronize(ctx))
	assert.True(t, ran[0])
	assert.True(t, ran[2])
}

func TestStreamPanic(t *testing.T) {
	e := newExec(t, 1)
	s := newStream(t, e)
	require.NoError(t, s.Enqueue(func(context.Context) error { panic("in stream") }))
	err := testwait.Call(t, "s.Synchronize", s.Synchronize)
	require.ErrorIs(t, err, executor.ErrPanic)
	require.NoError(t, testwait.Call(t, "s.Synchronize", s.Synchronize))
}

func TestStreamCrossWaitEvent(t *testing.T) {
	e := newExec(t, 2)
	a, b := newStream(t, e), newStream(t, e)
	gate := make(chan struct{})
	var x int64 // written on a, read on b: ordered by the event
	require.NoError(t, a.Enqueue(func(context.Context) error {
		<-gate
		x = 42
		return nil
	}))
	ev, err := a.Record()
	require.NoError(t, err)
	require.NoError(t, b.WaitEvent(ev))
	var seen int64
	require.NoError(t, b.Enqueue(func(context.Context) error { seen = x; return nil }))
	bev, err := b.Record()
	require.NoError(t, err)
	time.Sleep(5 * time.Millisecond)
	done, _ := bev.Query()
	assert.False(t, done, "b waits for a's event")
	close(gate)
	require.NoError(t, testwait.Call(t, "b.Synchronize", b.Synchronize))
	assert.Equal(t, int64(42), seen)
}

// Events of another executor (any executor.Event) can be waited on; a
// failed event makes the waiting stream's work fail too.
func TestStreamWaitForeignEvent(t *testing.T) {
	e1, e2 := newExec(t, 1), newExec(t, 1)
	a, b := newStream(t, e1), newStream(t, e2)
	boom := errors.New("upstream failed")
	require.NoError(t, a.Enqueue(func(context.Context) error { return boom }))
	ev, err := a.Record()
	require.NoError(t, err)
	require.NoError(t, b.WaitEvent(foreign{ev}))
	ran := false
	require.NoError(t, b.Enqueue(func(context.Context) error { ran = true; return nil }))
	assert.ErrorIs(t, testwait.Call(t, "b.Synchronize", b.Synchronize), boom)
	assert.False(t, ran)
	assert.ErrorIs(t, testwait.Call(t, "a.Synchronize", a.Synchronize), boom)
}

// foreign hides the concrete type of an event.
type foreign struct{ executor.Event }

func TestEventTiming(t *testing.T) {
	e := newExec(t, 1)
	s := newStream(t, e)
	start, err := s.Record()
	require.NoError(t, err)
	require.NoError(t, s.Enqueue(func(context.Context) error { time.Sleep(20 * time.Millisecond); return nil }))
	end, err := s.Record()
	require.NoError(t, err)
	require.NoError(t, end.Wait(testwait.Ctx(t)))
	d, err := executor.Elapsed(start, end)
	require.NoError(t, err)
	assert.GreaterOrEqual(t, d, 20*time.Millisecond)
	back, err := executor.Elapsed(end, start)
	require.NoError(t, err)
	assert.Equal(t, -d, back)
	_, err = end.(executor.TimedEvent).Since(foreign{start})
	assert.ErrorIs(t, err, executor.ErrInvalidArgument)

	gate := make(chan struct{})
	require.NoError(t, s.Enqueue(func(context.Context) error { <-gate; return nil }))
	pending, err := s.Record()
	require.NoError(t, err)
	_, err = executor.Elapsed(start, pending)
	assert.ErrorIs(t, err, executor.ErrInvalidArgument, "not complete yet")
	close(gate)
	require.NoError(t, testwait.Call(t, "s.Synchronize", s.Synchronize))
}

func TestStreamSynchronizeCancel(t *testing.T) {
	e := newExec(t, 1)
	s := newStream(t, e)
	gate := make(chan struct{})
	boom := errors.New("later")
	require.NoError(t, s.Enqueue(func(context.Context) error { <-gate; return boom }))
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Millisecond)
	defer cancel()
	assert.ErrorIs(t, s.Synchronize(ctx), context.DeadlineExceeded)
	ev, err := s.Record()
	require.NoError(t, err)
	wctx, wcancel := context.WithCancel(context.Background())
	wcancel()
	assert.ErrorIs(t, ev.Wait(wctx), context.Canceled)
	close(gate)
	// The error was not lost by the canceled Synchronize.
	assert.ErrorIs(t, testwait.Call(t, "s.Synchronize", s.Synchronize), boom)
}

func TestStreamCloseDrains(t *testing.T) {
	e := newExec(t, 2)
	s, err := e.NewStream()
	require.NoError(t, err)
	var count atomic.Int64
	for range 100 {
		require.NoError(t, s.Enqueue(func(context.Context) error {
			time.Sleep(10 * time.Microsecond)
			count.Add(1)
			return nil
		}))
	}
	ev, err := s.Record()
	require.NoError(t, err)
	require.NoError(t, s.Close())
	assert.Equal(t, int64(100), count.Load(), "Close waited for the work")
	done, _ := ev.Query()
	assert.True(t, done)
	assert.ErrorIs(t, s.Enqueue(func(context.Context) error { return nil }), executor.ErrClosed)
	_, err = s.Record()
	assert.ErrorIs(t, err, executor.ErrClosed)
	assert.ErrorIs(t, s.WaitEvent(ev), executor.ErrClosed)
	assert.ErrorIs(t, testwait.Call(t, "s.Synchronize", s.Synchronize), executor.ErrClosed)
	assert.ErrorIs(t, s.Close(), executor.ErrClosed)
}

// Closing the executor closes its streams, after their work.
func TestExecutorCloseClosesStreams(t *testing.T) {
	e := cpu.NewExecutor(2)
	s, err := e.NewStream()
	require.NoError(t, err)
	var ran atomic.Bool
	require.NoError(t, s.Enqueue(func(context.Context) error {
		time.Sleep(time.Millisecond)
		ran.Store(true)
		return nil
	}))
	require.NoError(t, e.Close())
	assert.True(t, ran.Load())
	assert.ErrorIs(t, s.Enqueue(func(context.Context) error { return nil }), executor.ErrClosed)
}

func TestStreamBadArguments(t *testing.T) {
	e := newExec(t, 1)
	s := newStream(t, e)
	assert.ErrorIs(t, s.Enqueue(nil), executor.ErrInvalidArgument)
	assert.ErrorIs(t, s.WaitEvent(nil), executor.ErrInvalidArgument)
}

// The context given to stream work is live while the stream is open.
func TestStreamContext(t *testing.T) {
	e := newExec(t, 1)
	s := newStream(t, e)
	var ctxErr error = errors.New("not run")
	require.NoError(t, s.Enqueue(func(ctx context.Context) error { ctxErr = ctx.Err(); return nil }))
	require.NoError(t, testwait.Call(t, "s.Synchronize", s.Synchronize))
	assert.NoError(t, ctxErr)
}

// runtime.Goexit in stream work fails the stream like a panic; the stream
// goes on serving and closes cleanly.
func TestStreamGoexit(t *testing.T) {
	e := newExec(t, 1)
	s, err := e.NewStream()
	require.NoError(t, err)
	ran := false
	require.NoError(t, s.Enqueue(func(context.Context) error { runtime.Goexit(); return nil }))
	require.NoError(t, s.Enqueue(func(context.Context) error { ran = true; return nil }))
	require.ErrorIs(t, testwait.Call(t, "s.Synchronize", s.Synchronize), executor.ErrPanic)
	assert.False(t, ran, "skipped after the failure")
	require.NoError(t, s.Enqueue(func(context.Context) error { ran = true; return nil }))
	require.NoError(t, testwait.Call(t, "s.Synchronize", s.Synchronize))
	assert.True(t, ran)
	require.NoError(t, s.Close())
}
