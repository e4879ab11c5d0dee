package transfer

import (
	"context"
	"errors"

	"github.com/xpu-go/xpu/executor"
	"github.com/xpu-go/xpu/memspace"
)

// When ParallelHost splits a copy. Measured on an idle 2-core host
// (internal/bench, copy.* against memmove.*): one memmove wins below
// 256 KiB, where handing a piece to a worker costs more than it saves; the
// split copy is 2.3x Go's copy at 1 MiB, 1.6x at 16 MiB and 1.5x at
// 256 MiB. Part of the gain at 1-16 MiB is that Go's memmove switches to
// non-temporal stores at 1 MiB — right for streams larger than the cache,
// slow for data that fits it — so those copies go in 512 KiB pieces. On a
// host whose cores are taken by other processes the split copy falls back
// towards one memmove, as any fork-join does.
const (
	// splitMin is the smallest copy that is split.
	splitMin = 256 << 10
	// piece is the piece size of copies below streamMin: under the 1 MiB
	// at which Go's memmove turns to non-temporal stores, so data that fits
	// the cache stays there.
	piece = 512 << 10
	// streamMin: from here a copy is cut into one contiguous piece per
	// worker, each copied with non-temporal stores.
	streamMin = 16 << 20
)

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
	if n < splitMin || memspace.Overlaps(dst, src) {
		copy(d, s)
		return nil
	}
	w := max(1, p.MaxParallelism())
	grain := piece
	if n >= streamMin {
		grain = (n/w + min(1, n%w) + 63) &^ 63
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
