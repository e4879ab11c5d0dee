package transfer

import (
	"context"
	"errors"

	"github.com/xpu-go/xpu/executor"
	"github.com/xpu-go/xpu/internal/hostcopy"
	"github.com/xpu-go/xpu/memspace"
)

// The split points are those of package internal/hostcopy, where the
// conformance suite reads them to choose the sizes it copies; the reasons
// for them are given there.

// ParallelHost returns a path between host-accessible spaces that splits
// large copies across p's workers. A copy of less than 256 KiB, or between
// overlapping blocks (copied as by memmove), is one memmove on the calling
// goroutine. Larger copies go in pieces: of 512 KiB below 16 MiB, so that
// each piece is copied through the cache; from 16 MiB, one contiguous piece
// per worker, each streamed past the cache. When p has a single worker, or
// is closed under the copy, the calling goroutine copies the same pieces
// itself, checking ctx between them.
//
// The cpu backend registers ParallelHost(its executor) for "host" to "host"
// when it opens and removes it when it closes. The path is safe for
// concurrent use. ParallelHost panics if p is nil.
func ParallelHost(p executor.Parallel) Path {
	if p == nil {
		panic("transfer: ParallelHost of a nil executor")
	}
	return PathFunc(func(ctx context.Context, dst, src memspace.Block) error {
		return parallelHostCopy(ctx, p, dst, src)
	})
}

func parallelHostCopy(ctx context.Context, p executor.Parallel, dst, src memspace.Block) error {
	d, s, err := hostBytes(dst, src)
	if err != nil {
		return err
	}
	n := len(d)
	w := max(1, p.MaxParallelism())
	grain := hostcopy.Grain(n, w)
	if grain == 0 || memspace.Overlaps(dst, src) {
		copy(d, s)
		return nil
	}
	if w > 1 {
		err := p.ParallelRange(ctx, n, grain, func(lo, hi int) { copy(d[lo:hi], s[lo:hi]) })
		if !errors.Is(err, executor.ErrClosed) {
			return err
		}
		// The executor closed under us: copy here.
	}
	for lo := 0; lo < n; lo += grain {
		if err := ctx.Err(); err != nil {
			return err
		}
		hi := min(lo+grain, n)
		copy(d[lo:hi], s[lo:hi])
	}
	return nil
}
