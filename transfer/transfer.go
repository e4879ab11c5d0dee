package transfer

import (
	"context"
	"fmt"
	"sort"
	"sync"

	"github.com/xpu-go/xpu/executor"
	"github.com/xpu-go/xpu/memspace"
	"github.com/xpu-go/xpu/xerr"
)

// Errors returned by transfers; the values of package xerr.
var (
	ErrInvalidArgument = xerr.ErrInvalidArgument
	ErrNotSupported    = xerr.ErrNotSupported
)

// Path copies bytes between blocks of one pair of space kinds.
// Implementations may assume dst and src have equal, positive lengths.
type Path interface {
	Copy(ctx context.Context, dst, src memspace.Block) error
}

// AsyncPath is a path with a stream-ordered copy (a DMA engine, say).
type AsyncPath interface {
	Path
	// CopyAsync enqueues the copy on s and returns an event that completes
	// when the copy has.
	CopyAsync(s executor.Stream, dst, src memspace.Block) (executor.Event, error)
}

// PathFunc adapts a function to Path.
type PathFunc func(ctx context.Context, dst, src memspace.Block) error

// Copy calls f.
func (f PathFunc) Copy(ctx context.Context, dst, src memspace.Block) error { return f(ctx, dst, src) }

type key struct{ dst, src string }

var (
	mu    sync.RWMutex
	paths = map[key]Path{}
)

// Register makes p the path from space kind srcKind to dstKind (the Kind of
// memspace.Properties). A later registration of the same pair replaces the
// earlier one, so a backend can install a faster path than the default.
func Register(dstKind, srcKind string, p Path) {
	if p == nil {
		panic("transfer: Register of a nil path")
	}
	mu.Lock()
	defer mu.Unlock()
	paths[key{dstKind, srcKind}] = p
}

// Paths lists the registered pairs as "src->dst", sorted.
func Paths() []string {
	mu.RLock()
	defer mu.RUnlock()
	out := make([]string, 0, len(paths))
	for k := range paths {
		out = append(out, k.src+"->"+k.dst)
	}
	sort.Strings(out)
	return out
}

// Lookup returns the path that copies from src's space to dst's: the one
// registered for their kinds, else the built-in host path when both are
// host-accessible, else an error matching ErrNotSupported that names both
// spaces.
func Lookup(dst, src memspace.Space) (Path, error) {
	dp, sp := dst.Properties(), src.Properties()
	mu.RLock()
	p, ok := paths[key{dp.Kind, sp.Kind}]
	mu.RUnlock()
	if ok {
		return p, nil
	}
	if dp.HostAccessible && sp.HostAccessible {
		return Host, nil
	}
	return nil, fmt.Errorf("transfer: no path from space %s (%s) to %s (%s): %w",
		src.Name(), sp.Kind, dst.Name(), dp.Kind, ErrNotSupported)
}

func check(dst, src memspace.Block) error {
	if dst.Space() == nil || src.Space() == nil {
		return fmt.Errorf("transfer: copy %v <- %v with a zero block: %w", dst, src, ErrInvalidArgument)
	}
	if dst.Len() != src.Len() {
		return fmt.Errorf("transfer: copy of %d bytes into %d bytes: %w", src.Len(), dst.Len(), ErrInvalidArgument)
	}
	return nil
}

// CopyBlock copies src into dst, which must have the same length, between
// any two spaces with a path. It returns when the copy is complete.
// Overlapping blocks of one space are copied as by memmove.
func CopyBlock(ctx context.Context, dst, src memspace.Block) error {
	if err := check(dst, src); err != nil {
		return err
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	if dst.Len() == 0 {
		return nil
	}
	p, err := Lookup(dst.Space(), src.Space())
	if err != nil {
		return err
	}
	return p.Copy(ctx, dst, src)
}

// CopyBlockAsync enqueues the copy of src into dst on s and returns an
// event that completes when it has. A path without its own stream-ordered
// copy runs its synchronous copy as work on s.
func CopyBlockAsync(s executor.Stream, dst, src memspace.Block) (executor.Event, error) {
	if err := check(dst, src); err != nil {
		return nil, err
	}
	p, err := Lookup(dst.Space(), src.Space())
	if err != nil {
		return nil, err
	}
	if ap, ok := p.(AsyncPath); ok && dst.Len() > 0 {
		return ap.CopyAsync(s, dst, src)
	}
	if dst.Len() > 0 {
		if err := s.Enqueue(func(ctx context.Context) error { return p.Copy(ctx, dst, src) }); err != nil {
			return nil, err
		}
	}
	return s.Record()
}

// Copy copies the elements of src into dst, which must have the same length.
func Copy[T any](ctx context.Context, dst, src *memspace.Buffer[T]) error {
	if dst == nil || src == nil {
		return fmt.Errorf("transfer: copy with a nil buffer: %w", ErrInvalidArgument)
	}
	return CopyBlock(ctx, dst.Block(), src.Block())
}

// CopyAsync enqueues the copy of src into dst on s.
func CopyAsync[T any](s executor.Stream, dst, src *memspace.Buffer[T]) (executor.Event, error) {
	if dst == nil || src == nil {
		return nil, fmt.Errorf("transfer: copy with a nil buffer: %w", ErrInvalidArgument)
	}
	return CopyBlockAsync(s, dst.Block(), src.Block())
}

// Host is the built-in path between host-accessible spaces: a memmove on
// the calling goroutine.
var Host Path = PathFunc(hostCopy)

func hostCopy(ctx context.Context, dst, src memspace.Block) error {
	d, err := dst.Bytes()
	if err != nil {
		return err
	}
	s, err := src.Bytes()
	if err != nil {
		return err
	}
	copy(d, s)
	return nil
}

// ParallelHost returns a host path that splits copies of at least threshold
// bytes across p's workers, in chunks of at least threshold/
// p.MaxParallelism() bytes aligned to 64 bytes, and copies smaller ones
// with one memmove. A threshold <= 0 never splits.
func ParallelHost(p executor.Parallel, threshold int) Path {
	return PathFunc(func(ctx context.Context, dst, src memspace.Block) error {
		n := dst.Len()
		w := p.MaxParallelism()
		if threshold <= 0 || n < threshold || w < 2 || memspace.Overlaps(dst, src) {
			return hostCopy(ctx, dst, src)
		}
		d, err := dst.Bytes()
		if err != nil {
			return err
		}
		s, err := src.Bytes()
		if err != nil {
			return err
		}
		grain := (n/w + 63) &^ 63
		return p.ParallelRange(ctx, n, grain, func(lo, hi int) {
			copy(d[lo:hi], s[lo:hi])
		})
	})
}
