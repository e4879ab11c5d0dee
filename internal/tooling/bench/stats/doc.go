// Package stats is tooling, not shipped by the library: the summaries of
// repeated measurements that the benchmark commands report, in one place
// so that every command reports the same median of the same runs. The
// functions are pure: they neither keep nor change their arguments.
package stats
