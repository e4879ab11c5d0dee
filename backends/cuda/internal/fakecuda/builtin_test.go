//go:build cgo

package fakecuda

import (
	"bytes"
	"math"
	"testing"
	"unsafe"

	"github.com/xpu-go/xpu/backends/cuda/internal/kernels"
)

// The fake's C kernels against the spec, through the real PTX and the
// kernels package's table of names and signatures: every built-in kernel
// is loaded from kernels.PTX, launched with arguments laid out by its
// Params, and its result compared bit for bit with a Go reference.

type elem interface {
	~int32 | ~int64 | ~uint32 | ~uint64 | ~float32 | ~float64
}

// slot is v as a 64-bit kernel-argument slot (little-endian, zero-padded).
func slot[T elem](v T) uint64 {
	var u uint64
	*(*T)(unsafe.Pointer(&u)) = v
	return u
}

func asBytes[T elem](v []T) []byte {
	return unsafe.Slice((*byte)(unsafe.Pointer(&v[0])), len(v)*int(unsafe.Sizeof(v[0])))
}

// fmin and fmax: a NaN operand is ignored unless both are; for integers
// b < a ? b : a and b > a ? b : a.
func fmin[T elem](a, b T) T {
	if a != a {
		return b
	}
	if b != b || !(b < a) {
		return a
	}
	return b
}

func fmax[T elem](a, b T) T {
	if a != a {
		return b
	}
	if b != b || !(b > a) {
		return a
	}
	return b
}

// limits returns the identities of min and max for T.
func limits[T elem]() (hi, lo T) {
	var z T
	// variables, not constants: a constant would have to fit every T
	i32hi, i32lo := int64(math.MaxInt32), int64(math.MinInt32)
	i64hi, i64lo := int64(math.MaxInt64), int64(math.MinInt64)
	u32hi, u64hi := uint64(math.MaxUint32), uint64(math.MaxUint64)
	inf := math.Inf(1)
	switch any(z).(type) {
	case int32:
		return T(i32hi), T(i32lo)
	case int64:
		return T(i64hi), T(i64lo)
	case uint32:
		return T(u32hi), 0
	case uint64:
		return T(u64hi), 0
	default:
		return T(inf), T(-inf)
	}
}

// reduceRef computes the block partials of the spec: thread t of block b
// folds i = b*B + t + k*G*B, then a halving tree.
func reduceRef[T elem](in []T, G, B int, ident T, op func(a, b T) T) []T {
	out := make([]T, G)
	acc := make([]T, B)
	for b := 0; b < G; b++ {
		for t := 0; t < B; t++ {
			a := ident
			for i := b*B + t; i < len(in); i += G * B {
				a = op(a, in[i])
			}
			acc[t] = a
		}
		for s := B / 2; s > 0; s /= 2 {
			for t := 0; t < s; t++ {
				acc[t] = op(acc[t], acc[t+s])
			}
		}
		out[b] = acc[0]
	}
	return out
}

