package commtest

import (
	"context"
	"fmt"
	"reflect"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/xpu-go/xpu/comm"
	"github.com/xpu-go/xpu/memspace"
)

// Guard is the generous time limit that turns a hang into a failure in the
// tests of in-process communicators. Tests of communicators that start
// processes may choose a longer one.
const Guard = 10 * time.Second

// Group opens a group of n ranks with open(n, opts), requires it to succeed
// with n ranks, and closes every rank when the test ends, requiring each
// Close to succeed: a rank the test closed itself is closed again then.
func Group[C comm.Comm, O any](t testing.TB, n int, open func(n int, opts O) ([]C, error), opts O) []C {
	t.Helper()
	cs, err := open(n, opts)
	require.NoError(t, err)
	require.Len(t, cs, n)
	t.Cleanup(func() {
		for _, c := range cs {
			require.NoError(t, c.Close())
		}
	})
	return cs
}

// Buffer views s as a buffer of the Go heap, stopping the test when T is
// not an element type (memspace.CheckElem).
func Buffer[T any](t testing.TB, s []T) *memspace.Buffer[T] {
	t.Helper()
	b, err := memspace.FromSlice(s)
	require.NoError(t, err)
	return b
}

// Block views s as a block of the Go heap. It may be called from any
// goroutine: when T is not an element type it reports the failure with
// Errorf, never FailNow, and returns the zero Block.
func Block[T any](t testing.TB, s []T) memspace.Block {
	t.Helper()
	b, err := memspace.FromSlice(s)
	if err != nil {
		t.Errorf("FromSlice: %v", err)
		return memspace.Block{}
	}
	return b.Block()
}

// Wait waits for r for at most limit and stops the test when r has not
// completed by then; otherwise it returns what r's Wait returned.
func Wait(t testing.TB, r comm.Request, limit time.Duration) (comm.Status, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), limit)
	defer cancel()
	st, err := r.Wait(ctx)
	require.NotErrorIs(t, err, context.DeadlineExceeded, "request did not complete within %v", limit)
	return st, err
}

// FromInt converts re to T, whatever T's kind (named types included); for a
// complex T, im is the imaginary part, and it is ignored otherwise. It
// panics when T is not a number.
func FromInt[T any](re, im int) T {
	var x T
	v := reflect.ValueOf(&x).Elem()
	switch v.Kind() {
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		v.SetInt(int64(re))
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr:
		v.SetUint(uint64(re))
	case reflect.Float32, reflect.Float64:
		v.SetFloat(float64(re))
	case reflect.Complex64, reflect.Complex128:
		v.SetComplex(complex(float64(re), float64(im)))
	default:
		panic(fmt.Sprintf("commtest.FromInt: %v is not a number", reflect.TypeFor[T]()))
	}
	return x
}
