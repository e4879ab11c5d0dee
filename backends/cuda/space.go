package cuda

import (
	"fmt"
	"math"
	"slices"
	"strconv"
	"sync"
	"unsafe"

	"github.com/xpu-go/xpu/backends/cuda/internal/cu"
	"github.com/xpu-go/xpu/impl"
	"github.com/xpu-go/xpu/memspace"
	"github.com/xpu-go/xpu/xerr"
)

var (
	_ memspace.Space        = (*Space)(nil)
	_ memspace.StatsSpace   = (*Space)(nil)
	_ memspace.Availability = (*Space)(nil)
	_ memspace.Lookuper     = (*Space)(nil)
	_ memspace.Closer       = (*Space)(nil)
	_ memspace.FreeNotifier = (*Space)(nil)
)

// Space is one kind of memory of one device: device memory (KindDevice),
// page-locked host memory (KindPinned) or managed memory (KindManaged).
// It keeps a ledger, answers Lookup, and reports the device's free memory.
// Its methods are safe for concurrent use.
type Space struct {
	d    dev
	kind string
	name string

	mu     sync.Mutex
	closed bool
	live   map[memspace.Addr]alloc // by the address handed out
	addrs  []memspace.Addr         // sorted keys of live, for Lookup
	stats  memspace.Stats

	staging staging // device memory's staging space (stage.go)

	// onFree are the observers of NotifyFree, under mu.
	onFree impl.Observers[memspace.Block]

	handles map[memspace.Addr]cu.IPCHandle // IPC handles taken, by live key (ipc.go)
	imports imports                        // other processes' allocations mapped (ipc.go)
}

type alloc struct {
	base cu.DevPtr // what the driver returned (before alignment)
	size int       // requested bytes
	span int       // bytes asked of the driver
}

// NewSpace opens the space of the given kind (KindDevice, KindPinned,
// KindManaged) of device index, with the driver library at library ("" for
// the default: EnvLibrary, else DefaultLibrary). Close releases it.
func NewSpace(library, kind string, index int) (*Space, error) {
	lib, err := load(library)
	if err != nil {
		return nil, err
	}
	return newSpace(lib, kind, index)
}

func newSpace(lib *cu.Lib, kind string, index int) (*Space, error) {
	switch kind {
	case KindDevice, KindPinned, KindManaged:
	default:
		return nil, xerr.Errorf(Name, "open", xerr.ErrInvalidArgument, "unknown memory kind %q (want %s, %s or %s)",
			kind, KindDevice, KindPinned, KindManaged)
	}
	d, err := retain(lib, index)
	if err != nil {
		return nil, err
	}
	name := Name + ":" + strconv.Itoa(index)
	if kind != KindDevice {
		name += "/" + kind[len("cuda-"):]
	}
	return &Space{d: d, kind: kind, name: name, live: map[memspace.Addr]alloc{}}, nil
}

// Name is "cuda:N" for device memory, "cuda:N/pinned" and "cuda:N/managed"
// for the others.
func (s *Space) Name() string { return s.name }

// Device is the device index.
func (s *Space) Device() int { return s.d.idx }

// Properties says what the memory is.
func (s *Space) Properties() memspace.Properties {
	p := memspace.Properties{Kind: s.kind, Device: s.d.idx, DeviceAccessible: true, Alignment: Alignment}
	switch s.kind {
	case KindPinned:
		p.HostAccessible, p.Pinned, p.Atomics = true, true, true
	case KindManaged:
		p.HostAccessible, p.Unified, p.Atomics = true, true, true
	}
	return p
}

// Alignment is the alignment of every block by default: the driver's.
const Alignment = 256

