package procs_test

import (
	"context"
	"encoding/binary"
	"fmt"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/xpu-go/xpu/memspace"
	"github.com/xpu-go/xpu/transfer"
	"github.com/xpu-go/xpu/xerr"
)

// The test double of a device space whose memory other processes map
// (CUDA device memory and its IPC handles): memory the host cannot touch
// through its blocks (no host pointer), each allocation an anonymous
// memory file mapped into this process, shared as (pid, fd, serial) and
// imported by opening the file through /proc and mapping it. Its
// transfer paths copy through the real addresses.

const (
	devKind    = "procs-test-device"
	devIPCKind = "procs-test-ipc"
)

// devSpace is the test double: a memspace.Space, Sharer, Importer and
// FreeNotifier. Imported blocks are blocks of the space too (the
// transfer paths reach them), outside its ledger; mapped counts the
// imported allocations still mapped.
type devSpace struct {
	mu     sync.Mutex
	allocs map[memspace.Addr]*devAlloc
	serial uint64
	inUse  int64
	live   int64
	notes  map[int]func(memspace.Block)
	note   int
	maps   map[string]*devMapping

	// refuse makes Import fail with ErrNotShareable, and noShare Share.
	refuse, noShare atomic.Bool
	// mapped counts the imported allocations mapped, imports the imports
	// made.
	mapped, imports atomic.Int64
	// beforeCopy, when set, runs before each copy of the paths, with the
	// blocks; an error it returns is the copy's.
	beforeCopy atomic.Pointer[func(dst, src memspace.Block) error]
}

type devAlloc struct {
	fd     int
	mem    []byte
	serial uint64
}

type devMapping struct {
	mem       []byte
	refs      int
	forgotten bool
}

var (
	_ memspace.StatsSpace   = (*devSpace)(nil)
	_ memspace.Sharer       = (*devSpace)(nil)
	_ memspace.Importer     = (*devSpace)(nil)
	_ memspace.FreeNotifier = (*devSpace)(nil)
)

// newDevSpace makes a test device space, registers its transfer paths
// and its importer, and at the test's end (after the cleanups registered
// later, such as the ranks' Close) checks that its ledger and its
// mappings are back to zero.
func newDevSpace(t testing.TB) *devSpace {
	t.Helper()
	if devSpaceMissing != "" {
		t.Skip(devSpaceMissing + "; the tests of device blocks run on Linux")
	}
	sp, unregister := openDevSpace()
	t.Cleanup(func() {
		unregister()
		if st := sp.Stats(); st.Live != 0 || st.InUse != 0 {
			t.Errorf("test device space: %d allocations (%d bytes) left", st.Live, st.InUse)
		}
		if n := sp.mapped.Load(); n != 0 {
			t.Errorf("test device space: %d imported allocations still mapped", n)
		}
	})
	return sp
}

// openDevSpace makes a test device space and registers its paths and
// importer until unregister.
func openDevSpace() (sp *devSpace, unregister func()) {
	sp = &devSpace{allocs: map[memspace.Addr]*devAlloc{}, notes: map[int]func(memspace.Block){}, maps: map[string]*devMapping{}}
	path := transfer.PathFunc(sp.copy)
	u := []func(){
		transfer.Register(devKind, "host", path),
		transfer.Register("host", devKind, path),
		transfer.Register(devKind, devKind, path),
		memspace.RegisterImporter(sp),
	}
	return sp, func() {
		for _, f := range u {
			f()
		}
	}
}

func (s *devSpace) Name() string { return devKind }

func (s *devSpace) Properties() memspace.Properties {
	return memspace.Properties{Kind: devKind, Device: 0, DeviceAccessible: true, Alignment: 1}
}

// memfdName is the name of the memory file of the allocation serial: an
// importer checks it, so that a freed allocation whose descriptor was
// reused is not taken for another.
func memfdName(serial uint64) string { return fmt.Sprintf("xpu-test-dev-%d", serial) }

