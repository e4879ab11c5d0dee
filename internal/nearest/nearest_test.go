package nearest

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestDistance(t *testing.T) {
	for _, tc := range []struct {
		a, b string
		want int
	}{
		{"abc", "abc", 0},
		{"", "", 0},
		{"", "abc", 3},
		{"abc", "", 3},
		{"alignmnt", "alignment", 1},
		{"ab", "ba", 2},
		{"limt", "limit", 1},
		{"kitten", "sitting", 3},
	} {
		assert.Equal(t, tc.want, Distance(tc.a, tc.b), "%q, %q", tc.a, tc.b)
		assert.Equal(t, tc.want, Distance(tc.b, tc.a), "%q, %q", tc.b, tc.a)
	}
}

func TestNames(t *testing.T) {
	known := []string{"workers", "limit", "hugepages", "lim", "limits"}
	// Nearest first; ties in lexical order, whatever the order given.
	assert.Equal(t, []string{"lim", "limit", "limits"}, Names("limt", known, 3, -1))
	assert.Equal(t, []string{"limits", "limit"}, Names("limitss", known, 2, -1))
	assert.Equal(t, []string{"limit", "limits"}, Names("limit", known, 2, -1))
	// The distance bound.
	assert.Equal(t, []string{"workers"}, Names("wrokers", known, 1, 2))
	assert.Empty(t, Names("zzz", known, 1, 2))
	assert.Equal(t, []string{"lim"}, Names("zzz", known, 1, -1))
	// n bounds the answer.
	assert.Len(t, Names("x", known, 10, -1), len(known))
	assert.Empty(t, Names("x", known, 0, -1))
	assert.Empty(t, Names("x", nil, 3, -1))
}

func TestEdits(t *testing.T) {
	for _, tc := range []struct {
		a, b string
		want int
	}{
		{"abc", "abc", 0},
		{"", "", 0},
		{"", "abc", 3},
		{"ab", "ba", 1},
		{"cdua", "cuda", 1},
		{"cdua", "cpu", 2},
		{"cdua", "rdma", 2},
		{"t-knwon", "t-known", 1},
		{"abcd", "badc", 2},
		{"ca", "abc", 3}, // a swap is not followed by an insertion between its letters
		{"limt", "limit", 1},
		{"kitten", "sitting", 3},
	} {
		assert.Equal(t, tc.want, Edits(tc.a, tc.b), "%q, %q", tc.a, tc.b)
		assert.Equal(t, tc.want, Edits(tc.b, tc.a), "%q, %q", tc.b, tc.a)
		assert.LessOrEqual(t, Edits(tc.a, tc.b), Distance(tc.a, tc.b), "%q, %q", tc.a, tc.b)
	}
}
