package executor

import (
	"context"
	"fmt"
)

// Reduce folds [0, n) in parallel: each chunk [lo, hi) is folded by
// chunk(lo, hi, identity) and the chunk results are combined in index order
// with combine, so the result is deterministic for a given grain even for
// floating point. grain <= 0 lets p choose. identity must be the identity
// of combine.
func Reduce[T any](ctx context.Context, p Parallel, n, grain int, identity T,
	chunk func(lo, hi int, acc T) T, combine func(a, b T) T) (T, error) {
	if n < 0 {
		return identity, fmt.Errorf("executor: reduce over %d elements: %w", n, ErrInvalidArgument)
	}
	if n == 0 {
		return identity, nil
	}
	if grain <= 0 {
		grain = p.SuggestedGrain(n)
	}
	parts := make([]T, (n+grain-1)/grain)
	err := p.ParallelRange(ctx, n, grain, func(lo, hi int) {
		parts[lo/grain] = chunk(lo, hi, identity)
	})
	if err != nil {
		return identity, err
	}
	acc := identity
	for _, v := range parts {
		acc = combine(acc, v)
	}
	return acc, nil
}
