package comm_test

import (
	"testing"
	"unsafe"

	"github.com/stretchr/testify/require"

	"github.com/xpu-go/xpu/comm"
	"github.com/xpu-go/xpu/memspace"
)

// bytesOf copies s into a new byte slice starting at offset off, so that
// off = 1 makes every multi-byte element misaligned.
func bytesOf[T any](s []T, off int) []byte {
	size := int(unsafe.Sizeof(*new(T)))
	out := make([]byte, off+len(s)*size)
	if len(s) > 0 {
		copy(out[off:], unsafe.Slice((*byte)(unsafe.Pointer(&s[0])), len(s)*size))
	}
	return out
}

// fromBytes copies p into a new, aligned []T.
func fromBytes[T any](p []byte) []T {
	size := int(unsafe.Sizeof(*new(T)))
	out := make([]T, len(p)/size)
	if len(out) > 0 {
		copy(unsafe.Slice((*byte)(unsafe.Pointer(&out[0])), len(p)), p)
	}
	return out
}

func testReduceLocal[T comm.Number](t *testing.T) {
	dt := comm.DTypeOf[T]()
	for _, op := range []comm.Op{comm.Sum, comm.Prod, comm.Min, comm.Max} {
		if dt.IsComplex() && (op == comm.Min || op == comm.Max) {
			a := buf(t, make([]T, 2)).Block()
			require.ErrorIs(t, comm.ReduceLocal(a, a, a, dt, op), comm.ErrInvalidArgument)
			continue
		}
		// Long enough to cross the staging chunk of the misaligned path.
		const n = 1500
		a, b := inputs[T](op, 1, n), inputs[T](op, 6, n)
		want := make([]T, n)
		for i := range want {
			want[i] = apply(op, a[i], b[i])
		}
		for _, off := range []int{0, 1} {
			pa, pb, pd := bytesOf(a, off), bytesOf(b, off), make([]byte, off+n*dt.Size())
			blk := func(p []byte) memspace.Block { return sub(t, buf(t, p).Block(), off) }
			require.NoError(t, comm.ReduceLocal(blk(pd), blk(pa), blk(pb), dt, op))
			require.Equal(t, want, fromBytes[T](pd[off:]), "%v offset %d", op, off)
			// In place: dst is a.
			require.NoError(t, comm.ReduceLocal(blk(pa), blk(pa), blk(pb), dt, op))
			require.Equal(t, want, fromBytes[T](pa[off:]), "%v in place, offset %d", op, off)
			// The same on bytes, into dst and in place (dst is b).
			pa, pd = bytesOf(a, off), make([]byte, off+n*dt.Size())
			require.NoError(t, comm.ReduceBytes(pd[off:], pa[off:], pb[off:], dt, op))
			require.Equal(t, want, fromBytes[T](pd[off:]), "bytes: %v offset %d", op, off)
			require.NoError(t, comm.ReduceBytes(pb[off:], pa[off:], pb[off:], dt, op))
			require.Equal(t, want, fromBytes[T](pb[off:]), "bytes: %v in place, offset %d", op, off)
		}
	}
}

// sub drops the first off bytes of b.
func sub(t *testing.T, b memspace.Block, off int) memspace.Block {
	s, err := b.Slice(off, b.Len()-off)
	require.NoError(t, err)
	return s
}

func TestReduceLocal(t *testing.T) {
	t.Run("int8", testReduceLocal[int8])
	t.Run("int16", testReduceLocal[int16])
	t.Run("int32", testReduceLocal[int32])
	t.Run("int64", testReduceLocal[int64])
	t.Run("uint8", testReduceLocal[uint8])
	t.Run("uint16", testReduceLocal[uint16])
	t.Run("uint32", testReduceLocal[uint32])
	t.Run("uint64", testReduceLocal[uint64])
	t.Run("float32", testReduceLocal[float32])
	t.Run("float64", testReduceLocal[float64])
	t.Run("Celsius", testReduceLocal[Celsius])
	t.Run("complex64", testReduceLocal[complex64])
	t.Run("complex128", testReduceLocal[complex128])
}

