package testwait

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// fakeT records the failures of a helper under test. Its FailNow ends the
// goroutine, as testing's does; its context ends, and its cleanups run,
// at end.
type fakeT struct {
	testing.TB
	mu       sync.Mutex
	failures []string
	fatal    bool
	ctx      context.Context
	cancel   context.CancelFunc
	cleanups []func()
}

func newFakeT() *fakeT {
	f := &fakeT{}
	f.ctx, f.cancel = context.WithCancel(context.Background())
	return f
}

func (f *fakeT) Helper()                  {}
func (f *fakeT) Context() context.Context { return f.ctx }
func (f *fakeT) Cleanup(c func())         { f.cleanups = append(f.cleanups, c) }
func (f *fakeT) Errorf(format string, args ...any) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.failures = append(f.failures, fmt.Sprintf(format, args...))
}
func (f *fakeT) Fatalf(format string, args ...any) {
	f.Errorf(format, args...)
	f.mu.Lock()
	f.fatal = true
	f.mu.Unlock()
	runtime.Goexit()
}

// end ends the fake test as testing does: its context first, then its
// cleanups, last registered first.
func (f *fakeT) end() {
	f.cancel()
	for i := len(f.cleanups) - 1; i >= 0; i-- {
		f.cleanups[i]()
	}
}

// failure returns the one failure f recorded, "" for none.
func (f *fakeT) failure(t *testing.T) string {
	t.Helper()
	f.mu.Lock()
	defer f.mu.Unlock()
	require.LessOrEqual(t, len(f.failures), 1, "failures: %q", f.failures)
	if len(f.failures) == 0 {
		return ""
	}
	return f.failures[0]
}

// run runs body as the fake test's goroutine, waits for it to return or
// stop, and returns how long it took in the bubble's time.
func (f *fakeT) run(body func(t testing.TB)) time.Duration {
	start := time.Now()
	done := make(chan struct{})
	go func() {
		defer close(done)
		body(f)
	}()
	<-done // unbounded: in a synctest bubble, where a wait that never ends panics at once
	return time.Since(start)
}

// failedAfter checks that the fake test stopped after took, with a failure
// that names what it waited for, says why, and shows the goroutines.
func (f *fakeT) failedAfter(t *testing.T, took, want time.Duration, what, why string) {
	t.Helper()
	msg := f.failure(t)
	assert.True(t, f.fatal, "the helper did not stop the test")
	assert.Equal(t, want, took, "stopped after %v, want %v", took, want)
	assert.True(t, strings.HasPrefix(msg, "waiting for "+what+": "), "the failure does not name what it waited for: %q", firstLine(msg))
	assert.Contains(t, firstLine(msg), why)
	assert.Contains(t, msg, "goroutine ", "the failure shows no stacks")
}

func firstLine(s string) string {
	first, _, _ := strings.Cut(s, "\n")
	return first
}

func TestRecv(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFakeT()
		ch := make(chan int, 1)
		ch <- 7
		var got int
		took := f.run(func(ft testing.TB) { got = Recv(ft, ch, "the answer") })
		assert.Empty(t, f.failure(t))
		assert.Equal(t, 7, got)
		assert.Zero(t, took)

		f = newFakeT()
		took = f.run(func(ft testing.TB) { Recv(ft, ch, "the second answer") })
		f.failedAfter(t, took, Bound, "the second answer", "nothing came in 20s")
	})
}

func TestClosed(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFakeT()
		done := make(chan struct{})
		go func() {
			time.Sleep(Bound - time.Second)
			close(done)
		}()
		took := f.run(func(ft testing.TB) { Closed(ft, done, "the worker") })
		assert.Empty(t, f.failure(t))
		assert.Equal(t, Bound-time.Second, took)

		f = newFakeT()
		took = f.run(func(ft testing.TB) { Closed(ft, make(chan struct{}), "the stopped worker") })
		f.failedAfter(t, took, Bound, "the stopped worker", "not closed in 20s")

		f = newFakeT()
		ch := make(chan int, 1)
		ch <- 3
		f.run(func(ft testing.TB) { Closed(ft, ch, "the results") })
		assert.True(t, f.fatal)
		assert.Equal(t, "waiting for the results to be closed: received 3 instead", f.failure(t))
	})
}

