package kernels

import (
	_ "embed"
	"reflect"
	"strconv"
)

//go:embed kernels.ptx
var kernelsPTX string

//go:embed testkernels.ptx
var testKernelsPTX string

// PTX is the PTX module of the built-in kernels (kernels.ptx) followed by
// one NUL byte, as cuModuleLoadDataEx wants its image: pass
// unsafe.StringData(PTX). The text alone is PTX[:len(PTX)-1].
var PTX = kernelsPTX + "\x00"

// TestPTX is the PTX module of the test kernels (testkernels.ptx), NUL
// terminated like PTX.
var TestPTX = testKernelsPTX + "\x00"

// Block sizes of the reductions.
const (
	// ReduceBlock is the block size the backend launches reductions with:
	// 256 threads, so ReduceBlock*8 = 2 KiB of dynamic shared memory at
	// most.
	ReduceBlock = 256
	// MinReduceBlock and MaxReduceBlock bound the block size a reduction
	// may be launched with, which must also be a power of two.
	MinReduceBlock = 32
	MaxReduceBlock = 1024
)

// Op is the operation of a built-in kernel.
type Op uint8

// The operations. The zero Op is none of them.
const (
	Fill  Op = iota + 1 // p[i] = v
	Scale               // p[i] = a * p[i]
	Axpy                // y[i] = a * x[i] + y[i]
	Add                 // z[i] = x[i] + y[i]
	Sum                 // out[b] = sum of block b's elements
	Min                 // out[b] = minimum of block b's elements
	Max                 // out[b] = maximum of block b's elements
)

var opNames = [...]string{Fill: "fill", Scale: "scale", Axpy: "axpy", Add: "add", Sum: "sum", Min: "min", Max: "max"}

// Ops returns every Op, in the order of their values.
func Ops() []Op { return []Op{Fill, Scale, Axpy, Add, Sum, Min, Max} }

// Valid reports whether o is one of the operations.
func (o Op) Valid() bool { return o >= Fill && o <= Max }

// Reduction reports whether o is a reduction (Sum, Min or Max), a kernel
// that writes one partial per block and needs dynamic shared memory.
func (o Op) Reduction() bool { return o == Sum || o == Min || o == Max }

// String returns the operation's name in kernel names: "fill", "scale",
// "axpy", "add", "sum", "min" or "max".
func (o Op) String() string {
	if !o.Valid() {
		return "Op(" + strconv.Itoa(int(o)) + ")"
	}
	return opNames[o]
}

// Type is the element type of a built-in kernel.
type Type uint8

// The element types. The zero Type is none of them.
const (
	Int32 Type = iota + 1
	Int64
	Uint32
	Uint64
	Float32
	Float64
)

var typeInfo = [...]struct {
	suffix, name string
	size         int
}{
	Int32:   {"i32", "int32", 4},
	Int64:   {"i64", "int64", 8},
	Uint32:  {"u32", "uint32", 4},
	Uint64:  {"u64", "uint64", 8},
	Float32: {"f32", "float32", 4},
	Float64: {"f64", "float64", 8},
}

// Types returns every Type, in the order of their values.
func Types() []Type { return []Type{Int32, Int64, Uint32, Uint64, Float32, Float64} }

// Valid reports whether t is one of the element types.
func (t Type) Valid() bool { return t >= Int32 && t <= Float64 }

// Suffix returns the type's suffix in kernel names: "i32", "i64", "u32",
// "u64", "f32" or "f64"; "" for an invalid Type.
func (t Type) Suffix() string {
	if !t.Valid() {
		return ""
	}
	return typeInfo[t].suffix
}

// Size returns the size of an element in bytes (4 or 8), 0 for an invalid
// Type.
func (t Type) Size() int {
	if !t.Valid() {
		return 0
	}
	return typeInfo[t].size
}

// Float reports whether t is Float32 or Float64.
func (t Type) Float() bool { return t == Float32 || t == Float64 }

// String returns the Go name of the type, "int32" for Int32.
func (t Type) String() string {
	if !t.Valid() {
		return "Type(" + strconv.Itoa(int(t)) + ")"
	}
	return typeInfo[t].name
}

// TypeOf returns the Type of Go elements of type T: int32, int64, uint32,
// uint64, float32, float64, int and uint (Int64 and Uint64 where they are
// 64 bits), and types defined on them (type Celsius float64 is Float64).
// The second result is false for any other type.
func TypeOf[T any]() (Type, bool) {
	switch k := reflect.TypeFor[T]().Kind(); k {
	case reflect.Int32:
		return Int32, true
	case reflect.Int64:
		return Int64, true
	case reflect.Uint32:
		return Uint32, true
	case reflect.Uint64:
		return Uint64, true
	case reflect.Float32:
		return Float32, true
	case reflect.Float64:
		return Float64, true
	case reflect.Int:
		if strconv.IntSize == 64 {
			return Int64, true
		}
		return Int32, true
	case reflect.Uint:
		if strconv.IntSize == 64 {
			return Uint64, true
		}
		return Uint32, true
	}
	return 0, false
}

