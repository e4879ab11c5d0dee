package stats

import "slices"

// Median returns the median of v: its middle value, or the mean of its
// two middle values when it has an even count; 0 for none. v is left as
// it was.
func Median(v []float64) float64 {
	if len(v) == 0 {
		return 0
	}
	s := slices.Clone(v)
	slices.Sort(s)
	n := len(s)
	if n%2 == 1 {
		return s[n/2]
	}
	return (s[n/2-1] + s[n/2]) / 2
}
