package collalg_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/xpu-go/xpu/internal/collalg"
)

// TestCountsStraddleEveryChange checks that Counts brackets every point
// where Choose changes its answer: between consecutive counts of its list,
// the path changes at most between a count and the next one.
func TestCountsStraddleEveryChange(t *testing.T) {
	for _, c := range collalg.Colls {
		for _, elem := range []int{1, 4, 8, 16} {
			for _, p := range []int{2, 3, 4, 5, 8} {
				counts := collalg.Counts(c, elem, p)
				if c == collalg.Barrier {
					assert.Empty(t, counts)
					continue
				}
				require.NotEmpty(t, counts, "%v", c)
				// Every change of path lies between a pair (k, k+1) of
				// the list: check by walking the whole range coarsely and
				// asking that a path seen anywhere is seen in the list.
				seen := map[collalg.Path]bool{}
				for _, k := range counts {
					seen[collalg.Choose(c, k, elem, p)] = true
				}
				for k := 1; k < counts[len(counts)-1]*2; k += max(1, k/64) {
					assert.True(t, seen[collalg.Choose(c, k, elem, p)],
						"%v of %d elements of %d bytes over %d ranks takes path %v, which no count of Counts takes",
						c, k, elem, p, collalg.Choose(c, k, elem, p))
				}
				for i := 1; i < len(counts); i++ {
					a, b := counts[i-1], counts[i]
					if collalg.Choose(c, a, elem, p) != collalg.Choose(c, b, elem, p) {
						assert.Equal(t, a+1, b, "%v: the path changes between %d and %d elements, not at a pair", c, a, b)
					}
				}
			}
		}
	}
}

// TestThresholdsAreStraddled checks the sizes by hand for the thresholds
// the package documentation of comm gives.
func TestThresholdsAreStraddled(t *testing.T) {
	for _, tc := range []struct {
		c         collalg.Coll
		elem, p   int
		below, at int // counts
		belowAlg  collalg.Alg
		atAlg     collalg.Alg
	}{
		{collalg.Bcast, 4, 3, collalg.BcastScatterMin/4 - 1, collalg.BcastScatterMin / 4, collalg.BcastBinomial, collalg.BcastScatterAllgather},
		{collalg.Reduce, 8, 2, collalg.ReduceRingMin/8 - 1, collalg.ReduceRingMin / 8, collalg.ReduceBinomial, collalg.ReduceRingGather},
		{collalg.Allreduce, 8, 3, collalg.AllreduceRingMin/8 - 1, collalg.AllreduceRingMin / 8, collalg.AllreduceRecursiveDoubling, collalg.AllreduceRing},
		{collalg.Allgather, 4, 4, collalg.AllgatherRingMin/16 - 1, collalg.AllgatherRingMin / 16, collalg.AllgatherBruck, collalg.AllgatherRing},
	} {
		counts := collalg.Counts(tc.c, tc.elem, tc.p)
		assert.Contains(t, counts, tc.below, "%v", tc.c)
		assert.Contains(t, counts, tc.at, "%v", tc.c)
		assert.Equal(t, tc.belowAlg, collalg.Choose(tc.c, tc.below, tc.elem, tc.p).Alg, "%v", tc.c)
		assert.Equal(t, tc.atAlg, collalg.Choose(tc.c, tc.at, tc.elem, tc.p).Alg, "%v", tc.c)
	}
	// Over two ranks Bcast keeps the tree at every size.
	for _, k := range collalg.Counts(collalg.Bcast, 4, 2) {
		assert.Equal(t, collalg.BcastBinomial, collalg.Choose(collalg.Bcast, k, 4, 2).Alg)
	}
}

// TestEveryPathReachable checks that over 2, 3 and 4 ranks (the group
// sizes the conformance suite uses) the counts of Counts take every
// algorithm, and every ring algorithm both with one chunk per block and
// with several.
func TestEveryPathReachable(t *testing.T) {
	for _, elem := range []int{4, 8} {
		seen := map[collalg.Path]bool{}
		for _, c := range collalg.Colls {
			for _, p := range []int{2, 3, 4} {
				seen[collalg.Choose(c, 1, elem, p)] = true
				for _, k := range collalg.Counts(c, elem, p) {
					seen[collalg.Choose(c, k, elem, p)] = true
				}
			}
			for _, a := range collalg.Algs(c) {
				assert.Equal(t, c, a.Coll())
				if !a.Ring() {
					assert.True(t, seen[collalg.Path{Alg: a}], "%v: %v never chosen", c, a)
					continue
				}
				for _, chunked := range []bool{false, true} {
					assert.True(t, seen[collalg.Path{Alg: a, Chunked: chunked}], "%v: %v never chosen", c, collalg.Path{Alg: a, Chunked: chunked})
				}
			}
		}
	}
}
