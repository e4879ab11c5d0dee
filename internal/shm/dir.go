package shm

import (
	"sync/atomic"
	"unsafe"
)

// Directories. Each side of a segment publishes, in a directory of its
// own after the rings, ranges of its memory that the other side may copy
// into and out of by itself, with WriteTo and ReadFrom (process_vm_writev
// and readv), without a message to the publisher: one-sided transfers
// whose target takes no part. A slot names a range by a key, the
// publisher's own 64-bit name for it (never 0), and counts the copies the
// other side has under way in it.
//
// The publisher fills a free slot's address and length, then stores its
// key; to withdraw it, it stores 0 in the key, then waits until the slot
// counts no copy, and only then may the memory go or the slot be reused.
// The copier raises the count, then loads the key, the address and the
// length again and copies only when they are still the range it was
// given; it lowers the count once the copy has returned. Each side's
// store comes before its load of the other side's word, and the atomic
// operations of package sync/atomic are sequentially consistent, so
// either the copier sees the key withdrawn, and copies nothing, or the
// publisher sees the count raised, and waits: no copy touches a range
// after its withdrawal has returned.
//
// The directory is advice the copier follows, not a barrier the kernel
// enforces: a process allowed to use process_vm_writev on the publisher
// could write anywhere in it. The two processes are one job of one user
// (the kernel allows the calls only then); the directory keeps a correct
// peer from writing memory that is no longer exposed.

// DirSlots is the number of slots of a directory.
const DirSlots = 512

// dirSlot is one slot: 32 bytes of shared memory.
type dirSlot struct {
	key  atomic.Uint64 // 0: free
	addr atomic.Uint64
	n    atomic.Uint64
	busy atomic.Uint64 // copies under way; raised and lowered by the copier
}

const (
	dirSlotSize = int(unsafe.Sizeof(dirSlot{}))
	// dirSize is the length of one directory.
	dirSize = DirSlots * dirSlotSize
)

// Dir is one side's directory: the publisher's view (Publish, Withdraw,
// Busy) or the copier's (Enter, Leave). Its memory is the segment's: a
// Dir must not be used once the Conn it came from is unmapped.
type Dir struct {
	slots []dirSlot
}

// dirAt returns directory i of a segment's memory whose rings hold size
// bytes each.
func dirAt(mem []byte, i, size int) *Dir {
	off := headerSize + 2*size + i*dirSize
	return &Dir{slots: unsafe.Slice((*dirSlot)(unsafe.Pointer(&mem[off])), DirSlots)}
}

// Dirs returns this side's directory, where it publishes, and the
// peer's, where it copies.
func (c *Conn) Dirs() (own, peer *Dir) {
	own, peer = dirAt(c.seg.mem, 0, c.seg.size), dirAt(c.seg.mem, 1, c.seg.size)
	if !c.seg.creator {
		own, peer = peer, own
	}
	return own, peer
}

// Free reports whether slot i is free for the publisher: no key, and no
// copy under way.
func (d *Dir) Free(i int) bool {
	s := &d.slots[i]
	return s.key.Load() == 0 && s.busy.Load() == 0
}

// Publish names n bytes at addr by key (not 0) in slot i, which must be
// Free.
func (d *Dir) Publish(i int, key, addr, n uint64) {
	s := &d.slots[i]
	s.addr.Store(addr)
	s.n.Store(n)
	s.key.Store(key)
}

// Withdraw ends the copies that start into slot i: after it, Busy counts
// those still under way, and the range is the publisher's once it reads 0.
func (d *Dir) Withdraw(i int) { d.slots[i].key.Store(0) }

// Busy returns the number of copies under way in slot i.
func (d *Dir) Busy(i int) uint64 { return d.slots[i].busy.Load() }

// Enter begins a copy into or out of the range slot i names, which must
// be key's, n bytes at addr: it reports false, and nothing is begun, when
// the slot names anything else. A true Enter is ended by Leave.
func (d *Dir) Enter(i int, key, addr, n uint64) bool {
	if i < 0 || i >= len(d.slots) || key == 0 {
		return false
	}
	s := &d.slots[i]
	if s.key.Load() != key {
		return false
	}
	s.busy.Add(1)
	if s.key.Load() != key || s.addr.Load() != addr || s.n.Load() != n {
		s.busy.Add(^uint64(0))
		return false
	}
	return true
}

// Leave ends a copy that Enter began in slot i.
func (d *Dir) Leave(i int) { d.slots[i].busy.Add(^uint64(0)) }
