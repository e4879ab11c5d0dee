package conformance

import (
	"context"
	"errors"
	"fmt"
	"math"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/xpu-go/xpu/executor"
)

// TestExecutor checks that the executors newExec makes keep the
// executor.Executor contract, and the executor.Parallel contract when they
// implement it (found through Unwrap with executor.As).
//
// "parallel/reduce/deterministic" holds executor.Reduce to its promise for
// floating point: for a given grain, bit-identical results on every run and
// whatever the parallelism — alone, beside other reductions, nested in a
// loop — and, with no grain, a SuggestedGrain that does not change from
// call to call.
//
// newExec is called once per case; it releases the executor with
// t.Cleanup. Run the suite under the race detector: several cases check
// that the executor orders memory as it promises.
//
// The suite ends with the case "executor/no-leak", which fails when a goroutine
// started during the suite is still running once every other case has ended
// and closed what it opened; it must not run beside tests that start
// goroutines of their own.
func TestExecutor[E executor.Executor](t *testing.T, newExec func(t *testing.T) E, opts ...Option) {
	t.Helper()
	s := newSuite(t, "executor", opts)
	defer s.finish(t)
	defer s.watchLeaks(t)()
	open := func(c *tcase) executor.Executor {
		c.Helper()
		e := executor.Executor(newExec(c.T))
		if e == nil {
			c.Fatal("conformance: the factory returned a nil executor")
		}
		return e
	}
	par := func(c *tcase) executor.Parallel {
		c.Helper()
		e := open(c)
		p, ok := executor.As[executor.Parallel](e)
		if !ok {
			c.Skipf("executor %s does not implement executor.Parallel", e.Name())
		}
		return p
	}
	r := s.root()
	r.run(t, "name", func(c *tcase) { assert.NotEmpty(c, open(c).Name()) })
	r.group(t, "execute", func(t *testing.T, g node) {
		g.run(t, "runs", func(c *tcase) { execRuns(c, open(c)) })
		g.run(t, "panic", func(c *tcase) { execPanic(c, open(c)) })
		g.run(t, "canceled", func(c *tcase) { execCanceled(c, open(c)) })
		g.run(t, "concurrent", func(c *tcase) { execConcurrent(c, open(c)) })
	})
	r.group(t, "parallel", func(t *testing.T, g node) {
		g.run(t, "max-parallelism", func(c *tcase) { parMax(c, par(c)) })
		g.run(t, "for/coverage", func(c *tcase) { parForCoverage(c, par(c)) })
		g.run(t, "range/chunks", func(c *tcase) { parRangeChunks(c, par(c)) })
		g.run(t, "invalid", func(c *tcase) { parInvalid(c, par(c)) })
		g.run(t, "panic", func(c *tcase) { parPanic(c, par(c)) })
		g.run(t, "cancel/before", func(c *tcase) { parCancelBefore(c, par(c)) })
		g.run(t, "cancel/during", func(c *tcase) { parCancelDuring(c, par(c)) })
		g.run(t, "nested", func(c *tcase) { parNested(c, par(c)) })
		g.run(t, "concurrent", func(c *tcase) { parConcurrent(c, par(c)) })
		g.run(t, "reduce", func(c *tcase) { parReduce(c, par(c)) })
		g.run(t, "reduce/deterministic", func(c *tcase) { parReduceDeterministic(c, par(c)) })
	})
}

var errUser = errors.New("conformance: error returned by user code")

func execRuns(c *tcase, e executor.Executor) {
	var runs atomic.Int32
	var got int // written by fn, read after Execute: Execute must order it
	err := e.Execute(c.ctx, func(ctx context.Context) error {
		if ctx == nil {
			return errors.New("fn received a nil context")
		}
		runs.Add(1)
		got = 42
		return nil
	})
	require.NoError(c, err)
	assert.Equal(c, int32(1), runs.Load(), "fn runs exactly once")
	assert.Equal(c, 42, got, "Execute returns after fn has returned")

	err = e.Execute(c.ctx, func(context.Context) error { return fmt.Errorf("wrapped: %w", errUser) })
	assert.ErrorIs(c, err, errUser, "Execute returns fn's error")
}

