//go:build cgo

package cuda_test

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/xpu-go/xpu/backends/cpu"
	"github.com/xpu-go/xpu/backends/cuda"
	"github.com/xpu-go/xpu/backends/cuda/internal/kernels"
	"github.com/xpu-go/xpu/comm"
	"github.com/xpu-go/xpu/memspace"
	"github.com/xpu-go/xpu/transfer"
	"github.com/xpu-go/xpu/xerr"
)

type number interface {
	~int32 | ~int64 | ~uint32 | ~uint64 | ~float32 | ~float64
}

// The built-in kernels against the same arithmetic in Go, for every type,
// at sizes around the block and grid edges.
func TestBuiltins(t *testing.T) {
	noDriverLeaks(t)
	g := openGPU(t, "0")
	t.Run("int32", func(t *testing.T) { checkBuiltins[int32](t, g) })
	t.Run("int64", func(t *testing.T) { checkBuiltins[int64](t, g) })
	t.Run("uint32", func(t *testing.T) { checkBuiltins[uint32](t, g) })
	t.Run("uint64", func(t *testing.T) { checkBuiltins[uint64](t, g) })
	t.Run("float32", func(t *testing.T) { checkBuiltins[float32](t, g) })
	t.Run("float64", func(t *testing.T) { checkBuiltins[float64](t, g) })
}

func checkBuiltins[T number](t *testing.T, g *gpu) {
	rng := rand.New(rand.NewPCG(7, uint64(len(t.Name()))))
	gen := func(n int) []T {
		v := make([]T, n)
		for i := range v {
			v[i] = T(rng.IntN(200)) - T(rng.IntN(2)*50) // small integers: exact in every type
		}
		return v
	}
	for _, n := range []int{0, 1, 255, 256, 257, 1000, 256*1024 + 3} {
		t.Run(fmt.Sprint(n), func(t *testing.T) {
			x, y := gen(n), gen(n)
			dx, dy := upload(t, g, x), upload(t, g, y)
			a := T(3)

			require.NoError(t, cuda.Axpy(g.s, a, dx, dy))
			want := make([]T, n)
			for i := range want {
				want[i] = a*x[i] + y[i]
			}
			equalValues(t, want, download(t, g, dy), "axpy")

			require.NoError(t, cuda.Scale(g.s, dy, T(2)))
			for i := range want {
				want[i] *= 2
			}
			equalValues(t, want, download(t, g, dy), "scale")

			require.NoError(t, cuda.Add(g.s, dy, dy, dx))
			for i := range want {
				want[i] += x[i]
			}
			equalValues(t, want, download(t, g, dy), "add in place")

			var sum, lo, hi T
			if n > 0 {
				lo, hi = want[0], want[0]
			} else {
				lo, hi = identities[T]()
			}
			for _, v := range want {
				sum += v
				lo, hi = min(lo, v), max(hi, v)
			}
			got := await(t, "the sum", func(ctx context.Context) (T, error) { return cuda.Sum(ctx, g.s, dy) })
			if _, isFloat := any(sum).(float32); isFloat && n > 1<<16 {
				// Past 2^24 float32 sums round, in an order of the device's.
				assert.InEpsilon(t, float64(sum), float64(got), 1e-5, "sum")
			} else {
				assert.Equal(t, sum, got, "sum")
			}
			got = await(t, "the minimum", func(ctx context.Context) (T, error) { return cuda.Min(ctx, g.s, dy) })
			assert.Equal(t, lo, got, "min")
			got = await(t, "the maximum", func(ctx context.Context) (T, error) { return cuda.Max(ctx, g.s, dy) })
			assert.Equal(t, hi, got, "max")

			require.NoError(t, cuda.Fill(g.s, dx, T(7)))
			for i := range want {
				want[i] = 7
			}
			equalValues(t, want, download(t, g, dx), "fill")
		})
	}
}

// identities are what min and max of nothing are.
func identities[T number]() (lo, hi T) {
	var z T
	switch p := any(&lo).(type) {
	case *float32:
		*p, *any(&hi).(*float32) = float32(math.Inf(1)), float32(math.Inf(-1))
	case *float64:
		*p, *any(&hi).(*float64) = math.Inf(1), math.Inf(-1)
	case *int32:
		*p, *any(&hi).(*int32) = math.MaxInt32, math.MinInt32
	case *int64:
		*p, *any(&hi).(*int64) = math.MaxInt64, math.MinInt64
	case *uint32:
		*p, *any(&hi).(*uint32) = math.MaxUint32, 0
	case *uint64:
		*p, *any(&hi).(*uint64) = math.MaxUint64, 0
	}
	_ = z
	return lo, hi
}

