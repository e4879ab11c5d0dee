package comm

import (
	"context"
	"fmt"
	"reflect"

	"golang.org/x/exp/constraints"

	"github.com/xpu-go/xpu/memspace"
)

// Number is the constraint of the element types reductions accept: every
// integer, float and complex type, named types included.
type Number interface {
	constraints.Integer | constraints.Float | constraints.Complex
}

// DType names the element type of a reduction on the wire, so backends with
// native collectives (MPI, NCCL) can map it to their own.
type DType uint8

// The element types, by kind. A named type maps to its underlying kind.
const (
	InvalidDType DType = iota
	Int8
	Int16
	Int32
	Int64
	Uint8
	Uint16
	Uint32
	Uint64
	Float32
	Float64
	Complex64
	Complex128
)

var dtypeNames = [...]string{"invalid", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64", "float32", "float64", "complex64", "complex128"}

func (d DType) String() string {
	if int(d) < len(dtypeNames) {
		return dtypeNames[d]
	}
	return fmt.Sprintf("DType(%d)", uint8(d))
}

// Size returns the size in bytes of one element.
func (d DType) Size() int {
	switch d {
	case Int8, Uint8:
		return 1
	case Int16, Uint16:
		return 2
	case Int32, Uint32, Float32:
		return 4
	case Int64, Uint64, Float64, Complex64:
		return 8
	case Complex128:
		return 16
	}
	return 0
}

// IsComplex reports whether d is a complex type (no Min or Max).
func (d DType) IsComplex() bool { return d == Complex64 || d == Complex128 }

// DTypeOf returns the DType of T, mapped through its kind so that named
// types (type Celsius float32) are found.
func DTypeOf[T Number]() DType {
	// The predeclared types answer from a type switch, a fraction of the
	// cost of reflect's (a fifth of a small typed collective's checks);
	// named types go by their kind.
	switch any((*T)(nil)).(type) {
	case *float64:
		return Float64
	case *float32:
		return Float32
	case *int64:
		return Int64
	case *int32:
		return Int32
	case *uint64:
		return Uint64
	case *uint32:
		return Uint32
	case *uint8:
		return Uint8
	case *int8:
		return Int8
	case *int16:
		return Int16
	case *uint16:
		return Uint16
	case *complex64:
		return Complex64
	case *complex128:
		return Complex128
	}
	return dtypeOfKind(reflect.TypeFor[T]())
}

// dtypeOfKind is DTypeOf by t's kind: int, uint, uintptr and named types.
func dtypeOfKind(t reflect.Type) DType {
	switch t.Kind() {
	case reflect.Int8:
		return Int8
	case reflect.Int16:
		return Int16
	case reflect.Int32:
		return Int32
	case reflect.Int64:
		return Int64
	case reflect.Int:
		if t.Size() == 8 {
			return Int64
		}
		return Int32
	case reflect.Uint8:
		return Uint8
	case reflect.Uint16:
		return Uint16
	case reflect.Uint32:
		return Uint32
	case reflect.Uint64:
		return Uint64
	case reflect.Uint, reflect.Uintptr:
		if t.Size() == 8 {
			return Uint64
		}
		return Uint32
	case reflect.Float32:
		return Float32
	case reflect.Float64:
		return Float64
	case reflect.Complex64:
		return Complex64
	case reflect.Complex128:
		return Complex128
	}
	return InvalidDType
}

// Op is a reduction operator. All are commutative and associative (up to
// floating-point rounding).
type Op uint8

// The reduction operators.
const (
	Sum Op = iota + 1
	Prod
	Min
	Max
)

func (o Op) String() string {
	switch o {
	case Sum:
		return "sum"
	case Prod:
		return "prod"
	case Min:
		return "min"
	case Max:
		return "max"
	}
	return fmt.Sprintf("Op(%d)", uint8(o))
}

// Check reports whether op applies to elements of d: a known op, and no Min
// or Max on complex numbers. The error matches ErrInvalidArgument.
func (op Op) Check(d DType) error {
	if op < Sum || op > Max {
		return fmt.Errorf("comm: unknown reduction %v: %w", op, ErrInvalidArgument)
	}
	if d.Size() == 0 {
		return fmt.Errorf("comm: unknown element type %v: %w", d, ErrInvalidArgument)
	}
	if (op == Min || op == Max) && d.IsComplex() {
		return fmt.Errorf("comm: %v of %v (complex numbers are unordered): %w", op, d, ErrInvalidArgument)
	}
	return nil
}

// Collectives is implemented by communicators with native collective
// operations. The generic functions (Allreduce, Bcast, …) use a method
// when the communicator has it, found through wrappers; a method returns
// ErrFallback to have the shared algorithm run instead. Blocks hold
// elements of dt for the reductions and bytes otherwise; sizes are
// validated by the generic functions before a method is called. Send may
// equal recv for Reduce and Allreduce (in place); for Gather, Scatter and
// Allgather the in-place form passes the caller's own slot of the larger
// buffer. Buffers that are not significant at a rank (recv of Reduce and
// Gather, send of Scatter, away from the root) are the zero Block.
//
// Every rank must call the same collectives in the same order, as in MPI.
type Collectives interface {
	Barrier(ctx context.Context) error
	Bcast(ctx context.Context, buf memspace.Block, root int) error
	Reduce(ctx context.Context, send, recv memspace.Block, dt DType, op Op, root int) error
	Allreduce(ctx context.Context, send, recv memspace.Block, dt DType, op Op) error
	Gather(ctx context.Context, send, recv memspace.Block, root int) error
	Scatter(ctx context.Context, send, recv memspace.Block, root int) error
	Allgather(ctx context.Context, send, recv memspace.Block) error
	Alltoall(ctx context.Context, send, recv memspace.Block) error
	ReduceScatter(ctx context.Context, send, recv memspace.Block, dt DType, op Op) error
}
