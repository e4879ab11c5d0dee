package kernels_test

import (
	"strconv"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/xpu-go/xpu/backends/cuda/internal/kernels"
)

func TestName(t *testing.T) {
	name, ok := kernels.Name(kernels.Axpy, kernels.Float32)
	require.True(t, ok)
	assert.Equal(t, "xpu_axpy_f32", name)
	want := map[kernels.Type]string{kernels.Int32: "i32", kernels.Int64: "i64", kernels.Uint32: "u32",
		kernels.Uint64: "u64", kernels.Float32: "f32", kernels.Float64: "f64"}
	ops := map[kernels.Op]string{kernels.Fill: "fill", kernels.Scale: "scale", kernels.Axpy: "axpy",
		kernels.Add: "add", kernels.Sum: "sum", kernels.Min: "min", kernels.Max: "max"}
	assert.Len(t, kernels.Types(), len(want))
	assert.Len(t, kernels.Ops(), len(ops))
	for _, ty := range kernels.Types() {
		for _, op := range kernels.Ops() {
			name, ok := kernels.Name(op, ty)
			require.True(t, ok)
			assert.Equal(t, "xpu_"+ops[op]+"_"+want[ty], name)
			k, ok := kernels.Lookup(op, ty)
			require.True(t, ok)
			assert.Equal(t, name, k.Name)
			assert.Equal(t, op, k.Op)
			assert.Equal(t, ty, k.Type)
		}
	}
	for _, bad := range []struct {
		op kernels.Op
		ty kernels.Type
	}{{0, kernels.Int32}, {kernels.Max + 1, kernels.Int32}, {kernels.Fill, 0}, {kernels.Fill, kernels.Float64 + 1}} {
		_, ok := kernels.Name(bad.op, bad.ty)
		assert.False(t, ok, "%v %v", bad.op, bad.ty)
		_, ok = kernels.Lookup(bad.op, bad.ty)
		assert.False(t, ok, "%v %v", bad.op, bad.ty)
	}
}

func TestKernelsTable(t *testing.T) {
	ks := kernels.Kernels()
	assert.Len(t, ks, len(kernels.Ops())*len(kernels.Types()))
	seen := map[string]bool{}
	for _, k := range ks {
		assert.False(t, seen[k.Name], "%s twice", k.Name)
		seen[k.Name] = true
		sizes := []int{}
		for _, p := range k.Params {
			sizes = append(sizes, p.Size())
			if p.Name == "n" {
				assert.Equal(t, kernels.Uint64, p.Type, k.Name)
			} else {
				assert.Equal(t, k.Type, p.Type, "%s %s", k.Name, p.Name)
			}
		}
		s := k.Type.Size()
		want := map[kernels.Op][]int{
			kernels.Fill: {8, s, 8}, kernels.Scale: {8, s, 8}, kernels.Axpy: {8, 8, s, 8},
			kernels.Add: {8, 8, 8, 8}, kernels.Sum: {8, 8, 8}, kernels.Min: {8, 8, 8}, kernels.Max: {8, 8, 8},
		}[k.Op]
		assert.Equal(t, want, sizes, k.Name)
		last := k.Params[len(k.Params)-1]
		assert.Equal(t, kernels.Param{Name: "n", Kind: kernels.Value, Type: kernels.Uint64}, last, k.Name)
		if k.Op.Reduction() {
			assert.Equal(t, kernels.ReduceBlock*s, k.SharedBytes(kernels.ReduceBlock), k.Name)
			assert.True(t, k.Params[1].Const, k.Name)
		} else {
			assert.Zero(t, k.SharedBytes(kernels.ReduceBlock), k.Name)
		}
	}
	// The results are copies.
	ks[0].Params[0].Name = "changed"
	ks[0].Name = "changed"
	assert.Equal(t, "p", kernels.Kernels()[0].Params[0].Name)
	k, _ := kernels.Lookup(kernels.Fill, kernels.Int32)
	k.Params[0].Name = "changed"
	k, _ = kernels.Lookup(kernels.Fill, kernels.Int32)
	assert.Equal(t, "p", k.Params[0].Name)
	tk := kernels.TestKernels()
	tk[1].Params[0].Name = "changed"
	assert.Equal(t, "p", kernels.TestKernels()[1].Params[0].Name)
}

