package units

import (
	"math"
	"strconv"
)

// Digits writes v with three significant digits and no exponent:
// 0.000266, 0.0123, 1.23, 12.3, 123, 1230 (a figure of four digits or
// more keeps them all, rounded to three significant ones: 12346 is
// "12300"). Zero is "0"; a negative v keeps its sign; NaN and the
// infinities are written as strconv writes them.
func Digits(v float64) string {
	if v == 0 || math.IsNaN(v) || math.IsInf(v, 0) {
		return strconv.FormatFloat(v, 'g', -1, 64)
	}
	// Round to three significant digits first, so that 99.96 is "100",
	// not "100.0".
	r, _ := strconv.ParseFloat(strconv.FormatFloat(v, 'g', 3, 64), 64)
	prec := max(0, 2-int(math.Floor(math.Log10(math.Abs(r)))))
	return strconv.FormatFloat(r, 'f', prec, 64)
}

// Scale is a unit a figure is written in: its name and how many of the
// base unit (nanoseconds, or GB/s) one of it is.
type Scale struct {
	Name   string  // "µs", "MB/s"
	Factor float64 // base units per unit: 1e3 for µs, 1e-3 for MB/s
}

// Format writes v, a figure in the base unit, in s with three significant
// digits (Digits), without the unit's name.
func (s Scale) Format(v float64) string { return Digits(v / s.Factor) }

var (
	timeScales = []Scale{{"ns", 1}, {"µs", 1e3}, {"ms", 1e6}, {"s", 1e9}}
	rateScales = []Scale{{"B/s", 1e-9}, {"kB/s", 1e-6}, {"MB/s", 1e-3}, {"GB/s", 1}}
)

// pick returns the largest of scales in which v reads 1 or more, the
// smallest for a v below 1 in every one.
func pick(scales []Scale, v float64) Scale {
	for i := len(scales) - 1; i > 0; i-- {
		if math.Abs(v) >= scales[i].Factor*(1-0.0005) { // 999.96 ns reads "1.00 µs"
			return scales[i]
		}
	}
	return scales[0]
}

// TimeScale returns the unit, of ns, µs, ms and s, in which a time of ns
// nanoseconds reads 1 or more: µs for 1500.
func TimeScale(ns float64) Scale { return pick(timeScales, ns) }

// RateScale returns the unit, of B/s, kB/s, MB/s and GB/s (powers of
// 1000), in which a rate of gbs GB/s reads 1 or more: MB/s for 0.5.
func RateScale(gbs float64) Scale { return pick(rateScales, gbs) }

// Time writes a time of ns nanoseconds in its scale: "850 ns",
// "1.23 µs", "123 ms", "2.50 s".
func Time(ns float64) string {
	s := TimeScale(ns)
	return s.Format(ns) + " " + s.Name
}

// Rate writes a rate of gbs GB/s in its scale: "12.3 GB/s", "850 MB/s".
func Rate(gbs float64) string {
	s := RateScale(gbs)
	return s.Format(gbs) + " " + s.Name
}
