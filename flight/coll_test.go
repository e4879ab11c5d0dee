package flight_test

import (
	"bytes"
	"errors"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/xpu-go/xpu/flight"
	"github.com/xpu-go/xpu/internal/tooling/testwait"
)

// Collectives and point-to-point entries, kept in rings of their own, come
// out of Entries as one record in the order they were posted.
func TestCollectivesMergeInOrder(t *testing.T) {
	r := newRec(t, 8, 0, 2)
	send := r.Post(flight.OpSend, 1, 3, 8)
	c1 := r.PostCollective(flight.OpAllreduce, flight.NoPeer, 4, "float64", "sum")
	recv := r.Post(flight.OpRecv, 1, 4, 8)
	c1.End(nil, false)
	c2 := r.PostCollective(flight.OpBcast, 1, 2, "int32", "")
	r.Record(flight.OpSend, 1, 5, 8)
	send.End(nil, false)
	es, dropped := r.Entries()
	require.Len(t, es, 5)
	assert.Zero(t, dropped)
	var ops []flight.Op
	for i, e := range es {
		assert.Equal(t, uint64(i+1), e.ID)
		ops = append(ops, e.Op)
	}
	assert.Equal(t, []flight.Op{flight.OpSend, flight.OpAllreduce, flight.OpRecv, flight.OpBcast, flight.OpSend}, ops)
	assert.Equal(t, []flight.State{flight.Done, flight.Done, flight.Posted, flight.Posted, flight.Done},
		[]flight.State{es[0].State, es[1].State, es[2].State, es[3].State, es[4].State})
	assert.Equal(t, "float64", es[1].DType)
	assert.Equal(t, "sum", es[1].Reduction)
	assert.Equal(t, 1, es[3].Peer)
	assert.True(t, es[3].Ended.IsZero(), "a collective in progress has not ended")
	assert.False(t, es[1].Ended.Before(es[1].Posted))
	recv.End(nil, false)
	c2.End(nil, false)
}

// Each ring keeps the last entries; the record keeps the newest of both,
// as many as the recorder's size, and counts the others dropped. A failed
// collective's error goes when its entry does.
func TestCollectiveRingWraps(t *testing.T) {
	r := newRec(t, 4, 0, 2)
	r.PostCollective(flight.OpBarrier, flight.NoPeer, 0, "", "").End(errors.New("lost"), false)
	for range 9 {
		r.PostCollective(flight.OpBarrier, flight.NoPeer, 0, "", "").End(nil, false)
	}
	es, dropped := r.Entries()
	require.Len(t, es, 4)
	assert.Equal(t, uint64(6), dropped)
	for i, e := range es {
		assert.Equal(t, uint64(7+i), e.Seq)
		assert.Equal(t, flight.Done, e.State)
		assert.Empty(t, e.Err)
	}
	for i := range 3 {
		r.Post(flight.OpSend, 1, i, 1)
	}
	es, dropped = r.Entries()
	require.Len(t, es, 4)
	assert.Equal(t, uint64(13-4), dropped)
	assert.Equal(t, []flight.Op{flight.OpBarrier, flight.OpSend, flight.OpSend, flight.OpSend},
		[]flight.Op{es[0].Op, es[1].Op, es[2].Op, es[3].Op})
	assert.Equal(t, uint64(10), es[0].Seq)
}

// A collective ended on another goroutine than the one that posted it (a
// nonblocking one) ends it: the next collective is recorded.
func TestCollectiveEndedElsewhere(t *testing.T) {
	r := newRec(t, 8, 0, 2)
	tk := r.PostCollective(flight.OpAllgather, flight.NoPeer, 8, "byte", "")
	done := make(chan struct{})
	go func() { defer close(done); tk.End(errors.New("peer lost"), false) }()
	testwait.Closed(t, done, "the End on another goroutine")
	next := r.PostCollective(flight.OpBarrier, flight.NoPeer, 0, "", "")
	require.True(t, next.Valid(), "the collective after one ended elsewhere is recorded")
	next.End(nil, false)
	es, _ := r.Entries()
	require.Len(t, es, 2)
	assert.Equal(t, flight.Failed, es[0].State)
	assert.Equal(t, "peer lost", es[0].Err)
	assert.Equal(t, uint64(2), es[1].Seq)
}