// Allocate returns size bytes aligned to align (0: Alignment).
func (s *Space) Allocate(size, align int) (memspace.Block, error) {
	align, err := impl.CheckAlloc(size, align, Alignment)
	if err != nil {
		return memspace.Block{}, xerr.Dev(Name, s.d.idx, "alloc", err)
	}
	span := size
	if align > Alignment {
		if size > math.MaxInt-align {
			return memspace.Block{}, s.oom(size, "larger than any address space")
		}
		span = size + align - Alignment
	}
	s.mu.Lock()
	closed := s.closed
	s.mu.Unlock()
	if closed {
		return memspace.Block{}, xerr.Dev(Name, s.d.idx, "alloc", memspace.ErrClosed)
	}
	base, host, err := s.driverAlloc(span)
	if err != nil {
		if r, ok := cu.ResultOf(err); ok && r == cu.ErrOutOfMemory {
			return memspace.Block{}, s.oom(size, "%v", err)
		}
		return memspace.Block{}, devErr(s.d.idx, "alloc", err)
	}
	addr := memspace.Addr((uintptr(base) + uintptr(align) - 1) &^ (uintptr(align) - 1))
	if host != nil {
		host = unsafe.Add(host, uintptr(addr)-uintptr(base))
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed { // closed while allocating
		_ = s.driverFree(base)
		return memspace.Block{}, xerr.Dev(Name, s.d.idx, "alloc", memspace.ErrClosed)
	}
	s.live[addr] = alloc{base: base, size: size, span: span}
	i, _ := slices.BinarySearch(s.addrs, addr)
	s.addrs = slices.Insert(s.addrs, i, addr)
	s.stats.InUse += int64(size)
	s.stats.Peak = max(s.stats.Peak, s.stats.InUse)
	s.stats.Reserved += int64(span)
	s.stats.Live++
	s.stats.Allocs++
	return memspace.NewBlock(s, addr, size, host), nil
}

func (s *Space) oom(size int, format string, args ...any) error {
	return xerr.Dev(Name, s.d.idx, "alloc", xerr.Detail(memspace.ErrOutOfMemory, "%d bytes: "+format, append([]any{size}, args...)...))
}

func (s *Space) driverAlloc(n int) (cu.DevPtr, unsafe.Pointer, error) {
	l, ctx := s.d.lib, s.d.ctx
	switch s.kind {
	case KindPinned:
		p, err := l.MemHostAlloc(ctx, n, cu.MemHostAllocPortable|cu.MemHostAllocDeviceMap)
		if err != nil {
			return 0, nil, err
		}
		return cu.DevPtr(uintptr(p)), p, nil
	case KindManaged:
		p, err := l.MemAllocManaged(ctx, n)
		if err != nil {
			return 0, nil, err
		}
		return p, hostPointer(p), nil
	}
	p, err := l.MemAlloc(ctx, n)
	return p, nil, err
}

func (s *Space) driverFree(p cu.DevPtr) error {
	if s.kind == KindPinned {
		return s.d.lib.MemFreeHost(s.d.ctx, hostPointer(p))
	}
	return s.d.lib.MemFree(s.d.ctx, p)
}

// Free returns a block to the driver.
func (s *Space) Free(b memspace.Block) error {
	if b.Space() == nil {
		return xerr.Dev(Name, s.d.idx, "free", xerr.Detail(memspace.ErrInvalidArgument, "the zero block"))
	}
	if b.Space() != memspace.Space(s) {
		return xerr.Dev(Name, s.d.idx, "free", xerr.Detail(memspace.ErrForeignBlock, "%v", b))
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return xerr.Dev(Name, s.d.idx, "free", memspace.ErrClosed)
	}
	a, ok := s.live[b.Addr()]
	if !ok || a.size != b.Len() {
		return xerr.Dev(Name, s.d.idx, "free", xerr.Detail(memspace.ErrDoubleFree, "%v", b))
	}
	// On a failed context the memory goes with the context's teardown:
	// the block leaves the ledger all the same.
	s.freed(a)
	if err := closing(s.driverFree(a.base)); err != nil {
		return devErr(s.d.idx, "free", err)
	}
	s.forget(b.Addr(), a)
	return nil
}

func (s *Space) forget(addr memspace.Addr, a alloc) {
	delete(s.live, addr)
	delete(s.handles, addr)
	if i, ok := slices.BinarySearch(s.addrs, addr); ok {
		s.addrs = slices.Delete(s.addrs, i, i+1)
	}
	s.stats.InUse -= int64(a.size)
	s.stats.Reserved -= int64(a.span)
	s.stats.Live--
	s.stats.Frees++
}

// Lookup returns the live block that contains addr.
func (s *Space) Lookup(addr memspace.Addr) (memspace.Block, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	start, a, ok := s.find(addr, 1)
	if !ok {
		return memspace.Block{}, false
	}
	return memspace.NewBlock(s, start, a.size, s.hostOf(start)), true
}

// holds checks that [addr, addr+n) lies in one live allocation: a block
// freed, of a closed space, or sliced past its allocation is an error, not
// an address handed to the device.
func (s *Space) holds(addr memspace.Addr, n int) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return xerr.Detail(memspace.ErrClosed, "space %s", s.name)
	}
	if _, _, ok := s.find(addr, n); ok {
		return nil
	}
	return xerr.Detail(memspace.ErrInvalidArgument, "%d bytes at %#x are not allocated in %s (freed, or past the allocation)", n, uintptr(addr), s.name)
}

