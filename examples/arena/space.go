package arena

import (
	"fmt"
	"sort"
	"sync"
	"syscall"
	"unsafe"

	"github.com/xpu-go/xpu/impl"
	"github.com/xpu-go/xpu/memspace"
	"github.com/xpu-go/xpu/xerr"
)

// Space is a fixed-capacity host memory space.
type Space struct {
	mu     sync.Mutex
	mem    []byte // the whole region, from mmap
	base   memspace.Addr
	free   []span                // free spans sorted by offset, never adjacent
	live   map[memspace.Addr]int // allocation start -> size
	stats  memspace.Stats
	closed bool
}

type span struct{ off, n int }

var (
	_ memspace.StatsSpace   = (*Space)(nil)
	_ memspace.Lookuper     = (*Space)(nil)
	_ memspace.Availability = (*Space)(nil)
	_ memspace.Closer       = (*Space)(nil)
)

// NewSpace maps a region of capacity bytes.
func NewSpace(capacity int) (*Space, error) {
	if capacity <= 0 {
		return nil, xerr.Errorf(Name, "new space", memspace.ErrInvalidArgument, "capacity %d", capacity)
	}
	mem, err := syscall.Mmap(-1, 0, capacity, syscall.PROT_READ|syscall.PROT_WRITE, syscall.MAP_PRIVATE|syscall.MAP_ANON)
	if err != nil {
		return nil, xerr.Errorf(Name, "new space", memspace.ErrOutOfMemory, "mmap of %d bytes: %w", capacity, err)
	}
	return &Space{
		mem:  mem,
		base: memspace.Addr(uintptr(unsafe.Pointer(&mem[0]))),
		free: []span{{0, capacity}},
		live: map[memspace.Addr]int{},
	}, nil
}

// Name returns "arena".
func (s *Space) Name() string { return Name }

// Properties describes pageable host memory.
func (s *Space) Properties() memspace.Properties {
	return memspace.Properties{Kind: "host", Device: -1, HostAccessible: true, Pageable: true, Atomics: true, Alignment: 16}
}

// Allocate returns the first free span that fits size at align.
func (s *Space) Allocate(size, align int) (memspace.Block, error) {
	align, err := impl.CheckAlloc(size, align, 16)
	if err != nil {
		return memspace.Block{}, xerr.Op(Name, "alloc", err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return memspace.Block{}, xerr.Op(Name, "alloc", memspace.ErrClosed)
	}
	if size > len(s.mem) {
		return memspace.Block{}, xerr.Errorf(Name, "alloc", memspace.ErrOutOfMemory, "%d bytes in a %d-byte arena", size, len(s.mem))
	}
	for i, f := range s.free {
		addr := uintptr(s.base) + uintptr(f.off)
		pad := int((uintptr(align) - addr%uintptr(align)) % uintptr(align))
		if pad > f.n || f.n-pad < size {
			continue
		}
		off := f.off + pad
		// Replace f by what is left on each side.
		var rest []span
		if pad > 0 {
			rest = append(rest, span{f.off, pad})
		}
		if tail := f.n - pad - size; tail > 0 {
			rest = append(rest, span{off + size, tail})
		}
		s.free = append(s.free[:i], append(rest, s.free[i+1:]...)...)
		a := s.base + memspace.Addr(off)
		s.live[a] = size
		s.stats.InUse += int64(size)
		s.stats.Live++
		s.stats.Allocs++
		s.stats.Peak = max(s.stats.Peak, s.stats.InUse)
		return memspace.NewBlock(s, a, size, unsafe.Pointer(&s.mem[off])), nil
	}
	return memspace.Block{}, xerr.Errorf(Name, "alloc", memspace.ErrOutOfMemory, "no free span of %d bytes at alignment %d", size, align)
}

// Free returns b's span to the free list, merging it with its neighbours.
func (s *Space) Free(b memspace.Block) error {
	if b.Space() != memspace.Space(s) {
		return xerr.Errorf(Name, "free", memspace.ErrForeignBlock, "%v", b)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return xerr.Op(Name, "free", memspace.ErrClosed)
	}
	size, ok := s.live[b.Addr()]
	if !ok || size != b.Len() {
		return xerr.Errorf(Name, "free", memspace.ErrDoubleFree, "%v", b)
	}
	delete(s.live, b.Addr())
	s.stats.InUse -= int64(size)
	s.stats.Live--
	s.stats.Frees++
	off := int(b.Addr() - s.base)
	i := sort.Search(len(s.free), func(i int) bool { return s.free[i].off > off })
	s.free = append(s.free, span{})
	copy(s.free[i+1:], s.free[i:])
	s.free[i] = span{off, size}
	if i+1 < len(s.free) && s.free[i].off+s.free[i].n == s.free[i+1].off {
		s.free[i].n += s.free[i+1].n
		s.free = append(s.free[:i+1], s.free[i+2:]...)
	}
	if i > 0 && s.free[i-1].off+s.free[i-1].n == s.free[i].off {
		s.free[i-1].n += s.free[i].n
		s.free = append(s.free[:i], s.free[i+1:]...)
	}
	return nil
}

// Stats returns the ledger.
func (s *Space) Stats() memspace.Stats {
	s.mu.Lock()
	defer s.mu.Unlock()
	st := s.stats
	st.Reserved = int64(len(s.mem))
	return st
}

// Lookup finds the allocation containing addr.
func (s *Space) Lookup(addr memspace.Addr) (memspace.Block, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for a, n := range s.live {
		if addr >= a && addr < a+memspace.Addr(n) {
			off := int(a - s.base)
			return memspace.NewBlock(s, a, n, unsafe.Pointer(&s.mem[off])), true
		}
	}
	return memspace.Block{}, false
}

// Available returns the free bytes (not all usable at once: the free list
// may be fragmented) and the capacity.
func (s *Space) Available() (free, total int64, err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, f := range s.free {
		free += int64(f.n)
	}
	return free, int64(len(s.mem)), nil
}

// Close unmaps the region. Blocks still live are lost; Close reports them.
func (s *Space) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil
	}
	s.closed = true
	leaked := len(s.live)
	err := syscall.Munmap(s.mem)
	s.mem = nil
	if err != nil {
		return xerr.Op(Name, "close", fmt.Errorf("munmap: %w", err))
	}
	if leaked > 0 {
		return xerr.Op(Name, "close", fmt.Errorf("%d live allocation(s) lost", leaked))
	}
	return nil
}
