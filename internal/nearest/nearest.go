// Package nearest finds, among known names, those nearest a name that
// matched none, for messages that suggest what was meant: the option
// readers' "did you mean …?" (package xpu) and the conformance suite's
// "the nearest: …" for a declared case name that names no case.
package nearest

import (
	"cmp"
	"slices"
)

// Names returns up to n of names, nearest s first, by Distance; names at
// the same distance come in lexical order, so the answer does not depend
// on the order of names. With maxDist >= 0 it keeps only the names within
// that distance of s; with a negative maxDist, any.
func Names(s string, names []string, n, maxDist int) []string {
	type cand struct {
		name string
		dist int
	}
	cs := make([]cand, 0, len(names))
	for _, name := range names {
		if d := Distance(s, name); maxDist < 0 || d <= maxDist {
			cs = append(cs, cand{name, d})
		}
	}
	slices.SortFunc(cs, func(a, b cand) int {
		return cmp.Or(cmp.Compare(a.dist, b.dist), cmp.Compare(a.name, b.name))
	})
	cs = cs[:max(0, min(n, len(cs)))]
	out := make([]string, 0, len(cs))
	for _, c := range cs {
		out = append(out, c.name)
	}
	return out
}

// Distance is the Levenshtein distance between a and b, in bytes: the
// fewest insertions, deletions and substitutions of one byte that turn a
// into b.
func Distance(a, b string) int { return distance(a, b, false) }

// Edits is Distance with one more edit: the swap of two adjacent bytes
// counts as one ("cdua" is one edit from "cuda", two from "cpu"), the
// optimal string alignment distance. It ranks the names a typo of a short
// name was meant as, where two swapped letters are the commonest slip.
func Edits(a, b string) int { return distance(a, b, true) }

// distance is Distance, and with swaps Edits. d[i][j], the distance
// between a[:i] and b[:j], is computed a row at a time; three rows kept.
func distance(a, b string, swaps bool) int {
	prev2 := make([]int, len(b)+1)
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
			if swaps && i > 1 && j > 1 && a[i-1] == b[j-2] && a[i-2] == b[j-1] {
				cur[j] = min(cur[j], prev2[j-2]+1)
			}
		}
		prev2, prev, cur = prev, cur, prev2
	}
	return prev[len(b)]
}
