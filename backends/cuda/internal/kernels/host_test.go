package kernels_test

import (
	"bufio"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/xpu-go/xpu/backends/cuda/internal/kernels"
	"github.com/xpu-go/xpu/backends/cuda/internal/kernels/internal/ptxgen"
)

// The host tests run kernels.cu on the CPU (testdata/host.cc: a coroutine
// per CUDA thread, a block's barrier a switch between them) and compare what it computes with
// the spec, written again here in Go. They test the source, where there is
// no GPU; the PTX is what clang makes of it.

// host is a running testdata/host.cc.
type host struct {
	t   *testing.T
	in  io.WriteCloser
	out *bufio.Scanner
}

// startHost builds testdata/host.cc with clang-14 and starts it, or skips.
func startHost(t *testing.T) *host {
	t.Helper()
	if runtime.GOOS != "linux" {
		t.Skip("testdata/host.cc needs Linux (ucontext)")
	}
	clang, err := exec.LookPath(ptxgen.Clang)
	if err != nil {
		t.Skipf("%s is not installed, so kernels.cu cannot be run on the host: %v", ptxgen.Clang, err)
	}
	bin := filepath.Join(t.TempDir(), "host")
	build := exec.Command(clang, "-x", "c++", "-std=c++14", "-O1", "-fwrapv", "-ffp-contract=off",
		"-fno-exceptions", "-fno-rtti", "-Wall", "-Wno-unknown-attributes", "-Wno-ignored-attributes", "-Werror",
		"testdata/host.cc", "-o", bin, "-lm")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("building testdata/host.cc: %v\n%s", err, out)
	}
	cmd := exec.Command(bin)
	in, err := cmd.StdinPipe()
	require.NoError(t, err)
	out, err := cmd.StdoutPipe()
	require.NoError(t, err)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	require.NoError(t, cmd.Start())
	t.Cleanup(func() {
		in.Close()
		assert.NoError(t, cmd.Wait(), "host: %s", stderr.String())
	})
	sc := bufio.NewScanner(out)
	sc.Buffer(nil, 1<<24)
	return &host{t: t, in: in, out: sc}
}

func (h *host) send(format string, args ...any) {
	_, err := fmt.Fprintf(h.in, format+"\n", args...)
	require.NoError(h.t, err)
}

// elem are the element types of the kernels.
type elem interface {
	~int32 | ~int64 | ~uint32 | ~uint64 | ~float32 | ~float64
}

func word[T elem](v T) uint64 {
	switch x := any(v).(type) {
	case int32:
		return uint64(uint32(x))
	case int64:
		return uint64(x)
	case uint32:
		return uint64(x)
	case uint64:
		return x
	case float32:
		return uint64(math.Float32bits(x))
	case float64:
		return math.Float64bits(x)
	}
	panic("unreachable")
}

func fromWord[T elem](w uint64) T {
	var v T
	switch p := any(&v).(type) {
	case *int32:
		*p = int32(uint32(w))
	case *int64:
		*p = int64(w)
	case *uint32:
		*p = uint32(w)
	case *uint64:
		*p = w
	case *float32:
		*p = math.Float32frombits(uint32(w))
	case *float64:
		*p = math.Float64frombits(w)
	}
	return v
}

func setBuf[T elem](h *host, id int, vs []T) {
	var b strings.Builder
	fmt.Fprintf(&b, "buf %d %d %d", id, kernelType[T](h.t).Size(), len(vs))
	for _, v := range vs {
		fmt.Fprintf(&b, " %x", word(v))
	}
	h.send("%s", b.String())
}

func getBuf[T elem](h *host, id int) []T {
	h.send("dump %d", id)
	require.True(h.t, h.out.Scan(), "host exited: %v", h.out.Err())
	f := strings.Fields(h.out.Text())
	require.Equal(h.t, strconv.Itoa(id), f[0])
	vs := make([]T, len(f)-1)
	for i, s := range f[1:] {
		w, err := strconv.ParseUint(s, 16, 64)
		require.NoError(h.t, err)
		vs[i] = fromWord[T](w)
	}
	return vs
}

func kernelType[T elem](t *testing.T) kernels.Type {
	ty, ok := kernels.TypeOf[T]()
	require.True(t, ok)
	return ty
}

// launch runs op over T with args: "b<id>" for buffers, values otherwise.
func launch[T elem](h *host, op kernels.Op, grid, block int, args ...any) {
	k, ok := kernels.Lookup(op, kernelType[T](h.t))
	require.True(h.t, ok)
	require.Len(h.t, args, len(k.Params))
	var b strings.Builder
	fmt.Fprintf(&b, "launch %s %d %d %d", k.Name, grid, block, k.SharedBytes(block))
	for _, a := range args {
		switch a := a.(type) {
		case string:
			b.WriteString(" " + a)
		case T:
			fmt.Fprintf(&b, " x%x", word(a))
		case uint64:
			fmt.Fprintf(&b, " x%x", a)
		default:
			h.t.Fatalf("argument %v of type %T", a, a)
		}
	}
	h.send("%s", b.String())
}

