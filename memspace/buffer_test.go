package memspace_test

import (
	"errors"
	"math"
	"testing"
	"unsafe"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/xpu-go/xpu/memspace"
)

type (
	Vec4  struct{ X, Y, Z, W float32 }
	Half  uint16
	Mixed struct {
		A int8
		B [3]Half
		C struct{ D complex64 }
		E bool
		F uintptr
	}
	WithPtr   struct{ P *int }
	WithStr   struct{ S string }
	Nested    struct{ Inner struct{ M map[int]int } }
	WithSlice struct {
		A int
		S []byte
	}
	PtrArray [2]*int
	Empty    struct{}
)

// allocRoundTrip allocates n elements of T in a host space, writes v to
// every element through Host and reads them back.
func allocRoundTrip[T comparable](t *testing.T, v T) {
	t.Helper()
	s := newHost(0)
	require.NoError(t, memspace.CheckElem[T]())
	buf, err := memspace.Alloc[T](s, 5)
	require.NoError(t, err, "%T", v)
	assert.Equal(t, 5, buf.Len())
	assert.Equal(t, 5*int(unsafe.Sizeof(v)), buf.Bytes())
	assert.Equal(t, memspace.Space(s), buf.Space())
	assert.Zero(t, uintptr(buf.Block().Addr())%unsafe.Alignof(v), "aligned for %T", v)
	xs, err := buf.Host()
	require.NoError(t, err)
	require.Len(t, xs, 5)
	for i := range xs {
		xs[i] = v
	}
	again, err := buf.Host()
	require.NoError(t, err)
	for _, x := range again {
		assert.Equal(t, v, x)
	}
	require.NoError(t, buf.Free())
	assert.Zero(t, s.Stats().InUse)
}

func TestAllocAcceptsFixedSizePointerFreeTypes(t *testing.T) {
	allocRoundTrip(t, int8(-3))
	allocRoundTrip(t, int16(-300))
	allocRoundTrip(t, int32(-3e6))
	allocRoundTrip(t, int64(-3e12))
	allocRoundTrip(t, int(-7))
	allocRoundTrip(t, uint8(3))
	allocRoundTrip(t, uint16(300))
	allocRoundTrip(t, uint32(3e6))
	allocRoundTrip(t, uint64(3e12))
	allocRoundTrip(t, uint(7))
	allocRoundTrip(t, uintptr(0xdead))
	allocRoundTrip(t, float32(1.5))
	allocRoundTrip(t, 2.5)
	allocRoundTrip(t, complex64(1+2i))
	allocRoundTrip(t, 3+4i)
	allocRoundTrip(t, true)
	allocRoundTrip(t, Vec4{1, 2, 3, 4})
	allocRoundTrip(t, Half(0x3c00))
	allocRoundTrip(t, [4]float32{1, 2, 3, 4})
	allocRoundTrip(t, [2][3]int16{{1, 2, 3}, {4, 5, 6}})
	allocRoundTrip(t, [2]Vec4{{1, 2, 3, 4}, {5, 6, 7, 8}})
	allocRoundTrip(t, Mixed{A: 1, B: [3]Half{2, 3, 4}, C: struct{ D complex64 }{5i}, E: true, F: 6})
}

// rejects checks that T is refused by CheckElem, Alloc, View and FromSlice
// with an error matching ErrBadElemType and ErrInvalidArgument.
func rejects[T any](t *testing.T, wantInMsg string) {
	t.Helper()
	s := newHost(0)
	check := func(what string, err error) {
		t.Helper()
		require.Error(t, err, "%s of %T", what, *new(T))
		assert.ErrorIs(t, err, memspace.ErrBadElemType, "%s of %T", what, *new(T))
		assert.ErrorIs(t, err, memspace.ErrInvalidArgument, "%s of %T", what, *new(T))
		assert.Contains(t, err.Error(), wantInMsg)
	}
	check("CheckElem", memspace.CheckElem[T]())
	_, err := memspace.Alloc[T](s, 1)
	check("Alloc", err)
	_, err = memspace.View[T](memspace.NewBlock(s, 1<<20, 64, nil))
	check("View", err)
	_, err = memspace.FromSlice(make([]T, 1))
	check("FromSlice", err)
	assert.Zero(t, s.Stats().Allocs, "nothing was allocated")
}

