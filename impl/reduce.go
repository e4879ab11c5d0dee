package impl

import (
	"fmt"
	"unsafe"

	"golang.org/x/exp/constraints"

	"github.com/xpu-go/xpu/xerr"
)

// The wire values of comm.DType and comm.Op, which the kernels switch on:
// comm's constants are these numbers (its tests check them all).
const (
	dtInt8 = 1 + iota
	dtInt16
	dtInt32
	dtInt64
	dtUint8
	dtUint16
	dtUint32
	dtUint64
	dtFloat32
	dtFloat64
	dtComplex64
	dtComplex128
)

const (
	opSum = 1 + iota
	opProd
	opMin
	opMax
)

// ReduceBytes computes dst[i] = a[i] op b[i] over elements of dt, a
// comm.DType, with op, a comm.Op: the kernel of the shared collective
// algorithms, for a backend that reduces on the host in its own buffers (a
// ring's slot, a shared segment). dst may be a or b (the same bytes), but
// must not overlap them partially; the slices need not be aligned for dt.
// It fails with an error matching xerr.ErrInvalidArgument for a bad type
// or operation (Min and Max of complex numbers), slices of different
// lengths, a length that is not a whole number of elements, or a partial
// overlap.
func ReduceBytes[D interface {
	~uint8
	fmt.Stringer
	Size() int
}, O interface {
	~uint8
	fmt.Stringer
}](dst, a, b []byte, dt D, op O) error {
	n, size := len(dst), dt.Size()
	switch {
	case size == 0 || op < opSum || op > opMax:
		return xerr.Detail(xerr.ErrInvalidArgument, "reduction %v of %v", op, dt)
	case (op == opMin || op == opMax) && (dt == dtComplex64 || dt == dtComplex128):
		return xerr.Detail(xerr.ErrInvalidArgument, "reduction %v of %v: complex numbers are not ordered", op, dt)
	case len(a) != n || len(b) != n:
		return xerr.Detail(xerr.ErrInvalidArgument, "reduce of %d, %d and %d bytes", n, len(a), len(b))
	case n%size != 0:
		return xerr.Detail(xerr.ErrInvalidArgument, "reduce of %d bytes, not a whole number of %v", n, dt)
	case n == 0:
		return nil
	case bytesOverlap(dst, a) || bytesOverlap(dst, b):
		return xerr.Detail(xerr.ErrInvalidArgument, "reduce into bytes partially overlapping an operand")
	}
	reduce(dst, a, b, uint8(dt), uint8(op))
	return nil
}

// bytesOverlap reports whether p and q, of equal nonzero length, share
// bytes without being the same bytes.
func bytesOverlap(p, q []byte) bool {
	pa, qa := uintptr(unsafe.Pointer(unsafe.SliceData(p))), uintptr(unsafe.Pointer(unsafe.SliceData(q)))
	n := uintptr(len(p))
	return pa != qa && pa < qa+n && qa < pa+n
}

// number is every element type a reduction takes (comm.Number).
type number interface {
	constraints.Integer | constraints.Float | constraints.Complex
}

// reduce computes dst = a op b over elements of dt. The three slices have
// the same length, a multiple of dt's size; dst may alias a or b exactly.
// dt and op have been checked.
func reduce(dst, a, b []byte, dt, op uint8) {
	if len(dst) == 0 {
		return
	}
	switch dt {
	case dtInt8:
		reduceOrdered[int8](dst, a, b, op)
	case dtInt16:
		reduceOrdered[int16](dst, a, b, op)
	case dtInt32:
		reduceOrdered[int32](dst, a, b, op)
	case dtInt64:
		reduceOrdered[int64](dst, a, b, op)
	case dtUint8:
		reduceOrdered[uint8](dst, a, b, op)
	case dtUint16:
		reduceOrdered[uint16](dst, a, b, op)
	case dtUint32:
		reduceOrdered[uint32](dst, a, b, op)
	case dtUint64:
		reduceOrdered[uint64](dst, a, b, op)
	case dtFloat32:
		reduceOrdered[float32](dst, a, b, op)
	case dtFloat64:
		reduceOrdered[float64](dst, a, b, op)
	case dtComplex64:
		reduceComplex[complex64](dst, a, b, op)
	case dtComplex128:
		reduceComplex[complex128](dst, a, b, op)
	}
}

type ordered interface {
	constraints.Integer | constraints.Float
}

// alignedChunk is the size of the aligned staging buffers used when an
// operand is misaligned for its element type.
const alignedChunk = 4096

// aligned reports whether the three slices start at multiples of E's
// alignment (three arguments, not variadic: a slice of slices built per
// call costs a small reduction more than its arithmetic).
func aligned[E any](p, q, r []byte) bool {
	al := unsafe.Alignof(*new(E)) - 1
	at := func(s []byte) uintptr { return uintptr(unsafe.Pointer(unsafe.SliceData(s))) }
	return (at(p)|at(q)|at(r))&al == 0
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

func reduceOrdered[E ordered](dst, a, b []byte, op uint8) {
	if !aligned[E](dst, a, b) {
		staged(dst, a, b, func(d, x, y []byte) { reduceOrdered[E](d, x, y, op) })
		return
	}
	if len(dst) == int(unsafe.Sizeof(*new(E))) {
		// One element (a small allreduce's usual vector): computed here,
		// as the kernels compute each element, without their loops.
		d, x, y := (*E)(unsafe.Pointer(&dst[0])), *(*E)(unsafe.Pointer(&a[0])), *(*E)(unsafe.Pointer(&b[0]))
		switch op {
		case opSum:
			*d = x + y
		case opProd:
			*d = x * y
		case opMin:
			*d = min(x, y)
		case opMax:
			*d = max(x, y)
		}
		return
	}
	d, x, y := view[E](dst), view[E](a), view[E](b)
	switch op {
	case opSum:
		sumKernel(d, x, y)
	case opProd:
		prodKernel(d, x, y)
	case opMin:
		minKernel(d, x, y)
	case opMax:
		maxKernel(d, x, y)
	}
}

func reduceComplex[E constraints.Complex](dst, a, b []byte, op uint8) {
	if !aligned[E](dst, a, b) {
		staged(dst, a, b, func(d, x, y []byte) { reduceComplex[E](d, x, y, op) })
		return
	}
	d, x, y := view[E](dst), view[E](a), view[E](b)
	switch op {
	case opSum:
		sumKernel(d, x, y)
	case opProd:
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

func sumKernel[E number](d, x, y []E) {
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

func prodKernel[E number](d, x, y []E) {
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