// Name returns the name of the entry of op over elements of type t, say
// "xpu_axpy_f32", and false if op or t is not valid.
func Name(op Op, t Type) (string, bool) {
	if !op.Valid() || !t.Valid() {
		return "", false
	}
	return "xpu_" + op.String() + "_" + t.Suffix(), true
}

// ParamKind says how a kernel parameter is passed.
type ParamKind uint8

// The parameter kinds.
const (
	// Pointer is an 8-byte device address of elements of the param's Type.
	Pointer ParamKind = iota + 1
	// Value is a value of the param's Type, of its Size.
	Value
)

// Param is one parameter of a kernel, as the driver passes it: by value,
// kernelParams[i] pointing at the i-th argument.
type Param struct {
	Name string    // the name in the spec: "p", "v", "n" ...
	Kind ParamKind // Pointer or Value
	Type Type      // the type of the value, or of the elements pointed at
	// Const is true for a pointer to elements the kernel only reads.
	Const bool
}

// Size returns the size of the argument in bytes: 8 for a pointer, the
// type's size for a value.
func (p Param) Size() int {
	if p.Kind == Pointer {
		return 8
	}
	return p.Type.Size()
}

// Kernel describes one entry of PTX or TestPTX.
type Kernel struct {
	Name   string  // the entry's name, for cuModuleGetFunction
	Op     Op      // the operation; zero for a test kernel
	Type   Type    // the element type; zero for a test kernel
	Params []Param // the parameters in order
}

// SharedBytes returns the dynamic shared memory, in bytes, a launch of k
// with blocks of block threads needs: block*k.Type.Size() for a reduction,
// 0 for other kernels.
func (k Kernel) SharedBytes(block int) int {
	if !k.Op.Reduction() {
		return 0
	}
	return block * k.Type.Size()
}

func ptr(name string, t Type) Param   { return Param{Name: name, Kind: Pointer, Type: t} }
func cptr(name string, t Type) Param  { return Param{Name: name, Kind: Pointer, Type: t, Const: true} }
func value(name string, t Type) Param { return Param{Name: name, Kind: Value, Type: t} }
func count() Param                    { return value("n", Uint64) }
func params(ps ...Param) []Param      { return ps }

func kernel(op Op, t Type) Kernel {
	name, _ := Name(op, t)
	return Kernel{Name: name, Op: op, Type: t, Params: signature(op, t)}
}

func clone(ks []Kernel) []Kernel {
	out := make([]Kernel, len(ks))
	for i, k := range ks {
		k.Params = append([]Param(nil), k.Params...)
		out[i] = k
	}
	return out
}

// signature returns the parameters of op over t, as the spec lists them.
func signature(op Op, t Type) []Param {
	switch op {
	case Fill:
		return params(ptr("p", t), value("v", t), count())
	case Scale:
		return params(ptr("p", t), value("a", t), count())
	case Axpy:
		return params(ptr("y", t), cptr("x", t), value("a", t), count())
	case Add:
		return params(ptr("z", t), cptr("x", t), cptr("y", t), count())
	default: // Sum, Min, Max
		return params(ptr("out", t), cptr("in", t), count())
	}
}

var table = func() []Kernel {
	var ks []Kernel
	for _, t := range Types() {
		for _, op := range Ops() {
			ks = append(ks, kernel(op, t))
		}
	}
	return ks
}()

// Kernels returns every kernel of PTX: each Op over each Type, grouped by
// Type. The result is the caller's to modify.
func Kernels() []Kernel { return clone(table) }

// Lookup returns the kernel of op over t, and false if op or t is not
// valid.
func Lookup(op Op, t Type) (Kernel, bool) {
	if !op.Valid() || !t.Valid() {
		return Kernel{}, false
	}
	k := table[(int(t)-1)*int(Max)+int(op)-1] // grouped by Type, in Op order
	k.Params = append([]Param(nil), k.Params...)
	return k, true
}

// The entries of TestPTX.
const (
	TestEmpty   = "xpu_test_empty"    // xpu_test_empty(): does nothing
	TestIotaU32 = "xpu_test_iota_u32" // xpu_test_iota_u32(uint32 *p, uint64 n): p[i] = i
	TestSleep   = "xpu_test_sleep"    // xpu_test_sleep(uint64 ns): thread 0 of block 0 waits ns nanoseconds
	TestStore   = "xpu_test_store"    // xpu_test_store(uint64 *p, uint64 v): thread 0 of block 0 stores v at *p
)

var testTable = []Kernel{
	{Name: TestEmpty},
	{Name: TestIotaU32, Params: params(ptr("p", Uint32), count())},
	{Name: TestSleep, Params: params(value("ns", Uint64))},
	{Name: TestStore, Params: params(ptr("p", Uint64), value("v", Uint64))},
}

// TestKernels returns every kernel of TestPTX; their Op and Type are zero.
// The result is the caller's to modify.
func TestKernels() []Kernel { return clone(testTable) }
