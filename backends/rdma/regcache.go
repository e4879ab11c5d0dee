package rdma

import (
	"runtime"
	"sync"
	"unsafe"

	"github.com/xpu-go/xpu/backends/rdma/internal/fabric"
	"github.com/xpu-go/xpu/memspace"
)

// Registered memory. RDMA reads and writes only memory registered with the
// device (pinned, with a local and a remote key), and registering costs a
// system call and a page walk. A buffer of a space that can tell which
// allocation an address is in (memspace.Lookuper) and when an allocation
// is freed (memspace.FreeNotifier) — the cpu backend's space does both —
// is registered whole on first use and the registration reused by every
// later message, until Free voids it. Any other host buffer (Go memory
// from memspace.FromSlice) is pinned and registered for the message and
// released after it.
//
// GPU memory takes the same path once its space exports allocations as
// dma-buf file descriptors: the cache then registers them with
// ibv_reg_dmabuf_mr instead (docs/adr/0024-rdma-verbs-through-cgo.md).

// regCache holds the registrations of allocations, keyed by the
// allocation's start address.
type regCache struct {
	fc fabric.Context

	mu      sync.Mutex
	closed  bool
	watched map[memspace.Space]func() // the spaces told of, and how to stop
	entries map[uintptr]*regEntry
	hits    int
	misses  int
}

type regEntry struct {
	mr    *fabric.MR
	start uintptr
	end   uintptr
	refs  int  // messages using it now
	void  bool // freed while in use: deregister when refs reach 0
}

func newRegCache(fc fabric.Context) *regCache {
	return &regCache{fc: fc, watched: map[memspace.Space]func(){}, entries: map[uintptr]*regEntry{}}
}

// registration is a buffer's registration for one message.
type registration struct {
	mr      *fabric.MR
	release func()
}

// get registers data, the host view of b, for one message: through the
// cache when b's space allows, else pinned and registered alone.
func (rc *regCache) get(b memspace.Block, data []byte) (registration, error) {
	if reg, ok := rc.cached(b, data); ok {
		return reg, nil
	}
	pin := new(runtime.Pinner)
	pin.Pin(&data[0]) // Go memory stays put; other memory is not Go's to move
	mr, err := rc.fc.Register(unsafe.Pointer(&data[0]), len(data))
	if err != nil {
		pin.Unpin()
		return registration{}, err
	}
	return registration{mr: mr, release: func() {
		_ = rc.fc.Deregister(mr)
		pin.Unpin()
	}}, nil
}

// cached returns a cached registration covering data, registering b's
// allocation first if need be; ok is false where b's space cannot be
// cached.
func (rc *regCache) cached(b memspace.Block, data []byte) (registration, bool) {
	sp := b.Space()
	if sp == nil || sp == memspace.GoHeap {
		return registration{}, false
	}
	lk, ok1 := memspace.As[memspace.Lookuper](sp)
	fn, ok2 := memspace.As[memspace.FreeNotifier](sp)
	if !ok1 || !ok2 {
		return registration{}, false
	}
	// The space is called without rc.mu held: its notifications take
	// rc.mu under the space's own lock.
	alloc, found := lk.Lookup(b.Addr())
	if !found || !alloc.HostAccessible() || alloc.HostPointer() == nil {
		return registration{}, false
	}
	rc.mu.Lock()
	_, watching := rc.watched[sp]
	closed := rc.closed
	rc.mu.Unlock()
	if closed {
		return registration{}, false
	}
	if !watching {
		stop := fn.NotifyFree(rc.void)
		rc.mu.Lock()
		if _, dup := rc.watched[sp]; dup || rc.closed {
			rc.mu.Unlock()
			stop()
		} else {
			rc.watched[sp] = stop
			rc.mu.Unlock()
		}
	}
	start := uintptr(alloc.HostPointer())
	end := start + uintptr(alloc.Len())
	p := uintptr(unsafe.Pointer(&data[0]))
	if p < start || p+uintptr(len(data)) > end {
		return registration{}, false
	}
	rc.mu.Lock()
	defer rc.mu.Unlock()
	e := rc.entries[start]
	if e == nil || e.end != end {
		mr, err := rc.fc.Register(alloc.HostPointer(), alloc.Len())
		if err != nil {
			return registration{}, false
		}
		if e != nil {
			rc.drop(e)
		}
		e = &regEntry{mr: mr, start: start, end: end}
		rc.entries[start] = e
		rc.misses++
	} else {
		rc.hits++
	}
	e.refs++
	return registration{mr: e.mr, release: func() { rc.put(e) }}, true
}

// put ends one message's use of e.
func (rc *regCache) put(e *regEntry) {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	e.refs--
	if e.refs == 0 && e.void {
		_ = rc.fc.Deregister(e.mr)
	}
}

// void drops the registrations inside b, which its space frees. It runs
// under the space's lock.
func (rc *regCache) void(b memspace.Block) {
	start := uintptr(b.Addr())
	end := start + uintptr(b.Len())
	rc.mu.Lock()
	defer rc.mu.Unlock()
	for k, e := range rc.entries {
		if e.start >= start && e.start < end {
			delete(rc.entries, k)
			rc.drop(e)
		}
	}
}

// drop deregisters e now, or once its last message is done. rc.mu is
// held.
func (rc *regCache) drop(e *regEntry) {
	if e.refs > 0 {
		e.void = true
		return
	}
	_ = rc.fc.Deregister(e.mr)
}

// close stops watching the spaces and deregisters everything; messages
// still using an entry must be over.
func (rc *regCache) close() {
	rc.mu.Lock()
	rc.closed = true
	stops := rc.watched
	rc.watched = nil
	rc.mu.Unlock()
	for _, stop := range stops {
		stop()
	}
	rc.mu.Lock()
	defer rc.mu.Unlock()
	for k, e := range rc.entries {
		delete(rc.entries, k)
		e.refs = 0
		_ = rc.fc.Deregister(e.mr)
	}
}

// stats returns the cache's hits and misses.
func (rc *regCache) stats() (hits, misses int) {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	return rc.hits, rc.misses
}