// same reports whether a and b are the same value, bit for bit, or both
// NaN (of any payload).
func same[T elem](a, b T) bool { return word(a) == word(b) || isNaN(a) && isNaN(b) }

func requireSame[T elem](t *testing.T, want, got []T, format string, args ...any) {
	t.Helper()
	require.Len(t, got, len(want))
	for i := range want {
		if !same(want[i], got[i]) {
			t.Fatalf("%s: element %d is %v, want %v", fmt.Sprintf(format, args...), i, got[i], want[i])
		}
	}
}

// values returns n values of T: random, with the type's extremes among
// them, never a negative zero.
func values[T elem](r *rand.Rand, n int) []T {
	vs := make([]T, n)
	var extremes []T
	switch p := any(&extremes).(type) {
	case *[]int32:
		*p = []int32{math.MaxInt32, math.MinInt32, -1, 0}
	case *[]int64:
		*p = []int64{math.MaxInt64, math.MinInt64, -1, 0}
	case *[]uint32:
		*p = []uint32{math.MaxUint32, 0, 1}
	case *[]uint64:
		*p = []uint64{math.MaxUint64, 0, 1}
	case *[]float32:
		*p = []float32{float32(math.Inf(1)), float32(math.Inf(-1)), math.MaxFloat32, math.SmallestNonzeroFloat32, 0}
	case *[]float64:
		*p = []float64{math.Inf(1), math.Inf(-1), math.MaxFloat64, math.SmallestNonzeroFloat64, 0}
	}
	for i := range vs {
		if r.IntN(20) == 0 {
			vs[i] = extremes[r.IntN(len(extremes))]
			continue
		}
		switch p := any(&vs[i]).(type) {
		case *int32:
			*p = int32(r.Uint32())
		case *int64:
			*p = int64(r.Uint64())
		case *uint32:
			*p = r.Uint32()
		case *uint64:
			*p = r.Uint64()
		case *float32:
			*p = float32(r.NormFloat64() * 1000)
		case *float64:
			*p = r.NormFloat64() * 1e6
		}
	}
	return vs
}

func isNaN[T elem](v T) bool { return v != v }

// identity, combine: the spec's reductions.
func identity[T elem](op kernels.Op) T {
	var v T
	if op == kernels.Sum {
		return v
	}
	hi := op == kernels.Min
	switch p := any(&v).(type) {
	case *int32:
		*p = map[bool]int32{true: math.MaxInt32, false: math.MinInt32}[hi]
	case *int64:
		*p = map[bool]int64{true: math.MaxInt64, false: math.MinInt64}[hi]
	case *uint32:
		*p = map[bool]uint32{true: math.MaxUint32, false: 0}[hi]
	case *uint64:
		*p = map[bool]uint64{true: math.MaxUint64, false: 0}[hi]
	case *float32:
		*p = float32(math.Inf(map[bool]int{true: 1, false: -1}[hi]))
	case *float64:
		*p = math.Inf(map[bool]int{true: 1, false: -1}[hi])
	}
	return v
}

func combine[T elem](op kernels.Op, a, b T) T {
	switch {
	case op == kernels.Sum:
		return a + b
	case isNaN(a): // fmin, fmax
		return b
	case isNaN(b):
		return a
	case op == kernels.Min && b < a, op == kernels.Max && b > a:
		return b
	}
	return a
}

// reduce is the spec's reduction by G blocks of B threads: the partials.
func reduce[T elem](op kernels.Op, in []T, G, B int) []T {
	out := make([]T, G)
	for b := range G {
		acc := make([]T, B)
		for t := range B {
			acc[t] = identity[T](op)
			for i := b*B + t; i < len(in); i += G * B {
				acc[t] = combine(op, acc[t], in[i])
			}
		}
		for s := B / 2; s > 0; s /= 2 {
			for t := range s {
				acc[t] = combine(op, acc[t], acc[t+s])
			}
		}
		out[b] = acc[0]
	}
	return out
}

// launches are the grid and block sizes of the elementwise tests.
var launches = [][2]int{{1, 1}, {1, 32}, {3, 64}, {2, 100}, {64, 32}}