func TestAllocRejectsTypesWithPointers(t *testing.T) {
	rejects[*int](t, "ptr")
	rejects[unsafe.Pointer](t, "unsafe.Pointer")
	rejects[string](t, "string")
	rejects[[]float32](t, "slice")
	rejects[map[int]int](t, "map")
	rejects[any](t, "interface")
	rejects[error](t, "interface")
	rejects[func()](t, "func")
	rejects[chan int](t, "chan")
	rejects[WithPtr](t, "WithPtr.P")
	rejects[WithStr](t, "WithStr.S")
	rejects[Nested](t, "Nested.Inner.M")
	rejects[WithSlice](t, "WithSlice.S")
	rejects[PtrArray](t, "PtrArray[]")
	rejects[[3]WithPtr](t, "P")
}

func TestCheckElemIsCached(t *testing.T) {
	e1 := memspace.CheckElem[WithStr]()
	e2 := memspace.CheckElem[WithStr]()
	require.Error(t, e1)
	assert.True(t, e1 == e2, "the second check returns the cached error value")
	assert.NoError(t, memspace.CheckElem[Vec4]())
	assert.NoError(t, memspace.CheckElem[Vec4]())
	// Named types are distinct types with their own entries.
	assert.NoError(t, memspace.CheckElem[Half]())
	assert.NoError(t, memspace.CheckElem[uint16]())
}

func TestAllocBadCounts(t *testing.T) {
	s := newHost(0)
	for _, n := range []int{0, -1, math.MinInt} {
		_, err := memspace.Alloc[float32](s, n)
		assert.ErrorIs(t, err, memspace.ErrInvalidArgument, "n = %d", n)
	}
	_, err := memspace.Alloc[float32](nil, 1)
	require.ErrorIs(t, err, memspace.ErrInvalidArgument)
	_, err = memspace.Alloc[Empty](s, 1)
	require.ErrorIs(t, err, memspace.ErrBadElemType, "zero-size elements")
	_, err = memspace.Alloc[[0]int](s, 1)
	require.ErrorIs(t, err, memspace.ErrBadElemType)

	_, err = memspace.Alloc[Vec4](s, math.MaxInt/8)
	require.ErrorIs(t, err, memspace.ErrOutOfMemory, "n*size overflows")
	require.False(t, errors.Is(err, memspace.ErrInvalidArgument))
	_, err = memspace.Alloc[float64](s, math.MaxInt/8+1)
	require.ErrorIs(t, err, memspace.ErrOutOfMemory)
	_, err = memspace.Alloc[byte](newDevice(1<<20), 2<<20)
	require.ErrorIs(t, err, memspace.ErrOutOfMemory, "the space's own limit")
	assert.Zero(t, s.Stats().Allocs)
}

func TestAllocAligned(t *testing.T) {
	dev := newDevice(0)
	dev.align = 1
	dev.next = 1<<40 + 3 // an odd address: the space itself aligns nothing
	odd, err := memspace.Alloc[byte](dev, 1)
	require.NoError(t, err)
	assert.Equal(t, memspace.Addr(1<<40+3), odd.Block().Addr(), "the fake hands out odd addresses")
	f, err := memspace.Alloc[float64](dev, 3)
	require.NoError(t, err)
	assert.Zero(t, f.Block().Addr()%8, "raised to the alignment of float64")
	v, err := memspace.AllocAligned[Vec4](dev, 2, 4096)
	require.NoError(t, err)
	assert.Zero(t, v.Block().Addr()%4096)
	_, err = memspace.AllocAligned[float64](dev, 1, 3)
	require.ErrorIs(t, err, memspace.ErrInvalidArgument, "alignment not a power of two")
	_, err = memspace.AllocAligned[float64](dev, 1, -8)
	require.ErrorIs(t, err, memspace.ErrInvalidArgument)
	for _, b := range []interface{ Free() error }{odd, f, v} {
		require.NoError(t, b.Free())
	}
}

