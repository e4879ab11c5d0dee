package cpu

import (
	"fmt"
	"math"
	"math/bits"
	"os"
	"sync"

	"github.com/xpu-go/xpu/impl"
	"github.com/xpu-go/xpu/memspace"
	"github.com/xpu-go/xpu/xerr"
)

// Compile-time checks of the capabilities the space offers.
var (
	_ memspace.Space        = (*Space)(nil)
	_ memspace.StatsSpace   = (*Space)(nil)
	_ memspace.Availability = (*Space)(nil)
	_ memspace.Lookuper     = (*Space)(nil)
	_ memspace.FreeNotifier = (*Space)(nil)
	_ memspace.Closer       = (*Space)(nil)
)

// DefaultAlignment is the alignment every allocation of a Space gets at
// least: one cache line.
const DefaultAlignment = 64

const (
	// Small blocks (a size and alignment that fit a power-of-two slot of at
	// most maxSmall bytes) are carved from slabs of slabSize bytes, one
	// slab list per slot size; larger blocks get a mapping of their own.
	minSmallShift = 6  // 64-byte slots
	maxSmallShift = 11 // 2 KiB slots
	maxSmall      = 1 << maxSmallShift
	slabSize      = 64 << 10
	// Blocks of at least hugeThreshold bytes are aligned to hugePage and
	// advised to use transparent huge pages when SpaceOptions.HugePages is
	// set.
	hugePage      = 2 << 20
	hugeThreshold = 2 * hugePage
)

var pageSize = uintptr(os.Getpagesize())

// SpaceOptions configure NewSpace.
type SpaceOptions struct {
	// Limit caps the bytes in use (the sum of the sizes of live blocks);
	// an Allocate that would pass it fails with ErrOutOfMemory. Zero or
	// negative means no limit other than the machine's.
	Limit int64
	// HugePages aligns blocks of 4 MiB and more to 2 MiB and advises the
	// kernel to back them with transparent huge pages (Linux), which saves
	// TLB misses on large arrays at the cost of memory rounded up to 2 MiB.
	HugePages bool
}

// Space is host memory allocated outside the Go heap with mmap: addresses
// are stable (the garbage collector neither moves nor scans the memory), so
// blocks can be handed to foreign code and registered for DMA, and the
// memory must never hold Go pointers (memspace.Alloc enforces this). New
// memory reads as zero.
//
// Blocks of at most 2 KiB (size and alignment rounded up to a power of two)
// are carved from 64 KiB slabs, so a small block costs its slot rather than
// a whole page and a system call; larger blocks get mappings of their own,
// rounded up to the page size, and are unmapped by Free. An overrun of a
// small block therefore corrupts its neighbours rather than faulting; an
// overrun of a large one faults at the next page.
//
// Space keeps a ledger (Stats), finds the block containing an address in
// O(log n) (Lookup), answers how much memory is available (Available) and
// frees what is still live on Close. It is safe for concurrent use.
type Space struct {
	limit int64
	huge  bool

	mu        sync.Mutex
	closed    bool
	idx       index // mapped regions by start address
	classes   [maxSmallShift - minSmallShift + 1]sizeClass
	committed int64 // bytes in use plus bytes of allocations in flight
	stats     memspace.Stats
	// onFree are the observers of NotifyFree, under mu.
	onFree impl.Observers[memspace.Block]
}

// mapping is a region obtained from the system: [addr, addr+size) is
// usable; [base, base+len) is what must be unmapped.
type mapping struct {
	addr, size uintptr
	base, len  uintptr
}

// region is an entry of the index: a large block, or a slab of small ones.
type region struct {
	m    mapping
	user int   // requested size of a large block
	slab *slab // non-nil for a slab
}

// slab holds slots of one power-of-two size.
type slab struct {
	r     *region
	class *sizeClass
	shift uint     // log2 of the slot size
	sizes []uint16 // requested size of each slot; 0 when free
	free  []uint16 // indices of free slots, used as a stack
	pos   int      // index in class.partial, or -1 when full
}

