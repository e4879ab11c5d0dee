package comm_test

import (
	"context"
	"slices"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/xpu-go/xpu/backends/local"
	"github.com/xpu-go/xpu/comm"
	"github.com/xpu-go/xpu/internal/collalg"
	"github.com/xpu-go/xpu/memspace"
)

// TestChunkMatchesCollalg checks that the rings cut their vectors where
// package collalg says they do: the conformance suite relies on it to send
// blocks in one chunk and in several.
func TestChunkMatchesCollalg(t *testing.T) {
	for _, unit := range []int{1, 2, 4, 8, 12, 16, 3 << 10, collalg.RingChunk + 1} {
		require.Equal(t, collalg.Chunk(unit), comm.ChunkFor(unit), "unit %d", unit)
	}
}

// phasesOf are the reserved tags each algorithm sends with, as (kind,
// phase) of comm.CollTag: the tags tell which algorithm ran.
var phasesOf = map[collalg.Alg][][2]int{
	collalg.BcastBinomial:              {{2, 0}},
	collalg.BcastScatterAllgather:      {{2, 1}, {2, 2}},
	collalg.ReduceBinomial:             {{3, 0}},
	collalg.ReduceRingGather:           {{3, 1}, {3, 2}},
	collalg.AllreduceRecursiveDoubling: {{4, 0}},
	collalg.AllreduceRing:              {{4, 1}, {4, 2}},
	collalg.AllgatherBruck:             {{7, 0}},
	collalg.AllgatherRing:              {{7, 1}},
}

// tagRecorder records the tags of the messages its rank sends.
type tagRecorder struct {
	comm.Comm
	mu   *sync.Mutex
	tags map[int]bool
}

func (r tagRecorder) Isend(b memspace.Block, dest, tag int) (comm.Request, error) {
	r.mu.Lock()
	r.tags[tag] = true
	r.mu.Unlock()
	return r.Comm.Isend(b, dest, tag)
}

// TestDispatchFollowsCollalg checks that a collective on each side of its
// thresholds runs the algorithm collalg.Choose names, over a power of two
// and another number of ranks.
func TestDispatchFollowsCollalg(t *testing.T) {
	const elem = 8 // float64
	for _, p := range []int{3, 4} {
		for _, c := range []collalg.Coll{collalg.Bcast, collalg.Reduce, collalg.Allreduce, collalg.Allgather} {
			for _, count := range collalg.Counts(c, elem, p) {
				want := collalg.Choose(c, count, elem, p).Alg
				var mu sync.Mutex
				tags := map[int]bool{}
				ranks := newGroup(t, p, local.Options{})
				for i, r := range ranks {
					ranks[i] = tagRecorder{Comm: r, mu: &mu, tags: tags}
				}
				for r, err := range onRanks(t, context.Background(), ranks, func(ctx context.Context, cm comm.Comm) error {
					v := buf(t, make([]float64, count))
					switch c {
					case collalg.Bcast:
						return comm.Bcast(ctx, cm, v, 1)
					case collalg.Reduce:
						var recv *memspace.Buffer[float64]
						if cm.Rank() == p-1 {
							recv = buf(t, make([]float64, count))
						}
						return comm.Reduce(ctx, cm, v, recv, comm.Sum, p-1)
					case collalg.Allreduce:
						return comm.Allreduce(ctx, cm, v, v, comm.Sum)
					default:
						return comm.Allgather(ctx, cm, v, buf(t, make([]float64, p*count)))
					}
				}) {
					require.NoError(t, err, "rank %d: %v of %d float64 over %d ranks", r, c, count, p)
				}
				var got []int
				for tag := range tags {
					got = append(got, tag)
				}
				var exp []int
				for _, kp := range phasesOf[want] {
					exp = append(exp, comm.CollTag(kp[0], kp[1]))
				}
				slices.Sort(got)
				slices.Sort(exp)
				require.Equal(t, exp, got, "%v of %d float64 over %d ranks: want the tags of %v", c, count, p, want)
			}
		}
	}
}