func checkBuiltins[T elem](t *testing.T, f *fake, m, s unsafe.Pointer, typ kernels.Type) {
	const n, G, B = 1000, 3, 64
	var zero T
	size := uint64(unsafe.Sizeof(zero))
	isFloat := typ.Float()
	x, y := make([]T, n), make([]T, n)
	frac, tiny, nan, seven := 0.375, 1e-3, math.NaN(), 7.0
	for i := range x {
		v := int64(i*37%201) - 100
		x[i] = T(v)
		y[i] = T(v * 3)
		if isFloat {
			x[i] += T(frac)
			y[i] = y[i]/T(seven) + T(tiny)
		}
	}
	if isFloat {
		x[17], x[500] = T(nan), T(nan) // ignored by min and max
	}
	dx, dy, dz := f.alloc(n*size), f.alloc(n*size), f.alloc(n*size)
	defer func() {
		f.cuMemFree(dx)
		f.cuMemFree(dy)
		f.cuMemFree(dz)
	}()
	a := T(3)
	if isFloat {
		fa := -1.625
		a = T(fa)
	}
	hi, lo := limits[T]()
	for _, op := range kernels.Ops() {
		k, ok := kernels.Lookup(op, typ)
		if !ok {
			t.Fatalf("no kernel %v %v", op, typ)
		}
		f.write(dx, asBytes(x))
		f.write(dy, asBytes(y))
		var want []T
		var args []uint64
		grid, block, shm := uint32(5), uint32(96), uint32(0)
		switch op {
		case kernels.Fill:
			want = make([]T, n)
			for i := range want {
				want[i] = a
			}
			args = []uint64{dx, slot(a), n}
		case kernels.Scale:
			want = make([]T, n)
			for i := range want {
				want[i] = a * x[i]
			}
			args = []uint64{dx, slot(a), n}
		case kernels.Axpy:
			want = make([]T, n)
			for i := range want {
				want[i] = T(a*x[i]) + y[i]
			}
			args = []uint64{dy, dx, slot(a), n}
		case kernels.Add:
			want = make([]T, n)
			for i := range want {
				want[i] = x[i] + y[i]
			}
			args = []uint64{dz, dx, dy, n}
		case kernels.Sum:
			want = reduceRef(x, G, B, 0, func(a, b T) T { return a + b })
		case kernels.Min:
			want = reduceRef(x, G, B, hi, fmin[T])
		case kernels.Max:
			want = reduceRef(x, G, B, lo, fmax[T])
		}
		if op.Reduction() {
			grid, block, shm = G, B, uint32(k.SharedBytes(B))
			args = []uint64{dz, dx, n}
		}
		if len(args) != len(k.Params) {
			t.Fatalf("%s: %d arguments for %d params", k.Name, len(args), len(k.Params))
		}
		for i, p := range k.Params {
			if p.Size() != 8 && p.Size() != int(size) {
				t.Fatalf("%s: param %d of %d bytes", k.Name, i, p.Size())
			}
		}
		fn := f.fn(m, k.Name)
		f.ok(f.cuLaunch(fn, grid, block, shm, s, args...), "launch "+k.Name)
		f.ok(f.cuStreamSynchronize(s), "sync "+k.Name)
		out := map[kernels.Op]dptr{kernels.Fill: dx, kernels.Scale: dx, kernels.Axpy: dy}[op]
		if out == 0 {
			out = dz
		}
		got := f.read(out, len(want)*int(size))
		if !bytes.Equal(got, asBytes(want)) {
			t.Errorf("%s: result differs from the reference\n got % x\nwant % x", k.Name, got[:min(len(got), 64)],
				asBytes(want)[:min(len(got), 64)])
		}
	}
}

func TestBuiltinKernelsAgainstTheSpec(t *testing.T) {
	f := loadCtx0(t)
	m, log, r := f.cuModuleLoad(kernels.PTX[:len(kernels.PTX)-1])
	if r != rSuccess {
		t.Fatalf("kernels.PTX: %s (%d): %s", f.cuErrorName(r), r, log)
	}
	tm, log, r := f.cuModuleLoad(kernels.TestPTX[:len(kernels.TestPTX)-1])
	if r != rSuccess {
		t.Fatalf("kernels.TestPTX: %s (%d): %s", f.cuErrorName(r), r, log)
	}
	for _, k := range kernels.TestKernels() {
		f.fn(tm, k.Name)
	}
	f.ok(f.cuLaunch(f.fn(tm, kernels.TestEmpty), 1, 1, 0, nil), "xpu_test_empty")
	s := f.stream()
	checkBuiltins[int32](t, f, m, s, kernels.Int32)
	checkBuiltins[int64](t, f, m, s, kernels.Int64)
	checkBuiltins[uint32](t, f, m, s, kernels.Uint32)
	checkBuiltins[uint64](t, f, m, s, kernels.Uint64)
	checkBuiltins[float32](t, f, m, s, kernels.Float32)
	checkBuiltins[float64](t, f, m, s, kernels.Float64)
	if st := f.ctl.Stats(); st.KernelLaunches != 1+6*7 {
		t.Fatalf("stats %+v", st)
	}
	f.ok(f.cuStreamDestroy(s), "destroy")
	f.ok(f.cuModuleUnload(m), "unload")
	f.ok(f.cuModuleUnload(tm), "unload")
	f.releaseClean()
}
