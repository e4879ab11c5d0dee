package transfer

import (
	"context"
	"fmt"
	"slices"
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

// entry is one registration: unregister removes the entry it made and no
// other, even when the pair has been registered again since.
type entry struct{ p Path }

var (
	mu sync.RWMutex
	// paths holds the registrations of each pair, oldest first; the last
	// one is in force.
	paths = map[key][]*entry{}
)

// Register makes p the path from space kind srcKind to dstKind (the Kind of
// memspace.Properties) and returns the function that removes exactly this
// registration; calling it more than once does nothing. A backend calls it
// in Open with a path bound to what it opened, and the returned function
// when it closes, so no path outlives its backend.
//
// A pair registered again is served by the newer path until that one is
// removed, then by the older again: two cpu backends open at once each
// register their own host path, and copies use the one opened last for as
// long as it is open. A registered path takes precedence over the built-in
// host path. Register panics if p is nil, as xpu.Register does for a nil
// driver.
func Register(dstKind, srcKind string, p Path) (unregister func()) {
	if p == nil {
		panic("transfer: Register of a nil path")
	}
	k := key{dstKind, srcKind}
	e := &entry{p}
	mu.Lock()
	defer mu.Unlock()
	paths[k] = append(paths[k], e)
	return func() {
		mu.Lock()
		defer mu.Unlock()
		list := slices.DeleteFunc(paths[k], func(x *entry) bool { return x == e })
		if len(list) == 0 {
			delete(paths, k)
			return
		}
		paths[k] = list
	}
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
	var p Path
	if list := paths[key{dp.Kind, sp.Kind}]; len(list) > 0 {
		p = list[len(list)-1].p
	}
	mu.RUnlock()
	if p != nil {
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
	d, s, err := hostBytes(dst, src)
	if err != nil {
		return err
	}
	copy(d, s)
	return nil
}

// hostBytes returns the host views of dst and src, cut to the shorter.
func hostBytes(dst, src memspace.Block) (d, s []byte, err error) {
	if d, err = dst.Bytes(); err != nil {
		return nil, nil, err
	}
	if s, err = src.Bytes(); err != nil {
		return nil, nil, err
	}
	n := min(len(d), len(s))
	return d[:n], s[:n], nil
}
