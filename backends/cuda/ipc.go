package cuda

import (
	"container/list"
	"errors"
	"slices"
	"strconv"
	"sync"

	"github.com/xpu-go/xpu/backends/cuda/internal/cu"
	"github.com/xpu-go/xpu/memspace"
	"github.com/xpu-go/xpu/xerr"
)

var (
	_ memspace.Sharer   = (*Space)(nil)
	_ memspace.Importer = (*Space)(nil)
	_ memspace.Space    = (*Imported)(nil)
)

// ShareKind is the Shared.Kind of CUDA device memory: the handle is the
// driver's CUipcMemHandle (cu.IPCHandleSize bytes), and the importer is a
// Space of this package.
const ShareKind = "cuda-ipc"

// KeepUnused is how many mappings of other processes' allocations a space
// keeps open while no import of them is in use, the least recently used
// closed first: a mapping costs the driver a page-table update to open,
// so a communicator that receives from the same buffers again finds them
// mapped.
const KeepUnused = 16

// Share describes the driver allocation that holds b, for another process
// of this machine (memspace.Sharer): Kind ShareKind, the allocation's IPC
// handle, its span as the driver allocated it, and b's place from the
// driver's base (blocks aligned above Alignment start past it). The handle
// is taken from the driver once per allocation and kept until Free.
//
// Only device memory shares: blocks of pinned and managed spaces, and a
// driver without the IPC entry points, fail with an error matching
// memspace.ErrNotShareable; a block of another space or one not allocated
// (freed) fails with one matching memspace.ErrInvalidArgument.
func (s *Space) Share(b memspace.Block) (memspace.Shared, error) {
	if b.Space() == nil {
		return memspace.Shared{}, xerr.Dev(Name, s.d.idx, "share", xerr.Detail(memspace.ErrInvalidArgument, "the zero block"))
	}
	if b.Space() != memspace.Space(s) {
		return memspace.Shared{}, xerr.Dev(Name, s.d.idx, "share", xerr.Detail(memspace.ErrForeignBlock, "%v", b))
	}
	if s.kind != KindDevice {
		return memspace.Shared{}, xerr.Dev(Name, s.d.idx, "share",
			xerr.Detail(memspace.ErrNotShareable, "%s memory has no IPC handle; only device memory shares", s.kind))
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return memspace.Shared{}, xerr.Dev(Name, s.d.idx, "share", memspace.ErrClosed)
	}
	start, a, ok := s.find(b.Addr(), b.Len())
	if !ok {
		return memspace.Shared{}, xerr.Dev(Name, s.d.idx, "share", xerr.Detail(memspace.ErrInvalidArgument,
			"%v is not allocated in %s (freed, or past the allocation)", b, s.name))
	}
	h, ok := s.handles[start]
	if !ok {
		var err error
		if h, err = s.d.lib.IpcGetMemHandle(s.d.ctx, a.base); err != nil {
			return memspace.Shared{}, s.shareErr(err)
		}
		if s.handles == nil {
			s.handles = map[memspace.Addr]cu.IPCHandle{}
		}
		s.handles[start] = h
	}
	return memspace.Shared{
		Kind:   ShareKind,
		Handle: append([]byte(nil), h[:]...),
		Size:   int64(a.span),
		Offset: int64(uintptr(b.Addr()) - uintptr(a.base)),
		Len:    int64(b.Len()),
	}, nil
}

func (s *Space) shareErr(err error) error {
	if errors.Is(err, cu.ErrNoIPC) {
		return xerr.Dev(Name, s.d.idx, "share", xerr.Detail(memspace.ErrNotShareable, "%w", err))
	}
	if sticky(err) {
		return devErr(s.d.idx, "share", err)
	}
	return xerr.Dev(Name, s.d.idx, "share", xerr.Detail(memspace.ErrNotShareable, "cuIpcGetMemHandle: %w", err))
}

// find returns the live allocation that holds [addr, addr+n), by the
// address it was handed out at (Share, Lookup, holds). s.mu held.
func (s *Space) find(addr memspace.Addr, n int) (memspace.Addr, alloc, bool) {
	i, ok := slices.BinarySearch(s.addrs, addr)
	if !ok {
		i--
	}
	if i < 0 {
		return 0, alloc{}, false
	}
	start := s.addrs[i]
	a := s.live[start]
	if uintptr(addr-start)+uintptr(n) > uintptr(a.size) {
		return 0, alloc{}, false
	}
	return start, a, true
}

// ImportKind is ShareKind: a space imports CUDA IPC handles.
func (s *Space) ImportKind() string { return ShareKind }

