package comm

import (
	"fmt"
	"unsafe"

	"github.com/xpu-go/xpu/memspace"
	"golang.org/x/exp/constraints"
)

// ReduceLocal computes dst[i] = a[i] op b[i] element-wise over elements of
// dt held in host-accessible blocks of equal length. dst may be a or b (the
// same block), but must not overlap them partially. The blocks need not be
// aligned for dt. It is the kernel of the shared algorithms, exported for
// backends that reduce on the host in their own collectives.
func ReduceLocal(dst, a, b memspace.Block, dt DType, op Op) error {
	if err := op.Check(dt); err != nil {
		return err
	}
	n := dst.Len()
	if a.Len() != n || b.Len() != n {
		return fmt.Errorf("comm: reduce of blocks of %d, %d and %d bytes: %w", dst.Len(), a.Len(), b.Len(), ErrInvalidArgument)
	}
	if n%dt.Size() != 0 {
		return fmt.Errorf("comm: %d-byte block is not a whole number of %v: %w", n, dt, ErrInvalidArgument)
	}
	for _, x := range []memspace.Block{a, b} {
		if !sameBlock(x, dst) && memspace.Overlaps(x, dst) {
			return fmt.Errorf("comm: reduce into %v partially overlapping operand %v: %w", dst, x, ErrInvalidArgument)
		}
	}
	d, err := hostBytes(dst)
	if err != nil {
		return err
	}
	x, err := hostBytes(a)
	if err != nil {
		return err
	}
	y, err := hostBytes(b)
	if err != nil {
		return err
	}
	reduceBytes(d, x, y, dt, op)
	return nil
}

// ReduceBytes is ReduceLocal on host bytes: dst[i] = a[i] op b[i] over
// elements of dt, for a backend that reduces in its own buffers (a ring's
// slot, a shared segment) without making blocks of them. dst may be a or b
// (the same bytes), but must not overlap them partially; the slices need
// not be aligned for dt. It fails with ErrInvalidArgument for a bad type
// or operation, slices of different lengths, or a length that is not a
// whole number of elements.
func ReduceBytes(dst, a, b []byte, dt DType, op Op) error {
	n := len(dst)
	if err := checkElems("reduce", dt, op, n); err != nil {
		return err
	}
	if len(a) != n || len(b) != n {
		return fmt.Errorf("comm: reduce of %d, %d and %d bytes: %w", n, len(a), len(b), ErrInvalidArgument)
	}
	if n == 0 {
		return nil
	}
	if bytesOverlap(dst, a) || bytesOverlap(dst, b) {
		return fmt.Errorf("comm: reduce into bytes partially overlapping an operand: %w", ErrInvalidArgument)
	}
	reduceBytes(dst, a, b, dt, op)
	return nil
}

// bytesOverlap reports whether p and q, of equal nonzero length, share
// bytes without being the same bytes.
func bytesOverlap(p, q []byte) bool {
	pa, qa := uintptr(unsafe.Pointer(unsafe.SliceData(p))), uintptr(unsafe.Pointer(unsafe.SliceData(q)))
	n := uintptr(len(p))
	return pa != qa && pa < qa+n && qa < pa+n
}

// sameBlock reports whether a and b are the same region (in place).
func sameBlock(a, b memspace.Block) bool {
	return a.Addr() == b.Addr() && a.Len() == b.Len() && a.HostPointer() == b.HostPointer() && memspace.Overlaps(a, b)
}

// hostBytes returns the host view of b, or an error matching
// ErrNotSupported for memory the host cannot touch.
func hostBytes(b memspace.Block) ([]byte, error) {
	if b.Len() == 0 {
		return nil, nil
	}
	p, err := b.Bytes()
	if err != nil {
		return nil, fmt.Errorf("comm: the shared collective algorithms need host-accessible memory (%w): %w", err, ErrNotSupported)
	}
	return p, nil
}

// reduceBytes computes dst = a op b over elements of dt. The three slices
// have the same length, a multiple of dt.Size(); dst may alias a or b
// exactly. dt and op have been checked.
func reduceBytes(dst, a, b []byte, dt DType, op Op) {
	if len(dst) == 0 {
		return
	}
	switch dt {
	case Int8:
		reduceOrdered[int8](dst, a, b, op)
	case Int16:
		reduceOrdered[int16](dst, a, b, op)
	case Int32:
		reduceOrdered[int32](dst, a, b, op)
	case Int64:
		reduceOrdered[int64](dst, a, b, op)
	case Uint8:
		reduceOrdered[uint8](dst, a, b, op)
	case Uint16:
		reduceOrdered[uint16](dst, a, b, op)
	case Uint32:
		reduceOrdered[uint32](dst, a, b, op)
	case Uint64:
		reduceOrdered[uint64](dst, a, b, op)
	case Float32:
		reduceOrdered[float32](dst, a, b, op)
	case Float64:
		reduceOrdered[float64](dst, a, b, op)
	case Complex64:
		reduceComplex[complex64](dst, a, b, op)
	case Complex128:
		reduceComplex[complex128](dst, a, b, op)
	}
}

type ordered interface {
	constraints.Integer | constraints.Float
}

// alignedChunk is the size of the aligned staging buffers used when an
// operand is misaligned for its element type.
const alignedChunk = 4096

