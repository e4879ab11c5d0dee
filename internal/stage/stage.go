package stage

import (
	"unsafe"

	"github.com/xpu-go/xpu/memspace"
	"github.com/xpu-go/xpu/xerr"
)

// Space is the space to stage blocks of sp in: its Stager's, found through
// wrappers, when that is host-accessible (for CUDA device memory, the
// device's pool of page-locked memory), else the Go heap.
func Space(sp memspace.Space) memspace.Space {
	if st, ok := memspace.As[memspace.Stager](sp); ok {
		if h := st.StagingSpace(); h != nil && h.Properties().HostAccessible {
			return h
		}
	}
	return memspace.GoHeap
}

// Heap returns n bytes of Go memory as a block of the Go heap's, which the
// garbage collector frees once no block refers to them; the empty block
// of the Go heap for n 0.
func Heap(n int) memspace.Block {
	if n == 0 {
		return memspace.NewBlock(memspace.GoHeap, 0, 0, nil)
	}
	w := make([]uint64, (n+7)/8)
	p := unsafe.Pointer(unsafe.SliceData(w))
	return memspace.NewBlock(memspace.GoHeap, memspace.Addr(uintptr(p)), n, p)
}

// Alloc allocates a host stand-in of n bytes in sp (from Space): Heap's
// for the Go heap or n 0, else a block of sp, which must carry a host
// mapping (an error matching ErrNotSupported otherwise, the block given
// back).
func Alloc(sp memspace.Space, n int) (memspace.Block, error) {
	if n == 0 || sp == memspace.GoHeap {
		return Heap(n), nil
	}
	b, err := sp.Allocate(n, 0)
	if err != nil {
		return memspace.Block{}, err
	}
	if b.HostPointer() == nil {
		_ = sp.Free(b)
		return memspace.Block{}, xerr.Detail(xerr.ErrNotSupported, "staging space %s gave block %v, which the host cannot touch", sp.Name(), b)
	}
	return b, nil
}

// Free frees a stand-in of Alloc: nothing for an empty one or the Go
// heap's.
func Free(b memspace.Block) error {
	if b.Len() == 0 || b.Space() == memspace.GoHeap {
		return nil
	}
	return b.Space().Free(b)
}
