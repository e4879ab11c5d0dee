package arena

import (
	"context"

	"github.com/xpu-go/xpu/executor"
	"github.com/xpu-go/xpu/xerr"
)

// Serial is an executor that runs everything on the calling goroutine: the
// smallest executor.Parallel there is, and a correct one.
type Serial struct{}

var _ executor.Parallel = Serial{}

// Name returns "serial".
func (Serial) Name() string { return "serial" }

// Execute runs fn now.
func (Serial) Execute(ctx context.Context, fn func(context.Context) error) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	return executor.Catch(func() error { return fn(ctx) })
}

// ParallelFor calls body for each index in order.
func (s Serial) ParallelFor(ctx context.Context, n int, body func(i int)) error {
	return s.ParallelRange(ctx, n, 0, func(lo, hi int) {
		for i := lo; i < hi; i++ {
			body(i)
		}
	})
}

// ParallelRange calls body for each chunk in order, checking ctx between
// chunks.
func (s Serial) ParallelRange(ctx context.Context, n, grain int, body func(lo, hi int)) error {
	if n < 0 {
		return xerr.Errorf(Name, "parallel-range", executor.ErrInvalidArgument, "loop over %d indices", n)
	}
	if grain <= 0 {
		grain = s.SuggestedGrain(n)
	}
	return executor.Catch(func() error {
		for lo := 0; lo < n; lo += grain {
			if err := ctx.Err(); err != nil {
				return err
			}
			body(lo, min(lo+grain, n))
		}
		return nil
	})
}

// MaxParallelism is 1.
func (Serial) MaxParallelism() int { return 1 }

// SuggestedGrain splits n into chunks of at most 4096 so cancellation is
// noticed.
func (Serial) SuggestedGrain(n int) int { return max(1, min(n, 4096)) }