// Fill takes any element of 1, 2, 4 or 8 bytes (the memset paths and the
// 8-byte kernel), on device, pinned and managed memory.
func TestFillSizes(t *testing.T) {
	noDriverLeaks(t)
	g := openGPU(t, "0")
	fill := func(t *testing.T, sp memspace.Space) {
		b8, err := memspace.Alloc[int8](sp, 1001)
		require.NoError(t, err)
		defer b8.Free()
		b16, err := memspace.Alloc[uint16](sp, 1001)
		require.NoError(t, err)
		defer b16.Free()
		bc, err := memspace.Alloc[complex64](sp, 1001)
		require.NoError(t, err)
		defer bc.Free()
		require.NoError(t, cuda.Fill(g.s, b8, -3))
		require.NoError(t, cuda.Fill(g.s, b16, 0xbeef))
		require.NoError(t, cuda.Fill(g.s, bc, complex(1.5, -2)))
		for _, v := range download(t, g, b8) {
			require.Equal(t, int8(-3), v)
		}
		for _, v := range download(t, g, b16) {
			require.Equal(t, uint16(0xbeef), v)
		}
		for _, v := range download(t, g, bc) {
			require.Equal(t, complex64(complex(1.5, -2)), v)
		}
	}
	for _, sp := range g.b.Spaces {
		t.Run(sp.Properties().Kind, func(t *testing.T) { fill(t, sp) })
	}
	bcx, err := memspace.Alloc[complex128](g.dev, 4)
	require.NoError(t, err)
	defer bcx.Free()
	assert.ErrorIs(t, cuda.Fill(g.s, bcx, 1), xerr.ErrNotSupported, "a 16-byte element")
}

// A user's own PTX: load, find, launch with a typed argument list.
func TestUserModule(t *testing.T) {
	noDriverLeaks(t)
	g := openGPU(t, "0")
	m, err := g.x.LoadModule(kernels.TestPTX)
	require.NoError(t, err)
	defer func() { assert.NoError(t, m.Close()) }()
	iota, err := m.Function(kernels.TestIotaU32)
	require.NoError(t, err)
	const n = 5000
	buf := upload(t, g, make([]uint32, n))
	require.NoError(t, iota.Launch(g.s, cuda.Config{Grid: cuda.Dim3{X: 7}, Block: cuda.Dim3{X: 128}}, buf, uint64(n)))
	for i, v := range download(t, g, buf) {
		require.Equal(t, uint32(i), v, "element %d", i)
	}
	empty, err := m.Function(kernels.TestEmpty)
	require.NoError(t, err)
	require.NoError(t, empty.Launch(g.s, cuda.Config{Grid: cuda.Dim3{X: 1}, Block: cuda.Dim3{X: 1}}))
	wait(t, "the stream after the empty kernel", g.s.Synchronize)
}