// sizeClass lists the slabs of one slot size that have free slots.
type sizeClass struct {
	partial []*slab
}

// NewSpace returns a host memory space.
func NewSpace(opts SpaceOptions) *Space {
	s := &Space{limit: opts.Limit, huge: opts.HugePages}
	if s.limit < 0 {
		s.limit = 0
	}
	return s
}

// Name returns "cpu".
func (s *Space) Name() string { return Name }

// Properties describes host memory: kind "host", no device, host-accessible,
// pageable, atomics, 64-byte default alignment.
func (s *Space) Properties() memspace.Properties {
	return memspace.Properties{Kind: "host", Device: -1, HostAccessible: true, Pageable: true,
		Atomics: true, Alignment: DefaultAlignment}
}

// Limit returns the cap on bytes in use, or 0 when there is none.
func (s *Space) Limit() int64 { return s.limit }

// Allocate returns size bytes aligned to align (a power of two up to
// memspace.MaxAlign; zero means DefaultAlignment). It returns an error
// matching ErrInvalidArgument for bad arguments, ErrOutOfMemory when the
// memory cannot be had or the Limit would be passed, and ErrClosed after
// Close.
func (s *Space) Allocate(size, align int) (memspace.Block, error) {
	align, err := impl.CheckAlloc(size, align, DefaultAlignment)
	if err != nil {
		return memspace.Block{}, xerr.Op(Name, "alloc", err)
	}
	if !sysHasMmap {
		return memspace.Block{}, xerr.Errorf(Name, "alloc", memspace.ErrNotSupported, errNoMmapText)
	}
	if size <= maxSmall && align <= maxSmall {
		shift := uint(bits.Len(uint(size - 1)))
		if a := uint(bits.TrailingZeros(uint(align))); a > shift {
			shift = a
		}
		if shift < minSmallShift {
			shift = minSmallShift
		}
		return s.allocSmall(size, shift)
	}
	return s.allocLarge(size, align)
}

const errNoMmapText = "this system has no mmap"

// oom returns the error of an allocation of size bytes that failed for the
// reason format and args give.
func (s *Space) oom(size int, format string, args ...any) error {
	return xerr.Errorf(Name, "alloc", memspace.ErrOutOfMemory, "%d bytes: "+format, append([]any{size}, args...)...)
}

// reserve checks the limit and counts size as committed. s.mu is held.
func (s *Space) reserve(size int) error {
	if s.closed {
		return xerr.Op(Name, "alloc", memspace.ErrClosed)
	}
	if s.limit > 0 && int64(size) > s.limit-s.committed {
		return s.oom(size, "limit of %d bytes, %d in use", s.limit, s.committed)
	}
	s.committed += int64(size)
	return nil
}

// account records a successful allocation. s.mu is held.
func (s *Space) account(size int) {
	s.stats.InUse += int64(size)
	if s.stats.InUse > s.stats.Peak {
		s.stats.Peak = s.stats.InUse
	}
	s.stats.Live++
	s.stats.Allocs++
}

func (s *Space) allocSmall(size int, shift uint) (memspace.Block, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.reserve(size); err != nil {
		return memspace.Block{}, err
	}
	c := &s.classes[shift-minSmallShift]
	if len(c.partial) == 0 {
		m, err := sysMap(slabSize, pageSize)
		if err != nil {
			s.committed -= int64(size)
			return memspace.Block{}, s.oom(size, "mapping a slab: %w", err)
		}
		n := slabSize >> shift
		sl := &slab{class: c, shift: shift, sizes: make([]uint16, n), free: make([]uint16, n)}
		for i := range sl.free { // pop from the end: hand out low addresses first
			sl.free[i] = uint16(n - 1 - i)
		}
		sl.r = &region{m: m, slab: sl}
		s.idx.insert(m.addr, sl.r)
		s.stats.Reserved += int64(m.len)
		sl.pos = len(c.partial)
		c.partial = append(c.partial, sl)
	}
	sl := c.partial[len(c.partial)-1]
	slot := sl.free[len(sl.free)-1]
	sl.free = sl.free[:len(sl.free)-1]
	sl.sizes[slot] = uint16(size)
	if len(sl.free) == 0 {
		c.remove(sl)
	}
	s.account(size)
	addr := sl.r.m.addr + uintptr(slot)<<shift
	return memspace.NewBlock(s, memspace.Addr(addr), size, hostPointer(addr)), nil
}