func TestBufferOnDevice(t *testing.T) {
	dev := newDevice(0)
	buf, err := memspace.Alloc[Vec4](dev, 10)
	require.NoError(t, err)
	_, err = buf.Host()
	require.ErrorIs(t, err, memspace.ErrNotHostAccessible)
	require.ErrorIs(t, err, memspace.ErrNotSupported)
	sub, err := buf.Slice(2, 5)
	require.NoError(t, err)
	assert.Equal(t, 3, sub.Len())
	assert.Equal(t, buf.Block().Addr()+32, sub.Block().Addr())
	assert.Equal(t, 48, sub.Bytes())
	require.NoError(t, buf.Free())
	assert.Zero(t, dev.Stats().InUse)
}

func TestBufferSliceAndFree(t *testing.T) {
	s := newHost(0)
	buf, err := memspace.Alloc[int32](s, 10)
	require.NoError(t, err)
	xs, err := buf.Host()
	require.NoError(t, err)
	for i := range xs {
		xs[i] = int32(i)
	}
	for _, c := range []struct{ lo, hi int }{{-1, 2}, {3, 2}, {0, 11}, {11, 11}} {
		_, err := buf.Slice(c.lo, c.hi)
		assert.ErrorIs(t, err, memspace.ErrInvalidArgument, "[%d:%d]", c.lo, c.hi)
	}
	view, err := buf.Slice(3, 7)
	require.NoError(t, err)
	vs, err := view.Host()
	require.NoError(t, err)
	assert.Equal(t, []int32{3, 4, 5, 6}, vs)
	vs[0] = 99
	assert.Equal(t, int32(99), xs[3], "a view shares the memory")
	empty, err := buf.Slice(10, 10)
	require.NoError(t, err)
	es, err := empty.Host()
	require.NoError(t, err)
	assert.Empty(t, es)
	inner, err := view.Slice(1, 2)
	require.NoError(t, err)
	is, err := inner.Host()
	require.NoError(t, err)
	assert.Equal(t, []int32{4}, is)

	err = view.Free()
	require.ErrorIs(t, err, memspace.ErrDoubleFree, "a view owns nothing")
	require.ErrorIs(t, err, memspace.ErrInvalidArgument)
	assert.EqualValues(t, 40, s.Stats().InUse, "freeing a view changed nothing")

	require.NoError(t, buf.Free())
	assert.Zero(t, s.Stats().InUse)
	require.ErrorIs(t, buf.Free(), memspace.ErrDoubleFree)
	_, err = buf.Host()
	require.ErrorIs(t, err, memspace.ErrClosed, "Host after Free")
	assert.EqualValues(t, 1, s.Stats().Frees)
}

func TestBufferFreeErrorKeepsOwnership(t *testing.T) {
	s := newHost(0)
	buf, err := memspace.Alloc[byte](s, 16)
	require.NoError(t, err)
	// The space frees the block behind the buffer's back; the buffer's Free
	// then fails, and it stays unfreed.
	require.NoError(t, s.Free(buf.Block()))
	require.ErrorIs(t, buf.Free(), memspace.ErrDoubleFree)
	_, err = buf.Host()
	require.NoError(t, err, "the buffer did not mark itself freed")
}