// Bad input: a clear error matching a sentinel, and the backend still
// works afterwards.
func TestKernelBadInput(t *testing.T) {
	noDriverLeaks(t)
	g := openGPU(t, "0")
	ctx := waitCtx(t)

	_, err := g.x.LoadModule(".version 8.0\n.target sm_90\nthis is not ptx {")
	require.ErrorIs(t, err, cuda.ErrBadModule)
	assert.ErrorIs(t, err, xerr.ErrInvalidArgument)
	assert.NotContains(t, err.Error(), "\n", "one line")
	t.Log(err)

	m, err := g.x.LoadModule(kernels.TestPTX)
	require.NoError(t, err)
	_, err = m.Function("no_such_kernel")
	assert.ErrorIs(t, err, cuda.ErrNoSuchKernel)

	iota, err := m.Function(kernels.TestIotaU32)
	require.NoError(t, err)
	buf := upload(t, g, make([]uint32, 64))
	for _, cfg := range []cuda.Config{
		{Grid: cuda.Dim3{X: 0}, Block: cuda.Dim3{X: 64}},
		{Grid: cuda.Dim3{X: 1}, Block: cuda.Dim3{X: 2048}},
		{Grid: cuda.Dim3{X: 1}, Block: cuda.Dim3{X: 32, Y: 32, Z: 2}},
		{Grid: cuda.Dim3{X: 1}, Block: cuda.Dim3{X: 64}, Shared: 1 << 30},
		{Grid: cuda.Dim3{X: 1}, Block: cuda.Dim3{X: -1}},
	} {
		err := iota.Launch(g.s, cfg, buf, uint64(64))
		assert.ErrorIs(t, err, xerr.ErrInvalidArgument, "%+v", cfg)
	}
	assert.ErrorIs(t, iota.Launch(g.s, cuda.Config{Grid: cuda.Dim3{X: 1}, Block: cuda.Dim3{X: 64}}, buf, "sixty-four"), xerr.ErrInvalidArgument)

	// A stream of another backend, a block the device cannot address.
	ce := cpu.NewExecutor(1)
	defer ce.Close()
	cs, err := ce.NewStream()
	require.NoError(t, err)
	assert.ErrorIs(t, iota.Launch(cs, cuda.Config{Grid: cuda.Dim3{X: 1}, Block: cuda.Dim3{X: 64}}, buf, uint64(64)), xerr.ErrNotSupported)
	host := cpu.NewSpace(cpu.SpaceOptions{})
	defer host.Close()
	hb, err := memspace.Alloc[uint32](host, 64)
	require.NoError(t, err)
	defer hb.Free()
	assert.ErrorIs(t, iota.Launch(g.s, cuda.Config{Grid: cuda.Dim3{X: 1}, Block: cuda.Dim3{X: 64}}, hb, uint64(64)), xerr.ErrInvalidArgument)
	assert.ErrorIs(t, cuda.Fill(g.s, hb, 1), xerr.ErrInvalidArgument)
	g1 := openGPU(t, "1")
	other := upload(t, g1, make([]uint32, 64))
	assert.ErrorIs(t, iota.Launch(g.s, cuda.Config{Grid: cuda.Dim3{X: 1}, Block: cuda.Dim3{X: 64}}, other, uint64(64)), xerr.ErrInvalidArgument, "memory of device 1")
	assert.ErrorIs(t, cuda.Scale(g.s, other, 2), xerr.ErrInvalidArgument, "memory of device 1")

	// Element types without a kernel, buffers of different lengths, an
	// operation without a kernel.
	i8 := upload(t, g, make([]int8, 8))
	assert.ErrorIs(t, cuda.Scale(g.s, i8, 2), xerr.ErrNotSupported)
	_, err = cuda.Sum(ctx, g.s, i8)
	assert.ErrorIs(t, err, xerr.ErrNotSupported)
	short := upload(t, g, make([]uint32, 10))
	assert.ErrorIs(t, cuda.Add(g.s, buf, buf, short), xerr.ErrInvalidArgument)
	assert.ErrorIs(t, cuda.ReduceInto(g.s, comm.Prod, buf, buf), xerr.ErrNotSupported)

	// A freed block, a block of a closed space.
	freed, err := memspace.Alloc[uint32](g.dev, 64)
	require.NoError(t, err)
	require.NoError(t, freed.Free())
	assert.ErrorIs(t, cuda.Fill(g.s, freed, 1), xerr.ErrInvalidArgument, "fill of a freed block")
	assert.ErrorIs(t, iota.Launch(g.s, cuda.Config{Grid: cuda.Dim3{X: 1}, Block: cuda.Dim3{X: 64}}, freed, uint64(64)), xerr.ErrInvalidArgument)
	hostBuf, _ := memspace.FromSlice(make([]uint32, 64))
	assert.ErrorIs(t, transfer.Copy(ctx, hostBuf, freed), xerr.ErrInvalidArgument, "copy of a freed block")
	_, err = transfer.CopyAsync(g.s, freed, hostBuf)
	assert.ErrorIs(t, err, xerr.ErrInvalidArgument, "stream copy into a freed block")
	g2 := openGPU(t, "0")
	stale, err := memspace.Alloc[uint32](g2.dev, 64)
	require.NoError(t, err)
	assert.ErrorContains(t, g2.dev.Close(), "still allocated", "closing a space reports its leak")
	assert.ErrorIs(t, transfer.Copy(ctx, hostBuf, stale), xerr.ErrClosed, "copy from a closed space")

	// Still usable: the stream, the module and the built-ins.
	require.NoError(t, iota.Launch(g.s, cuda.Config{Grid: cuda.Dim3{X: 1}, Block: cuda.Dim3{X: 64}}, buf, uint64(64)))
	sum := await(t, "the sum after the bad input", func(ctx context.Context) (uint32, error) { return cuda.Sum(ctx, g.s, buf) })
	assert.Equal(t, uint32(63*64/2), sum)

	// After Close.
	require.NoError(t, m.Close())
	assert.ErrorIs(t, m.Close(), xerr.ErrClosed)
	_, err = m.Function(kernels.TestEmpty)
	assert.ErrorIs(t, err, xerr.ErrClosed)
	assert.ErrorIs(t, iota.Launch(g.s, cuda.Config{Grid: cuda.Dim3{X: 1}, Block: cuda.Dim3{X: 64}}, buf, uint64(64)), xerr.ErrClosed)
}