func testHostElementwise[T elem](t *testing.T, h *host) {
	r := rand.New(rand.NewPCG(1, 2))
	const n, size = 1000, 1003 // elements beyond n must stay as they are
	for _, l := range launches {
		grid, block := l[0], l[1]
		x, y := values[T](r, size), values[T](r, size)
		a := values[T](r, 1)[0]
		setBuf(h, 0, x)
		setBuf(h, 1, y)

		launch[T](h, kernels.Fill, grid, block, "b0", a, uint64(n))
		want := append([]T(nil), x...)
		for i := range n {
			want[i] = a
		}
		requireSame(t, want, getBuf[T](h, 0), "fill %v", l)

		setBuf(h, 0, x)
		launch[T](h, kernels.Scale, grid, block, "b0", a, uint64(n))
		want = append([]T(nil), x...)
		for i := range n {
			want[i] = a * x[i]
		}
		requireSame(t, want, getBuf[T](h, 0), "scale %v", l)

		setBuf(h, 0, x)
		launch[T](h, kernels.Axpy, grid, block, "b1", "b0", a, uint64(n))
		want = append([]T(nil), y...)
		for i := range n {
			want[i] = T(a*x[i]) + y[i] // T(): rounded, never fused
		}
		requireSame(t, want, getBuf[T](h, 1), "axpy %v", l)

		setBuf(h, 1, y)
		setBuf(h, 2, make([]T, size))
		launch[T](h, kernels.Add, grid, block, "b2", "b0", "b1", uint64(n))
		want = make([]T, size)
		for i := range n {
			want[i] = x[i] + y[i]
		}
		requireSame(t, want, getBuf[T](h, 2), "add %v", l)
		launch[T](h, kernels.Add, grid, block, "b0", "b0", "b1", uint64(n)) // z is x
		requireSame(t, want[:n], getBuf[T](h, 0)[:n], "add into x %v", l)
		launch[T](h, kernels.Add, grid, block, "b1", "b1", "b1", uint64(n)) // z is x is y
		for i := range n {
			want[i] = y[i] + y[i]
		}
		requireSame(t, want[:n], getBuf[T](h, 1)[:n], "add into x and y %v", l)
	}
}

func testHostReduce[T elem](t *testing.T, h *host) {
	r := rand.New(rand.NewPCG(3, 4))
	float := kernelType[T](t).Float()
	var nan T
	if float {
		nan = T(math.NaN())
	}
	inputs := map[string][]T{
		"empty": nil, "one": values[T](r, 1), "31": values[T](r, 31),
		"1000": values[T](r, 1000), "5000": values[T](r, 5000),
	}
	if float {
		withNaN := values[T](r, 700)
		for i := 0; i < len(withNaN); i += 7 {
			withNaN[i] = nan
		}
		inputs["some NaN"] = withNaN
		inputs["all NaN"] = []T{nan, nan, nan, nan, nan}
	}
	for name, in := range inputs {
		for _, l := range [][2]int{{1, 32}, {4, 32}, {7, 64}, {1, kernels.ReduceBlock}, {3, kernels.ReduceBlock}, {2, 1024}} {
			G, B := l[0], l[1]
			for _, op := range []kernels.Op{kernels.Sum, kernels.Min, kernels.Max} {
				setBuf(h, 0, slices.Concat(in, values[T](r, 3))) // elements beyond n are not read
				setBuf(h, 1, values[T](r, G))
				launch[T](h, op, G, B, "b1", "b0", uint64(len(in)))
				want := reduce(op, in, G, B)
				requireSame(t, want, getBuf[T](h, 1), "%v of %s by %d blocks of %d", op, name, G, B)

				launch[T](h, op, 1, 32, "b1", "b1", uint64(G)) // the second pass, out = in
				requireSame(t, reduce(op, want, 1, 32)[:1], getBuf[T](h, 1)[:1], "%v of %s's partials", op, name)
			}
		}
	}
}

func testHost[T elem](t *testing.T) {
	t.Parallel()
	h := startHost(t)
	t.Run("elementwise", func(t *testing.T) { testHostElementwise[T](t, h) })
	t.Run("reduce", func(t *testing.T) { testHostReduce[T](t, h) })
}

func TestHost(t *testing.T) {
	t.Run("int32", testHost[int32])
	t.Run("int64", testHost[int64])
	t.Run("uint32", testHost[uint32])
	t.Run("uint64", testHost[uint64])
	t.Run("float32", testHost[float32])
	t.Run("float64", testHost[float64])
}

// The reference agrees with the spec's identities and NaN rule.
func TestReferenceReduce(t *testing.T) {
	nan := math.NaN()
	assert.Equal(t, []float64{0, 0}, reduce(kernels.Sum, []float64{}, 2, 32))
	assert.Equal(t, []float64{math.Inf(1)}, reduce(kernels.Min, []float64(nil), 1, 32))
	assert.Equal(t, []int32{math.MinInt32}, reduce(kernels.Max, []int32(nil), 1, 32))
	assert.Equal(t, []float64{1}, reduce(kernels.Min, []float64{nan, 1, nan}, 1, 32))
	assert.Equal(t, []float64{6, 0}, reduce(kernels.Sum, []float64{1, 2, 3}, 2, 32))
	assert.Equal(t, []int32{1 + 3, 2}, reduce(kernels.Sum, []int32{1, 2, 3}, 2, 1)) // block 0: 0 and 2; block 1: 1
}
