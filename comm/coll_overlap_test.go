package comm_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/xpu-go/xpu/comm"
	"github.com/xpu-go/xpu/internal/tooling/testwait"
	"github.com/xpu-go/xpu/memspace"
)

// otherSpace is a second host space, so that blocks of two spaces can share
// addresses.
type otherSpace struct{}

func (otherSpace) Name() string { return "other" }
func (otherSpace) Properties() memspace.Properties {
	return memspace.Properties{HostAccessible: true}
}
func (otherSpace) Allocate(int, int) (memspace.Block, error) {
	return memspace.Block{}, comm.ErrNotSupported
}
func (otherSpace) Free(memspace.Block) error { return comm.ErrNotSupported }

// The overlap checks compare addresses and lengths before spaces: blocks
// that touch are apart, one shared byte is an overlap, and equal addresses
// in different spaces are apart.
func TestOverlapChecksAtTheEdges(t *testing.T) {
	ctx := testwait.Ctx(t)
	c := &nopColl{rank: 1, size: 2}
	whole := buf(t, make([]float64, 8)).Block()
	sub := func(off, n int) memspace.Block {
		b, err := whole.Slice(off, n)
		require.NoError(t, err)
		return b
	}
	elsewhere := memspace.NewBlock(otherSpace{}, whole.Addr(), 32, whole.HostPointer())

	ok := []struct {
		name string
		err  error
	}{
		{"allreduce touching", comm.AllreduceBlock(ctx, c, sub(0, 16), sub(16, 16), comm.Float64, comm.Sum)},
		{"allreduce touching, reversed", comm.AllreduceBlock(ctx, c, sub(16, 16), sub(0, 16), comm.Float64, comm.Sum)},
		{"allreduce in place", comm.AllreduceBlock(ctx, c, sub(8, 16), sub(8, 16), comm.Float64, comm.Sum)},
		{"allreduce same addresses, other space", comm.AllreduceBlock(ctx, c, sub(0, 32), elsewhere, comm.Float64, comm.Sum)},
		{"alltoall touching", comm.AlltoallBlock(ctx, c, sub(0, 32), sub(32, 32))},
		{"alltoall same addresses, other space", comm.AlltoallBlock(ctx, c, elsewhere, sub(0, 32))},
		{"allgather in its slot", comm.AllgatherBlock(ctx, c, sub(16, 16), sub(0, 32))},
		{"allgather touching", comm.AllgatherBlock(ctx, c, sub(32, 16), sub(0, 32))},
		{"reduce-scatter touching", comm.ReduceScatterBlock(ctx, c, sub(0, 32), sub(32, 16), comm.Float64, comm.Sum)},
	}
	for _, tc := range ok {
		assert.NoError(t, tc.err, tc.name)
	}
	bad := []struct {
		name string
		err  error
	}{
		{"allreduce one byte shared", comm.AllreduceBlock(ctx, c, sub(0, 16), sub(15, 16), comm.Uint8, comm.Sum)},
		{"allreduce one byte shared, reversed", comm.AllreduceBlock(ctx, c, sub(15, 16), sub(0, 16), comm.Uint8, comm.Sum)},
		{"alltoall one byte shared", comm.AlltoallBlock(ctx, c, sub(0, 32), sub(31, 32))},
		{"alltoall in place", comm.AlltoallBlock(ctx, c, sub(0, 32), sub(0, 32))},
		{"allgather not its slot", comm.AllgatherBlock(ctx, c, sub(0, 16), sub(0, 32))},
		{"allgather straddling its slot", comm.AllgatherBlock(ctx, c, sub(24, 16), sub(0, 32))},
		{"reduce-scatter one element shared", comm.ReduceScatterBlock(ctx, c, sub(0, 32), sub(24, 16), comm.Float64, comm.Sum)},
	}
	for _, tc := range bad {
		assert.ErrorIs(t, tc.err, comm.ErrInvalidArgument, tc.name)
	}
}
