package testwait

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"sync"
	"testing"
	"time"
)

// Bound is how long a wait of a test may last before the test fails: far
// longer than the waits of this module's tests take, even under the race
// detector on a loaded two-core machine, and far shorter than go test's
// timeout, so that a lost wake-up fails in seconds, never by flaking.
const Bound = 20 * time.Second

// Grace is how long Call waits, after Bound, for a call whose context
// has ended to return, before it fails the test saying that the call
// ignores its context.
const Grace = 5 * time.Second

// maxStacks is how much of the goroutines' stacks a failure shows.
const maxStacks = 64 << 10

// errBound is the cause of a context of Ctx or Call that ran out of Bound.
var errBound = fmt.Errorf("testwait: the bound of %v ran out", Bound)

// Recv receives a value from ch and returns it. It stops the test, naming
// what it waited for, when no value (and no close) comes within Bound.
func Recv[T any](t testing.TB, ch <-chan T, what string) T {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(Bound):
		fatal(t, what, "nothing came in %v", Bound)
		var zero T
		return zero
	}
}

// Closed waits for ch to be closed. It stops the test, naming what it
// waited for, when a value comes instead or when ch is not closed within
// Bound.
func Closed[T any](t testing.TB, ch <-chan T, what string) {
	t.Helper()
	select {
	case v, ok := <-ch:
		if ok {
			t.Fatalf("waiting for %s to be closed: received %v instead", what, v)
		}
	case <-time.After(Bound):
		fatal(t, what, "not closed in %v", Bound)
	}
}

// Group waits for wg. It stops the test, naming what it waited for, when
// wg's count does not drop to zero within Bound; the goroutine that waits
// for wg is then left behind.
func Group(t testing.TB, wg *sync.WaitGroup, what string) {
	t.Helper()
	done := make(chan struct{})
	go func() {
		wg.Wait()
		close(done)
	}()
	select {
	case <-done:
	case <-time.After(Bound):
		fatal(t, what, "not done in %v (a goroutine waiting for the group is left behind)", Bound)
	}
}

// Ctx returns a context that ends Bound from now, or when the test ends
// (before its cleanups run, as t.Context does). When Bound runs out first,
// the test fails with the goroutines' stacks, whatever its calls do with
// the error they return.
func Ctx(t testing.TB) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeoutCause(t.Context(), Bound, errBound)
	var (
		mu    sync.Mutex
		ended bool
	)
	stop := context.AfterFunc(ctx, func() {
		mu.Lock()
		defer mu.Unlock()
		if !ended && errors.Is(context.Cause(ctx), errBound) {
			t.Errorf("the test's context (testwait.Ctx) ran out of its bound of %v; goroutines:\n%s", Bound, stacks())
		}
	})
	t.Cleanup(func() {
		mu.Lock()
		ended = true
		mu.Unlock()
		stop()
		cancel()
	})
	return ctx
}

// Call runs f with a context that ends Bound from now, or when the test
// ends, and returns f's error. It stops the test, naming what f waits
// for, when f returns after its context ran out of Bound, or when f has
// not returned Grace after that: f then ignores its context, and its
// goroutine is left behind, still running.
func Call(t testing.TB, what string, f func(ctx context.Context) error) error {
	t.Helper()
	ctx, cancel := context.WithTimeoutCause(t.Context(), Bound, errBound)
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- f(ctx) }()
	select {
	case err := <-done:
		if err != nil && errors.Is(context.Cause(ctx), errBound) {
			fatal(t, what, "not done in %v: %v", Bound, err)
		}
		return err
	case <-time.After(Bound + Grace):
		fatal(t, what, "no return %v after its bound of %v: the call ignores its context (its goroutine is left behind, still running)", Grace, Bound)
		return nil
	}
}

// fatal stops the test: it was waiting for what, which did not happen as
// the format says; the goroutines' stacks follow.
func fatal(t testing.TB, what, format string, args ...any) {
	t.Helper()
	t.Fatalf("waiting for %s: %s; goroutines:\n%s", what, fmt.Sprintf(format, args...), stacks())
}

// stacks returns the stacks of every goroutine of the test binary, cut
// to maxStacks.
func stacks() string {
	buf := make([]byte, 4*maxStacks)
	n := runtime.Stack(buf, true)
	if n <= maxStacks {
		return string(buf[:n])
	}
	return fmt.Sprintf("%s\n... (cut at %d bytes)", buf[:maxStacks], maxStacks)
}