func execPanic(c *tcase, e executor.Executor) {
	err := e.Execute(c.ctx, func(context.Context) error { panic("conformance: deliberate panic") })
	assert.ErrorIs(c, err, executor.ErrPanic, "a panic in fn")
	err = e.Execute(c.ctx, func(context.Context) error { panic(errUser) })
	assert.ErrorIs(c, err, executor.ErrPanic, "a panic with an error value")
	ran := false
	require.NoError(c, e.Execute(c.ctx, func(context.Context) error { ran = true; return nil }), "Execute after a panic")
	assert.True(c, ran)
}

func execCanceled(c *tcase, e executor.Executor) {
	ctx, cancel := context.WithCancel(c.ctx)
	cancel()
	ran := atomic.Bool{}
	err := e.Execute(ctx, func(context.Context) error { ran.Store(true); return nil })
	assert.ErrorIs(c, err, context.Canceled, "Execute with a canceled context")
	assert.False(c, ran.Load(), "fn ran although the context was done before it started")

	dctx, dcancel := context.WithTimeout(c.ctx, 0)
	defer dcancel()
	<-dctx.Done()
	err = e.Execute(dctx, func(context.Context) error { ran.Store(true); return nil })
	assert.ErrorIs(c, err, context.DeadlineExceeded, "Execute with an expired deadline")
	assert.False(c, ran.Load(), "fn ran although the deadline had passed")
	require.NoError(c, e.Execute(c.ctx, func(context.Context) error { return nil }), "Execute after canceled calls")
}

func execConcurrent(c *tcase, e executor.Executor) {
	const callers, calls = 16, 20
	var n atomic.Int64
	var wg sync.WaitGroup
	errs := make([]error, callers)
	for g := range callers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range calls {
				if err := e.Execute(c.ctx, func(context.Context) error { n.Add(1); return nil }); err != nil {
					errs[g] = err
					return
				}
			}
		}()
	}
	wg.Wait()
	require.NoError(c, errors.Join(errs...))
	assert.Equal(c, int64(callers*calls), n.Load())
}

func parMax(c *tcase, p executor.Parallel) {
	assert.GreaterOrEqual(c, p.MaxParallelism(), 1, "MaxParallelism")
	for _, n := range []int{1, 2, 100, 12345, 1 << 24} {
		g := p.SuggestedGrain(n)
		assert.GreaterOrEqual(c, g, 1, "SuggestedGrain(%d)", n)
	}
}

// sizes returns the loop sizes the coverage cases use: the edges, around
// the worker count, primes and a large one.
func sizes(workers int) []int {
	ns := []int{0, 1, 2, 3, 7, 97, 1000, 10007, 100003}
	for _, n := range []int{workers - 1, workers, workers + 1, 2*workers + 1} {
		if n > 0 {
			ns = append(ns, n)
		}
	}
	return ns
}

func parForCoverage(c *tcase, p executor.Parallel) {
	for _, n := range sizes(p.MaxParallelism()) {
		hits := make([]atomic.Int32, n)
		err := p.ParallelFor(c.ctx, n, func(i int) {
			if i < 0 || i >= n {
				panic(fmt.Sprintf("index %d out of [0, %d)", i, n))
			}
			hits[i].Add(1)
		})
		require.NoError(c, err, "ParallelFor(%d)", n)
		if bad := badHits(hits); bad != "" {
			c.Errorf("ParallelFor(%d): %s", n, bad)
		}
	}
}

// badHits describes the indices not run exactly once, or "".
func badHits(hits []atomic.Int32) string {
	var missing, twice, first = 0, 0, -1
	for i := range hits {
		switch h := hits[i].Load(); {
		case h == 0:
			missing++
		case h > 1:
			twice++
		default:
			continue
		}
		if first < 0 {
			first = i
		}
	}
	if missing == 0 && twice == 0 {
		return ""
	}
	return fmt.Sprintf("%d indices never ran and %d ran more than once (first bad index %d, run %d times)",
		missing, twice, first, hits[first].Load())
}

