package cpu_test

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"strings"
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

func newExec(t *testing.T, workers int) *cpu.Executor {
	t.Helper()
	e := cpu.NewExecutor(workers)
	t.Cleanup(func() { _ = e.Close() })
	return e
}

func TestExecutorWorkers(t *testing.T) {
	assert.Equal(t, 3, newExec(t, 3).MaxParallelism())
	assert.Positive(t, newExec(t, 0).MaxParallelism())
	assert.Equal(t, "cpu", newExec(t, 1).Name())
	e := newExec(t, 4)
	for _, n := range []int{1, 2, 15, 16, 17, 1000, 1 << 24} {
		g := e.SuggestedGrain(n)
		assert.GreaterOrEqual(t, g, 1)
		assert.LessOrEqual(t, g, n)
		chunks := (n + g - 1) / g
		assert.LessOrEqual(t, chunks, 8*e.MaxParallelism()+1, "n=%d grain=%d", n, g)
	}
}

// Every index is visited exactly once, and every chunk is exactly
// [k*grain, min((k+1)*grain, n)), for many shapes and worker counts.
func TestParallelRangeChunks(t *testing.T) {
	ctx := testwait.Ctx(t)
	for _, workers := range []int{1, 2, 5} {
		e := newExec(t, workers)
		for _, n := range []int{1, 2, 3, 7, 64, 100, 1000, 4097} {
			for _, grain := range []int{-1, 0, 1, 2, 3, 7, 64, n - 1, n, n + 1, 1 << 30} {
				name := fmt.Sprintf("w%d/n%d/g%d", workers, n, grain)
				g := grain
				if g <= 0 {
					g = e.SuggestedGrain(n)
				}
				visits := make([]atomic.Int32, n)
				chunks := make([]atomic.Int32, (n+g-1)/g)
				var bad atomic.Value
				err := e.ParallelRange(ctx, n, grain, func(lo, hi int) {
					if lo%g != 0 || hi != min(lo+g, n) || lo >= hi {
						bad.Store(fmt.Sprintf("chunk [%d,%d)", lo, hi))
						return
					}
					chunks[lo/g].Add(1)
					for i := lo; i < hi; i++ {
						visits[i].Add(1)
					}
				})
				require.NoError(t, err, name)
				require.Nil(t, bad.Load(), name)
				for k := range chunks {
					require.Equal(t, int32(1), chunks[k].Load(), "%s chunk %d", name, k)
				}
				for i := range visits {
					require.Equal(t, int32(1), visits[i].Load(), "%s index %d", name, i)
				}
			}
		}
	}
}

func TestParallelForSums(t *testing.T) {
	e := newExec(t, 3)
	for _, n := range []int{1, 5, 999, 100000} {
		out := make([]int, n)
		require.NoError(t, e.ParallelFor(testwait.Ctx(t), n, func(i int) { out[i] = i * i }))
		for i, v := range out {
			require.Equal(t, i*i, v)
		}
	}
}

func TestParallelBadArguments(t *testing.T) {
	e := newExec(t, 2)
	ctx := testwait.Ctx(t)
	assert.ErrorIs(t, e.ParallelFor(ctx, -1, func(int) {}), executor.ErrInvalidArgument)
	assert.ErrorIs(t, e.ParallelRange(ctx, -5, 1, func(int, int) {}), executor.ErrInvalidArgument)
	assert.ErrorIs(t, e.ParallelFor(ctx, 10, nil), executor.ErrInvalidArgument)
	assert.ErrorIs(t, e.ParallelRange(ctx, 10, 1, nil), executor.ErrInvalidArgument)
	assert.ErrorIs(t, e.Execute(ctx, nil), executor.ErrInvalidArgument)
	called := false
	require.NoError(t, e.ParallelFor(ctx, 0, func(int) { called = true }))
	assert.False(t, called, "n == 0 runs nothing")
}