// aligned reports whether every slice starts at a multiple of E's alignment.
func aligned[E any](ps ...[]byte) bool {
	al := unsafe.Alignof(*new(E))
	for _, p := range ps {
		if uintptr(unsafe.Pointer(unsafe.SliceData(p)))%al != 0 {
			return false
		}
	}
	return true
}

// view reinterprets p, which is aligned for E and a whole number of E, as
// a []E.
func view[E any](p []byte) []E {
	size := int(unsafe.Sizeof(*new(E)))
	return unsafe.Slice((*E)(unsafe.Pointer(unsafe.SliceData(p))), len(p)/size)
}

// staged runs kernel over misaligned operands by copying them through
// aligned staging buffers, alignedChunk bytes at a time.
func staged(dst, a, b []byte, kernel func(dst, a, b []byte)) {
	var sd, sa, sb [alignedChunk / 8]uint64
	bd := unsafe.Slice((*byte)(unsafe.Pointer(&sd[0])), alignedChunk)
	ba := unsafe.Slice((*byte)(unsafe.Pointer(&sa[0])), alignedChunk)
	bb := unsafe.Slice((*byte)(unsafe.Pointer(&sb[0])), alignedChunk)
	for off := 0; off < len(dst); off += alignedChunk {
		n := min(alignedChunk, len(dst)-off)
		copy(ba, a[off:off+n])
		copy(bb, b[off:off+n])
		kernel(bd[:n], ba[:n], bb[:n])
		copy(dst[off:off+n], bd[:n])
	}
}

func reduceOrdered[E ordered](dst, a, b []byte, op Op) {
	if !aligned[E](dst, a, b) {
		staged(dst, a, b, func(d, x, y []byte) { reduceOrdered[E](d, x, y, op) })
		return
	}
	d, x, y := view[E](dst), view[E](a), view[E](b)
	switch op {
	case Sum:
		sumKernel(d, x, y)
	case Prod:
		prodKernel(d, x, y)
	case Min:
		minKernel(d, x, y)
	case Max:
		maxKernel(d, x, y)
	}
}

func reduceComplex[E constraints.Complex](dst, a, b []byte, op Op) {
	if !aligned[E](dst, a, b) {
		staged(dst, a, b, func(d, x, y []byte) { reduceComplex[E](d, x, y, op) })
		return
	}
	d, x, y := view[E](dst), view[E](a), view[E](b)
	switch op {
	case Sum:
		sumKernel(d, x, y)
	case Prod:
		prodKernel(d, x, y)
	}
}

// The kernels compute d[i] = x[i] op y[i], four elements a turn: the
// loop's branch and index run a quarter as often (float64 sums in L2:
// 26 against 23 GB/s here), and the speed depends less on where the linker
// places the loop (a tight loop whose branch straddles a 32-byte boundary
// is not cached on CPUs with Intel's jump-erratum microcode). Each element
// is computed alone, as before: d may be x or y, and the results are the
// same bits. Four loops of one shape, not one generic over an operator: a
// method of a type parameter is called through the instantiation's
// dictionary, not inlined, and this is the hottest loop of every reduction.

func sumKernel[E Number](d, x, y []E) {
	n := len(d)
	x, y = x[:n], y[:n]
	i := 0
	for ; i <= n-4; i += 4 {
		dd, xx, yy := d[i:i+4:i+4], x[i:i+4:i+4], y[i:i+4:i+4]
		dd[0] = xx[0] + yy[0]
		dd[1] = xx[1] + yy[1]
		dd[2] = xx[2] + yy[2]
		dd[3] = xx[3] + yy[3]
	}
	for ; i < n; i++ {
		d[i] = x[i] + y[i]
	}
}

func prodKernel[E Number](d, x, y []E) {
	n := len(d)
	x, y = x[:n], y[:n]
	i := 0
	for ; i <= n-4; i += 4 {
		dd, xx, yy := d[i:i+4:i+4], x[i:i+4:i+4], y[i:i+4:i+4]
		dd[0] = xx[0] * yy[0]
		dd[1] = xx[1] * yy[1]
		dd[2] = xx[2] * yy[2]
		dd[3] = xx[3] * yy[3]
	}
	for ; i < n; i++ {
		d[i] = x[i] * y[i]
	}
}

func minKernel[E ordered](d, x, y []E) {
	n := len(d)
	x, y = x[:n], y[:n]
	i := 0
	for ; i <= n-4; i += 4 {
		dd, xx, yy := d[i:i+4:i+4], x[i:i+4:i+4], y[i:i+4:i+4]
		dd[0] = min(xx[0], yy[0])
		dd[1] = min(xx[1], yy[1])
		dd[2] = min(xx[2], yy[2])
		dd[3] = min(xx[3], yy[3])
	}
	for ; i < n; i++ {
		d[i] = min(x[i], y[i])
	}
}

func maxKernel[E ordered](d, x, y []E) {
	n := len(d)
	x, y = x[:n], y[:n]
	i := 0
	for ; i <= n-4; i += 4 {
		dd, xx, yy := d[i:i+4:i+4], x[i:i+4:i+4], y[i:i+4:i+4]
		dd[0] = max(xx[0], yy[0])
		dd[1] = max(xx[1], yy[1])
		dd[2] = max(xx[2], yy[2])
		dd[3] = max(xx[3], yy[3])
	}
	for ; i < n; i++ {
		d[i] = max(x[i], y[i])
	}
}