func parRangeChunks(c *tcase, p executor.Parallel) {
	w := p.MaxParallelism()
	for _, n := range sizes(w) {
		for _, grain := range []int{-1, 0, 1, 2, 3, 64, 1000, n, n + 1} {
			type chunk struct{ lo, hi int }
			var mu sync.Mutex
			var chunks []chunk
			err := p.ParallelRange(c.ctx, n, grain, func(lo, hi int) {
				mu.Lock()
				chunks = append(chunks, chunk{lo, hi})
				mu.Unlock()
			})
			require.NoError(c, err, "ParallelRange(%d, %d)", n, grain)
			g := grain
			if g <= 0 {
				if n == 0 {
					g = 1
				} else {
					g = p.SuggestedGrain(n)
					require.GreaterOrEqual(c, g, 1, "SuggestedGrain(%d)", n)
				}
			}
			want := 0
			if n > 0 {
				want = (n + g - 1) / g
			}
			if !assert.Len(c, chunks, want, "ParallelRange(%d, %d) calls body once per chunk of grain %d", n, grain, g) {
				continue
			}
			seen := make([]bool, want)
			for _, ch := range chunks {
				k := ch.lo / g
				ok := ch.lo >= 0 && ch.lo < n && ch.lo%g == 0 && ch.hi == min(ch.lo+g, n) && !seen[k]
				if !assert.True(c, ok, "ParallelRange(%d, %d): chunk [%d, %d) is not one of [k*%d, min((k+1)*%d, %d)) or came twice",
					n, grain, ch.lo, ch.hi, g, g, n) {
					break
				}
				seen[k] = true
			}
		}
	}
}

func parInvalid(c *tcase, p executor.Parallel) {
	for _, n := range []int{-1, -1000} {
		called := atomic.Bool{}
		err := p.ParallelFor(c.ctx, n, func(int) { called.Store(true) })
		assert.ErrorIs(c, err, executor.ErrInvalidArgument, "ParallelFor(%d)", n)
		err = p.ParallelRange(c.ctx, n, 1, func(int, int) { called.Store(true) })
		assert.ErrorIs(c, err, executor.ErrInvalidArgument, "ParallelRange(%d, 1)", n)
		assert.False(c, called.Load(), "body called for n = %d", n)
	}
	_, err := executor.Reduce(c.ctx, p, -1, 0, 0, func(lo, hi, acc int) int { return acc }, func(a, b int) int { return a + b })
	assert.ErrorIs(c, err, executor.ErrInvalidArgument, "Reduce over -1 elements")
}

func parPanic(c *tcase, p executor.Parallel) {
	const n = 1000
	err := p.ParallelFor(c.ctx, n, func(i int) {
		if i == 17 {
			panic("conformance: deliberate panic at index 17")
		}
	})
	assert.ErrorIs(c, err, executor.ErrPanic, "ParallelFor with a panicking body")
	err = p.ParallelRange(c.ctx, n, 10, func(lo, hi int) {
		if lo == 500 {
			panic(errUser)
		}
	})
	assert.ErrorIs(c, err, executor.ErrPanic, "ParallelRange with a panicking body")
	// Every chunk of a panicking loop may panic at once.
	err = p.ParallelFor(c.ctx, 64, func(int) { panic("conformance: every index panics") })
	assert.ErrorIs(c, err, executor.ErrPanic, "ParallelFor where every index panics")
	// The executor still works, in full.
	hits := make([]atomic.Int32, n)
	require.NoError(c, p.ParallelFor(c.ctx, n, func(i int) { hits[i].Add(1) }), "ParallelFor after panics")
	assert.Empty(c, badHits(hits), "ParallelFor after panics")
}

