package conformance

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"unicode"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/xpu-go/xpu/internal/collalg"
)

// TestCommCasesTable checks the table both communicator suites run: every
// case has either a body that every rank runs or a group-only form with
// the reason it cannot run in a job, names are unique, and a fixed span
// fits the group sizes the case is written for.
func TestCommCasesTable(t *testing.T) {
	for _, maxRanks := range []int{1, 2, DefaultMaxRanks} {
		names := map[string]bool{}
		for _, sec := range commCases(&config{maxRanks: maxRanks}) {
			for _, rc := range sec.cases {
				full := sec.name + "/" + rc.name
				assert.False(t, names[full], "%s twice", full)
				names[full] = true
				if rc.body != nil {
					assert.Nil(t, rc.group, full)
					assert.Empty(t, rc.groupOnly, full)
					assert.False(t, rc.single, full)
					require.NotEmpty(t, rc.ns, full)
					if rc.span > 0 {
						assert.Equal(t, []int{rc.span}, rc.ns, "%s: a case for %d ranks is run with that many in TestComm", full, rc.span)
						assert.False(t, rc.capped, full)
					}
					continue
				}
				assert.NotNil(t, rc.group, full)
				assert.NotEmpty(t, rc.groupOnly, "%s: a group-only case says why", full)
			}
		}
		assert.True(t, names["coll/allreduce"])
		assert.True(t, names["/group"])
		assert.True(t, names["context/collectives"])
		assert.True(t, names["requests/wait-all"])
		assert.True(t, names["p2p/any-source-order"])
		assert.True(t, names["device/isend-irecv"])
		if maxRanks >= 3 {
			assert.True(t, names["algorithms/bcast"])
			assert.True(t, names["algorithms/reduce"])
		}
	}
}

func TestRankWidth(t *testing.T) {
	cases := map[string]rankCase{}
	for _, sec := range commCases(&config{maxRanks: DefaultMaxRanks}) {
		for _, rc := range sec.cases {
			cases[sec.name+"/"+rc.name] = rc
		}
	}
	for _, tc := range []struct {
		name           string
		size, maxRanks int
		n              int
		why            string
	}{
		{"coll/allreduce", 1, 9, 1, ""},
		{"coll/allreduce", 16, 9, 16, ""}, // collectives: every rank
		{"p2p/send-recv", 16, 9, 9, ""},   // capped at MaxRanks
		{"p2p/send-recv", 4, 9, 4, ""},    // capped, under the cap
		{"p2p/invalid", 16, 9, 16, ""},    // rank Size() is the first invalid one
		{"p2p/truncated", 5, 9, 2, ""},    // a sender and a receiver
		{"p2p/truncated", 1, 9, 0, "needs 2 ranks; the communicator has 1"},
		{"p2p/send-recv", 1, 9, 0, "needs at least 2 ranks; the communicator has 1"},
		{"p2p/send-recv", 4, 1, 0, "needs 2 ranks; MaxRanks(1) lets it use 1"},
		{"p2p/self", 1, 9, 1, ""},
	} {
		rc, ok := cases[tc.name]
		require.True(t, ok, tc.name)
		j := &job{s: &suite{cfg: &config{maxRanks: tc.maxRanks}}, size: tc.size}
		n, why := j.width(rc)
		assert.Equal(t, tc.n, n, "%s on %d ranks, MaxRanks(%d)", tc.name, tc.size, tc.maxRanks)
		assert.Equal(t, tc.why, why, "%s on %d ranks, MaxRanks(%d)", tc.name, tc.size, tc.maxRanks)
	}
}

