package commtest_test

import (
	"runtime"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/xpu-go/xpu/backends/local"
	"github.com/xpu-go/xpu/comm"
	"github.com/xpu-go/xpu/internal/tooling/commtest"
	"github.com/xpu-go/xpu/internal/tooling/testwait"
	"github.com/xpu-go/xpu/memspace"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

type celsius float32

func TestFromInt(t *testing.T) {
	assert.Equal(t, int8(-3), commtest.FromInt[int8](-3, 9))
	assert.Equal(t, uint16(7), commtest.FromInt[uint16](7, 9))
	assert.Equal(t, celsius(-2), commtest.FromInt[celsius](-2, 9))
	assert.Equal(t, 4.0, commtest.FromInt[float64](4, 9))
	assert.Equal(t, complex64(complex(1, -2)), commtest.FromInt[complex64](1, -2))
	assert.PanicsWithValue(t, "commtest.FromInt: string is not a number", func() { commtest.FromInt[string](1, 0) })
}

func TestBufferAndBlock(t *testing.T) {
	s := []float32{1, 2, 3}
	b := commtest.Buffer(t, s)
	assert.Equal(t, 3, b.Len())
	assert.Equal(t, 12, commtest.Block(t, s).Len())

	// A type that is not an element type fails the test from any goroutine.
	ft := &fakeT{TB: t}
	done := make(chan memspace.Block)
	go func() { done <- commtest.Block(ft, []*int{nil}) }()
	assert.True(t, (testwait.Recv(t, done, "Block on another goroutine")).IsZero())
	assert.True(t, ft.Failed())
}

func TestGroupAndWait(t *testing.T) {
	cs := commtest.Group(t, 2, local.NewGroup, local.Options{})
	in, out := []byte{0}, []byte{42}
	r, err := cs[1].Irecv(commtest.Block(t, in), 0, 5)
	require.NoError(t, err)
	require.NoError(t, comm.Send(testwait.Ctx(t), cs[0], commtest.Block(t, out), 1, 5))
	st, err := commtest.Wait(t, r, commtest.Guard)
	require.NoError(t, err)
	assert.Equal(t, 0, st.Source)
	assert.Equal(t, byte(42), in[0])

	// A request that does not complete in time stops the test.
	r, err = cs[1].Irecv(commtest.Block(t, in), 0, 6)
	require.NoError(t, err)
	ft := &fakeT{TB: t}
	stopped := make(chan bool)
	go func() {
		defer func() { stopped <- ft.Failed() }()
		_, _ = commtest.Wait(ft, r, time.Millisecond)
	}()
	assert.True(t, testwait.Recv(t, stopped, "Wait on another goroutine"))
	require.NoError(t, cs[0].Close()) // and again when the test ends
}

// fakeT records a failure instead of failing the test it wraps; FailNow
// ends the calling goroutine, as testing's does.
type fakeT struct {
	testing.TB
	failed atomic.Bool
}

func (f *fakeT) Helper()               {}
func (f *fakeT) Errorf(string, ...any) { f.failed.Store(true) }
func (f *fakeT) Error(...any)          { f.failed.Store(true) }
func (f *fakeT) Fail()                 { f.failed.Store(true) }
func (f *fakeT) Failed() bool          { return f.failed.Load() }
func (f *fakeT) FailNow()              { f.Fail(); runtime.Goexit() }
func (f *fakeT) Fatalf(string, ...any) { f.FailNow() }
func (f *fakeT) Fatal(...any)          { f.FailNow() }
