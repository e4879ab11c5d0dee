package launch

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestByTopology(t *testing.T) {
	// Two packages of two cores of two hardware threads, numbered as many
	// machines number them: the first thread of every core, then the
	// second of every core.
	var cs []cpuPlace
	for id := range 8 {
		cs = append(cs, cpuPlace{pkg: id % 4 / 2, core: id % 2, id: id})
	}
	order := byTopology(cs)
	assert.Equal(t, []int{0, 4, 1, 5, 2, 6, 3, 7}, order)
	// Two ranks get a package each, four a core each.
	assert.Equal(t, [][]int{{0, 4, 1, 5}, {2, 6, 3, 7}}, placement(order, 2))
	assert.Equal(t, [][]int{{0, 4}, {1, 5}, {2, 6}, {3, 7}}, placement(order, 4))
	assert.Equal(t, 0, cs[0].id, "byTopology sorted its argument")
	assert.Equal(t, 4, cs[4].id, "byTopology sorted its argument")
}

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