// TestAlgorithmCasesCoverEveryPath checks that the algorithm cases, at the
// group sizes and element sizes they use, lead every collective of
// package comm down every path its shared algorithms can take — each
// algorithm, and each ring with one chunk per block and with several —
// so that a threshold of package collalg that moves, or an algorithm
// added to it, cannot leave a path untested. A collective without an
// algorithm case has one algorithm, not a ring, which the coll cases run
// at every size they try.
func TestAlgorithmCasesCoverEveryPath(t *testing.T) {
	inCases := map[collalg.Coll]bool{}
	for _, rc := range algCases(DefaultMaxRanks) {
		for _, c := range collalg.Colls {
			if c.String() == rc.name {
				inCases[c] = true
				assert.Equal(t, algGroupSizes, rc.ns, "%v", c)
			}
		}
	}
	for _, c := range collalg.Colls {
		algs := collalg.Algs(c)
		require.NotEmpty(t, algs, "%v", c)
		if !inCases[c] {
			assert.Len(t, algs, 1, "%v has several algorithms but no algorithm case", c)
			assert.False(t, algs[0].Ring(), "%v runs a ring but has no algorithm case", c)
			continue
		}
		seen := map[collalg.Path]bool{}
		for _, n := range algGroupSizes {
			for _, k := range collalg.Counts(c, algElem(c), n) {
				seen[collalg.Choose(c, k, algElem(c), n)] = true
			}
		}
		for _, a := range algs {
			paths := []collalg.Path{{Alg: a}}
			if a.Ring() {
				paths = []collalg.Path{{Alg: a}, {Alg: a, Chunked: true}}
			}
			for _, p := range paths {
				assert.True(t, seen[p], "comm/algorithms/%v never takes the path %v", c, p)
			}
		}
	}
	// The sizes straddle the thresholds the package documentation of comm
	// gives: just below and at each.
	for _, tc := range []struct {
		c     collalg.Coll
		n     int
		bytes int
	}{
		{collalg.Bcast, 3, collalg.BcastScatterMin},
		{collalg.Reduce, 2, collalg.ReduceRingMin},
		{collalg.Allreduce, 4, collalg.AllreduceRingMin},
	} {
		counts := collalg.Counts(tc.c, algElem(tc.c), tc.n)
		at := tc.bytes / algElem(tc.c)
		assert.Contains(t, counts, at-1, "%v over %d ranks", tc.c, tc.n)
		assert.Contains(t, counts, at, "%v over %d ranks", tc.c, tc.n)
	}
}

// TestAlgorithmData checks the shared data of the algorithm cases: the
// sum is the sum of the windows, and the windows differ.
func TestAlgorithmData(t *testing.T) {
	f := algFloats(3 * 5)
	sum := algSum(3, 5)
	for i := range 5 {
		assert.Equal(t, f[i]+f[5+i]+f[10+i], sum[i])
	}
	ints := algInts(40)
	for i := range 20 {
		assert.NotEqual(t, ints[i], ints[i+20])
		assert.NotZero(t, ints[i])
	}
	assert.Len(t, algPoison(7), 7)
}

// TestRuleAnchorsInGuide checks that every section of the backend guide a
// communicator failure points to exists: an explicit anchor (<a id="…">)
// or a heading whose GitHub anchor it is.
func TestRuleAnchorsInGuide(t *testing.T) {
	text, err := os.ReadFile(filepath.Join("..", guide))
	require.NoError(t, err)
	anchors := map[string]bool{}
	for _, m := range regexp.MustCompile(`<a id="([^"]+)"`).FindAllStringSubmatch(string(text), -1) {
		anchors[m[1]] = true
	}
	for _, line := range strings.Split(string(text), "\n") {
		if h, ok := strings.CutPrefix(strings.TrimLeft(line, "#"), " "); ok && strings.HasPrefix(line, "#") {
			slug := strings.Map(func(r rune) rune {
				switch {
				case r == ' ':
					return '-'
				case r == '-' || r == '_' || unicode.IsLetter(r) || unicode.IsDigit(r):
					return unicode.ToLower(r)
				}
				return -1
			}, h)
			anchors[slug] = true
		}
	}
	for _, r := range commRules {
		assert.True(t, anchors[r.anchor], "the guide has no section #%s, which failures quoting %q point to", r.anchor, r.text)
	}
}