func TestTestKernelsTable(t *testing.T) {
	tk := kernels.TestKernels()
	require.Len(t, tk, 4)
	names := map[string][]int{}
	for _, k := range tk {
		assert.Zero(t, k.Op)
		assert.Zero(t, k.Type)
		sizes := []int{}
		for _, p := range k.Params {
			sizes = append(sizes, p.Size())
		}
		names[k.Name] = sizes
	}
	assert.Equal(t, map[string][]int{
		kernels.TestEmpty: {}, kernels.TestIotaU32: {8, 8}, kernels.TestSleep: {8}, kernels.TestStore: {8, 8},
	}, names)
}

type celsius float64

func TestTypeOf(t *testing.T) {
	for _, c := range []struct {
		want kernels.Type
		of   func() (kernels.Type, bool)
	}{
		{kernels.Int32, kernels.TypeOf[int32]},
		{kernels.Int64, kernels.TypeOf[int64]},
		{kernels.Uint32, kernels.TypeOf[uint32]},
		{kernels.Uint64, kernels.TypeOf[uint64]},
		{kernels.Float32, kernels.TypeOf[float32]},
		{kernels.Float64, kernels.TypeOf[float64]},
		{kernels.Float64, kernels.TypeOf[celsius]},
		{map[int]kernels.Type{32: kernels.Int32, 64: kernels.Int64}[strconv.IntSize], kernels.TypeOf[int]},
		{map[int]kernels.Type{32: kernels.Uint32, 64: kernels.Uint64}[strconv.IntSize], kernels.TypeOf[uint]},
	} {
		ty, ok := c.of()
		assert.True(t, ok)
		assert.Equal(t, c.want, ty)
	}
	for _, f := range []func() (kernels.Type, bool){
		kernels.TypeOf[int8], kernels.TypeOf[uint16], kernels.TypeOf[complex64], kernels.TypeOf[string],
		kernels.TypeOf[*float32], kernels.TypeOf[uintptr], kernels.TypeOf[any], kernels.TypeOf[[2]float32],
	} {
		ty, ok := f()
		assert.False(t, ok)
		assert.Zero(t, ty)
	}
}

func TestTypeAndOpNames(t *testing.T) {
	sizes := map[kernels.Type]int{kernels.Int32: 4, kernels.Int64: 8, kernels.Uint32: 4, kernels.Uint64: 8, kernels.Float32: 4, kernels.Float64: 8}
	for ty, size := range sizes {
		assert.Equal(t, size, ty.Size(), ty.String())
		assert.True(t, ty.Valid())
	}
	assert.Equal(t, "float32", kernels.Float32.String())
	assert.Equal(t, "f32", kernels.Float32.Suffix())
	assert.True(t, kernels.Float64.Float())
	assert.False(t, kernels.Int64.Float())
	assert.Equal(t, "Type(0)", kernels.Type(0).String())
	assert.Equal(t, "", kernels.Type(7).Suffix())
	assert.Zero(t, kernels.Type(7).Size())
	assert.False(t, kernels.Type(0).Valid())

	assert.Equal(t, "axpy", kernels.Axpy.String())
	assert.Equal(t, "Op(8)", kernels.Op(8).String())
	assert.False(t, kernels.Op(0).Valid())
	for _, op := range kernels.Ops() {
		assert.Equal(t, op == kernels.Sum || op == kernels.Min || op == kernels.Max, op.Reduction(), op.String())
	}
}

func TestReduceBlock(t *testing.T) {
	for _, b := range []int{kernels.ReduceBlock, kernels.MinReduceBlock, kernels.MaxReduceBlock} {
		assert.Zero(t, b&(b-1), "%d is not a power of two", b)
	}
	assert.LessOrEqual(t, kernels.MinReduceBlock, kernels.ReduceBlock)
	assert.LessOrEqual(t, kernels.ReduceBlock, kernels.MaxReduceBlock)
}
