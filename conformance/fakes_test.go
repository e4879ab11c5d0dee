package conformance_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"unsafe"

	"github.com/xpu-go/xpu/backends/cpu"
	"github.com/xpu-go/xpu/executor"
	"github.com/xpu-go/xpu/impl"
	"github.com/xpu-go/xpu/memspace"
	"github.com/xpu-go/xpu/transfer"
	"github.com/xpu-go/xpu/xerr"
)

// This file holds small implementations for the suite's own tests: a
// correct host space on the Go heap, each of whose defects can be switched
// on, and wrappers that break the real backends in one way each. They show
// that each requirement of the suite can fail.

// defect is one deliberate bug of fakeSpace.
type defect int

const (
	correct           defect = iota
	ignoreAlignment          // returns blocks one byte off any alignment
	silentDoubleFree         // a second Free of a block succeeds
	freeByAddressOnly        // Free ignores the length: a prefix slice frees the allocation
	uncountedFrees           // the ledger does not count frees
	neverReuse               // Free keeps the ledger right but not the memory: a capacity runs out
	bareErrors               // Allocate returns impl's errors without the space's name
)

// fakeSpace is host memory on the Go heap. Each allocation is a Go slice
// kept alive by the live map, so its address is stable. A device fakeSpace
// hides the memory from the host (its blocks have no host view) and is
// reached through the transfer paths of deviceKind, as device memory is.
type fakeSpace struct {
	name   string
	kind   string
	defect defect
	device bool

	mu    sync.Mutex
	live  map[memspace.Addr][]byte
	freed map[memspace.Addr]bool
	st    memspace.Stats
	// acct is the memory the space gives from: its own, or a device's
	// that several spaces share.
	acct *memAccount
	// index is the device a device fakeSpace says it is on.
	index int
}

// memAccount is memory with a capacity. capacity, when set, is the most
// bytes the spaces drawing on it give at once, which Available reports;
// consumed is what they have given and not taken back.
type memAccount struct {
	mu                 sync.Mutex
	capacity, consumed int64
}

// take takes n bytes, unless the capacity would be exceeded.
func (a *memAccount) take(n int64) error {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.capacity > 0 && a.consumed+n > a.capacity {
		return fmt.Errorf("fake: %d bytes with %d of %d given: %w", n, a.consumed, a.capacity, memspace.ErrOutOfMemory)
	}
	a.consumed += n
	return nil
}

// give gives n bytes back.
func (a *memAccount) give(n int64) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.consumed -= n
}

var (
	_ memspace.Space      = (*fakeSpace)(nil)
	_ memspace.StatsSpace = (*fakeSpace)(nil)
)

func newFakeSpace(d defect) *fakeSpace {
	return &fakeSpace{name: "fake", kind: "host", defect: d,
		live: map[memspace.Addr][]byte{}, freed: map[memspace.Addr]bool{}, acct: &memAccount{}}
}

func (s *fakeSpace) Name() string { return s.name }

func (s *fakeSpace) Properties() memspace.Properties {
	if s.device {
		return memspace.Properties{Kind: deviceKind, Device: s.index, DeviceAccessible: true, Alignment: 256}
	}
	return memspace.Properties{Kind: s.kind, Device: -1, HostAccessible: true, Pageable: true, Alignment: 16}
}

// deviceKind is the kind of the device fakeSpace.
const deviceKind = "conformance-test-device"

func newFakeDevice() *fakeSpace {
	s := newFakeSpace(correct)
	s.name, s.device = "fake-device", true
	return s
}

func init() { registerKind(deviceKind, deviceCopy) }

// registerKind registers path for every pair of kind and "host", and
// returns what unregisters them.
func registerKind(kind string, path transfer.PathFunc) (unregister func()) {
	var undo []func()
	for _, p := range [][2]string{{kind, "host"}, {"host", kind}, {kind, kind}} {
		undo = append(undo, transfer.Register(p[0], p[1], path))
	}
	return func() {
		for _, u := range undo {
			u()
		}
	}
}

// deviceCopy copies between device fakeSpaces and host memory, as a DMA
// engine would: it finds the memory of a device block from its address.
func deviceCopy(_ context.Context, dst, src memspace.Block) error {
	d, s, err := memOfBoth(memOf, dst, src)
	if err != nil {
		return err
	}
	copy(d, s)
	return nil
}

