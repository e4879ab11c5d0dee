package memspace_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/xpu-go/xpu/memspace"
	"github.com/xpu-go/xpu/xerr"
)

func TestAsFindsCapabilitiesThroughWrappers(t *testing.T) {
	dev := newDevice(0)
	w := wrapper{wrapper{dev}}
	ss, ok := memspace.As[memspace.StatsSpace](w)
	require.True(t, ok)
	assert.Same(t, dev, ss.(*fakeSpace))
	l, ok := memspace.As[memspace.Lookuper](w)
	require.True(t, ok)
	assert.Same(t, dev, l.(*fakeSpace))
	u, ok := memspace.As[memspace.Unwrapper](w)
	require.True(t, ok, "the wrapper itself")
	assert.Equal(t, memspace.Space(wrapper{dev}), u.Unwrap())

	_, ok = memspace.As[memspace.Lookuper](memspace.GoHeap)
	assert.False(t, ok)
	_, ok = memspace.As[memspace.Lookuper](wrapper{memspace.GoHeap})
	assert.False(t, ok, "the chain ends without one")
	_, ok = memspace.As[memspace.Lookuper](nil)
	assert.False(t, ok)
	_, ok = memspace.As[memspace.Lookuper](wrapper{nil})
	assert.False(t, ok, "a wrapper of nothing")
}

func TestStatsOf(t *testing.T) {
	dev := newDevice(0)
	b, err := dev.Allocate(100, 0)
	require.NoError(t, err)
	st, err := memspace.StatsOf(wrapper{dev})
	require.NoError(t, err)
	assert.EqualValues(t, 100, st.InUse)
	assert.EqualValues(t, 1, st.Live)
	require.NoError(t, dev.Free(b))

	_, err = memspace.StatsOf(memspace.GoHeap)
	require.ErrorIs(t, err, memspace.ErrNotSupported)
	assert.Contains(t, err.Error(), "go-heap")
	assert.NotContains(t, err.Error(), "\n", "one line")
}

func TestSentinelKinds(t *testing.T) {
	assert.ErrorIs(t, memspace.ErrDoubleFree, memspace.ErrInvalidArgument)
	assert.ErrorIs(t, memspace.ErrForeignBlock, memspace.ErrInvalidArgument)
	assert.ErrorIs(t, memspace.ErrBadElemType, memspace.ErrInvalidArgument)
	assert.ErrorIs(t, memspace.ErrNotHostAccessible, memspace.ErrNotSupported)
	assert.NotErrorIs(t, memspace.ErrDoubleFree, memspace.ErrForeignBlock)
	assert.NotErrorIs(t, memspace.ErrOutOfMemory, memspace.ErrInvalidArgument)
	assert.ErrorIs(t, memspace.ErrDeviceLost, xerr.ErrDeviceLost, "the value of package xerr")
}
