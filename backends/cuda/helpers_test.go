//go:build cgo

package cuda_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/xpu-go/xpu"
	"github.com/xpu-go/xpu/backends/cuda"
	"github.com/xpu-go/xpu/executor"
	"github.com/xpu-go/xpu/memspace"
	"github.com/xpu-go/xpu/transfer"
)

// waitBound bounds every wait of these tests for the device: their work
// takes milliseconds on the fake driver and little more on a GPU, so a
// wait that reaches it is one that would never end.
const waitBound = 30 * time.Second

// waitCtx returns a context that ends waitBound from now, or when t ends:
// for the calls of a test that wait for the device as part of their work
// (copies, sends), and for waits in goroutines other than t's, which
// cannot use await.
func waitCtx(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), waitBound)
	t.Cleanup(cancel)
	return ctx
}

// wedged names the first wait that ran out of waitBound: the device or
// the backend is stuck, and every later wait fails at once, saying so,
// rather than wait out the bound again in each of the tests left.
var wedged atomic.Pointer[string]

// returned runs f, a wait for the device bounded by a context that ends
// within waitBound, in a goroutine of its own and returns its error. It
// fails t, naming what f waits for, when f has not returned a second after
// the bound (a wait that ignores its context): the test then ends instead
// of hanging until go test's timeout.
func returned(t testing.TB, what string, f func() error) error {
	t.Helper()
	if w := wedged.Load(); w != nil {
		t.Fatalf("waiting for %s: not tried, an earlier wait (for %s) ran out of %v", what, *w, waitBound)
	}
	done := make(chan error, 1)
	go func() { done <- f() }()
	select {
	case err := <-done:
		return err
	case <-time.After(waitBound + time.Second):
		wedged.CompareAndSwap(nil, &what)
		t.Fatalf("waiting for %s: no return %v after its bound of %v (the wait ignores its context)", what, time.Second, waitBound)
		return nil
	}
}

// await runs f, which waits for the device, with a context that ends
// waitBound from now, and returns its result. It fails t, naming what it
// waited for, when f fails, runs out of the bound, or does not return
// (see returned).
func await[T any](t testing.TB, what string, f func(ctx context.Context) (T, error)) T {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), waitBound)
	defer cancel()
	var v T
	err := returned(t, what, func() (err error) {
		v, err = f(ctx)
		return err
	})
	switch {
	case errors.Is(err, context.DeadlineExceeded):
		wedged.CompareAndSwap(nil, &what)
		t.Fatalf("waiting for %s: not done within %v", what, waitBound)
	case err != nil:
		t.Fatalf("waiting for %s: %v", what, err)
	}
	return v
}

// wait is await for a wait without a result: a Synchronize, an event's
// Wait.
func wait(t testing.TB, what string, f func(ctx context.Context) error) {
	t.Helper()
	await(t, what, func(ctx context.Context) (struct{}, error) { return struct{}{}, f(ctx) })
}

// equalValues checks got against want element by element, naming what
// was read back, how many elements differ and the first: assert.Equal's
// report of a mismatch in a large buffer takes minutes to format.
func equalValues[T comparable](t testing.TB, want, got []T, what string) bool {
	t.Helper()
	if len(got) != len(want) {
		t.Errorf("%s: %d elements read back, want %d", what, len(got), len(want))
		return false
	}
	first, differ := -1, 0
	for i := range want {
		if got[i] != want[i] {
			if first < 0 {
				first = i
			}
			differ++
		}
	}
	if differ > 0 {
		t.Errorf("%s: %d of %d elements differ, the first at %d: %v, want %v", what, differ, len(want), first, got[first], want[first])
		return false
	}
	return true
}

// gpu is an open backend of one device, with a stream.
type gpu struct {
	b      *xpu.Backend
	dev    *cuda.Space
	pinned *cuda.Space
	x      *cuda.Executor
	s      executor.Stream
}

func openGPU(t *testing.T, device string) *gpu {
	t.Helper()
	b, err := xpu.Open(context.Background(), cuda.Name, xpu.Options{cuda.OptDevice: device})
	require.NoError(t, err)
	t.Cleanup(func() { assert.NoError(t, b.Close(), "closing the backend (a leak is reported here)") })
	g := &gpu{b: b, dev: b.Spaces[0].(*cuda.Space), pinned: b.Spaces[1].(*cuda.Space), x: b.Exec.(*cuda.Executor)}
	g.s, err = g.x.NewStream()
	require.NoError(t, err)
	return g
}

// upload allocates a device buffer holding vals.
func upload[T any](t *testing.T, g *gpu, vals []T) *memspace.Buffer[T] {
	t.Helper()
	whole, err := memspace.Alloc[T](g.dev, max(len(vals), 1))
	require.NoError(t, err)
	t.Cleanup(func() { assert.NoError(t, whole.Free()) })
	buf, err := whole.Slice(0, len(vals))
	require.NoError(t, err)
	if len(vals) > 0 {
		src, err := memspace.FromSlice(vals)
		require.NoError(t, err)
		require.NoError(t, transfer.Copy(waitCtx(t), buf, src), "copying %d elements to the device", len(vals))
	}
	return buf
}

// download copies a device buffer back to the host, after the stream.
func download[T any](t *testing.T, g *gpu, buf *memspace.Buffer[T]) []T {
	t.Helper()
	wait(t, "the stream before a copy back", g.s.Synchronize)
	out := make([]T, buf.Len())
	dst, err := memspace.FromSlice(out)
	require.NoError(t, err)
	require.NoError(t, transfer.Copy(waitCtx(t), dst, buf), "copying %d elements back", len(out))
	return out
}