// memOfBoth returns the memory of dst and src, as mem finds it.
func memOfBoth(mem func(memspace.Block) ([]byte, error), dst, src memspace.Block) (d, s []byte, err error) {
	if d, err = mem(dst); err != nil {
		return nil, nil, err
	}
	if s, err = mem(src); err != nil {
		return nil, nil, err
	}
	return d, s, nil
}

// hostBytes returns the host views of dst and src.
func hostBytes(dst, src memspace.Block) (d, s []byte, err error) {
	return memOfBoth(memspace.Block.Bytes, dst, src)
}

func memOf(b memspace.Block) ([]byte, error) {
	if b.HostAccessible() {
		return b.Bytes()
	}
	s, ok := memspace.As[*fakeSpace](b.Space()) // through a Pool, too
	if !ok {
		return nil, fmt.Errorf("fake: no path to %v: %w", b, memspace.ErrNotSupported)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for base, mem := range s.live {
		if b.Addr() >= base && b.Addr()+memspace.Addr(b.Len()) <= base+memspace.Addr(len(mem)) {
			off := int(b.Addr() - base)
			return mem[off : off+b.Len()], nil
		}
	}
	return nil, fmt.Errorf("fake: %v is not live memory of %s: %w", b, s.name, memspace.ErrInvalidArgument)
}

func (s *fakeSpace) Allocate(size, align int) (memspace.Block, error) {
	align, err := impl.CheckAlloc(size, align, s.Properties().Alignment)
	if err != nil {
		if s.defect == bareErrors {
			return memspace.Block{}, err
		}
		return memspace.Block{}, xerr.Op(s.name, "alloc", err)
	}
	if size > 1<<32 {
		return memspace.Block{}, fmt.Errorf("fake: %d bytes: %w", size, memspace.ErrOutOfMemory)
	}
	if err := s.acct.take(int64(size)); err != nil {
		return memspace.Block{}, err
	}
	mem := make([]byte, size+align+1)
	base := uintptr(unsafe.Pointer(unsafe.SliceData(mem)))
	off := int((uintptr(align) - base%uintptr(align)) % uintptr(align))
	if s.defect == ignoreAlignment {
		off = 1 // odd, so misaligned for every alignment above 1
		if base%2 == 1 {
			off = 0
		}
	}
	mem = mem[off : off+size : off+size]
	p := unsafe.Pointer(unsafe.SliceData(mem))
	addr := memspace.Addr(uintptr(p))
	s.mu.Lock()
	defer s.mu.Unlock()
	s.live[addr] = mem
	delete(s.freed, addr)
	s.st.InUse += int64(size)
	s.st.Live++
	s.st.Allocs++
	s.st.Peak = max(s.st.Peak, s.st.InUse)
	if s.device {
		p = nil
	}
	return memspace.NewBlock(s, addr, size, p), nil
}

func (s *fakeSpace) Free(b memspace.Block) error {
	if b.Space() != memspace.Space(s) {
		return fmt.Errorf("fake: free of %v: %w", b, memspace.ErrForeignBlock)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	mem, ok := s.live[b.Addr()]
	if !ok && s.defect == silentDoubleFree && s.freed[b.Addr()] {
		return nil
	}
	if !ok || (len(mem) != b.Len() && s.defect != freeByAddressOnly) {
		return fmt.Errorf("fake: free of %v: %w", b, memspace.ErrDoubleFree)
	}
	delete(s.live, b.Addr())
	s.freed[b.Addr()] = true
	if s.defect != neverReuse {
		s.acct.give(int64(len(mem)))
	}
	if s.defect != uncountedFrees {
		s.st.InUse -= int64(len(mem))
		s.st.Live--
		s.st.Frees++
	}
	return nil
}

// Available reports the capacity, when the space has one.
func (s *fakeSpace) Available() (free, total int64, err error) {
	a := s.acct
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.capacity == 0 {
		return -1, -1, nil
	}
	return a.capacity - a.consumed, a.capacity, nil
}

func (s *fakeSpace) Stats() memspace.Stats {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.st
}

// dropExec is the CPU executor, except that ParallelFor skips the middle
// index and ParallelRange the last chunk.
type dropExec struct{ *cpu.Executor }

func (e dropExec) ParallelFor(ctx context.Context, n int, body func(int)) error {
	return e.Executor.ParallelFor(ctx, n, func(i int) {
		if n > 2 && i == n/2 {
			return
		}
		body(i)
	})
}

func (e dropExec) ParallelRange(ctx context.Context, n, grain int, body func(lo, hi int)) error {
	return e.Executor.ParallelRange(ctx, n, grain, func(lo, hi int) {
		if lo > 0 && hi == n {
			return
		}
		body(lo, hi)
	})
}

// deafExec is the CPU executor, except that Execute with a context already
// done blocks for ever instead of returning ctx.Err().
type deafExec struct{ *cpu.Executor }

// never is what the hung and the leaked goroutines wait for: nothing
// closes it.
var never = make(chan struct{})

func (e deafExec) Execute(ctx context.Context, fn func(context.Context) error) error {
	if ctx.Err() != nil {
		<-never
	}
	return e.Executor.Execute(ctx, fn)
}

// wrapStreams is the CPU executor, whose streams wrap wraps.
type wrapStreams struct {
	*cpu.Executor
	wrap func(executor.Stream) executor.Stream
}

func (w wrapStreams) NewStream() (executor.Stream, error) {
	s, err := w.Executor.NewStream()
	if err != nil {
		return nil, err
	}
	return w.wrap(s), nil
}

// forgetfulStream is a CPU stream whose functions' errors are dropped:
// errors are not sticky.
type forgetfulStream struct{ executor.Stream }

func (s forgetfulStream) Enqueue(fn func(context.Context) error) error {
	return s.Stream.Enqueue(func(ctx context.Context) error {
		_ = fn(ctx)
		return nil
	})
}

var errShortCopy = errors.New("fake: short copy")

// shortCopy is a transfer path that copies every byte but the last.
func shortCopy(_ context.Context, dst, src memspace.Block) error {
	d, s, err := hostBytes(dst, src)
	if err != nil {
		return err
	}
	if len(d) == 0 {
		return errShortCopy
	}
	copy(d[:len(d)-1], s)
	return nil
}

// bumpSpace is device memory handed out by a bump pointer from a base
// aligned to 1 TiB, which ignores the alignment each Allocate asks for
// (it keeps its own, 256 bytes): the first block of an empty space sits at
// the base, aligned to anything, the next ones are not. Freeing every
// block moves the pointer back to the base.
type bumpSpace struct {
	mu   sync.Mutex
	next int
	live map[memspace.Addr]int
}

const bumpBase = 1 << 40

func newBumpSpace() *bumpSpace { return &bumpSpace{live: map[memspace.Addr]int{}} }

func (s *bumpSpace) Name() string { return "bump" }

func (s *bumpSpace) Properties() memspace.Properties {
	return memspace.Properties{Kind: "conformance-test-bump", Device: 0, DeviceAccessible: true, Alignment: 256}
}

func (s *bumpSpace) Allocate(size, align int) (memspace.Block, error) {
	if _, err := impl.CheckAlloc(size, align, 256); err != nil {
		return memspace.Block{}, xerr.Op("bump", "alloc", err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	off := (s.next + 255) &^ 255 // the space's alignment, not the one asked for
	if size > 1<<34 || off+size > 1<<34 {
		return memspace.Block{}, fmt.Errorf("bump: %d bytes: %w", size, memspace.ErrOutOfMemory)
	}
	s.next = off + size
	b := memspace.NewBlock(s, memspace.Addr(bumpBase+off), size, nil)
	s.live[b.Addr()] = size
	return b, nil
}

func (s *bumpSpace) Free(b memspace.Block) error {
	if b.Space() != memspace.Space(s) {
		return fmt.Errorf("bump: free of %v: %w", b, memspace.ErrForeignBlock)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if n, ok := s.live[b.Addr()]; !ok || n != b.Len() {
		return fmt.Errorf("bump: free of %v: %w", b, memspace.ErrDoubleFree)
	}
	delete(s.live, b.Addr())
	if len(s.live) == 0 {
		s.next = 0
	}
	return nil
}
