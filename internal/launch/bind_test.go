package launch

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestPlacement(t *testing.T) {
	for _, tc := range []struct {
		name string
		cpus []int
		n    int
		want [][]int
	}{
		{"one rank takes them all", []int{0, 1, 2, 3}, 1, [][]int{{0, 1, 2, 3}}},
		{"a run each", []int{0, 1, 2, 3}, 2, [][]int{{0, 1}, {2, 3}}},
		{"one each", []int{0, 1}, 2, [][]int{{0}, {1}}},
		{"runs of unequal length", []int{0, 1, 2, 3, 4}, 2, [][]int{{0, 1}, {2, 3, 4}}},
		{"in the order given", []int{0, 4, 1, 5}, 2, [][]int{{0, 4}, {1, 5}}},
		{"in turn when more ranks", []int{0, 1}, 5, [][]int{{0}, {1}, {0}, {1}, {0}}},
		{"in turn, in the order given", []int{6, 2, 9}, 4, [][]int{{6}, {2}, {9}, {6}}},
	} {
		assert.Equal(t, tc.want, placement(tc.cpus, tc.n), tc.name)
	}
	// A rank's run is its own: changing it leaves the list given as it was.
	cpus := []int{0, 1, 2, 3}
	p := placement(cpus, 2)
	p[0][0] = 9
	assert.Equal(t, []int{0, 1, 2, 3}, cpus)
}
