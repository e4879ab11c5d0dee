package cuda

import (
	"context"
	"sync"
	"unsafe"

	"github.com/xpu-go/xpu/backends/cuda/internal/cu"
	"github.com/xpu-go/xpu/backends/cuda/internal/kernels"
	"github.com/xpu-go/xpu/comm"
	"github.com/xpu-go/xpu/executor"
	"github.com/xpu-go/xpu/memspace"
	"github.com/xpu-go/xpu/xerr"
)

// Built-in kernels. Each runs in stream order on a Stream of the buffers'
// device (device, pinned or managed memory). The element types are int32,
// int64, uint32, uint64, float32 and float64 (int and uint too, as 64-bit
// integers); Fill takes any element of 1, 2, 4 or 8 bytes. Another type
// is an error matching xerr.ErrNotSupported that names it.

const elementwiseBlock = 256

// maxGrid bounds the grid of the grid-stride kernels.
const maxGrid = 4096

func gridFor(n int) int { return max(1, min((n+elementwiseBlock-1)/elementwiseBlock, maxGrid)) }

// builtin returns the built-in kernel op for type t, loading the module on
// first use.
func (x *Executor) builtin(op kernels.Op, t kernels.Type) (*Function, error) {
	name, ok := kernels.Name(op, t)
	if !ok {
		return nil, xerr.Dev(Name, x.d.idx, op.String(), xerr.Detail(xerr.ErrNotSupported, "no built-in kernel for %v", t))
	}
	x.builtinMu.Lock()
	m := x.builtinMod
	if m == nil {
		var err error
		if m, err = x.LoadModule(kernels.PTX); err != nil {
			x.builtinMu.Unlock()
			return nil, err
		}
		x.builtinMod = m
	}
	x.builtinMu.Unlock()
	return m.Function(name)
}

func typeOf[T any](op string, x *Executor) (kernels.Type, error) {
	t, ok := kernels.TypeOf[T]()
	if !ok {
		var z T
		return 0, xerr.Dev(Name, x.d.idx, op, xerr.Detail(xerr.ErrNotSupported, "no built-in kernel for element type %T", z))
	}
	return t, nil
}

func streamOf(op string, s executor.Stream) (*Stream, error) {
	st, ok := s.(*Stream)
	if !ok {
		return nil, xerr.Op(Name, op, xerr.Detail(xerr.ErrNotSupported, "stream %T is not a cuda stream", s))
	}
	return st, nil
}

// value appends v, a number of type T, as a kernel argument.
func value[T any](a *cu.Args, v T) {
	p := unsafe.Pointer(&v)
	switch unsafe.Sizeof(v) {
	case 1:
		a.U8(*(*uint8)(p))
	case 2:
		a.U16(*(*uint16)(p))
	case 4:
		a.U32(*(*uint32)(p))
	default:
		a.U64(*(*uint64)(p))
	}
}

// run launches a built-in kernel of type T with the pointers and values
// in args, over n elements.
func run[T any](op kernels.Op, s executor.Stream, n int, grid, block, shared int, args func(x *Executor, a *cu.Args) error) error {
	st, err := streamOf(op.String(), s)
	if err != nil {
		return err
	}
	t, err := typeOf[T](op.String(), st.x)
	if err != nil {
		return err
	}
	f, err := st.x.builtin(op, t)
	if err != nil {
		return err
	}
	var a cu.Args
	if err := args(st.x, &a); err != nil {
		return xerr.Dev(Name, st.x.d.idx, op.String(), err)
	}
	return st.launch(f, Config{Grid: Dim3{X: grid}, Block: Dim3{X: block}, Shared: shared}, &a)
}

func ptrOf[T any](x *Executor, b *memspace.Buffer[T], what string) (cu.DevPtr, error) {
	if b == nil {
		return 0, xerr.Detail(xerr.ErrInvalidArgument, "nil %s buffer", what)
	}
	return x.devicePointer(b.Block())
}

// streamPtr is streamOf(op, s) and ptrOf(b) on its executor, b called
// what in the error of op.
func streamPtr[T any](op, what string, s executor.Stream, b *memspace.Buffer[T]) (*Stream, cu.DevPtr, error) {
	st, err := streamOf(op, s)
	if err != nil {
		return nil, 0, err
	}
	p, err := ptrOf(st.x, b, what)
	if err != nil {
		return nil, 0, xerr.Dev(Name, st.x.d.idx, op, err)
	}
	return st, p, nil
}

func sameLen(n int, bs ...int) error {
	for _, m := range bs {
		if m != n {
			return xerr.Detail(xerr.ErrInvalidArgument, "buffers of %d and %d elements", n, m)
		}
	}
	return nil
}