func TestParallelPanic(t *testing.T) {
	for _, workers := range []int{1, 2, 4} {
		e := newExec(t, workers)
		var ran atomic.Int64
		err := e.ParallelRange(testwait.Ctx(t), 10000, 1, func(lo, hi int) {
			if ran.Add(1) == 3 {
				panic("boom")
			}
		})
		require.ErrorIs(t, err, executor.ErrPanic)
		var pe *executor.PanicError
		require.ErrorAs(t, err, &pe)
		assert.Equal(t, "boom", pe.Value)
		assert.NotEmpty(t, pe.Stack)
		assert.Less(t, ran.Load(), int64(10000), "scheduling stopped after the panic")
		// The executor is still usable.
		var sum atomic.Int64
		require.NoError(t, e.ParallelFor(testwait.Ctx(t), 100, func(i int) { sum.Add(int64(i)) }))
		assert.Equal(t, int64(4950), sum.Load())
	}
}

func TestParallelPanicWithError(t *testing.T) {
	e := newExec(t, 2)
	sentinel := errors.New("mine")
	err := e.ParallelFor(testwait.Ctx(t), 4, func(i int) { panic(sentinel) })
	assert.ErrorIs(t, err, executor.ErrPanic)
	assert.ErrorIs(t, err, sentinel, "a panic with an error unwraps to it")
}

func TestParallelCancel(t *testing.T) {
	e := newExec(t, 2)
	ctx, cancel := context.WithCancel(context.Background())
	var ran atomic.Int64
	err := e.ParallelRange(ctx, 100000, 1, func(lo, hi int) {
		if ran.Add(1) == 10 {
			cancel()
		}
	})
	require.ErrorIs(t, err, context.Canceled)
	assert.Less(t, ran.Load(), int64(100000))
	// Already done: nothing runs.
	called := false
	err = e.ParallelFor(ctx, 10, func(int) { called = true })
	assert.ErrorIs(t, err, context.Canceled)
	assert.False(t, called)
	dctx, dcancel := context.WithTimeout(context.Background(), time.Millisecond)
	defer dcancel()
	err = e.ParallelRange(dctx, 1<<20, 1, func(lo, hi int) { time.Sleep(100 * time.Microsecond) })
	assert.ErrorIs(t, err, context.DeadlineExceeded)
	// Usable after.
	require.NoError(t, e.ParallelFor(testwait.Ctx(t), 10, func(int) {}))
}

// Nested loops complete even when every worker is inside the outer loop.
func TestParallelNested(t *testing.T) {
	for _, workers := range []int{1, 2, 4} {
		e := newExec(t, workers)
		const outer, inner = 16, 1000
		var total atomic.Int64
		err := e.ParallelFor(testwait.Ctx(t), outer, func(i int) {
			err := e.ParallelFor(context.Background(), inner, func(j int) {
				// and one more level
				_ = e.ParallelRange(context.Background(), 4, 1, func(lo, hi int) { total.Add(1) })
			})
			if err != nil {
				panic(err)
			}
		})
		require.NoError(t, err)
		assert.Equal(t, int64(outer*inner*4), total.Load())
	}
}

func TestReduceWithExecutor(t *testing.T) {
	e := newExec(t, 3)
	const n = 1000003
	for _, grain := range []int{0, 1, 1000, n} {
		sum, err := executor.Reduce(testwait.Ctx(t), e, n, grain, int64(0),
			func(lo, hi int, acc int64) int64 {
				for i := lo; i < hi; i++ {
					acc += int64(i)
				}
				return acc
			},
			func(a, b int64) int64 { return a + b })
		require.NoError(t, err)
		assert.Equal(t, int64(n)*(n-1)/2, sum, "grain %d", grain)
	}
	// Floating point: deterministic for a given grain.
	f := func() float64 {
		v, err := executor.Reduce(testwait.Ctx(t), e, 100000, 977, 0.0,
			func(lo, hi int, acc float64) float64 {
				for i := lo; i < hi; i++ {
					acc += 1 / float64(i+1)
				}
				return acc
			}, func(a, b float64) float64 { return a + b })
		require.NoError(t, err)
		return v
	}
	first := f()
	for range 5 {
		assert.Equal(t, first, f())
	}
}