func parCancelBefore(c *tcase, p executor.Parallel) {
	ctx, cancel := context.WithCancel(c.ctx)
	cancel()
	var calls atomic.Int64
	err := p.ParallelFor(ctx, 1000, func(int) { calls.Add(1) })
	assert.ErrorIs(c, err, context.Canceled, "ParallelFor with a canceled context")
	err = p.ParallelRange(ctx, 1000, 10, func(int, int) { calls.Add(1) })
	assert.ErrorIs(c, err, context.Canceled, "ParallelRange with a canceled context")
	assert.Zero(c, calls.Load(), "chunks started although the context was done before the call")
}

func parCancelDuring(c *tcase, p executor.Parallel) {
	const n, at = 100000, 10
	w := p.MaxParallelism()
	ctx, cancel := context.WithCancel(c.ctx)
	defer cancel()
	var started atomic.Int64
	var atCancel atomic.Int64
	var once sync.Once
	err := p.ParallelRange(ctx, n, 1, func(lo, hi int) {
		if started.Add(1) == at {
			once.Do(func() {
				cancel()
				atCancel.Store(started.Load())
			})
		}
	})
	assert.ErrorIs(c, err, context.Canceled, "ParallelRange canceled from its body")
	// Counted after the cancel, so a chunk not yet counted then had passed
	// its check of the context before: at most one per worker other than
	// the one that canceled (w is generous by one).
	limit := atCancel.Load() + int64(w)
	assert.LessOrEqual(c, started.Load(), limit,
		"%d chunks started; %d had when the context was canceled, and there are %d workers", started.Load(), atCancel.Load(), w)
	require.NoError(c, p.ParallelFor(c.ctx, 100, func(int) {}), "ParallelFor after a canceled one")
}

func parNested(c *tcase, p executor.Parallel) {
	const k = 8
	hits := make([]atomic.Int32, k*k*k)
	var errs atomic.Int32
	err := p.ParallelFor(c.ctx, k, func(i int) {
		if p.ParallelFor(c.ctx, k, func(j int) {
			if p.ParallelFor(c.ctx, k, func(l int) { hits[(i*k+j)*k+l].Add(1) }) != nil {
				errs.Add(1)
			}
		}) != nil {
			errs.Add(1)
		}
	})
	require.NoError(c, err, "outer ParallelFor")
	assert.Zero(c, errs.Load(), "nested ParallelFor returned errors")
	assert.Empty(c, badHits(hits), "nested ParallelFor, depth 3")
}

func parConcurrent(c *tcase, p executor.Parallel) {
	const callers, n = 8, 2000
	var wg sync.WaitGroup
	res := make([]string, callers)
	errs := make([]error, callers)
	for g := range callers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			hits := make([]atomic.Int32, n)
			errs[g] = p.ParallelFor(c.ctx, n, func(i int) { hits[i].Add(1) })
			res[g] = badHits(hits)
		}()
	}
	wg.Wait()
	require.NoError(c, errors.Join(errs...))
	for g, r := range res {
		assert.Empty(c, r, "caller %d of %d concurrent ParallelFor", g, callers)
	}
}

func parReduce(c *tcase, p executor.Parallel) {
	for _, n := range []int{0, 1, 2, 1000, 100003} {
		for _, grain := range []int{0, 1, 7, 1000} {
			got, err := executor.Reduce(c.ctx, p, n, grain, int64(0),
				func(lo, hi int, acc int64) int64 {
					for i := lo; i < hi; i++ {
						acc += int64(i)
					}
					return acc
				},
				func(a, b int64) int64 { return a + b })
			require.NoError(c, err, "Reduce(%d, %d)", n, grain)
			var want int64
			for i := range n {
				want += int64(i)
			}
			assert.Equal(c, want, got, "Reduce sum of [0, %d) with grain %d", n, grain)
		}
	}
}

// orderSensitive returns n float64 values whose sum depends on the order
// of the additions: magnitudes from 1e-9 to 1e15 and both signs, so that
// nearly every other association rounds differently.
func orderSensitive(n int) []float64 {
	v := make([]float64, n)
	x := uint64(12345)
	for i := range v {
		x = x*6364136223846793005 + 1442695040888963407
		mant := 1 + float64(x>>40)/float64(1<<24)
		v[i] = mant * math.Pow10(int(x>>20%25)-9)
		if x>>60&1 == 1 {
			v[i] = -v[i]
		}
	}
	return v
}

