package cuda

import (
	"context"
	"sync"
	"unsafe"

	"github.com/xpu-go/xpu/backends/cuda/internal/cu"
	"github.com/xpu-go/xpu/executor"
	"github.com/xpu-go/xpu/memspace"
	"github.com/xpu-go/xpu/transfer"
	"github.com/xpu-go/xpu/xerr"
)

// Path copies between CUDA memory and host memory, and between devices:
// the driver's copies, synchronous (Copy) or in stream order on a CUDA
// stream (CopyAsync, no host thread blocked per copy). Pageable host
// memory is staged through page-locked memory where stream order needs
// it. Registered for every pair of kinds with a CUDA kind while a backend
// is open.
var Path transfer.AsyncPath = path{}

type path struct{}

// end is one side of a copy.
type end struct {
	sp       *Space         // nil: host memory of another backend
	ptr      cu.DevPtr      // device (or unified) address
	host     unsafe.Pointer // host view, nil for device memory
	imported bool           // another process's device memory, mapped in sp's context
}

func endOf(b memspace.Block) (end, error) {
	if m, ok := b.Space().(*Imported); ok {
		if err := m.holds(b.Addr(), b.Len()); err != nil {
			return end{}, xerr.Dev(Name, m.owner.d.idx, "copy", err)
		}
		return end{sp: m.owner, ptr: cu.DevPtr(b.Addr()), imported: true}, nil
	}
	if sp, ok := memspace.As[*Space](b.Space()); ok {
		if err := sp.holds(b.Addr(), b.Len()); err != nil {
			return end{}, xerr.Dev(Name, sp.d.idx, "copy", err)
		}
		return end{sp: sp, ptr: cu.DevPtr(b.Addr()), host: b.HostPointer()}, nil
	}
	if b.HostPointer() == nil {
		return end{}, xerr.Errorf(Name, "copy", xerr.ErrNotSupported, "block %v is neither CUDA nor host memory", b)
	}
	return end{host: b.HostPointer()}, nil
}

func (e end) device() bool { return e.sp != nil && (e.sp.kind == KindDevice || e.imported) }

// pageable is host memory the driver has not pinned.
func (e end) pageable() bool { return e.sp == nil }

func ends(dst, src memspace.Block) (d, s end, err error) {
	if d, err = endOf(dst); err != nil {
		return
	}
	s, err = endOf(src)
	return
}

// space is the CUDA space of a copy whose context makes the call.
func (p path) space(d, s end) *Space {
	if d.device() {
		return d.sp
	}
	if s.device() || d.sp == nil {
		return s.sp
	}
	return d.sp
}

// Copy copies src into dst and returns when the data is in place.
func (p path) Copy(ctx context.Context, dst, src memspace.Block) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	d, s, err := ends(dst, src)
	if err != nil {
		return err
	}
	sp := p.space(d, s)
	if sp == nil { // two host sides
		return transfer.Host.Copy(ctx, dst, src)
	}
	l, cx, n := sp.d.lib, sp.d.ctx, dst.Len()
	switch {
	case d.device() && s.device() && d.sp.d.idx != s.sp.d.idx:
		err = l.MemcpyPeer(cx, d.ptr, d.sp.d.ctx, s.ptr, s.sp.d.ctx, n)
	case d.device() && s.pageable():
		err = l.MemcpyHtoD(cx, d.ptr, s.host, n)
	case s.device() && d.pageable():
		err = l.MemcpyDtoH(cx, d.host, s.ptr, n)
	case d.pageable():
		err = l.MemcpyDtoH(cx, d.host, s.ptr, n)
	case s.pageable():
		err = l.MemcpyHtoD(cx, d.ptr, s.host, n)
	default:
		err = l.Memcpy(cx, d.ptr, s.ptr, n)
	}
	return devErr(sp.d.idx, "copy", err)
}

// CopyAsync copies in stream order on s and returns an event recorded
// after the copy. A stream of another backend runs the copy as host work
// on it.
func (p path) CopyAsync(st executor.Stream, dst, src memspace.Block) (executor.Event, error) {
	s, ok := st.(*Stream)
	if !ok {
		if err := st.Enqueue(func(ctx context.Context) error { return p.Copy(ctx, dst, src) }); err != nil {
			return nil, err
		}
		return st.Record()
	}
	de, se, err := ends(dst, src)
	if err != nil {
		return nil, err
	}
	if de.pageable() && se.pageable() {
		if err := s.Enqueue(func(ctx context.Context) error { return transfer.Host.Copy(ctx, dst, src) }); err != nil {
			return nil, err
		}
		return s.Record()
	}
	if err := s.copyAsync(de, se, dst.Len()); err != nil {
		return nil, err
	}
	return s.Record()
}