func TestReduceLocalMinMaxNaN(t *testing.T) {
	// NaN wins whatever the order, so partners folding in either order agree.
	nan := float64(0)
	nan /= nan
	for _, op := range []comm.Op{comm.Min, comm.Max} {
		for _, pair := range [][2]float64{{nan, 1}, {1, nan}} {
			d := buf(t, []float64{0})
			require.NoError(t, comm.ReduceLocal(d.Block(), buf(t, pair[:1]).Block(), buf(t, pair[1:]).Block(), comm.Float64, op))
			got, _ := d.Host()
			require.NotEqual(t, got[0], got[0], "%v of %v", op, pair)
		}
	}
}

func TestReduceLocalErrors(t *testing.T) {
	x := buf(t, make([]float64, 8))
	a, _ := x.Slice(0, 4)
	b, _ := x.Slice(2, 6)
	other := buf(t, make([]float64, 4))
	d, err := memspace.Alloc[float64](deviceSpace{}, 4)
	require.NoError(t, err)
	cases := map[string]struct {
		dst, a, b memspace.Block
		dt        comm.DType
		op        comm.Op
		want      error
	}{
		"lengths":         {a.Block(), other.Block(), buf(t, make([]float64, 3)).Block(), comm.Float64, comm.Sum, comm.ErrInvalidArgument},
		"partial overlap": {b.Block(), a.Block(), other.Block(), comm.Float64, comm.Sum, comm.ErrInvalidArgument},
		"not whole":       {sub(t, a.Block(), 4), sub(t, other.Block(), 4), sub(t, other.Block(), 4), comm.Float64, comm.Sum, comm.ErrInvalidArgument},
		"bad op":          {a.Block(), a.Block(), other.Block(), comm.Float64, comm.Op(9), comm.ErrInvalidArgument},
		"bad dtype":       {a.Block(), a.Block(), other.Block(), comm.InvalidDType, comm.Sum, comm.ErrInvalidArgument},
		"device memory":   {d.Block(), other.Block(), other.Block(), comm.Float64, comm.Sum, comm.ErrNotSupported},
		"complex min":     {a.Block(), a.Block(), other.Block(), comm.Complex64, comm.Min, comm.ErrInvalidArgument},
		"complex128 max":  {x.Block(), x.Block(), x.Block(), comm.Complex128, comm.Max, comm.ErrInvalidArgument},
	}
	for name, tc := range cases {
		require.ErrorIs(t, comm.ReduceLocal(tc.dst, tc.a, tc.b, tc.dt, tc.op), tc.want, name)
	}
}

func TestReduceBytesErrors(t *testing.T) {
	x := make([]byte, 64)
	cases := map[string]struct {
		dst, a, b []byte
		dt        comm.DType
		op        comm.Op
	}{
		"lengths":         {x[:16], x[16:32], x[32:40], comm.Float64, comm.Sum},
		"partial overlap": {x[8:24], x[:16], x[32:48], comm.Float64, comm.Sum},
		"not whole":       {x[:12], x[16:28], x[32:44], comm.Float64, comm.Sum},
		"bad op":          {x[:16], x[16:32], x[32:48], comm.Float64, comm.Op(9)},
		"bad dtype":       {x[:16], x[16:32], x[32:48], comm.InvalidDType, comm.Sum},
		"complex min":     {x[:16], x[16:32], x[32:48], comm.Complex64, comm.Min},
	}
	for name, tc := range cases {
		require.ErrorIs(t, comm.ReduceBytes(tc.dst, tc.a, tc.b, tc.dt, tc.op), comm.ErrInvalidArgument, name)
	}
	require.NoError(t, comm.ReduceBytes(nil, nil, nil, comm.Float64, comm.Sum), "empty")
}
