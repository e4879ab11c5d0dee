package impl_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/xpu-go/xpu/comm"
	"github.com/xpu-go/xpu/impl"
	"github.com/xpu-go/xpu/internal/tooling/testwait"
	"github.com/xpu-go/xpu/memspace"
	"github.com/xpu-go/xpu/xerr"
)

// TestConstants keeps impl's copies of the concept packages' constants
// equal to them.
func TestConstants(t *testing.T) {
	require.NoError(t, impl.CheckRank(comm.AnySource, 1, true))
	require.Error(t, impl.CheckRank(comm.AnySource, 1, false))
	require.NoError(t, impl.CheckTag(comm.AnyTag, true))
	require.NoError(t, impl.CheckTag(comm.MaxTag, false))
	require.Error(t, impl.CheckTag(comm.MaxTag+1, false))
	require.NoError(t, impl.CheckWireTag(comm.MaxReservedTag, false))
	require.Error(t, impl.CheckWireTag(comm.MaxReservedTag+1, false))
	_, err := impl.CheckAlloc(1, memspace.MaxAlign, 1)
	require.NoError(t, err)
	_, err = impl.CheckAlloc(1, memspace.MaxAlign*2, 1)
	require.Error(t, err)
}

func TestChecks(t *testing.T) {
	for _, err := range []error{
		impl.CheckRank(4, 4, false), impl.CheckRank(-1, 4, false), impl.CheckRank(-2, 4, true),
		impl.CheckTag(-1, false), impl.CheckTag(-2, true), impl.CheckWireTag(-1, false),
	} {
		require.ErrorIs(t, err, xerr.ErrInvalidArgument)
		assert.NotContains(t, err.Error(), "\n", "one line")
	}
	assert.EqualError(t, impl.CheckRank(5, 4, false), "rank 5 outside [0, 4): invalid argument")
	require.NoError(t, impl.CheckRank(3, 4, false))
	assert.True(t, impl.MatchTag(comm.AnyTag, comm.MaxTag))
	assert.False(t, impl.MatchTag(comm.AnyTag, comm.MaxTag+1), "AnyTag never matches a reserved tag")
	assert.True(t, impl.MatchTag(comm.MaxTag+1, comm.MaxTag+1))
	assert.False(t, impl.MatchTag(3, 4))
}

func TestCheckAlloc(t *testing.T) {
	for _, c := range []struct{ size, align, def, want int }{
		{1, 0, 64, 64},
		{1, 8, 64, 64},
		{1, 128, 64, 128},
		{1, memspace.MaxAlign, 64, memspace.MaxAlign},
		{1, 1, 1, 1},
	} {
		got, err := impl.CheckAlloc(c.size, c.align, c.def)
		require.NoError(t, err, "%+v", c)
		assert.Equal(t, c.want, got, "%+v", c)
	}
	for _, c := range []struct{ size, align int }{
		{0, 0}, {-5, 0}, {1, 3}, {1, -1}, {1, -64}, {1, memspace.MaxAlign << 1}, {1, 6},
	} {
		_, err := impl.CheckAlloc(c.size, c.align, 64)
		assert.ErrorIs(t, err, xerr.ErrInvalidArgument, "%+v", c)
	}
	_, err := impl.CheckAlloc(-12, 0, 64)
	assert.ErrorContains(t, err, "size -12 is not positive")
	_, err = impl.CheckAlloc(0, 0, 64)
	assert.ErrorContains(t, err, "size 0 is not positive")
	_, err = impl.CheckAlloc(8, 24, 64)
	assert.ErrorContains(t, err, "alignment 24 is not a power of two")
}

func TestCheckAllocOneLine(t *testing.T) {
	_, err := impl.CheckAlloc(0, 0, 64)
	assert.False(t, strings.Contains(err.Error(), "\n"), "%q", err)
}

func TestWaitDone(t *testing.T) {
	done := make(chan struct{})
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	assert.ErrorIs(t, impl.WaitDone(ctx, done), context.Canceled, "the context ended first")
	close(done)
	assert.NoError(t, impl.WaitDone(ctx, done), "a completion wins over an ended context")
	assert.NoError(t, impl.WaitDone(testwait.Ctx(t), done))
	pending := make(chan struct{})
	tctx, tcancel := context.WithTimeout(context.Background(), 10*time.Millisecond)
	defer tcancel()
	assert.ErrorIs(t, impl.WaitDone(tctx, pending), context.DeadlineExceeded, "a context that ends while waiting")
}
