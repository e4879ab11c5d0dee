package conformance

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/xpu-go/xpu/executor"
)

// TestStream checks that the streams of the executors newStreamer makes
// keep the executor.Stream and executor.Event contracts: order, events
// across streams, sticky errors, Close. Event timing is checked where
// events are executor.TimedEvent.
//
// newStreamer is called once per case; it releases the executor with
// t.Cleanup. The suite closes the streams it makes. The case
// "close/no-leak" checks that no goroutine outlives the streams and the
// executor of one case, and the suite ends with "stream/no-leak", which
// fails when a goroutine started during any of its cases is still running
// once they have all ended; neither may run beside tests that start
// goroutines of their own.
func TestStream(t *testing.T, newStreamer func(t *testing.T) executor.Streamer, opts ...Option) {
	t.Helper()
	s := newSuite(t, "stream", opts)
	defer s.finish(t)
	defer s.watchLeaks(t)()
	open := func(c *tcase) streamFactory {
		c.Helper()
		st := newStreamer(c.T)
		if st == nil {
			c.Fatal("conformance: the factory returned a nil streamer")
		}
		return streamFactory{c: c, s: st}
	}
	r := s.root()
	r.run(t, "fifo", func(c *tcase) { streamFIFO(c, open(c).stream()) })
	r.run(t, "fifo/concurrent-enqueue", func(c *tcase) { streamConcurrentEnqueue(c, open(c).stream()) })
	r.group(t, "event", func(t *testing.T, g node) {
		g.run(t, "record-query-wait", func(c *tcase) { streamEvent(c, open(c).stream()) })
		g.run(t, "wait-event", func(c *tcase) { f := open(c); streamWaitEvent(c, f.stream(), f.stream()) })
		g.run(t, "wait-canceled", func(c *tcase) { streamEventCanceled(c, open(c).stream()) })
		g.run(t, "elapsed", func(c *tcase) { streamElapsed(c, open(c).stream()) })
	})
	r.group(t, "error", func(t *testing.T, g node) {
		g.run(t, "sticky", func(c *tcase) { streamSticky(c, open(c).stream()) })
		g.run(t, "panic", func(c *tcase) { streamPanic(c, open(c).stream()) })
	})
	r.run(t, "synchronize/canceled", func(c *tcase) { streamSyncCanceled(c, open(c).stream()) })
	r.group(t, "close", func(t *testing.T, g node) {
		g.run(t, "drains", func(c *tcase) { streamCloseDrains(c, open(c).stream()) })
		g.run(t, "after", func(c *tcase) { streamAfterClose(c, open(c).stream()) })
		g.run(t, "no-leak", func(c *tcase) {
			noLeak(c)
			f := open(c)
			streamFIFO(c, f.stream())
			streamSticky(c, f.stream())
		})
	})
}

type streamFactory struct {
	c *tcase
	s executor.Streamer
}

// stream makes a stream that is closed when the case ends.
func (f streamFactory) stream() executor.Stream {
	f.c.Helper()
	st, err := f.s.NewStream()
	require.NoError(f.c, err, "NewStream")
	require.NotNil(f.c, st, "NewStream")
	f.c.Cleanup(func() {
		if err := st.Close(); err != nil && !errors.Is(err, executor.ErrClosed) {
			f.c.Errorf("Close of a stream: %v", err)
		}
	})
	return st
}

func streamFIFO(c *tcase, st executor.Stream) {
	const n = 1000
	var order []int // appended by the tasks without a lock: the stream orders them
	for i := range n {
		require.NoError(c, st.Enqueue(func(context.Context) error {
			order = append(order, i)
			return nil
		}))
	}
	require.NoError(c, st.Synchronize(c.ctx))
	require.Len(c, order, n, "every enqueued task ran once")
	for i, v := range order {
		if v != i {
			c.Fatalf("task %d ran in position %d: the stream is not first-in first-out", v, i)
		}
	}
}

func streamConcurrentEnqueue(c *tcase, st executor.Stream) {
	const producers, per = 4, 250
	var mu sync.Mutex
	last := make([]int, producers)
	for i := range last {
		last[i] = -1
	}
	var bad []string
	var wg sync.WaitGroup
	errs := make([]error, producers)
	for p := range producers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range per {
				err := st.Enqueue(func(context.Context) error {
					mu.Lock()
					defer mu.Unlock()
					if last[p] != i-1 {
						bad = append(bad, fmt.Sprintf("producer %d: task %d ran after task %d", p, i, last[p]))
					}
					last[p] = i
					return nil
				})
				if err != nil {
					errs[p] = err
					return
				}
			}
		}()
	}
	wg.Wait()
	require.NoError(c, errors.Join(errs...))
	require.NoError(c, st.Synchronize(c.ctx))
	mu.Lock()
	defer mu.Unlock()
	assert.Empty(c, bad, "tasks of one producer run in the order they were enqueued")
	for p, l := range last {
		assert.Equal(c, per-1, l, "producer %d: last task run", p)
	}
}