func (s *Space) hostOf(addr memspace.Addr) unsafe.Pointer {
	if s.kind == KindDevice {
		return nil
	}
	return hostPointer(cu.DevPtr(addr))
}

// Stats is the ledger.
func (s *Space) Stats() memspace.Stats {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.stats
}

// Available is the device's free and total memory as the driver reports
// them (for pinned memory too: the host's page-locked memory has no
// cheaper measure, and it is the device that maps it).
func (s *Space) Available() (free, total int64, err error) {
	s.mu.Lock()
	closed := s.closed
	s.mu.Unlock()
	if closed {
		return 0, 0, xerr.Dev(Name, s.d.idx, "available", memspace.ErrClosed)
	}
	free, total, err = s.d.lib.MemGetInfo(s.d.ctx)
	return free, total, devErr(s.d.idx, "available", err)
}

// Close frees what is still allocated (reporting it as a leak) and
// releases the device.
func (s *Space) Close() error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return xerr.Dev(Name, s.d.idx, "close", memspace.ErrClosed)
	}
	s.closed = true
	live, bytes := s.stats.Live, s.stats.InUse
	var ferr error
	for addr, a := range s.live {
		s.freed(a)
		if err := closing(s.driverFree(a.base)); err != nil && ferr == nil {
			ferr = driverErr(err)
		}
		s.forget(addr, a)
	}
	s.mu.Unlock()
	imported := s.closeImports()
	serr := s.closeStaging()
	rerr := s.d.release()
	if rerr == nil {
		rerr = serr
	}
	var err error
	if live > 0 {
		err = fmt.Errorf("%d blocks (%d bytes) were still allocated; they are freed now", live, bytes)
	} else if imported > 0 {
		err = fmt.Errorf("%d imports of other processes' memory were still in use; they are unmapped now", imported)
	}
	if ferr != nil {
		err = fmt.Errorf("freeing: %w", ferr)
	}
	if err != nil {
		return xerr.Dev(Name, s.d.idx, "close", err)
	}
	return rerr
}

// NotifyFree makes the space call f with each allocation as Free frees it,
// and at Close with each one still live, before the driver frees the
// memory (memspace.FreeNotifier): the block f gets is the driver's whole
// allocation, from its base, which may lie below the address Allocate
// handed out. A communicator that shared the allocation with another
// process (CUDA IPC) tells that process to unmap it. f runs with the
// space's lock held: it must be quick and must not call the space.
func (s *Space) NotifyFree(f func(memspace.Block)) (stop func()) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.onFree.Add(&s.mu, f)
}

// freed tells the observers that the allocation a goes away. s.mu is held.
func (s *Space) freed(a alloc) {
	s.onFree.Notify(memspace.NewBlock(s, memspace.Addr(a.base), a.span, nil))
}
