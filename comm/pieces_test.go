package comm_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/xpu-go/xpu/backends/local"
	"github.com/xpu-go/xpu/comm"
	"github.com/xpu-go/xpu/internal/tooling/testwait"
	"github.com/xpu-go/xpu/memspace"
)

// TestStageInPiecesMismatch: ranks that ask for different chunks, or for
// one that is not positive, all fail, with every rank's chunk named.
func TestStageInPiecesMismatch(t *testing.T) {
	for _, tc := range []struct {
		chunks []int
		want   string
	}{
		{[]int{40, 80, 40}, "rank 0: 40, rank 1: 80, rank 2: 40"},
		{[]int{0, 0}, "rank 0: 0, rank 1: 0"},
		{[]int{-8, -8}, "rank 0: -8, rank 1: -8"},
	} {
		t.Run(fmt.Sprint(tc.chunks), func(t *testing.T) {
			cs := newGroup(t, len(tc.chunks), local.Options{})
			for r, err := range onRanks(t, context.Background(), cs, func(ctx context.Context, c comm.Comm) error {
				pc, err := comm.StageInPieces(ctx, c, tc.chunks[c.Rank()])
				if pc != nil {
					return fmt.Errorf("got a communicator %v", pc)
				}
				return err
			}) {
				require.ErrorIs(t, err, comm.ErrInvalidArgument, "rank %d", r)
				assert.Contains(t, err.Error(), "comm stage-in-pieces: ", "rank %d", r)
				assert.Contains(t, err.Error(), tc.want, "rank %d", r)
			}
		})
	}
	_, err := comm.StageInPieces(testwait.Ctx(t), nil, 8)
	require.ErrorIs(t, err, comm.ErrInvalidArgument)
}

// TestStageInPiecesKeepsCapabilities: the communicator StageInPieces
// returns is c, seen through a wrapper: same rank and size, Unwrap gives
// c, and c's capabilities and flight recorder are found through it.
func TestStageInPiecesKeepsCapabilities(t *testing.T) {
	cs := newGroup(t, 2, local.Options{})
	pcs := make([]comm.Comm, 2)
	for r, err := range onRanks(t, context.Background(), cs, func(ctx context.Context, c comm.Comm) (err error) {
		pcs[c.Rank()], err = comm.StageInPieces(ctx, c, 64)
		return err
	}) {
		require.NoError(t, err, "rank %d", r)
	}
	for r, pc := range pcs {
		assert.Equal(t, r, pc.Rank())
		assert.Equal(t, 2, pc.Size())
		u, ok := pc.(comm.Unwrapper)
		require.True(t, ok, "not an Unwrapper")
		assert.Same(t, cs[r], u.Unwrap())
		_, isRec := cs[r].(comm.Recording)
		_, found := comm.As[comm.Recording](pc)
		assert.Equal(t, isRec, found, "Recording through the wrapper")
		_, isOne := cs[r].(comm.OneSided)
		_, found = comm.As[comm.OneSided](pc)
		assert.Equal(t, isOne, found, "OneSided through the wrapper")
		assert.Same(t, comm.FlightRecorder(cs[r]), comm.FlightRecorder(pc))
	}
	// Point to point goes through as it is.
	for r, err := range onRanks(t, context.Background(), pcs, func(ctx context.Context, c comm.Comm) error {
		in := []int32{-1}
		_, err := comm.Sendrecv(ctx, c, buf(t, []int32{int32(c.Rank())}).Block(), 1-c.Rank(), 0, buf(t, in).Block(), 1-c.Rank(), 0)
		if err == nil && in[0] != int32(1-c.Rank()) {
			err = fmt.Errorf("received %d", in[0])
		}
		return err
	}) {
		require.NoError(t, err, "rank %d", r)
	}
}

// TestPiecesRunOnEveryRank counts the collectives each rank runs on a
// communicator that stages in pieces: one per piece, whether its buffers
// are on the device or on the host, and one for a buffer no longer than a
// piece. Each goes to the native collective first (which declines here).
func TestPiecesRunOnEveryRank(t *testing.T) {
	registerStagePaths(t)
	const p, n = 2, 64 // 7 pieces of 10 int32s (the last of 4)
	rs := newStageRanks(p, true)
	cs := newGroup(t, p, local.Options{})
	natives := make([]*native, p)
	ws := make([]comm.Comm, p)
	for i := range cs {
		natives[i] = &native{Comm: cs[i], decline: true}
		ws[i] = wrapper{natives[i]}
	}
	bufs := make([]*memspace.Buffer[int32], p)
	dones := make([]func() []int32, p)
	bufs[0], dones[0] = devBuf(t, rs[0], vals(1, 0, n)) // the device on rank 0
	bufs[1] = buf(t, vals(1, 1, n))                     // the host on rank 1
	small := []*memspace.Buffer[int32]{buf(t, vals(2, 0, 10)), buf(t, vals(2, 1, 10))}
	for r, err := range onRanks(t, context.Background(), ws, func(ctx context.Context, c comm.Comm) error {
		pc, err := comm.StageInPieces(ctx, c, stageTestChunk)
		if err != nil {
			return err
		}
		if err := comm.Allreduce(ctx, pc, bufs[c.Rank()], bufs[c.Rank()], comm.Sum); err != nil {
			return err
		}
		if err := comm.Bcast(ctx, pc, bufs[c.Rank()], 0); err != nil {
			return err
		}
		return comm.Allreduce(ctx, pc, small[c.Rank()], small[c.Rank()], comm.Sum)
	}) {
		require.NoError(t, err, "rank %d", r)
	}
	for r, nc := range natives {
		count := map[string]int{}
		for _, call := range nc.calls {
			count[call]++
		}
		assert.Equal(t, 7+1, count["allreduce"], "rank %d: allreduces (7 pieces, then one small)", r)
		assert.Equal(t, 7, count["bcast"], "rank %d: broadcasts", r)
	}
	want := make([]int32, n)
	for j := range want {
		want[j] = vals(1, 0, n)[j] + vals(1, 1, n)[j]
	}
	assert.Equal(t, want, dones[0]())
	got, err := bufs[1].Host()
	require.NoError(t, err)
	assert.Equal(t, want, got)
	checkLedgers(t, rs)
}