func TestParallelConcurrentCallers(t *testing.T) {
	e := newExec(t, 2)
	concurrently(t, 8, func(g int) error {
		for round := range 50 {
			n := 100 + g*37 + round
			out := make([]int32, n)
			if err := e.ParallelFor(context.Background(), n, func(i int) { out[i] += int32(g + 1) }); err != nil {
				return err
			}
			for i, v := range out {
				if v != int32(g+1) {
					return fmt.Errorf("caller %d round %d index %d: %d", g, round, i, v)
				}
			}
		}
		return nil
	})
}

// More concurrent loops than there are publication slots: the extra ones
// run on their callers.
func TestParallelManyBlockedCallers(t *testing.T) {
	e := newExec(t, 2)
	release := make(chan struct{})
	var started sync.WaitGroup
	var wg sync.WaitGroup
	const callers = 80
	started.Add(callers)
	for range callers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var once sync.Once
			_ = e.ParallelRange(context.Background(), 4, 1, func(lo, hi int) {
				once.Do(started.Done)
				<-release
			})
		}()
	}
	testwait.Group(t, &started, "every caller inside its loop (one starved)")
	close(release)
	testwait.Group(t, &wg, "the callers' loops")
}

func TestExecute(t *testing.T) {
	for _, workers := range []int{1, 2} {
		e := newExec(t, workers)
		ctx := context.Background()
		ran := false
		require.NoError(t, e.Execute(ctx, func(context.Context) error { ran = true; return nil }))
		assert.True(t, ran)
		sentinel := errors.New("x")
		assert.ErrorIs(t, e.Execute(ctx, func(context.Context) error { return sentinel }), sentinel)
		err := e.Execute(ctx, func(context.Context) error { panic("p") })
		assert.ErrorIs(t, err, executor.ErrPanic)
		cctx, cancel := context.WithCancel(ctx)
		cancel()
		ran = false
		assert.ErrorIs(t, e.Execute(cctx, func(context.Context) error { ran = true; return nil }), context.Canceled)
		assert.False(t, ran)
		// Nested Execute does not deadlock.
		require.NoError(t, e.Execute(ctx, func(ctx context.Context) error {
			return e.Execute(ctx, func(ctx context.Context) error {
				return e.Execute(ctx, func(context.Context) error { return nil })
			})
		}))
	}
}

// goid returns the id of the calling goroutine, from its stack header.
func goid() string {
	var buf [64]byte
	n := runtime.Stack(buf[:], false)
	f := strings.Fields(string(buf[:n]))
	return f[1] // "goroutine N [running]:"
}

// Execute hands its function to a helper when one is idle, and runs it on
// the caller when there is no helper.
func TestExecuteOnHelper(t *testing.T) {
	ctx := testwait.Ctx(t)
	e1 := newExec(t, 1)
	me := goid()
	for range 5 {
		var where string
		require.NoError(t, e1.Execute(ctx, func(context.Context) error { where = goid(); return nil }))
		assert.Equal(t, me, where, "one worker: the caller runs fn")
	}
	e2 := newExec(t, 2)
	elsewhere := 0
	for range 50 {
		var where string
		require.NoError(t, e2.Execute(ctx, func(context.Context) error { where = goid(); return nil }))
		if where != me {
			elsewhere++
		}
	}
	// A helper may be slow to wake on a loaded machine, so fn may run on
	// the caller now and then, but not every time.
	assert.Positive(t, elsewhere)
}