func TestGroup(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFakeT()
		var wg sync.WaitGroup
		wg.Go(func() { time.Sleep(time.Second) })
		took := f.run(func(ft testing.TB) { Group(ft, &wg, "the senders") })
		assert.Empty(t, f.failure(t))
		assert.Equal(t, time.Second, took)

		f = newFakeT()
		wg.Add(1)
		took = f.run(func(ft testing.TB) { Group(ft, &wg, "the receivers") })
		f.failedAfter(t, took, Bound, "the receivers", "not done in 20s")
		wg.Done() // lets the goroutine left waiting for the group end
	})
}

func TestCtx(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		// Ended by the test's end, before the bound: no failure.
		f := newFakeT()
		var ctx context.Context
		f.run(func(ft testing.TB) { ctx = Ctx(ft) })
		deadline, ok := ctx.Deadline()
		assert.True(t, ok, "no deadline")
		assert.Equal(t, time.Now().Add(Bound), deadline)
		f.end()
		synctest.Wait()
		assert.ErrorIs(t, ctx.Err(), context.Canceled)
		assert.Empty(t, f.failure(t))

		// Ended by the bound: the test fails, with the stacks, even
		// when what used the context swallowed its error.
		f = newFakeT()
		f.run(func(ft testing.TB) { ctx = Ctx(ft) })
		start := time.Now()
		<-ctx.Done() // unbounded: in a synctest bubble
		assert.Equal(t, Bound, time.Since(start))
		assert.ErrorIs(t, ctx.Err(), context.DeadlineExceeded)
		synctest.Wait()
		msg := f.failure(t)
		assert.Contains(t, firstLine(msg), "ran out of its bound of 20s")
		assert.Contains(t, msg, "goroutine ")
		assert.False(t, f.fatal, "Ctx stopped a goroutine that was not the test's")
		f.end()
	})
}

func TestCall(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		// f's own error comes back as it is.
		f := newFakeT()
		refused := errors.New("refused")
		var err error
		f.run(func(ft testing.TB) {
			err = Call(ft, "the send", func(ctx context.Context) error {
				_, ok := ctx.Deadline()
				assert.True(t, ok, "the call's context has no deadline")
				return refused
			})
		})
		assert.Empty(t, f.failure(t))
		assert.Equal(t, refused, err)

		// A call that waits for its context to end: stopped at the bound.
		f = newFakeT()
		took := f.run(func(ft testing.TB) {
			_ = Call(ft, "the barrier", func(ctx context.Context) error {
				<-ctx.Done() // unbounded: the context's end is what this tests
				return ctx.Err()
			})
		})
		f.failedAfter(t, took, Bound, "the barrier", "not done in 20s: context deadline exceeded")

		// A call that ignores its context: stopped Grace later, saying so.
		f = newFakeT()
		release := make(chan struct{})
		took = f.run(func(ft testing.TB) {
			_ = Call(ft, "the flush", func(context.Context) error {
				<-release // unbounded: released below
				return nil
			})
		})
		f.failedAfter(t, took, Bound+Grace, "the flush", "the call ignores its context (its goroutine is left behind, still running)")
		close(release)
	})
}

func TestStacksCut(t *testing.T) {
	release := make(chan struct{})
	var wg sync.WaitGroup
	for range 2000 {
		wg.Go(func() { <-release }) // unbounded: released below
	}
	s := stacks()
	close(release)
	Group(t, &wg, "the parked goroutines")
	assert.True(t, strings.HasSuffix(s, fmt.Sprintf("\n... (cut at %d bytes)", maxStacks)), "the stacks are not cut: %d bytes", len(s))
	assert.Len(t, s, maxStacks+len(fmt.Sprintf("\n... (cut at %d bytes)", maxStacks)))
	assert.True(t, strings.HasPrefix(s, "goroutine "), "the stacks do not start with a goroutine: %q", firstLine(s))
}
