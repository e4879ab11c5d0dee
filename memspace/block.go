package memspace

import (
	"fmt"
	"unsafe"
)

// Addr is an address in a space. Device addresses are integers: they are
// never dereferenced by Go code, and the garbage collector never sees them.
type Addr uintptr

// Block is a region of one space: the space, the start address and the
// length in bytes. Blocks are values; copying one does not copy memory.
//
// A block of a host-accessible space also carries its host mapping, so the
// host can view it without the space being consulted. Backends create
// blocks with NewBlock; users get them from Space.Allocate and slice them
// with Slice.
type Block struct {
	space Space
	addr  Addr
	size  int
	host  unsafe.Pointer // host mapping of addr; nil where the host cannot touch it
}

// NewBlock is for backends: it returns a block of space s at addr of size
// bytes. host is the host mapping of addr (often the same address), or nil
// where the memory is not host-accessible. host must point to memory the Go
// garbage collector does not move: off-heap memory, or a Go heap object the
// block then keeps alive.
func NewBlock(s Space, addr Addr, size int, host unsafe.Pointer) Block {
	return Block{space: s, addr: addr, size: size, host: host}
}

// Space returns the space the block belongs to (nil for the zero Block).
func (b Block) Space() Space { return b.space }

// Addr returns the start address.
func (b Block) Addr() Addr { return b.addr }

// Len returns the length in bytes.
func (b Block) Len() int { return b.size }

// IsZero reports whether b is the zero Block.
func (b Block) IsZero() bool { return b.space == nil && b.addr == 0 && b.size == 0 }

// HostAccessible reports whether the host can view the block.
func (b Block) HostAccessible() bool {
	return b.host != nil || (b.size == 0 && b.space != nil && b.space.Properties().HostAccessible)
}

// HostPointer returns the host mapping of the start of the block, or nil.
// It is for backends that hand host memory to foreign code.
func (b Block) HostPointer() unsafe.Pointer { return b.host }

// Bytes returns the host view of the block. It returns
// ErrNotHostAccessible for memory the host cannot touch.
func (b Block) Bytes() ([]byte, error) {
	if b.host == nil {
		if b.size == 0 {
			return nil, nil
		}
		name := "<nil>"
		if b.space != nil {
			name = b.space.Name()
		}
		return nil, fmt.Errorf("memspace: block of space %s: %w", name, ErrNotHostAccessible)
	}
	return unsafe.Slice((*byte)(b.host), b.size), nil
}

// Slice returns the sub-block [off, off+n). A sub-block cannot be freed; it
// is a view of the allocation.
func (b Block) Slice(off, n int) (Block, error) {
	if off < 0 || n < 0 || off > b.size || n > b.size-off {
		return Block{}, fmt.Errorf("memspace: slice [%d, %d+%d) of a %d-byte block: %w", off, off, n, b.size, ErrInvalidArgument)
	}
	s := Block{space: b.space, addr: b.addr + Addr(off), size: n}
	// An empty slice keeps no host pointer: at off == size it would point
	// one past the end of the allocation, which checkptr rightly refuses.
	if b.host != nil && n > 0 {
		s.host = unsafe.Add(b.host, off)
	}
	return s, nil
}

// String describes the block for errors and logs.
func (b Block) String() string {
	name := "<nil>"
	if b.space != nil {
		name = b.space.Name()
	}
	return fmt.Sprintf("%s[%#x+%d]", name, uintptr(b.addr), b.size)
}

// Overlaps reports whether a and b are in the same space and share a byte.
func Overlaps(a, b Block) bool {
	if a.space != b.space || a.size == 0 || b.size == 0 {
		return false
	}
	return a.addr < b.addr+Addr(b.size) && b.addr < a.addr+Addr(a.size)
}
