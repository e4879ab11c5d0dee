package memspace

import (
	"fmt"
	"math"
	"unsafe"
)

// Buffer is a typed array of n elements of T in one space. T must pass
// CheckElem. A Buffer made by Alloc owns its block and must be freed with
// Free; views made by Slice, View or FromSlice own nothing.
//
// A Buffer is not safe for concurrent Free; concurrent reads and writes of
// its elements follow the usual rules of memory.
type Buffer[T any] struct {
	block Block
	n     int
	owned bool
	freed bool
	_     [0]*T // buffers of different element types do not convert
}

// Alloc allocates n elements of T in s with the alignment of T (or the
// space's default, whichever is larger).
func Alloc[T any](s Space, n int) (*Buffer[T], error) {
	return AllocAligned[T](s, n, 0)
}

// AllocAligned is Alloc with an explicit power-of-two alignment in bytes.
func AllocAligned[T any](s Space, n, align int) (*Buffer[T], error) {
	if err := CheckElem[T](); err != nil {
		return nil, err
	}
	if s == nil {
		return nil, fmt.Errorf("memspace: alloc in a nil space: %w", ErrInvalidArgument)
	}
	if n <= 0 {
		return nil, fmt.Errorf("memspace: alloc of %d elements: %w", n, ErrInvalidArgument)
	}
	size := int(unsafe.Sizeof(*new(T)))
	if n > math.MaxInt/size {
		return nil, fmt.Errorf("memspace: alloc of %d elements of %d bytes overflows: %w", n, size, ErrOutOfMemory)
	}
	// Raise a valid (or zero) alignment to T's own; an invalid one is left for
	// the space to reject.
	if a := int(unsafe.Alignof(*new(T))); align >= 0 && align&(align-1) == 0 && align < a {
		align = a
	}
	b, err := s.Allocate(n*size, align)
	if err != nil {
		return nil, err
	}
	return &Buffer[T]{block: b, n: n, owned: true}, nil
}

// View returns a typed view of block b. Its length must be a multiple of the
// size of T, and for host-accessible memory the start must be aligned for T.
func View[T any](b Block) (*Buffer[T], error) {
	if err := CheckElem[T](); err != nil {
		return nil, err
	}
	size := int(unsafe.Sizeof(*new(T)))
	if b.size%size != 0 {
		return nil, fmt.Errorf("memspace: %d-byte block is not a whole number of %d-byte elements: %w", b.size, size, ErrInvalidArgument)
	}
	if b.host != nil && uintptr(b.host)%unsafe.Alignof(*new(T)) != 0 {
		return nil, fmt.Errorf("memspace: block %v is misaligned for %T: %w", b, *new(T), ErrInvalidArgument)
	}
	return &Buffer[T]{block: b, n: b.size / size}, nil
}

// FromSlice returns a buffer viewing the Go slice s, in the GoHeap space. It
// lets Go memory take part in copies and communication. The buffer keeps s
// alive; it owns nothing and Free is an error.
func FromSlice[T any](s []T) (*Buffer[T], error) {
	if err := CheckElem[T](); err != nil {
		return nil, err
	}
	size := int(unsafe.Sizeof(*new(T)))
	if len(s) == 0 {
		return &Buffer[T]{block: Block{space: GoHeap}}, nil
	}
	p := unsafe.Pointer(unsafe.SliceData(s))
	return &Buffer[T]{block: Block{space: GoHeap, addr: Addr(uintptr(p)), size: len(s) * size, host: p}, n: len(s)}, nil
}

// Len returns the number of elements.
func (b *Buffer[T]) Len() int { return b.n }

// Bytes returns the size of the buffer in bytes.
func (b *Buffer[T]) Bytes() int { return b.block.size }

// Block returns the block holding the elements.
func (b *Buffer[T]) Block() Block { return b.block }

// Space returns the space of the buffer.
func (b *Buffer[T]) Space() Space { return b.block.space }

// Host returns the elements as a Go slice viewing the memory. It returns
// ErrNotHostAccessible for device memory (copy to a host buffer with
// transfer.Copy instead) and ErrClosed after Free. The slice must not be
// used after Free.
func (b *Buffer[T]) Host() ([]T, error) {
	if b.freed {
		return nil, fmt.Errorf("memspace: view of a freed buffer: %w", ErrClosed)
	}
	if b.n == 0 {
		return []T{}, nil
	}
	if b.block.host == nil {
		return nil, fmt.Errorf("memspace: buffer in space %s: %w", b.block.space.Name(), ErrNotHostAccessible)
	}
	return unsafe.Slice((*T)(b.block.host), b.n), nil
}

// Slice returns a view of elements [lo, hi). The view owns nothing.
func (b *Buffer[T]) Slice(lo, hi int) (*Buffer[T], error) {
	if lo < 0 || hi < lo || hi > b.n {
		return nil, fmt.Errorf("memspace: slice [%d:%d] of %d elements: %w", lo, hi, b.n, ErrInvalidArgument)
	}
	size := int(unsafe.Sizeof(*new(T)))
	blk, err := b.block.Slice(lo*size, (hi-lo)*size)
	if err != nil {
		return nil, err
	}
	return &Buffer[T]{block: blk, n: hi - lo}, nil
}

// Free returns the buffer's memory to its space. Freeing a view, or a
// buffer twice, returns ErrDoubleFree and changes nothing.
func (b *Buffer[T]) Free() error {
	if !b.owned {
		return fmt.Errorf("memspace: free of a buffer view: %w", ErrDoubleFree)
	}
	if b.freed {
		return fmt.Errorf("memspace: buffer freed twice: %w", ErrDoubleFree)
	}
	if err := b.block.space.Free(b.block); err != nil {
		return err
	}
	b.freed = true
	return nil
}