func TestExecutorClose(t *testing.T) {
	e := cpu.NewExecutor(3)
	require.NoError(t, e.Close())
	ctx := testwait.Ctx(t)
	assert.ErrorIs(t, e.ParallelFor(ctx, 10, func(int) {}), executor.ErrClosed)
	assert.ErrorIs(t, e.ParallelRange(ctx, 10, 1, func(int, int) {}), executor.ErrClosed)
	assert.ErrorIs(t, e.Execute(ctx, func(context.Context) error { return nil }), executor.ErrClosed)
	_, err := e.NewStream()
	assert.ErrorIs(t, err, executor.ErrClosed)
	assert.ErrorIs(t, e.Close(), executor.ErrClosed)
}

// A loop running while the executor closes still completes.
func TestExecutorCloseDuringLoop(t *testing.T) {
	e := cpu.NewExecutor(2)
	started := make(chan struct{})
	var once sync.Once
	var count atomic.Int64
	done := make(chan error, 1)
	go func() {
		done <- e.ParallelRange(context.Background(), 200, 1, func(lo, hi int) {
			once.Do(func() { close(started) })
			time.Sleep(50 * time.Microsecond)
			count.Add(1)
		})
	}()
	testwait.Closed(t, started, "the loop's start")
	require.NoError(t, e.Close())
	require.NoError(t, testwait.Recv(t, done, "the loop, while the executor closes"))

	assert.Equal(t, int64(200), count.Load())
}

// Helpers park when idle and wake for the next loop.
func TestExecutorWakesAfterIdle(t *testing.T) {
	e := newExec(t, 2)
	for range 3 {
		time.Sleep(2 * time.Millisecond) // past the spin: helpers park
		var n atomic.Int64
		require.NoError(t, e.ParallelRange(testwait.Ctx(t), 64, 1, func(lo, hi int) {
			time.Sleep(10 * time.Microsecond)
			n.Add(1)
		}))
		assert.Equal(t, int64(64), n.Load())
	}
}

// runtime.Goexit in a body on a helper (t.FailNow from a loop, say) ends
// that chunk as a panic would; the helper is replaced, so the executor
// keeps its parallelism.
func TestParallelGoexitOnHelper(t *testing.T) {
	e := newExec(t, 2)
	caller := goid()
	var helperHit atomic.Bool
	err := e.ParallelRange(testwait.Ctx(t), 2, 1, func(lo, hi int) {
		if goid() != caller {
			helperHit.Store(true)
			runtime.Goexit()
		}
		deadline := time.Now().Add(10 * time.Second)
		for !helperHit.Load() && time.Now().Before(deadline) {
			time.Sleep(50 * time.Microsecond)
		}
	})
	require.True(t, helperHit.Load(), "a helper took a chunk")
	require.ErrorIs(t, err, executor.ErrPanic)
	// Two chunks that each wait for the other can only finish with two
	// workers: the replaced helper is there.
	var arrived atomic.Int32
	var timedOut atomic.Bool
	require.NoError(t, e.ParallelRange(testwait.Ctx(t), 2, 1, func(lo, hi int) {
		arrived.Add(1)
		deadline := time.Now().Add(10 * time.Second)
		for arrived.Load() < 2 {
			if time.Now().After(deadline) {
				timedOut.Store(true)
				return
			}
			time.Sleep(50 * time.Microsecond)
		}
	}))
	assert.False(t, timedOut.Load(), "the executor lost its helper")
}

// Extreme grains and sizes do not overflow the chunk bounds.
func TestParallelRangeHugeGrain(t *testing.T) {
	e := newExec(t, 2)
	const n = 1<<62 + 5
	var mu sync.Mutex
	var got [][2]int
	require.NoError(t, e.ParallelRange(testwait.Ctx(t), n, 1<<62, func(lo, hi int) {
		mu.Lock()
		got = append(got, [2]int{lo, hi})
		mu.Unlock()
	}))
	assert.ElementsMatch(t, [][2]int{{0, 1 << 62}, {1 << 62, n}}, got)
}
