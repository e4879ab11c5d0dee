package comm_test

import (
	"context"
	"fmt"
	"reflect"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/xpu-go/xpu/backends/local"
	"github.com/xpu-go/xpu/comm"
	"github.com/xpu-go/xpu/internal/tooling/commtest"
	"github.com/xpu-go/xpu/internal/tooling/testwait"
	"github.com/xpu-go/xpu/memspace"
)

// guard is the generous time limit that turns a hang into a failure.
const guard = commtest.Guard

// Celsius is a named element type: reductions must find its kind.
type Celsius float32

// vec3 is a struct element type for the non-reducing collectives.
type vec3 struct{ X, Y, Z float32 }

// protocols force each protocol of the local backend: every message copied
// at once, or every send waiting for its receive.
var protocols = []struct {
	name string
	opts local.Options
}{
	{"eager", local.Options{EagerLimit: 1 << 30}},
	{"rendezvous", local.Options{EagerLimit: -1}},
}

// newGroup makes a group of n local ranks, closed when the test ends.
func newGroup(t testing.TB, n int, opts local.Options) []comm.Comm {
	t.Helper()
	cs := make([]comm.Comm, n)
	for i, c := range commtest.Group(t, n, local.NewGroup, opts) {
		cs[i] = c
	}
	return cs
}

// onRanks runs fn on every rank concurrently, under the guard, and returns
// each rank's error; it fails t when a rank's fn ignores the guard.
func onRanks(t testing.TB, ctx context.Context, cs []comm.Comm, fn func(ctx context.Context, c comm.Comm) error) []error {
	ctx, cancel := context.WithTimeout(ctx, guard)
	defer cancel()
	errs := make([]error, len(cs))
	var wg sync.WaitGroup
	for i, c := range cs {
		wg.Go(func() { errs[i] = fn(ctx, c) })
	}
	testwait.Group(t, &wg, "every rank's part")
	return errs

}

// run runs fn on a fresh group of n ranks and requires every rank to
// succeed.
func run(t testing.TB, n int, opts local.Options, fn func(ctx context.Context, c comm.Comm) error) {
	t.Helper()
	cs := newGroup(t, n, opts)
	for r, err := range onRanks(t, context.Background(), cs, fn) {
		require.NoError(t, err, "rank %d of %d", r, n)
	}
}

// buf views s as a buffer of the Go heap.
func buf[T any](t testing.TB, s []T) *memspace.Buffer[T] {
	t.Helper()
	return commtest.Buffer(t, s)
}

// isUnsigned reports whether T is an unsigned integer type.
func isUnsigned[T any]() bool {
	switch reflect.TypeFor[T]().Kind() {
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr:
		return true
	}
	return false
}

// input returns element j of rank r's contribution to a reduction with op:
// small integers, so that float sums and products are exact; factors of a
// product are never zero (no -0).
func input[T comm.Number](op comm.Op, r, j int) T {
	if op == comm.Prod {
		f := [...]int{2, -1, 1, -2}[(r*3+j)%4]
		if isUnsigned[T]() {
			f = [...]int{2, 1, 3, 1}[(r*3+j)%4]
		}
		return commtest.FromInt[T](f, (r+j)%2)
	}
	v := (r*7+j*3)%11 - 5
	if isUnsigned[T]() {
		v += 5
	}
	return commtest.FromInt[T](v, (r+2*j)%5-2)
}

// less orders the ordered kinds (not complex) by value.
func less[T comm.Number](a, b T) bool {
	va, vb := reflect.ValueOf(a), reflect.ValueOf(b)
	switch va.Kind() {
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		return va.Int() < vb.Int()
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr:
		return va.Uint() < vb.Uint()
	case reflect.Float32, reflect.Float64:
		return va.Float() < vb.Float()
	}
	panic(fmt.Sprintf("less: kind %v", va.Kind()))
}

// apply is the sequential reference of op.
func apply[T comm.Number](op comm.Op, a, b T) T {
	switch op {
	case comm.Sum:
		return a + b
	case comm.Prod:
		return a * b
	case comm.Min:
		if less(b, a) {
			return b
		}
		return a
	case comm.Max:
		if less(a, b) {
			return b
		}
		return a
	}
	panic("apply: bad op")
}

// inputs returns rank r's n elements.
func inputs[T comm.Number](op comm.Op, r, n int) []T {
	s := make([]T, n)
	for j := range s {
		s[j] = input[T](op, r, j)
	}
	return s
}

// reference reduces the inputs of p ranks sequentially, rank by rank.
func reference[T comm.Number](op comm.Op, p, n int) []T {
	acc := inputs[T](op, 0, n)
	for r := 1; r < p; r++ {
		for j, v := range inputs[T](op, r, n) {
			acc[j] = apply(op, acc[j], v)
		}
	}
	return acc
}

// payload returns n distinct values of rank r for the data-moving
// collectives, tagged with the rank and index so misplaced data shows.
func payload(r, n int) []vec3 {
	s := make([]vec3, n)
	for j := range s {
		s[j] = vec3{X: float32(r), Y: float32(j), Z: float32(r*1000 + j)}
	}
	return s
}

// counts returns the element counts tested with p ranks: 1, odd, fewer
// than p, more than p, and a few hundred.
func counts(p int) []int {
	cs := []int{1, 3, 17, 301}
	if p > 2 {
		cs = append(cs, p-1)
	}
	return append(cs, p+1)
}