// Import maps the range sh names of another process's device allocation
// into this space's device context (memspace.Importer) and returns it as
// a block of an Imported space: device memory of this space's device
// (Properties().Kind is KindDevice), which transfer.CopyBlock copies to
// and from like any device block. done releases the import; it must be
// called once the block is no longer used.
//
// The driver opens each handle once per space: later imports of the same
// handle share the mapping, which stays open, once unused, among the
// KeepUnused most recently used, until Forget or Close. Memory of another
// device is mapped with peer access enabled on demand.
//
// A handle this process cannot reach fails with an error matching
// memspace.ErrNotShareable that gives the driver's code and its meaning:
// a handle of a freed allocation, a forged or corrupted one, one of
// another machine, of a process that has ended, of this process itself,
// or of a device without peer access to this one; so does a driver
// without the IPC entry points. A description that is not ShareKind's,
// or whose range lies outside its allocation, matches
// memspace.ErrInvalidArgument.
func (s *Space) Import(sh memspace.Shared) (memspace.Block, func(), error) {
	fail := func(err error) (memspace.Block, func(), error) {
		return memspace.Block{}, func() {}, xerr.Dev(Name, s.d.idx, "import", err)
	}
	if err := sh.Check(); err != nil {
		return fail(err)
	}
	if sh.Kind != ShareKind || len(sh.Handle) != cu.IPCHandleSize {
		return fail(xerr.Detail(memspace.ErrInvalidArgument, "shared block %v: not a %s handle of %d bytes", sh, ShareKind, cu.IPCHandleSize))
	}
	c := &s.imports
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return fail(memspace.ErrClosed)
	}
	key := string(sh.Handle)
	m, ok := c.byHandle[key]
	if !ok {
		var h cu.IPCHandle
		copy(h[:], sh.Handle)
		p, err := s.d.lib.IpcOpenMemHandle(s.d.ctx, h, cu.IPCLazyEnablePeerAccess)
		if err != nil {
			return fail(importErr(err))
		}
		m = &Imported{owner: s, key: key, ptr: p, size: sh.Size}
		if c.byHandle == nil {
			c.byHandle = map[string]*Imported{}
			c.unused = list.New()
		}
		c.byHandle[key] = m
		c.opens++
	}
	if sh.Offset+sh.Len > m.size {
		if m.refs == 0 && m.elem == nil {
			c.close(m) // opened for this import only
		}
		return fail(xerr.Detail(memspace.ErrInvalidArgument, "shared block %v: outside the %d bytes mapped", sh, m.size))
	}
	if m.elem != nil {
		c.unused.Remove(m.elem)
		m.elem = nil
	}
	m.refs++
	b := memspace.NewBlock(m, memspace.Addr(m.ptr)+memspace.Addr(sh.Offset), int(sh.Len), nil)
	var once sync.Once
	return b, func() { once.Do(func() { c.release(m) }) }, nil
}

// importErr says what a failed cuIpcOpenMemHandle means: memory this
// process cannot reach (memspace.ErrNotShareable), unless the device
// failed or is out of memory.
func importErr(err error) error {
	if errors.Is(err, cu.ErrNoIPC) {
		return xerr.Detail(memspace.ErrNotShareable, "%w", err)
	}
	r, ok := cu.ResultOf(err)
	if !ok {
		return err
	}
	if r.Sticky() || r == cu.ErrOutOfMemory {
		return driverErr(err)
	}
	why := "the driver refuses it"
	switch r {
	case cu.ErrInvalidValue:
		why = "the handle is not one the driver issued (forged or corrupted)"
	case cu.ErrInvalidHandle:
		why = "the allocation it names has been freed"
	case cu.ErrInvalidDevice:
		why = "it names memory this machine does not have (another machine's handle)"
	case cu.ErrNotFound:
		why = "the process that shared it has ended"
	case cu.ErrInvalidContext:
		why = "it is this process's own handle, which the driver does not open"
	case cu.ErrPeerAccessUnsupported, cu.ErrPeerAccessNotEnabled:
		why = "the memory is on a device this one has no peer access to"
	}
	return xerr.Detail(memspace.ErrNotShareable, "cuIpcOpenMemHandle: %w: %s", err, why)
}

// Forget closes the mapping of handle as soon as no import of it is in
// use (memspace.Importer): its owner freed the allocation or has ended.
// A later Import of the same handle opens it again. Forgetting a handle
// never imported does nothing.
func (s *Space) Forget(handle []byte) {
	c := &s.imports
	c.mu.Lock()
	defer c.mu.Unlock()
	m, ok := c.byHandle[string(handle)]
	if !ok {
		return
	}
	delete(c.byHandle, m.key)
	m.forgotten = true
	if m.refs == 0 {
		c.close(m)
		return
	}
	if c.forgotten == nil {
		c.forgotten = map[*Imported]struct{}{}
	}
	c.forgotten[m] = struct{}{}
}

// ImportStats count a space's mappings of other processes' allocations.
type ImportStats struct {
	Mapped int   // mappings open, in use or kept for reuse
	InUse  int   // mappings an import in use holds
	Opens  int64 // handles the driver opened for the space, in total
}

