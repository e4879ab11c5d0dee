package doubling_test

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/xpu-go/xpu/internal/doubling"
)

// TestDoubling runs the schedule of every group size up to 33 on sets of
// contributions (a bit per rank): pairs must name each other, and every
// rank must end holding every rank's contribution exactly once.
func TestDoubling(t *testing.T) {
	for p := 1; p <= 33; p++ {
		t.Run(fmt.Sprint(p), func(t *testing.T) {
			ds := make([]doubling.Schedule, p)
			has := make([]uint64, p)
			for r := range p {
				ds[r] = doubling.New(p, r)
				has[r] = 1 << r
			}
			steps := -1
			for r, d := range ds {
				if h := d.HandsTo(); h >= 0 {
					require.Equal(t, r, ds[h].FoldsFrom(), "rank %d hands to %d", r, h)
					require.Zero(t, d.Steps(), "rank %d sits out", r)
					require.Equal(t, -1, d.FoldsFrom())
					has[h] |= has[r]
					continue
				}
				if from := d.FoldsFrom(); from >= 0 {
					require.Equal(t, r, ds[from].HandsTo(), "rank %d folds from %d", r, from)
				}
				if steps < 0 {
					steps = d.Steps()
				}
				require.Equal(t, steps, d.Steps(), "rank %d", r)
			}
			for i := range max(steps, 0) {
				next := append([]uint64(nil), has...)
				for r, d := range ds {
					if d.HandsTo() >= 0 {
						continue
					}
					peer := d.Partner(i)
					require.NotEqual(t, r, peer)
					require.Equal(t, r, ds[peer].Partner(i), "step %d: %d and %d", i, r, peer)
					require.Zero(t, has[r]&has[peer], "step %d: ranks %d and %d would count a contribution twice", i, r, peer)
					next[r] = has[r] | has[peer]
				}
				has = next
			}
			for r, d := range ds {
				if h := d.HandsTo(); h >= 0 {
					has[r] = has[h]
				}
			}
			for r := range p {
				require.Equal(t, uint64(1)<<p-1, has[r], "rank %d's result", r)
			}
		})
	}
}
