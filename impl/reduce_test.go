package impl_test

import (
	"encoding/binary"
	"fmt"
	"math"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/xpu-go/xpu/comm"
	"github.com/xpu-go/xpu/impl"
	"github.com/xpu-go/xpu/xerr"
)

// TestReduceBytesWireValues runs impl.ReduceBytes with every comm.DType and
// comm.Op: the kernels switch on the wire values, so a constant of comm
// that moved would reduce the wrong type or with the wrong operator here.
func TestReduceBytesWireValues(t *testing.T) {
	// Two elements of 3 and 5 (2 and 6 for Min/Max checks) of each type,
	// written as the type's bytes.
	put := func(dt comm.DType, v float64) []byte {
		b := make([]byte, dt.Size())
		switch dt {
		case comm.Int8, comm.Uint8:
			b[0] = byte(int8(v))
		case comm.Int16, comm.Uint16:
			binary.LittleEndian.PutUint16(b, uint16(int16(v)))
		case comm.Int32, comm.Uint32:
			binary.LittleEndian.PutUint32(b, uint32(int32(v)))
		case comm.Int64, comm.Uint64:
			binary.LittleEndian.PutUint64(b, uint64(int64(v)))
		case comm.Float32:
			binary.LittleEndian.PutUint32(b, math.Float32bits(float32(v)))
		case comm.Float64:
			binary.LittleEndian.PutUint64(b, math.Float64bits(v))
		case comm.Complex64:
			binary.LittleEndian.PutUint32(b, math.Float32bits(float32(v)))
		case comm.Complex128:
			binary.LittleEndian.PutUint64(b, math.Float64bits(v))
		}
		return b
	}
	for dt := comm.Int8; dt <= comm.Complex128; dt++ {
		for op, want := range map[comm.Op]float64{comm.Sum: 8, comm.Prod: 15, comm.Min: 3, comm.Max: 5} {
			dst := make([]byte, dt.Size())
			err := impl.ReduceBytes(dst, put(dt, 3), put(dt, 5), dt, op)
			if dt.IsComplex() && (op == comm.Min || op == comm.Max) {
				require.ErrorIs(t, err, xerr.ErrInvalidArgument, "%v %v", op, dt)
				continue
			}
			require.NoError(t, err, "%v %v", op, dt)
			require.Equal(t, put(dt, want), dst, "%v of 3 and 5 as %v", op, dt)
		}
	}
	for _, bad := range []struct {
		dst, a, b int
		dt        comm.DType
		op        comm.Op
	}{
		{8, 8, 8, comm.InvalidDType, comm.Sum},
		{8, 8, 8, comm.Float64, 0},
		{8, 8, 8, comm.Float64, comm.Max + 1},
		{8, 4, 8, comm.Float64, comm.Sum},
		{6, 6, 6, comm.Float64, comm.Sum},
	} {
		err := impl.ReduceBytes(make([]byte, bad.dst), make([]byte, bad.a), make([]byte, bad.b), bad.dt, bad.op)
		require.ErrorIs(t, err, xerr.ErrInvalidArgument, "%+v", bad)
	}
	buf := make([]byte, 16)
	require.ErrorIs(t, impl.ReduceBytes(buf[:8], buf[4:12], buf[8:], comm.Float32, comm.Sum), xerr.ErrInvalidArgument, "partial overlap")
}

// BenchmarkReduceBytes times one reduction of two vectors of 8 bytes (one
// float64: a small allreduce's fold, where dispatch is all the cost) and
// of 64 KiB.
func BenchmarkReduceBytes(b *testing.B) {
	for _, n := range []int{8, 64 << 10} {
		dst, x, y := make([]byte, n), make([]byte, n), make([]byte, n)
		b.Run(fmt.Sprintf("float64.sum.%dB", n), func(b *testing.B) {
			b.SetBytes(int64(n))
			for b.Loop() {
				if err := impl.ReduceBytes(dst, x, y, comm.Float64, comm.Sum); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