func (c *sizeClass) remove(sl *slab) {
	last := c.partial[len(c.partial)-1]
	c.partial[sl.pos] = last
	last.pos = sl.pos
	c.partial = c.partial[:len(c.partial)-1]
	sl.pos = -1
}

func (s *Space) allocLarge(size, align int) (memspace.Block, error) {
	a := uintptr(align)
	if a < pageSize {
		a = pageSize
	}
	if s.huge && size >= hugeThreshold && a < hugePage {
		a = hugePage
	}
	// Sizes that cannot be mapped at all fail before any system call.
	if uint64(size) > math.MaxInt64/2-uint64(a) {
		return memspace.Block{}, s.oom(size, "larger than any address space")
	}
	length := (uintptr(size) + pageSize - 1) &^ (pageSize - 1)
	s.mu.Lock()
	err := s.reserve(size)
	s.mu.Unlock()
	if err != nil {
		return memspace.Block{}, err
	}
	m, err := sysMap(length, a)
	s.mu.Lock()
	defer s.mu.Unlock()
	if err != nil {
		s.committed -= int64(size)
		return memspace.Block{}, s.oom(size, "mmap: %w", err)
	}
	if s.closed { // closed while mapping
		s.committed -= int64(size)
		_ = sysUnmap(m)
		return memspace.Block{}, xerr.Op(Name, "alloc", memspace.ErrClosed)
	}
	if s.huge && a >= hugePage {
		sysHugePages(m.addr, m.size)
	}
	s.idx.insert(m.addr, &region{m: m, user: size})
	s.stats.Reserved += int64(m.len)
	s.account(size)
	return memspace.NewBlock(s, memspace.Addr(m.addr), size, hostPointer(m.addr)), nil
}

// Free releases a block returned by Allocate. It returns an error matching
// ErrDoubleFree for a block the space does not hold (freed already, never
// allocated, or a sub-slice of an allocation), ErrForeignBlock for a block
// of another space, and ErrClosed after Close; in every case the space
// stays usable.
func (s *Space) Free(b memspace.Block) error {
	if b.Space() == nil {
		return xerr.Errorf(Name, "free", memspace.ErrInvalidArgument, "the zero block")
	}
	if b.Space() != memspace.Space(s) {
		return xerr.Errorf(Name, "free", memspace.ErrForeignBlock, "%v", b)
	}
	addr := uintptr(b.Addr())
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return xerr.Op(Name, "free", memspace.ErrClosed)
	}
	r := s.idx.floor(addr)
	if r == nil || b.Len() <= 0 {
		return s.notHeld(b)
	}
	if sl := r.slab; sl != nil {
		off := addr - r.m.addr
		if off >= slabSize || off&(1<<sl.shift-1) != 0 {
			return s.notHeld(b)
		}
		slot := off >> sl.shift
		if sl.sizes[slot] == 0 || int(sl.sizes[slot]) != b.Len() {
			return s.notHeld(b)
		}
		sl.sizes[slot] = 0
		sl.free = append(sl.free, uint16(slot))
		c := sl.class
		if sl.pos < 0 {
			sl.pos = len(c.partial)
			c.partial = append(c.partial, sl)
		}
		// An empty slab goes back to the system unless it is the class's
		// only one with room, which is kept to absorb alloc/free cycles.
		if len(sl.free) == len(sl.sizes) && len(c.partial) > 1 {
			c.remove(sl)
			s.unmapRegion(r)
		}
	} else {
		if r.m.addr != addr || r.user != b.Len() {
			return s.notHeld(b)
		}
		s.unmapRegion(r)
	}
	s.freed(memspace.NewBlock(s, b.Addr(), b.Len(), b.HostPointer()))
	s.committed -= int64(b.Len())
	s.stats.InUse -= int64(b.Len())
	s.stats.Live--
	s.stats.Frees++
	return nil
}