// Collectives one after another on one goroutine, point-to-point entries
// on others, and dumps at the same time (run under -race, and without it,
// where a collective's End is a plain store): every collective entry read
// is whole — its count is its sequence number, and an ended one ended no
// earlier than it was posted.
func TestCollectivesConcurrent(t *testing.T) {
	r := newRec(t, 64, 0, 2)
	const colls, sends = 3000, 500
	var wg sync.WaitGroup
	wg.Go(func() {
		for i := range colls {
			tk := r.PostCollective(flight.OpAllreduce, flight.NoPeer, int64(i+1), "float64", "sum")
			if !tk.Valid() {
				t.Errorf("collective %d not recorded", i+1)
				return
			}
			tk.End(nil, false)
		}
	})
	for g := range 2 {
		wg.Go(func() {
			for i := range sends {
				tk := r.Post(flight.OpSend, 1, g, int64(i))
				tk.Matched()
				tk.End(nil, false)
			}
		})
	}
	check := func(es []flight.Entry) {
		for _, e := range es {
			if e.Op != flight.OpAllreduce {
				continue
			}
			if uint64(e.Count) != e.Seq {
				t.Errorf("entry %d: count %d, seq %d: a torn entry", e.ID, e.Count, e.Seq)
			}
			if e.State != flight.Posted && e.State != flight.Done {
				t.Errorf("entry %d: state %v", e.ID, e.State)
			}
			if e.State == flight.Done && e.Ended.Before(e.Posted) {
				t.Errorf("entry %d ended before it was posted", e.ID)
			}
		}
	}
	wg.Go(func() {
		for range 200 {
			es, _ := r.Entries()
			check(es)
			var b bytes.Buffer
			_, err := r.WriteTo(&b)
			assert.NoError(t, err)
		}
	})
	testwait.Group(t, &wg, "recording collectives and sends, and dumping")
	es, dropped := r.Entries()
	assert.Len(t, es, 64)
	assert.Equal(t, uint64(colls+2*sends-64), dropped)
	check(es)
	// IDs number the whole record, collectives posted among sends on
	// other goroutines included, with none left out or given twice.
	for i := 1; i < len(es); i++ {
		assert.Equal(t, es[i-1].ID+1, es[i].ID)
	}
	assert.Equal(t, uint64(colls+2*sends), es[len(es)-1].ID)
}

// The ticket of a collective that ended, whose slot a later collective
// took, changes nothing: not the later entry, nor the collective in
// progress (a second End that cleared it would let the next collective
// in, recorded as a separate one).
func TestStaleCollectiveTicket(t *testing.T) {
	r := newRec(t, 4, 0, 2)
	old := r.PostCollective(flight.OpBarrier, flight.NoPeer, 0, "", "")
	old.End(nil, false)
	for range 3 {
		r.PostCollective(flight.OpBarrier, flight.NoPeer, 0, "", "").End(nil, false)
	}
	cur := r.PostCollective(flight.OpBcast, 0, 8, "", "") // old's slot
	require.True(t, cur.Valid())
	old.End(errors.New("late"), false)
	assert.False(t, r.PostCollective(flight.OpBarrier, flight.NoPeer, 0, "", "").Valid(),
		"a stale ticket ended the collective in progress")
	es, _ := r.Entries()
	require.Len(t, es, 4)
	last := es[len(es)-1]
	assert.Equal(t, flight.OpBcast, last.Op)
	assert.Equal(t, flight.Posted, last.State)
	assert.Empty(t, last.Err)
	cur.End(nil, false)
}

// A program that runs collectives of one communicator side by side breaks
// the contract PostCollective relies on; its record may mix them, but
// recording and reading stay memory-safe and race-free (run under -race),
// and every entry read is one of theirs.
func TestCollectivesSideBySide(t *testing.T) {
	r := newRec(t, 16, 0, 2)
	var wg sync.WaitGroup
	for _, op := range []flight.Op{flight.OpAllreduce, flight.OpBcast} {
		wg.Go(func() {
			for i := range 2000 {
				r.PostCollective(op, 0, int64(i), "float64", "sum").End(nil, false)
			}
		})
	}
	wg.Go(func() {
		for range 100 {
			es, _ := r.Entries()
			for _, e := range es {
				if e.Op != flight.OpAllreduce && e.Op != flight.OpBcast {
					t.Errorf("entry %d: op %v, which nobody posted", e.ID, e.Op)
				}
			}
		}
	})
	testwait.Group(t, &wg, "collectives side by side, and reading")
}
