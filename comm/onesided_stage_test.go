package comm_test

import (
	"errors"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/xpu-go/xpu/backends/local"
	"github.com/xpu-go/xpu/comm"
	"github.com/xpu-go/xpu/internal/tooling/testwait"
)

// comm.Put and comm.Get stage a local block the host cannot touch: the
// test device's memory goes through a stand-in of its stager's space, and
// the bytes land at the offset named, nowhere else. The methods refuse
// such a block.
func TestOneSidedStaged(t *testing.T) {
	registerStagePaths(t)
	ctx := testwait.Ctx(t)
	for _, stager := range []bool{true, false} {
		rs := newStageRanks(1, stager)
		cs := newGroup(t, 2, local.Options{})
		one := cs[0].(comm.OneSided)
		region := make([]int32, 64)
		for i := range region {
			region[i] = int32(1000 + i)
		}
		reg, err := cs[1].(comm.OneSided).Expose(buf(t, region).Block())
		require.NoError(t, err)

		src, freeSrc := devBuf(t, rs[0], []int32{1, 2, 3, 4, 5})
		_, err = one.Put(src.Block(), reg.Key(), 0)
		assert.True(t, errors.Is(err, comm.ErrNotSupported), "Put of device memory: %v", err)
		require.NoError(t, comm.Put(ctx, one, src.Block(), reg.Key(), 8*4))
		want := make([]int32, 64)
		for i := range want {
			want[i] = int32(1000 + i)
		}
		copy(want[8:], []int32{1, 2, 3, 4, 5})
		assert.Equal(t, want, region, "stager %v: the region after a staged Put", stager)
		freeSrc()

		dst, readDst := devBuf(t, rs[0], make([]int32, 6))
		require.NoError(t, comm.Get(ctx, one, dst.Block(), reg.Key(), 7*4))
		assert.Equal(t, want[7:13], readDst(), "stager %v: a staged Get", stager)

		// A range past the region fails, staged or not, and leaves the
		// ledgers at zero.
		far, freeFar := devBuf(t, rs[0], make([]int32, 8))
		err = comm.Get(ctx, one, far.Block(), reg.Key(), 60*4)
		assert.True(t, errors.Is(err, comm.ErrInvalidArgument), "a staged Get past the region: %v", err)
		err = comm.Put(ctx, one, far.Block(), reg.Key(), 60*4)
		assert.True(t, errors.Is(err, comm.ErrInvalidArgument), "a staged Put past the region: %v", err)
		freeFar()
		require.NoError(t, reg.Close())
		checkLedgers(t, rs)
		if stager {
			assert.NotZero(t, rs[0].pinned.Stats().Allocs, "nothing was staged in the stager's space")
		}
	}
}
