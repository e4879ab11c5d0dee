package stats_test

import (
	"fmt"
	"slices"
	"testing"

	"github.com/xpu-go/xpu/internal/tooling/bench/stats"
)

func TestMedian(t *testing.T) {
	for _, c := range []struct {
		name string
		v    []float64
		want float64
	}{
		{"none", nil, 0},
		{"one", []float64{7}, 7},
		{"odd, unsorted", []float64{5, 1, 9, 3, 7}, 5},
		{"even: the mean of the middle two", []float64{4, 1, 3, 2}, 2.5},
		{"repeated", []float64{2, 2, 9, 2}, 2},
	} {
		in := slices.Clone(c.v)
		if got := stats.Median(c.v); got != c.want {
			t.Errorf("%s: Median(%v) = %v, want %v", c.name, in, got, c.want)
		}
		if !slices.Equal(in, c.v) {
			t.Errorf("%s: Median changed its argument: %v, was %v", c.name, c.v, in)
		}
	}
}

func ExampleMedian() {
	runs := []float64{212.4, 208.9, 251.0, 210.2} // ns, four runs of one case
	fmt.Printf("%.1f ns\n", stats.Median(runs))
	// Output: 211.3 ns
}