func TestView(t *testing.T) {
	s := newHost(0)
	raw, err := memspace.Alloc[byte](s, 64)
	require.NoError(t, err)
	v, err := memspace.View[Vec4](raw.Block())
	require.NoError(t, err)
	assert.Equal(t, 4, v.Len())
	vs, err := v.Host()
	require.NoError(t, err)
	vs[1] = Vec4{1, 2, 3, 4}
	bs, err := raw.Host()
	require.NoError(t, err)
	assert.Equal(t, float32(1), *(*float32)(unsafe.Pointer(&bs[16])))
	require.ErrorIs(t, v.Free(), memspace.ErrDoubleFree, "a view owns nothing")

	odd, err := raw.Block().Slice(0, 60)
	require.NoError(t, err)
	_, err = memspace.View[Vec4](odd)
	require.ErrorIs(t, err, memspace.ErrInvalidArgument, "60 bytes are not whole Vec4s")
	mis, err := raw.Block().Slice(2, 8)
	require.NoError(t, err)
	_, err = memspace.View[float32](mis)
	require.ErrorIs(t, err, memspace.ErrInvalidArgument, "misaligned host memory")
	_, err = memspace.View[Empty](raw.Block())
	require.ErrorIs(t, err, memspace.ErrInvalidArgument)

	dv, err := memspace.View[float64](memspace.NewBlock(newDevice(0), 1<<40+4, 16, nil))
	require.NoError(t, err, "device addresses are not checked for host alignment")
	assert.Equal(t, 2, dv.Len())
	_, err = dv.Host()
	require.ErrorIs(t, err, memspace.ErrNotHostAccessible)
	require.NoError(t, raw.Free())
}

func TestFromSlice(t *testing.T) {
	xs := []Vec4{{1, 2, 3, 4}, {5, 6, 7, 8}}
	buf, err := memspace.FromSlice(xs)
	require.NoError(t, err)
	assert.Equal(t, memspace.GoHeap, buf.Space())
	assert.Equal(t, 2, buf.Len())
	assert.Equal(t, 32, buf.Bytes())
	assert.Equal(t, memspace.Addr(uintptr(unsafe.Pointer(&xs[0]))), buf.Block().Addr())
	hs, err := buf.Host()
	require.NoError(t, err)
	hs[1].W = 80
	assert.Equal(t, float32(80), xs[1].W, "the buffer views the slice")
	require.ErrorIs(t, buf.Free(), memspace.ErrDoubleFree, "Go memory is not freed by Free")

	empty, err := memspace.FromSlice([]float64{})
	require.NoError(t, err)
	assert.Zero(t, empty.Len())
	es, err := empty.Host()
	require.NoError(t, err)
	assert.Empty(t, es)
	assert.True(t, empty.Block().HostAccessible())
	nilBuf, err := memspace.FromSlice[int](nil)
	require.NoError(t, err)
	assert.Zero(t, nilBuf.Len())
}

func TestGoHeap(t *testing.T) {
	assert.Equal(t, "go-heap", memspace.GoHeap.Name())
	props := memspace.GoHeap.Properties()
	assert.True(t, props.HostAccessible)
	assert.Equal(t, -1, props.Device)
	_, err := memspace.GoHeap.Allocate(8, 0)
	require.ErrorIs(t, err, memspace.ErrNotSupported)
	require.ErrorIs(t, memspace.GoHeap.Free(memspace.Block{}), memspace.ErrDoubleFree)
	_, err = memspace.Alloc[float32](memspace.GoHeap, 4)
	require.ErrorIs(t, err, memspace.ErrNotSupported)
}

func TestBufferInPool(t *testing.T) {
	dev := newDevice(0)
	p := newPool(t, dev, memspace.PoolOptions{})
	buf, err := memspace.Alloc[Vec4](p, 1000)
	require.NoError(t, err)
	assert.Equal(t, memspace.Space(p), buf.Space())
	_, err = buf.Host()
	require.ErrorIs(t, err, memspace.ErrNotHostAccessible)
	view, err := buf.Slice(10, 20)
	require.NoError(t, err)
	require.ErrorIs(t, view.Free(), memspace.ErrDoubleFree)
	require.ErrorIs(t, p.Free(view.Block()), memspace.ErrDoubleFree, "a sub-slice reaching the pool directly")
	require.NoError(t, buf.Free())
	assert.Zero(t, p.Stats().InUse)
}
