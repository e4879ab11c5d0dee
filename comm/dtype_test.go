package comm_test

import (
	"testing"

	"github.com/xpu-go/xpu/comm"
)

type (
	namedFloat float32
	namedInt   int
	namedUint  uintptr
)

// TestDTypeOf: every number type maps to its DType, the predeclared ones
// and named ones, which go by their kind; int, uint and uintptr by their
// size.
func TestDTypeOf(t *testing.T) {
	word := comm.Int64
	uword := comm.Uint64
	if ^uint(0)>>32 == 0 {
		word, uword = comm.Int32, comm.Uint32
	}
	for _, c := range []struct {
		name      string
		got, want comm.DType
	}{
		{"int8", comm.DTypeOf[int8](), comm.Int8},
		{"int16", comm.DTypeOf[int16](), comm.Int16},
		{"int32", comm.DTypeOf[int32](), comm.Int32},
		{"int64", comm.DTypeOf[int64](), comm.Int64},
		{"int", comm.DTypeOf[int](), word},
		{"uint8", comm.DTypeOf[uint8](), comm.Uint8},
		{"uint16", comm.DTypeOf[uint16](), comm.Uint16},
		{"uint32", comm.DTypeOf[uint32](), comm.Uint32},
		{"uint64", comm.DTypeOf[uint64](), comm.Uint64},
		{"uint", comm.DTypeOf[uint](), uword},
		{"uintptr", comm.DTypeOf[uintptr](), uword},
		{"float32", comm.DTypeOf[float32](), comm.Float32},
		{"float64", comm.DTypeOf[float64](), comm.Float64},
		{"complex64", comm.DTypeOf[complex64](), comm.Complex64},
		{"complex128", comm.DTypeOf[complex128](), comm.Complex128},
		{"namedFloat", comm.DTypeOf[namedFloat](), comm.Float32},
		{"namedInt", comm.DTypeOf[namedInt](), word},
		{"namedUint", comm.DTypeOf[namedUint](), uword},
	} {
		if c.got != c.want {
			t.Errorf("DTypeOf[%s]() = %v, want %v", c.name, c.got, c.want)
		}
	}
}