// Fill sets every element of b to v.
func Fill[T any](s executor.Stream, b *memspace.Buffer[T], v T) error {
	st, p, err := streamPtr("fill", "fill", s, b)
	if err != nil {
		return err
	}
	n := b.Len()
	if n == 0 {
		return nil
	}
	l, cx := st.x.d.lib, st.x.d.ctx
	vp := unsafe.Pointer(&v)
	switch unsafe.Sizeof(v) {
	case 1:
		c := *(*uint8)(vp)
		return st.submit("fill", func() error { return l.MemsetD8Async(cx, p, c, n, st.h) })
	case 2:
		c := *(*uint16)(vp)
		return st.submit("fill", func() error { return l.MemsetD16Async(cx, p, c, n, st.h) })
	case 4:
		c := *(*uint32)(vp)
		return st.submit("fill", func() error { return l.MemsetD32Async(cx, p, c, n, st.h) })
	case 8:
		bits := *(*uint64)(vp)
		return run[uint64](kernels.Fill, s, n, gridFor(n), elementwiseBlock, 0, func(x *Executor, a *cu.Args) error {
			a.Ptr(p)
			a.U64(bits)
			a.U64(uint64(n))
			return nil
		})
	}
	return xerr.Dev(Name, st.x.d.idx, "fill", xerr.Detail(xerr.ErrNotSupported, "no fill for %d-byte elements (%T)", unsafe.Sizeof(v), v))
}

// Scale multiplies every element of b by a.
func Scale[T any](s executor.Stream, b *memspace.Buffer[T], a T) error {
	if b == nil {
		return xerr.Op(Name, "scale", xerr.Detail(xerr.ErrInvalidArgument, "nil buffer"))
	}
	n := b.Len()
	return run[T](kernels.Scale, s, n, gridFor(n), elementwiseBlock, 0, func(x *Executor, args *cu.Args) error {
		p, err := ptrOf(x, b, "scale")
		if err != nil {
			return err
		}
		args.Ptr(p)
		value(args, a)
		args.U64(uint64(n))
		return nil
	})
}

// Axpy sets y to a*x + y, element by element.
func Axpy[T any](s executor.Stream, a T, x, y *memspace.Buffer[T]) error {
	if x == nil || y == nil {
		return xerr.Op(Name, "axpy", xerr.Detail(xerr.ErrInvalidArgument, "nil buffer"))
	}
	n := y.Len()
	return run[T](kernels.Axpy, s, n, gridFor(n), elementwiseBlock, 0, func(ex *Executor, args *cu.Args) error {
		if err := sameLen(n, x.Len()); err != nil {
			return err
		}
		py, err := ptrOf(ex, y, "y")
		if err != nil {
			return err
		}
		px, err := ptrOf(ex, x, "x")
		if err != nil {
			return err
		}
		args.Ptr(py)
		args.Ptr(px)
		value(args, a)
		args.U64(uint64(n))
		return nil
	})
}

// Add sets z to x + y, element by element (z may be x or y).
func Add[T any](s executor.Stream, z, x, y *memspace.Buffer[T]) error {
	if x == nil || y == nil || z == nil {
		return xerr.Op(Name, "add", xerr.Detail(xerr.ErrInvalidArgument, "nil buffer"))
	}
	n := z.Len()
	return run[T](kernels.Add, s, n, gridFor(n), elementwiseBlock, 0, func(ex *Executor, args *cu.Args) error {
		if err := sameLen(n, x.Len(), y.Len()); err != nil {
			return err
		}
		for _, b := range []*memspace.Buffer[T]{z, x, y} {
			p, err := ptrOf(ex, b, "add")
			if err != nil {
				return err
			}
			args.Ptr(p)
		}
		args.U64(uint64(n))
		return nil
	})
}

// reducer is a stream's scratch for reductions: device memory for the
// blocks' partial results and the result, and a pinned word the result is
// read back through. Reductions on one stream are ordered, so one scratch
// serves them all; mu serialises the read-backs.
type reducer struct {
	mu      sync.Mutex
	once    sync.Once
	x       *Executor
	partial cu.DevPtr // reduceGrid+1 words of 16 bytes
	host    unsafe.Pointer
	err     error
}

// reduceGrid is the grid of a reduction's first pass.
const reduceGrid = 1024

func (s *Stream) scratch() (*reducer, error) {
	s.mu.Lock()
	if s.red == nil {
		s.red = &reducer{x: s.x}
	}
	r := s.red
	s.mu.Unlock()
	r.once.Do(func() {
		l, cx := r.x.d.lib, r.x.d.ctx
		if r.partial, r.err = l.MemAlloc(cx, (reduceGrid+1)*16); r.err != nil {
			return
		}
		if r.host, r.err = l.MemHostAlloc(cx, 16, cu.MemHostAllocPortable); r.err != nil {
			_ = l.MemFree(cx, r.partial)
			r.partial = 0
		}
	})
	return r, devErr(s.x.d.idx, "reduce", r.err)
}