// gate enqueues a task that blocks until the returned release is called.
func gate(c *tcase, st executor.Stream) (release func()) {
	c.Helper()
	ch := make(chan struct{})
	require.NoError(c, st.Enqueue(func(ctx context.Context) error {
		select {
		case <-ch:
			return nil
		case <-ctx.Done():
			return ctx.Err()
		}
	}))
	var once sync.Once
	release = func() { once.Do(func() { close(ch) }) }
	c.Cleanup(release) // never leave a stream blocked behind a failed check
	return release
}

func streamEvent(c *tcase, st executor.Stream) {
	// An event on an idle stream completes.
	ev0, err := st.Record()
	require.NoError(c, err, "Record on an idle stream")
	require.NoError(c, ev0.Wait(c.ctx), "Wait of an event on an idle stream")

	release := gate(c, st)
	var ran atomic.Bool
	require.NoError(c, st.Enqueue(func(context.Context) error { ran.Store(true); return nil }))
	ev, err := st.Record()
	require.NoError(c, err, "Record")
	done, err := ev.Query()
	assert.NoError(c, err, "Query of a pending event")
	assert.False(c, done, "Query: an event behind a blocked task is complete")
	release()
	require.NoError(c, ev.Wait(c.ctx), "Wait")
	assert.True(c, ran.Load(), "the event completed before the work enqueued before it")
	done, err = ev.Query()
	assert.NoError(c, err, "Query of a completed event")
	assert.True(c, done, "Query after Wait returned")
	require.NoError(c, ev.Wait(c.ctx), "a second Wait of a completed event")
}

func streamWaitEvent(c *tcase, a, b executor.Stream) {
	release := gate(c, a)
	x := 0 // written on a, read on b: the event orders them
	require.NoError(c, a.Enqueue(func(context.Context) error { x = 1; return nil }))
	evA, err := a.Record()
	require.NoError(c, err)
	require.NoError(c, b.WaitEvent(evA), "WaitEvent of another stream's event")
	seen := -1
	require.NoError(c, b.Enqueue(func(context.Context) error { seen = x; return nil }))
	evB, err := b.Record()
	require.NoError(c, err)
	done, err := evB.Query()
	assert.NoError(c, err)
	assert.False(c, done, "work after WaitEvent completed while the awaited stream was blocked")
	release()
	require.NoError(c, b.Synchronize(c.ctx))
	assert.Equal(c, 1, seen, "work after WaitEvent(ev) saw the effect of the work before ev")
	require.NoError(c, a.Synchronize(c.ctx))
}

// waitEnds checks that wait, held up by pending work, returns
// context.Canceled with a canceled context and context.DeadlineExceeded
// past a deadline; what names the call in the failures.
func waitEnds(c *tcase, wait func(context.Context) error, what string) {
	c.Helper()
	ctx, cancel := context.WithCancel(c.ctx)
	cancel()
	assert.ErrorIs(c, wait(ctx), context.Canceled, what+" with a canceled context")
	dctx, dcancel := context.WithTimeout(c.ctx, 20*time.Millisecond)
	defer dcancel()
	assert.ErrorIs(c, wait(dctx), context.DeadlineExceeded, what+" past a deadline")
}

func streamEventCanceled(c *tcase, st executor.Stream) {
	release := gate(c, st)
	ev, err := st.Record()
	require.NoError(c, err)
	waitEnds(c, ev.Wait, "Wait of a pending event")
	release()
	require.NoError(c, ev.Wait(c.ctx), "the event completes after canceled waits")
}

func streamElapsed(c *tcase, st executor.Stream) {
	start, err := st.Record()
	require.NoError(c, err)
	if _, ok := start.(executor.TimedEvent); !ok {
		c.Skipf("the stream's events (%T) are not executor.TimedEvent", start)
	}
	const nap = 30 * time.Millisecond
	require.NoError(c, st.Enqueue(func(context.Context) error { time.Sleep(nap); return nil }))
	end, err := st.Record()
	require.NoError(c, err)
	require.NoError(c, end.Wait(c.ctx))
	d, err := executor.Elapsed(start, end)
	require.NoError(c, err, "Elapsed")
	assert.GreaterOrEqual(c, d, nap, "Elapsed between events around a %v sleep", nap)
}

