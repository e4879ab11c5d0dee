package sweep

import (
	"bytes"
	"context"
	"fmt"
	"time"

	"github.com/xpu-go/xpu/memspace"
	"github.com/xpu-go/xpu/transfer"
)

// Copier prepares the copy a transfer sweep times from src into dst,
// blocks of the same length: it returns one copy, to be called many times.
type Copier func(dst, src memspace.Block) (func(ctx context.Context) error, error)

// TransferCopier copies through the path package transfer has for the
// two spaces (transfer.Lookup): what programs get from transfer.Copy.
func TransferCopier(dst, src memspace.Block) (func(ctx context.Context) error, error) {
	p, err := transfer.Lookup(dst.Space(), src.Space())
	if err != nil {
		return nil, err
	}
	return func(ctx context.Context) error { return p.Copy(ctx, dst, src) }, nil
}

// MemmoveCopier copies with Go's copy between the blocks' host views: the
// floor of a host-to-host transfer. Both blocks must be host-accessible.
func MemmoveCopier(dst, src memspace.Block) (func(ctx context.Context) error, error) {
	d, err := dst.Bytes()
	if err != nil {
		return nil, err
	}
	s, err := src.Bytes()
	if err != nil {
		return nil, err
	}
	return func(context.Context) error { copy(d, s); return nil }, nil
}

// RunCopy sweeps the copy cp makes from blocks of src into blocks of dst
// over plan's sizes (its Ops are not read: the operation is "copy"),
// calling emit with each point (Ranks 1). Each sample poisons the
// destination and checks after the copies that it holds the source's
// bytes, through host views where the spaces have them and through
// transfer.CopyBlock from and to the Go heap where they do not. It
// returns EndComplete or EndBudget as RunRank does.
func RunCopy(ctx context.Context, dst, src memspace.Space, cp Copier, plan Plan, emit func(Point)) (string, error) {
	plan.Ops = []string{"barrier"} // Check wants an operation; copy has its own loop
	if err := plan.Check(); err != nil {
		return "", err
	}
	for seed, size := range plan.Sizes {
		p, stopped, err := copyPoint(ctx, dst, src, cp, plan, size, seed)
		if err != nil {
			return "", fmt.Errorf("copy %s: %w", FormatSize(size), err)
		}
		if stopped {
			return EndBudget, nil
		}
		if emit != nil {
			emit(p)
		}
	}
	return EndComplete, nil
}

// copyPoint measures the copy of size bytes as a communicator's point is
// measured (measure).
func copyPoint(ctx context.Context, dst, src memspace.Space, cp Copier, plan Plan, size int64, seed int) (p Point, stopped bool, err error) {
	sb, err := src.Allocate(int(size), 0)
	if err != nil {
		return Point{}, false, err
	}
	defer src.Free(sb)
	db, err := dst.Allocate(int(size), 0)
	if err != nil {
		return Point{}, false, err
	}
	defer dst.Free(db)
	want := pattern(size, seed)
	if err := fill(ctx, sb, want); err != nil {
		return Point{}, false, err
	}
	poison := make([]byte, size)
	poisonBytes(poison)
	run, err := cp(db, sb)
	if err != nil {
		return Point{}, false, err
	}
	got := make([]byte, size)
	sample := func(iters int) (ns float64, stop, bad bool, err error) {
		if err := fill(ctx, db, poison); err != nil {
			return 0, false, false, err
		}
		start := time.Now()
		for range iters {
			if err := run(ctx); err != nil {
				return 0, false, false, err
			}
		}
		ns = float64(time.Since(start).Nanoseconds())
		if err := read(ctx, got, db); err != nil {
			return 0, false, false, err
		}
		stop = !plan.Deadline.IsZero() && time.Now().After(plan.Deadline)
		return ns, stop, !bytes.Equal(got, want), ctx.Err()
	}
	p = Point{Op: "copy", Ranks: 1, Size: size}
	stopped, err = measure(&p, sample, plan, 1, "the destination did not hold the source's bytes")
	return p, stopped, err
}

// fill writes data into b, through its host view or a copy from the Go
// heap.
func fill(ctx context.Context, b memspace.Block, data []byte) error {
	if h, err := b.Bytes(); err == nil {
		copy(h, data)
		return nil
	}
	return transfer.CopyBlock(ctx, b, blk(data))
}

// read copies b's bytes into out, through its host view or a copy to the
// Go heap.
func read(ctx context.Context, out []byte, b memspace.Block) error {
	if h, err := b.Bytes(); err == nil {
		copy(out, h)
		return nil
	}
	return transfer.CopyBlock(ctx, blk(out), b)
}