func (r *reducer) close() {
	l, cx := r.x.d.lib, r.x.d.ctx
	if r.partial != 0 {
		_ = l.MemFree(cx, r.partial)
	}
	if r.host != nil {
		_ = l.MemFreeHost(cx, r.host)
	}
}

func reduceOp(op comm.Op) (kernels.Op, error) {
	switch op {
	case comm.Sum:
		return kernels.Sum, nil
	case comm.Min:
		return kernels.Min, nil
	case comm.Max:
		return kernels.Max, nil
	}
	return 0, xerr.Op(Name, "reduce", xerr.Detail(xerr.ErrNotSupported, "no built-in reduction %v (sum, min and max are)", op))
}

// ReduceInto sets dst's first element to op (comm.Sum, comm.Min or
// comm.Max) over src's elements, in stream order; an empty src gives the
// operation's identity.
func ReduceInto[T any](s executor.Stream, op comm.Op, dst, src *memspace.Buffer[T]) error {
	kop, err := reduceOp(op)
	if err != nil {
		return err
	}
	if dst == nil || src == nil {
		return xerr.Op(Name, "reduce", xerr.Detail(xerr.ErrInvalidArgument, "nil buffer"))
	}
	if dst.Len() < 1 {
		return xerr.Op(Name, "reduce", xerr.Detail(xerr.ErrInvalidArgument, "the result buffer is empty"))
	}
	st, pd, err := streamPtr("reduce", "result", s, dst)
	if err != nil {
		return err
	}
	return reduce(st, kop, pd, src)
}

// reduce is ReduceInto with a kernel op and a device address.
func reduce[T any](st *Stream, op kernels.Op, dst cu.DevPtr, src *memspace.Buffer[T]) error {
	t, err := typeOf[T](op.String(), st.x)
	if err != nil {
		return err
	}
	ps, err := ptrOf(st.x, src, "source")
	if err != nil {
		return xerr.Dev(Name, st.x.d.idx, "reduce", err)
	}
	r, err := st.scratch()
	if err != nil {
		return err
	}
	f, err := st.x.builtin(op, t)
	if err != nil {
		return err
	}
	n, b := src.Len(), kernels.ReduceBlock
	shared := b * t.Size()
	grid := max(1, min((n+b-1)/b, reduceGrid))
	var a1 cu.Args
	a1.Ptr(r.partial)
	a1.Ptr(ps)
	a1.U64(uint64(n))
	if err := st.launch(f, Config{Grid: Dim3{X: grid}, Block: Dim3{X: b}, Shared: shared}, &a1); err != nil {
		return err
	}
	var a2 cu.Args
	a2.Ptr(dst)
	a2.Ptr(r.partial)
	a2.U64(uint64(grid))
	return st.launch(f, Config{Grid: Dim3{X: 1}, Block: Dim3{X: b}, Shared: shared}, &a2)
}

// reduceTo reads the result of a reduction back to the host.
func reduceTo[T any](ctx context.Context, s executor.Stream, op comm.Op, src *memspace.Buffer[T]) (T, error) {
	var zero T
	kop, err := reduceOp(op)
	if err != nil {
		return zero, err
	}
	st, err := streamOf(kop.String(), s)
	if err != nil {
		return zero, err
	}
	if src == nil {
		return zero, xerr.Op(Name, kop.String(), xerr.Detail(xerr.ErrInvalidArgument, "nil buffer"))
	}
	r, err := st.scratch()
	if err != nil {
		return zero, err
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	result := r.partial + reduceGrid*16
	if err := reduce(st, kop, result, src); err != nil {
		return zero, err
	}
	l, cx := st.x.d.lib, st.x.d.ctx
	size := int(unsafe.Sizeof(zero))
	if err := st.submit(kop.String(), func() error { return l.MemcpyDtoHAsync(cx, r.host, result, size, st.h) }); err != nil {
		return zero, err
	}
	if err := st.Synchronize(ctx); err != nil {
		return zero, err
	}
	return *(*T)(r.host), nil
}

// Sum returns the sum of src's elements, waiting for the stream.
func Sum[T any](ctx context.Context, s executor.Stream, src *memspace.Buffer[T]) (T, error) {
	return reduceTo(ctx, s, comm.Sum, src)
}

// Min returns the least of src's elements (for floats, NaNs are ignored
// unless all are NaN), waiting for the stream.
func Min[T any](ctx context.Context, s executor.Stream, src *memspace.Buffer[T]) (T, error) {
	return reduceTo(ctx, s, comm.Min, src)
}

// Max returns the greatest of src's elements, waiting for the stream.
func Max[T any](ctx context.Context, s executor.Stream, src *memspace.Buffer[T]) (T, error) {
	return reduceTo(ctx, s, comm.Max, src)
}