// ImportStats reports the space's mappings of other processes'
// allocations (Import).
func (s *Space) ImportStats() ImportStats {
	c := &s.imports
	c.mu.Lock()
	defer c.mu.Unlock()
	st := ImportStats{Mapped: len(c.byHandle) + len(c.forgotten), InUse: len(c.forgotten), Opens: c.opens}
	for _, m := range c.byHandle {
		if m.refs > 0 {
			st.InUse++
		}
	}
	return st
}

// imports is a space's cache of mappings of other processes' allocations,
// by handle.
type imports struct {
	mu       sync.Mutex
	closed   bool
	byHandle map[string]*Imported
	unused   *list.List // of *Imported whose refs are 0, the most recently used first
	// forgotten holds the mappings Forget removed from byHandle while an
	// import of them was in use: closed at their last release.
	forgotten map[*Imported]struct{}
	opens     int64 // driver opens, in total
}

// release ends one import of m. c.mu not held.
func (c *imports) release(m *Imported) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if m.closed {
		return
	}
	m.refs--
	if m.refs > 0 {
		return
	}
	if m.forgotten {
		delete(c.forgotten, m)
		c.close(m)
		return
	}
	m.elem = c.unused.PushFront(m)
	for c.unused.Len() > KeepUnused {
		old := c.unused.Remove(c.unused.Back()).(*Imported)
		old.elem = nil
		delete(c.byHandle, old.key)
		c.close(old)
	}
}

// close unmaps m; c.mu held. The driver's error is dropped: a failed
// context unmaps all the same, and nothing else can fail that the caller
// could act on.
func (c *imports) close(m *Imported) {
	if m.closed {
		return
	}
	if m.elem != nil {
		c.unused.Remove(m.elem)
		m.elem = nil
	}
	if !m.forgotten {
		delete(c.byHandle, m.key)
	}
	m.closed = true
	_ = m.owner.d.lib.IpcCloseMemHandle(m.owner.d.ctx, m.ptr)
}

// closeImports unmaps every mapping, in use or not, and reports how many
// imports were still in use. Space.Close calls it before releasing the
// device.
func (s *Space) closeImports() int {
	c := &s.imports
	c.mu.Lock()
	defer c.mu.Unlock()
	c.closed = true
	inUse := len(c.forgotten)
	for _, m := range c.byHandle {
		if m.refs > 0 {
			inUse++
		}
		c.close(m)
	}
	for m := range c.forgotten {
		c.close(m)
	}
	c.forgotten = nil
	return inUse
}

// Imported is the space of the blocks Import returns: one mapping of
// another process's device allocation, in the importing space's device
// context. Its properties are those of that device's memory, so transfer
// paths copy to and from its blocks; it allocates nothing, and its blocks
// are released with the done function of Import, not Free.
type Imported struct {
	owner     *Space
	key       string
	ptr       cu.DevPtr // the allocation's base in this process
	size      int64
	refs      int           // imports in use; owner.imports.mu guards the fields below
	elem      *list.Element // in owner.imports.unused while refs is 0
	forgotten bool
	closed    bool
}

// Name is the importing space's name with "/ipc".
func (m *Imported) Name() string { return m.owner.name + "/ipc" }

// Properties are those of device memory of the importing device.
func (m *Imported) Properties() memspace.Properties {
	return memspace.Properties{Kind: KindDevice, Device: m.owner.d.idx, DeviceAccessible: true, Alignment: Alignment}
}

// Allocate fails: an imported mapping allocates nothing.
func (m *Imported) Allocate(size, align int) (memspace.Block, error) {
	return memspace.Block{}, xerr.Dev(Name, m.owner.d.idx, "alloc",
		xerr.Detail(memspace.ErrNotSupported, "%s maps another process's memory and allocates nothing", m.Name()))
}

// Free fails: an imported block is released with the done function
// Import returned.
func (m *Imported) Free(b memspace.Block) error {
	return xerr.Dev(Name, m.owner.d.idx, "free",
		xerr.Detail(memspace.ErrInvalidArgument, "%v is imported: release it with the done function of Import", b))
}

// holds checks that [addr, addr+n) lies in the mapping and that an import
// of it is in use: a block released, or of a closed mapping, is an error
// rather than an address handed to the device.
func (m *Imported) holds(addr memspace.Addr, n int) error {
	c := &m.owner.imports
	c.mu.Lock()
	defer c.mu.Unlock()
	if m.closed || m.refs == 0 {
		return xerr.Detail(memspace.ErrInvalidArgument, "%d bytes at %#x: the import of %s was released", n, uintptr(addr), m.Name())
	}
	off := uintptr(addr) - uintptr(m.ptr)
	if uintptr(addr) < uintptr(m.ptr) || off+uintptr(n) > uintptr(m.size) {
		return xerr.Detail(memspace.ErrInvalidArgument, "%d bytes at %#x are outside the %d bytes of %s mapped", n, uintptr(addr), m.size, m.Name())
	}
	return nil
}

// String names the mapping for messages.
func (m *Imported) String() string { return m.Name() + "@" + strconv.FormatUint(uint64(m.ptr), 16) }