func (s *Stream) copyAsync(d, e end, n int) error {
	l, cx := s.x.d.lib, s.x.d.ctx
	switch {
	case d.pageable():
		return s.stagedOut(d.host, e.ptr, n)
	case e.pageable():
		return s.stagedIn(d.ptr, e.host, n)
	case d.device() && e.device() && d.sp.d.idx != e.sp.d.idx:
		return s.submit("copy", func() error { return l.MemcpyPeerAsync(cx, d.ptr, d.sp.d.ctx, e.ptr, e.sp.d.ctx, n, s.h) })
	}
	return s.submit("copy", func() error { return l.MemcpyAsync(cx, d.ptr, e.ptr, n, s.h) })
}

// stageSize is the size of a stream's page-locked staging buffer: copies
// of pageable memory move through it in pieces of at most this size.
const stageSize = 8 << 20

// stager is a stream's page-locked staging buffer, allocated on first use.
// Host work runs only once the stream has drained to it, so one buffer
// serves every piece in turn.
type stager struct {
	once sync.Once
	x    *Executor
	p    unsafe.Pointer
	err  error
}

func (s *Stream) stageBuffer() (unsafe.Pointer, error) {
	s.mu.Lock()
	if s.stage == nil {
		s.stage = &stager{x: s.x}
	}
	st := s.stage
	s.mu.Unlock()
	st.once.Do(func() {
		st.p, st.err = st.x.d.lib.MemHostAlloc(st.x.d.ctx, stageSize, cu.MemHostAllocPortable)
	})
	return st.p, devErr(s.x.d.idx, "copy", st.err)
}

func (st *stager) close() {
	if st.p != nil {
		_ = st.x.d.lib.MemFreeHost(st.x.d.ctx, st.p)
		st.p = nil
	}
}

// stagedIn copies pageable host memory to the device in stream order: each
// piece is copied into the staging buffer when the stream reaches it, then
// sent by the driver.
func (s *Stream) stagedIn(dst cu.DevPtr, src unsafe.Pointer, n int) error {
	l, cx := s.x.d.lib, s.x.d.ctx
	return s.staged(n, func(buf unsafe.Pointer, off, k int) error {
		from, to := unsafe.Add(src, off), dst+cu.DevPtr(off)
		if err := s.Enqueue(hostCopy(buf, from, k)); err != nil {
			return err
		}
		return s.submit("copy", func() error { return l.MemcpyHtoDAsync(cx, to, buf, k, s.h) })
	})
}

// stagedOut copies device memory to pageable host memory in stream order.
func (s *Stream) stagedOut(dst unsafe.Pointer, src cu.DevPtr, n int) error {
	l, cx := s.x.d.lib, s.x.d.ctx
	return s.staged(n, func(buf unsafe.Pointer, off, k int) error {
		from, to := src+cu.DevPtr(off), unsafe.Add(dst, off)
		if err := s.submit("copy", func() error { return l.MemcpyDtoHAsync(cx, buf, from, k, s.h) }); err != nil {
			return err
		}
		return s.Enqueue(hostCopy(to, buf, k))
	})
}

// staged calls piece for each stageSize piece of n bytes in turn, from
// offset off with k bytes, with the stream's staging buffer buf, and stops
// at the first error.
func (s *Stream) staged(n int, piece func(buf unsafe.Pointer, off, k int) error) error {
	buf, err := s.stageBuffer()
	if err != nil {
		return err
	}
	for off := 0; off < n; off += stageSize {
		if err := piece(buf, off, min(stageSize, n-off)); err != nil {
			return err
		}
	}
	return nil
}

// hostCopy returns host work that copies k bytes from src to dst.
func hostCopy(dst, src unsafe.Pointer, k int) func(context.Context) error {
	return func(context.Context) error {
		copy(unsafe.Slice((*byte)(dst), k), unsafe.Slice((*byte)(src), k))
		return nil
	}
}

// registerPaths registers Path for every pair of kinds with a CUDA kind
// (pairs of host-accessible kinds keep the host path), and returns the
// function that removes them.
func registerPaths() func() {
	kinds := []string{KindDevice, KindPinned, KindManaged, "host"}
	var undo []func()
	for _, d := range kinds {
		for _, s := range kinds {
			if d != KindDevice && s != KindDevice {
				continue
			}
			undo = append(undo, transfer.Register(d, s, Path))
		}
	}
	return func() {
		for _, u := range undo {
			u()
		}
	}
}