func (s *devSpace) Allocate(size, align int) (memspace.Block, error) {
	if size <= 0 {
		return memspace.Block{}, xerr.Detail(memspace.ErrInvalidArgument, "size %d", size)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.serial++
	fd, err := memfdCreate(memfdName(s.serial))
	if err != nil {
		return memspace.Block{}, fmt.Errorf("memfd: %w", err)
	}
	if err := unix.Ftruncate(fd, int64(size)); err != nil {
		_ = unix.Close(fd)
		return memspace.Block{}, fmt.Errorf("ftruncate: %w", err)
	}
	mem, err := unix.Mmap(fd, 0, size, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
	if err != nil {
		_ = unix.Close(fd)
		return memspace.Block{}, fmt.Errorf("mmap: %w", err)
	}
	a := memspace.Addr(uintptr(unsafe.Pointer(&mem[0])))
	s.allocs[a] = &devAlloc{fd: fd, mem: mem, serial: s.serial}
	s.inUse += int64(size)
	s.live++
	return memspace.NewBlock(s, a, size, nil), nil
}

func (s *devSpace) Free(b memspace.Block) error {
	if b.Space() != memspace.Space(s) {
		return memspace.ErrForeignBlock
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	a := s.allocs[b.Addr()]
	if a == nil || len(a.mem) != b.Len() {
		return memspace.ErrDoubleFree
	}
	for _, f := range s.notes {
		f(b)
	}
	delete(s.allocs, b.Addr())
	_ = unix.Munmap(a.mem)
	_ = unix.Close(a.fd)
	s.inUse -= int64(b.Len())
	s.live--
	return nil
}

func (s *devSpace) Stats() memspace.Stats {
	s.mu.Lock()
	defer s.mu.Unlock()
	return memspace.Stats{InUse: s.inUse, Live: s.live}
}

func (s *devSpace) NotifyFree(f func(memspace.Block)) (stop func()) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.note++
	id := s.note
	s.notes[id] = f
	return func() {
		s.mu.Lock()
		delete(s.notes, id)
		s.mu.Unlock()
	}
}

// Share describes b as (pid, fd, serial) of its allocation.
func (s *devSpace) Share(b memspace.Block) (memspace.Shared, error) {
	if s.noShare.Load() {
		return memspace.Shared{}, xerr.Detail(memspace.ErrNotShareable, "not shared (test)")
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for base, a := range s.allocs {
		if b.Addr() >= base && b.Addr()+memspace.Addr(b.Len()) <= base+memspace.Addr(len(a.mem)) {
			h := make([]byte, 24)
			binary.LittleEndian.PutUint64(h[0:], uint64(os.Getpid()))
			binary.LittleEndian.PutUint64(h[8:], uint64(a.fd))
			binary.LittleEndian.PutUint64(h[16:], a.serial)
			return memspace.Shared{Kind: devIPCKind, Handle: h, Size: int64(len(a.mem)),
				Offset: int64(b.Addr() - base), Len: int64(b.Len())}, nil
		}
	}
	return memspace.Shared{}, xerr.Detail(memspace.ErrInvalidArgument, "block %v of no allocation", b)
}

func (s *devSpace) ImportKind() string { return devIPCKind }

// Import maps the allocation the handle names, once per handle.
func (s *devSpace) Import(sh memspace.Shared) (memspace.Block, func(), error) {
	if s.refuse.Load() {
		return memspace.Block{}, nil, xerr.Detail(memspace.ErrNotShareable, "refused (test)")
	}
	if err := sh.Check(); err != nil || len(sh.Handle) != 24 {
		return memspace.Block{}, nil, xerr.Detail(memspace.ErrNotShareable, "handle %x", sh.Handle)
	}
	key := string(sh.Handle)
	s.mu.Lock()
	defer s.mu.Unlock()
	m := s.maps[key]
	if m == nil {
		mem, err := mapShared(sh)
		if err != nil {
			return memspace.Block{}, nil, err
		}
		m = &devMapping{mem: mem}
		s.maps[key] = m
		s.mapped.Add(1)
	}
	m.refs++
	s.imports.Add(1)
	a := memspace.Addr(uintptr(unsafe.Pointer(&m.mem[0]))) + memspace.Addr(sh.Offset)
	var once sync.Once
	done := func() {
		once.Do(func() {
			s.mu.Lock()
			defer s.mu.Unlock()
			m.refs--
			s.unmapIdle(m)
		})
	}
	return memspace.NewBlock(s, a, int(sh.Len), nil), done, nil
}

// mapShared opens the memory file of sh through /proc and maps it; an
// allocation freed (the name does not match) or gone fails with
// ErrNotShareable.
func mapShared(sh memspace.Shared) ([]byte, error) {
	pid := binary.LittleEndian.Uint64(sh.Handle[0:])
	fd := binary.LittleEndian.Uint64(sh.Handle[8:])
	serial := binary.LittleEndian.Uint64(sh.Handle[16:])
	f, err := os.OpenFile(fmt.Sprintf("/proc/%d/fd/%d", pid, fd), os.O_RDWR, 0)
	if err != nil {
		return nil, xerr.Detail(memspace.ErrNotShareable, "open: %w", err)
	}
	defer f.Close()
	link, err := os.Readlink(fmt.Sprintf("/proc/self/fd/%d", f.Fd()))
	if err != nil || !strings.HasPrefix(link, "/memfd:"+memfdName(serial)+" ") {
		return nil, xerr.Detail(memspace.ErrNotShareable, "allocation %d freed (the file is %q)", serial, link)
	}
	mem, err := unix.Mmap(int(f.Fd()), 0, int(sh.Size), unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
	if err != nil {
		return nil, xerr.Detail(memspace.ErrNotShareable, "mmap: %w", err)
	}
	return mem, nil
}

// Forget unmaps the allocation of handle once no import of it is in use.
func (s *devSpace) Forget(handle []byte) {
	s.mu.Lock()
	defer s.mu.Unlock()
	m := s.maps[string(handle)]
	if m == nil {
		return
	}
	delete(s.maps, string(handle))
	m.forgotten = true
	s.unmapIdle(m)
}

// unmapIdle unmaps m if it is forgotten and unused; mu is held.
func (s *devSpace) unmapIdle(m *devMapping) {
	if m.forgotten && m.refs == 0 && m.mem != nil {
		_ = unix.Munmap(m.mem)
		m.mem = nil
		s.mapped.Add(-1)
	}
}

// bytesOf returns the memory of b: a host block's bytes, or the range of
// an allocation or a mapping of the space.
func (s *devSpace) bytesOf(b memspace.Block) ([]byte, error) {
	if b.HostAccessible() {
		return b.Bytes()
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	in := func(mem []byte) []byte {
		if len(mem) == 0 {
			return nil
		}
		base := memspace.Addr(uintptr(unsafe.Pointer(&mem[0])))
		if b.Addr() >= base && b.Addr()+memspace.Addr(b.Len()) <= base+memspace.Addr(len(mem)) {
			off := int(b.Addr() - base)
			return mem[off : off+b.Len()]
		}
		return nil
	}
	for _, a := range s.allocs {
		if p := in(a.mem); p != nil {
			return p, nil
		}
	}
	for _, m := range s.maps {
		if p := in(m.mem); p != nil {
			return p, nil
		}
	}
	return nil, xerr.Detail(memspace.ErrInvalidArgument, "block %v of no allocation or mapping", b)
}

// copy is the transfer path of the space, to, from and within it.
func (s *devSpace) copy(_ context.Context, dst, src memspace.Block) error {
	if f := s.beforeCopy.Load(); f != nil {
		if err := (*f)(dst, src); err != nil {
			return err
		}
	}
	d, err := s.bytesOf(dst)
	if err != nil {
		return err
	}
	sb, err := s.bytesOf(src)
	if err != nil {
		return err
	}
	copy(d, sb)
	return nil
}

// alloc allocates n bytes of the space filled with fill(i), and frees
// them at the test's end.
func (s *devSpace) alloc(t testing.TB, n int, fill func(i int) byte) memspace.Block {
	t.Helper()
	b, err := s.Allocate(n, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Free(b) })
	s.fill(t, b, fill)
	return b
}

// fill writes fill(i) at byte i of b.
func (s *devSpace) fill(t testing.TB, b memspace.Block, fill func(i int) byte) {
	t.Helper()
	p, err := s.bytesOf(b)
	if err != nil {
		t.Fatal(err)
	}
	for i := range p {
		p[i] = fill(i)
	}
}

// read returns a copy of the bytes of b.
func (s *devSpace) read(t testing.TB, b memspace.Block) []byte {
	t.Helper()
	p, err := s.bytesOf(b)
	if err != nil {
		t.Fatal(err)
	}
	return append([]byte(nil), p...)
}
