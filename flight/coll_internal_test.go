package flight

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/xpu-go/xpu/internal/order"
)

// An entry whose slot the next collective has begun to write (its fin
// word, with the new key, and its count, not yet r.cn) is left out of the
// record: its words are part old, part new.
func TestEntryBeingRewrittenIsLeftOut(t *testing.T) {
	r := New(4, Context{})
	defer r.Close()
	for i := range 4 {
		r.PostCollective(OpBcast, 0, int64(i+1), "", "").End(nil, false)
	}
	// The fifth collective, part way through PostCollective.
	order.Release(&r.active, 1)
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