// NotifyFree makes the space call f with each allocation Free frees, and
// at Close with each region still mapped, before the memory can be reused
// (memspace.FreeNotifier). f runs with the space's lock held: it must not
// call the space.
func (s *Space) NotifyFree(f func(memspace.Block)) (stop func()) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.onFree.Add(&s.mu, f)
}

// freed tells the observers that b goes away. s.mu is held.
func (s *Space) freed(b memspace.Block) { s.onFree.Notify(b) }

func (s *Space) unmapRegion(r *region) {
	s.idx.remove(r.m.addr)
	s.stats.Reserved -= int64(r.m.len)
	// munmap of a mapping this space made cannot fail short of a kernel
	// bug; the ledger is kept right either way.
	_ = sysUnmap(r.m)
}

func (s *Space) notHeld(b memspace.Block) error {
	return xerr.Errorf(Name, "free", memspace.ErrDoubleFree, "%v", b)
}

// Lookup returns the live block containing addr.
func (s *Space) Lookup(addr memspace.Addr) (memspace.Block, bool) {
	a := uintptr(addr)
	s.mu.Lock()
	defer s.mu.Unlock()
	r := s.idx.floor(a)
	if r == nil {
		return memspace.Block{}, false
	}
	off := a - r.m.addr
	if sl := r.slab; sl != nil {
		if off >= slabSize {
			return memspace.Block{}, false
		}
		slot := off >> sl.shift
		n := uintptr(sl.sizes[slot])
		if off-slot<<sl.shift >= n {
			return memspace.Block{}, false
		}
		start := r.m.addr + slot<<sl.shift
		return memspace.NewBlock(s, memspace.Addr(start), int(n), hostPointer(start)), true
	}
	if off >= uintptr(r.user) {
		return memspace.Block{}, false
	}
	return memspace.NewBlock(s, memspace.Addr(r.m.addr), r.user, hostPointer(r.m.addr)), true
}

// Stats returns the ledger. Reserved counts the bytes mapped from the
// system (whole pages, and slabs in full).
func (s *Space) Stats() memspace.Stats {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.stats
}

// Available returns the bytes free and in total: with a Limit, the room
// left under it and the limit; otherwise the machine's available and total
// memory (MemAvailable and MemTotal of /proc/meminfo on Linux, -1 where
// unknown).
func (s *Space) Available() (free, total int64, err error) {
	if s.limit > 0 {
		s.mu.Lock()
		used := s.committed
		s.mu.Unlock()
		return max(s.limit-used, 0), s.limit, nil
	}
	return memInfo()
}

// Close unmaps every region. Blocks still live are freed with it, and Close
// reports them as a leak: an error naming how many and how many bytes.
// After Close, Allocate and Free return ErrClosed, and so does a second
// Close.
func (s *Space) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return xerr.Op(Name, "close", memspace.ErrClosed)
	}
	s.closed = true
	live, bytes := s.stats.Live, s.stats.InUse
	failed, firstErr := 0, error(nil)
	s.idx.each(func(r *region) {
		s.freed(memspace.NewBlock(s, memspace.Addr(r.m.addr), int(r.m.size), nil))
		if err := sysUnmap(r.m); err != nil {
			if firstErr == nil {
				firstErr = err
			}
			failed++
		}
	})
	s.idx = index{}
	s.classes = [len(s.classes)]sizeClass{}
	s.committed = 0
	s.stats.Frees += live
	s.stats.InUse, s.stats.Live, s.stats.Reserved = 0, 0, 0
	var err error
	if failed > 0 {
		err = fmt.Errorf("munmap failed for %d regions: %w", failed, firstErr)
	}
	if live > 0 {
		leak := fmt.Errorf("%d blocks (%d bytes) were still allocated; they are freed now", live, bytes)
		if err != nil {
			leak = fmt.Errorf("%w; %w", leak, err)
		}
		err = leak
	}
	return xerr.Op(Name, "close", err)
}