func streamSticky(c *tcase, st executor.Stream) {
	var first, third atomic.Bool
	require.NoError(c, st.Enqueue(func(context.Context) error { first.Store(true); return nil }))
	require.NoError(c, st.Enqueue(func(context.Context) error { return fmt.Errorf("task 2: %w", errUser) }))
	require.NoError(c, st.Enqueue(func(context.Context) error { third.Store(true); return nil }))
	ev, err := st.Record()
	require.NoError(c, err)
	assert.ErrorIs(c, ev.Wait(c.ctx), errUser, "an event recorded after a failed task completes with its error")
	done, qerr := ev.Query()
	assert.True(c, done, "Query after Wait")
	assert.ErrorIs(c, qerr, errUser, "Query of an event after a failure")
	assert.True(c, first.Load(), "the task before the failure ran")
	assert.False(c, third.Load(), "a task enqueued after a failure ran before Synchronize cleared the error")
	assert.ErrorIs(c, st.Synchronize(c.ctx), errUser, "Synchronize reports the sticky error")
	assert.NoError(c, st.Synchronize(c.ctx), "Synchronize clears the sticky error")
	var fourth atomic.Bool
	require.NoError(c, st.Enqueue(func(context.Context) error { fourth.Store(true); return nil }))
	ev2, err := st.Record()
	require.NoError(c, err)
	assert.NoError(c, ev2.Wait(c.ctx), "an event after the error was cleared")
	assert.True(c, fourth.Load(), "work after the error was cleared runs")
	assert.False(c, third.Load(), "the skipped task stays skipped")
}

func streamPanic(c *tcase, st executor.Stream) {
	require.NoError(c, st.Enqueue(func(context.Context) error { panic("conformance: deliberate panic in a stream task") }))
	assert.ErrorIs(c, st.Synchronize(c.ctx), executor.ErrPanic, "a panicking task")
	ran := false
	require.NoError(c, st.Enqueue(func(context.Context) error { ran = true; return nil }))
	require.NoError(c, st.Synchronize(c.ctx), "the stream after a panic")
	assert.True(c, ran)
}

func streamSyncCanceled(c *tcase, st executor.Stream) {
	release := gate(c, st)
	var after atomic.Bool
	require.NoError(c, st.Enqueue(func(context.Context) error { after.Store(true); return nil }))
	waitEnds(c, st.Synchronize, "Synchronize")
	release()
	require.NoError(c, st.Synchronize(c.ctx), "the work goes on after a canceled Synchronize")
	assert.True(c, after.Load())
}

func streamCloseDrains(c *tcase, st executor.Stream) {
	ch := make(chan struct{})
	require.NoError(c, st.Enqueue(func(context.Context) error { <-ch; return nil }))
	var n atomic.Int32
	const k = 100
	for range k {
		require.NoError(c, st.Enqueue(func(context.Context) error { n.Add(1); return nil }))
	}
	// Release the first task a little later, so that Close finds work
	// pending. The check does not depend on the delay.
	go func() {
		time.Sleep(20 * time.Millisecond)
		close(ch)
	}()
	require.NoError(c, st.Close(), "Close")
	assert.Equal(c, int32(k), n.Load(), "Close returned before the enqueued work had run")
}

func streamAfterClose(c *tcase, st executor.Stream) {
	ev, err := st.Record()
	require.NoError(c, err)
	require.NoError(c, st.Close())
	assert.ErrorIs(c, st.Enqueue(func(context.Context) error { return nil }), executor.ErrClosed, "Enqueue after Close")
	_, err = st.Record()
	assert.ErrorIs(c, err, executor.ErrClosed, "Record after Close")
	assert.ErrorIs(c, st.WaitEvent(ev), executor.ErrClosed, "WaitEvent after Close")
	assert.ErrorIs(c, st.Synchronize(c.ctx), executor.ErrClosed, "Synchronize after Close")
	assert.NoError(c, ev.Wait(c.ctx), "an event recorded before Close stays complete")
	err = st.Close()
	assert.True(c, err == nil || errors.Is(err, executor.ErrClosed), "second Close returned %v, want nil or ErrClosed", err)
}
