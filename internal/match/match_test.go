package match_test

import (
	"iter"
	"slices"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/xpu-go/xpu/comm"
	"github.com/xpu-go/xpu/internal/match"
)

type item struct {
	match.Entry[item]
	name string
}

type table = match.Table[item, *item]

func newTable(size int) *table {
	t := &table{}
	t.Init(size)
	return t
}

func names(seq iter.Seq[*item]) []string {
	var out []string
	for x := range seq {
		out = append(out, x.name)
	}
	return out
}

// A message goes to the receive posted first among those it matches,
// whether that one names the source or is AnySource.
func TestTakePostedEarliest(t *testing.T) {
	tb := newTable(3)
	any1 := &item{name: "any-tag5"}
	from1 := &item{name: "src1-anytag"}
	from1b := &item{name: "src1-tag5"}
	tb.Post(any1, comm.AnySource, 5)
	tb.Post(from1, 1, comm.AnyTag)
	tb.Post(from1b, 1, 5)

	assert.Same(t, any1, tb.TakePosted(1, 5), "the AnySource receive was posted first")
	assert.False(t, any1.Queued())
	assert.Same(t, from1, tb.TakePosted(1, 5), "then the first match among source 1's")
	assert.Same(t, from1b, tb.TakePosted(1, 5))
	assert.Nil(t, tb.TakePosted(1, 5), "nothing left")

	tb.Post(from1, 1, 7)
	tb.Post(any1, comm.AnySource, 7)
	assert.Same(t, from1, tb.TakePosted(1, 7), "the receive naming the source was posted first")
	assert.Nil(t, tb.TakePosted(2, 8), "no receive wants tag 8")
	assert.Same(t, any1, tb.TakePosted(2, 7), "an AnySource receive takes any source")
}

// AnyTag never matches the reserved tags of the collectives, in either
// direction.
func TestAnyTagSkipsReserved(t *testing.T) {
	tb := newTable(2)
	r := &item{name: "anytag"}
	tb.Post(r, 1, comm.AnyTag)
	assert.Nil(t, tb.TakePosted(1, comm.MaxTag+1))
	assert.Same(t, r, tb.TakePosted(1, comm.MaxTag))

	m := &item{name: "reserved"}
	tb.Arrive(m, 1, comm.MaxTag+1)
	assert.Nil(t, tb.TakeUnexpected(1, comm.AnyTag))
	assert.Nil(t, tb.TakeUnexpected(comm.AnySource, comm.AnyTag))
	assert.Same(t, m, tb.TakeUnexpected(1, comm.MaxTag+1))
}

// A receive takes the earliest arrived message it matches: by source, or in
// arrival order across sources for AnySource. Messages of one source with
// one tag leave in the order they came (non-overtaking).
func TestTakeUnexpectedOrder(t *testing.T) {
	tb := newTable(3)
	a := &item{name: "a:2/3"}
	b := &item{name: "b:1/3"}
	c := &item{name: "c:2/4"}
	d := &item{name: "d:2/3"}
	for _, m := range []struct {
		x        *item
		src, tag int
	}{{a, 2, 3}, {b, 1, 3}, {c, 2, 4}, {d, 2, 3}} {
		tb.Arrive(m.x, m.src, m.tag)
	}
	assert.Equal(t, []string{"a:2/3", "c:2/4", "d:2/3"}, names(tb.UnexpectedFrom(2)))
	assert.Equal(t, []string{"a:2/3", "b:1/3", "c:2/4", "d:2/3"}, names(tb.Arrivals()))

	assert.Same(t, c, tb.TakeUnexpected(2, 4))
	assert.Same(t, a, tb.TakeUnexpected(comm.AnySource, 3), "the earliest arrival with tag 3")
	assert.Same(t, b, tb.TakeUnexpected(comm.AnySource, comm.AnyTag))
	assert.Nil(t, tb.TakeUnexpected(1, comm.AnyTag), "source 1 has nothing left")
	assert.Same(t, d, tb.TakeUnexpected(2, 3))
	assert.False(t, d.Queued())
	assert.Empty(t, names(tb.Arrivals()))
}

// The iterators let the loop body remove the entry it is given, which is
// how owners fail what waits on a lost peer.
func TestIterateAndRemove(t *testing.T) {
	tb := newTable(2)
	var rs []*item
	for i, src := range []int{0, 1, comm.AnySource, 1, 0} {
		r := &item{name: string(rune('a' + i))}
		tb.Post(r, src, i)
		rs = append(rs, r)
	}
	assert.Equal(t, []string{"a", "e", "b", "d", "c"}, names(tb.Posted()))
	for r := range tb.PostedFrom(1) {
		if r.name == "b" {
			tb.Unpost(r)
		}
	}
	assert.Equal(t, []string{"d"}, names(tb.PostedFrom(1)))
	for r := range tb.Posted() {
		tb.Unpost(r)
	}
	assert.Empty(t, names(tb.Posted()))
	assert.Empty(t, names(tb.PostedAny()))
	for _, r := range rs {
		assert.False(t, r.Queued(), r.name)
	}

	var ms []*item
	for i := range 4 {
		m := &item{name: string(rune('p' + i))}
		tb.Arrive(m, i%2, 9)
		ms = append(ms, m)
	}
	for m := range tb.Arrivals() {
		if m.name != "q" {
			tb.Unqueue(m)
		}
	}
	assert.Equal(t, []string{"q"}, names(tb.Arrivals()))
	assert.Equal(t, []string{"q"}, names(tb.UnexpectedFrom(1)))
	assert.Empty(t, names(tb.UnexpectedFrom(0)))
	require.True(t, ms[1].Queued())
	// An entry removed from a table can be queued again.
	tb.Unqueue(ms[1])
	tb.Post(ms[1], 0, 1)
	assert.Same(t, ms[1], tb.TakePosted(0, 1))
}

// Stopping an iteration early stops it.
func TestIterateStop(t *testing.T) {
	tb := newTable(1)
	for i := range 3 {
		tb.Post(&item{name: string(rune('a' + i))}, 0, i)
	}
	var seen []string
	for r := range tb.Posted() {
		seen = append(seen, r.name)
		if len(seen) == 2 {
			break
		}
	}
	assert.Equal(t, []string{"a", "b"}, seen)
	assert.True(t, slices.Equal(names(tb.PostedFrom(0)), []string{"a", "b", "c"}))
}

// Posting, matching and removing allocate nothing.
func TestNoAllocs(t *testing.T) {
	tb := newTable(4)
	r, m := &item{}, &item{}
	allocs := testing.AllocsPerRun(100, func() {
		tb.Post(r, 2, 1)
		tb.TakePosted(2, 1)
		tb.Arrive(m, 3, 1)
		tb.TakeUnexpected(comm.AnySource, comm.AnyTag)
	})
	assert.Zero(t, allocs)
}
