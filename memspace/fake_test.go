package memspace_test

import (
	"fmt"
	"sync"
	"unsafe"

	"github.com/xpu-go/xpu/impl"
	"github.com/xpu-go/xpu/memspace"
)

// fakeSpace is a test-only Space. As a "device" (host == false) it hands
// out addresses from a counter and has no memory at all: nothing can read
// or write it, so a pool over it that worked proves the pool never touches
// memory. As a "host" space it is backed by Go byte slices it keeps alive.
// capacity, when positive, caps the bytes in use (out of memory beyond).
type fakeSpace struct {
	name     string
	host     bool
	capacity int64
	align    int

	mu     sync.Mutex
	next   memspace.Addr
	live   map[memspace.Addr]fakeAlloc
	closed bool
	stats  memspace.Stats
	calls  int // Allocate calls, failed ones included
}

type fakeAlloc struct {
	size int
	mem  []byte // backing store of a host allocation, kept alive here
	off  int    // offset of the block in mem
}

var (
	_ memspace.StatsSpace = (*fakeSpace)(nil)
	_ memspace.Lookuper   = (*fakeSpace)(nil)
	_ memspace.Closer     = (*fakeSpace)(nil)
)

// newDevice returns a fake device space of capacity bytes (0: unlimited).
func newDevice(capacity int64) *fakeSpace {
	return &fakeSpace{name: "fakedev", capacity: capacity, align: 256, next: 1 << 40, live: map[memspace.Addr]fakeAlloc{}}
}

// newHost returns a fake host space backed by Go memory.
func newHost(capacity int64) *fakeSpace {
	return &fakeSpace{name: "fakehost", host: true, capacity: capacity, align: 64, live: map[memspace.Addr]fakeAlloc{}}
}

func (f *fakeSpace) Name() string { return f.name }

func (f *fakeSpace) Properties() memspace.Properties {
	if f.host {
		return memspace.Properties{Kind: "fake-host", Device: -1, HostAccessible: true, Pageable: true, Atomics: true, Alignment: f.align}
	}
	return memspace.Properties{Kind: "fake-device", Device: 3, DeviceAccessible: true, Atomics: true, Alignment: f.align}
}

func (f *fakeSpace) Allocate(size, align int) (memspace.Block, error) {
	align, err := impl.CheckAlloc(size, align, f.align)
	if err != nil {
		return memspace.Block{}, err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls++
	if f.closed {
		return memspace.Block{}, fmt.Errorf("fake: %w", memspace.ErrClosed)
	}
	if int64(size) < 0 || (f.capacity > 0 && f.stats.InUse+int64(size) > f.capacity) || size > 1<<50 {
		return memspace.Block{}, fmt.Errorf("fake: %d bytes with %d in use of %d: %w", size, f.stats.InUse, f.capacity, memspace.ErrOutOfMemory)
	}
	var b memspace.Block
	var a fakeAlloc
	if f.host {
		mem := make([]byte, size+align)
		p := unsafe.Pointer(unsafe.SliceData(mem))
		off := (align - int(uintptr(p)%uintptr(align))) % align
		p = unsafe.Add(p, off)
		a = fakeAlloc{size: size, mem: mem, off: off}
		b = memspace.NewBlock(f, memspace.Addr(uintptr(p)), size, p)
	} else {
		m := memspace.Addr(align - 1)
		addr := (f.next + m) &^ m
		f.next = addr + memspace.Addr(size) + 4096 // a gap, so neighbours never touch
		a = fakeAlloc{size: size}
		b = memspace.NewBlock(f, addr, size, nil)
	}
	f.live[b.Addr()] = a
	f.stats.InUse += int64(size)
	f.stats.Reserved = f.stats.InUse
	f.stats.Peak = max(f.stats.Peak, f.stats.InUse)
	f.stats.Live++
	f.stats.Allocs++
	return b, nil
}

func (f *fakeSpace) Free(b memspace.Block) error {
	if b.Space() != memspace.Space(f) {
		return fmt.Errorf("fake: %v: %w", b, memspace.ErrForeignBlock)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	a, ok := f.live[b.Addr()]
	if !ok || a.size != b.Len() {
		return fmt.Errorf("fake: %v: %w", b, memspace.ErrDoubleFree)
	}
	delete(f.live, b.Addr())
	f.stats.InUse -= int64(a.size)
	f.stats.Reserved = f.stats.InUse
	f.stats.Live--
	f.stats.Frees++
	return nil
}

func (f *fakeSpace) Stats() memspace.Stats {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.stats
}

func (f *fakeSpace) Lookup(addr memspace.Addr) (memspace.Block, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for base, a := range f.live {
		if addr >= base && addr-base < memspace.Addr(a.size) {
			var host unsafe.Pointer
			if a.mem != nil {
				host = unsafe.Pointer(&a.mem[a.off])
			}
			return memspace.NewBlock(f, base, a.size, host), true
		}
	}
	return memspace.Block{}, false
}

func (f *fakeSpace) Close() error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.closed = true
	return nil
}

func (f *fakeSpace) allocateCalls() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.calls
}

// wrapper is a space wrapper with nothing but Unwrap, to test As.
type wrapper struct{ memspace.Space }

func (w wrapper) Unwrap() memspace.Space { return w.Space }
