package flight

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/xpu-go/xpu/internal/order"
)

// An entry whose slot the next collective has begun to write (its fin
// word, with the new key, and its count, not yet r.cs) is left out of the
// record: its words are part old, part new.
func TestEntryBeingRewrittenIsLeftOut(t *testing.T) {
	r := New(4, Context{})
	defer r.Close()
	for i := range 4 {
		r.PostCollective(OpBcast, 0, int64(i+1), "", "").End(nil, false)
	}
	// The fifth collective, part way through PostCollective: r.cs does
	// not count it yet.
	s := &r.coll[0]
	order.Release(&s.w[cFin], pendingFin(5, Posted))
	order.Release(&s.w[cCount], 99)
	es, dropped := r.Entries()
	require.Len(t, es, 3)
	assert.Equal(t, uint64(1), dropped)
	for i, e := range es {
		assert.Equal(t, uint64(i+2), e.Seq)
		assert.Equal(t, int64(i+2), e.Count)
		assert.Equal(t, uint64(i+2), e.ID)
		assert.Equal(t, Done, e.State)
	}
}

// A point-to-point entry whose index was taken and whose words are still
// being written is left out, and so is an entry whose slot a later entry
// has begun to take; the IDs of the others do not move.
func TestP2PEntryBeingWrittenIsLeftOut(t *testing.T) {
	r := New(4, Context{})
	defer r.Close()
	for i := range 3 {
		r.Record(OpSend, 1, i, int64(i))
	}
	// The fourth, part way through put.
	key := r.pn.Add(1)
	s := &r.ring[(key-1)&r.mask]
	order.Release(&s.w[pSeq], key<<1|1)
	order.Release(&s.w[pCount], 99)
	es, dropped := r.Entries()
	require.Len(t, es, 3)
	assert.Equal(t, uint64(1), dropped)
	for i, e := range es {
		assert.Equal(t, uint64(i+1), e.ID)
		assert.Equal(t, i, e.Tag)
		assert.Equal(t, Done, e.State)
	}
	// The fourth done; the fifth begins to take the first's slot.
	order.Release(&s.w[pSeq], key<<1)
	key = r.pn.Add(1)
	order.Release(&r.ring[(key-1)&r.mask].w[pSeq], key<<1|1)
	es, dropped = r.Entries()
	require.Len(t, es, 3)
	assert.Equal(t, uint64(2), dropped)
	for i, e := range es {
		assert.Equal(t, uint64(i+2), e.ID)
	}
}

// A storm of collectives that overruns the collective ring while Entries
// reads it leaves no collective whole in that read, and without them no
// point-to-point entry can be placed, not even those posted after the
// storm; Entries reads again, and keeps them.
func TestCollectiveStormDuringRead(t *testing.T) {
	const size = 8
	r := New(size, Context{})
	defer r.Close()
	for i := range 3 {
		r.Record(OpSend, 1, i, 1)
		r.PostCollective(OpBcast, 0, 1, "", "").End(nil, false)
	}
	storms := 0
	collsRead = func() {
		if storms > 0 {
			return
		}
		storms++
		for range size {
			r.PostCollective(OpAllreduce, -1, 1, "", "").End(nil, false)
		}
		r.Record(OpRecv, 2, 7, 1)
		r.Record(OpRecv, 2, 8, 1)
	}
	defer func() { collsRead = nil }()
	es, dropped := r.Entries()
	require.Equal(t, 1, storms)
	// The newest size of the 3+3+size+2 entries: the storm's last 6
	// collectives, then the two receives posted after it.
	require.Len(t, es, size)
	assert.Equal(t, uint64(3+3+2), dropped)
	for i, e := range es {
		assert.Equal(t, uint64(3+3+2+i+1), e.ID)
		if i < size-2 {
			assert.Equal(t, OpAllreduce, e.Op)
		} else {
			assert.Equal(t, OpRecv, e.Op)
			assert.Equal(t, 7+i-(size-2), e.Tag)
		}
	}
}