// reduceModel is what executor.Reduce promises for a sum over grain: each
// chunk [k*grain, min((k+1)*grain, n)) added up in index order from zero,
// then the chunks' sums added in index order.
func reduceModel(v []float64, grain int) float64 {
	acc := 0.0
	for lo := 0; lo < len(v); lo += grain {
		part := 0.0
		for _, x := range v[lo:min(lo+grain, len(v))] {
			part += x
		}
		acc += part
	}
	return acc
}

// parReduceDeterministic checks the promise of executor.Reduce's
// documentation: for a given grain the result is deterministic even for
// floating point — bit for bit the same on every run and whatever the
// parallelism, as the chunks are combined in index order. The sum of
// values of mixed magnitudes depends on the order of the additions, so
// the result is compared with the sequential model (reduceModel) when the
// executor is idle, when several reductions compete for its workers and
// when they run nested in a loop (with the workers a nested loop gets);
// with no grain given, the executor's SuggestedGrain must be the one it
// uses, and the same every time for the same n.
func parReduceDeterministic(c *tcase, p executor.Parallel) {
	const n = 30_011
	v := orderSensitive(n)
	if reduceModel(v, 3) == reduceModel(v, n) || reduceModel(v, 64) == reduceModel(v, 1000) {
		c.Fatal("conformance: the values of the case do not depend on the order of their sum; the case proves nothing")
	}
	sum := func(ctx context.Context, grain int) (float64, error) {
		return executor.Reduce(ctx, p, n, grain, 0.0,
			func(lo, hi int, acc float64) float64 {
				for _, x := range v[lo:hi] {
					acc += x
				}
				return acc
			},
			func(a, b float64) float64 { return a + b })
	}
	check := func(grain int, got float64, err error, how string) bool {
		c.Helper()
		g := grain
		if g <= 0 {
			g = p.SuggestedGrain(n)
		}
		if !assert.NoError(c, err, "Reduce(%d, grain %d) %s", n, grain, how) {
			return false
		}
		want := reduceModel(v, g)
		return assert.True(c, math.Float64bits(got) == math.Float64bits(want),
			"Reduce of %d float64 of mixed magnitudes with grain %d %s = %v (bits %#x), want %v (bits %#x): "+
				"the chunks' sums added in index order, bit for bit, as Reduce promises for a given grain whatever the "+
				"parallelism (a grain of 0 is SuggestedGrain(%d) = %d, which must not change from call to call)",
			n, grain, how, got, math.Float64bits(got), want, math.Float64bits(want), n, p.SuggestedGrain(n))
	}
	for _, grain := range []int{3, 64, 1000, n/7 + 1, 0} {
		for run := range 3 {
			got, err := sum(c.ctx, grain)
			if !check(grain, got, err, fmt.Sprintf("on run %d, the executor idle", run+1)) {
				return
			}
		}
		// Reductions competing for the workers, and nested in a loop.
		const k = 4
		got := make([]float64, k)
		errs := make([]error, k)
		var wg sync.WaitGroup
		for i := range k {
			wg.Add(1)
			go func() {
				defer wg.Done()
				got[i], errs[i] = sum(c.ctx, grain)
			}()
		}
		wg.Wait()
		for i := range k {
			if !check(grain, got[i], errs[i], fmt.Sprintf("in %d reductions run at once (#%d)", k, i+1)) {
				return
			}
		}
		err := p.ParallelFor(c.ctx, k, func(i int) { got[i], errs[i] = sum(c.ctx, grain) })
		require.NoError(c, err, "ParallelFor around %d reductions", k)
		for i := range k {
			if !check(grain, got[i], errs[i], fmt.Sprintf("nested in a ParallelFor (index %d)", i)) {
				return
			}
		}
	}
}
