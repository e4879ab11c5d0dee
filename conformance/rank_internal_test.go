package conformance

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestCommCasesTable checks the table both communicator suites run: every
// case has either a body that every rank runs or a group-only form with
// the reason it cannot run in a job, names are unique, and a fixed span
// fits the group sizes the case is written for.
func TestCommCasesTable(t *testing.T) {
	for _, maxRanks := range []int{1, 2, DefaultMaxRanks} {
		names := map[string]bool{}
		for _, sec := range commCases(maxRanks) {
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
	}
}

func TestRankWidth(t *testing.T) {
	cases := map[string]rankCase{}
	for _, sec := range commCases(DefaultMaxRanks) {
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
