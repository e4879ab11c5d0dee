// Package units is tooling, not shipped by the library: it writes the
// figures of the benchmark commands for people, with three significant
// digits in a unit scaled to the figure (850 ns, 1.23 µs, 12.3 GB/s,
// 850 MB/s), or in one unit chosen for a whole column of a table, which
// its header names.
//
// Times are given in nanoseconds and rates in GB/s (1e9 bytes per second,
// one byte per nanosecond), the units the benchmarks measure in; the
// functions are pure and safe for concurrent use.
package units
