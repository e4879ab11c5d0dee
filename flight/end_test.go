package flight_test

import (
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/xpu-go/xpu/flight"
	"github.com/xpu-go/xpu/internal/tooling/testwait"
)

// A point-to-point ticket whose slot the ring has given to a later entry
// changes nothing when it ends or matches: its End takes no lock, and the
// slot's fin word, which holds the pending entry's ID, tells it apart.
func TestStaleTicketLeavesItsSlot(t *testing.T) {
	r := newRec(t, 4, 0, 2)
	first := r.Post(flight.OpRecv, 1, 0, 8)
	for i := 1; i < 5; i++ {
		r.Post(flight.OpSend, 1, i, 8) // the fifth entry takes first's slot
	}
	first.Matched()
	first.End(nil, false)
	first.End(nil, true)
	es, _ := r.Entries()
	require.Len(t, es, 4)
	for _, e := range es {
		assert.Equal(t, flight.Posted, e.State, "entry %d (tag %d) was changed by the ticket of the entry it replaced", e.ID, e.Tag)
	}
}

// An End writes its own entry's end: state and end time together, the
// time no earlier than posted, and a later End or Matched changes nothing.
func TestEndWithoutLock(t *testing.T) {
	r := newRec(t, 8, 0, 2)
	recv := r.Post(flight.OpRecv, 1, 3, 8)
	send := r.Post(flight.OpSend, 1, 3, 8)
	recv.Matched()
	recv.End(nil, false)
	recv.End(nil, true)
	recv.Matched()
	send.End(nil, true)
	es, _ := r.Entries()
	require.Len(t, es, 2)
	assert.Equal(t, flight.Done, es[0].State)
	assert.Equal(t, flight.Cancelled, es[1].State)
	for _, e := range es {
		assert.False(t, e.Ended.IsZero(), "entry %d ended without an end time", e.ID)
		assert.False(t, e.Ended.Before(e.Posted), "entry %d ended before it was posted", e.ID)
	}
}

// Tickets ended late, on another goroutine, while a third posts fast
// enough to wrap the ring many times over (run under -race): an entry the
// ring still holds is changed by its own ticket and by no other. The
// fast poster never ends its entries, so each of them must read posted;
// the slow poster ends every one of its own, so each of them the ring
// still holds must read done.
func TestLateEndsWhileTheRingWraps(t *testing.T) {
	r := newRec(t, 8, 0, 2)
	const slow, fast = 1, 2
	tickets := make(chan flight.Ticket, 64)
	var wg sync.WaitGroup
	wg.Add(4)
	go func() {
		defer wg.Done()
		defer close(tickets)
		for range 2000 {
			tickets <- r.Post(flight.OpRecv, 1, slow, 8)
		}
	}()
	go func() {
		defer wg.Done()
		for tk := range tickets {
			tk.Matched()
			tk.End(nil, false)
		}
	}()
	go func() {
		defer wg.Done()
		for range 20000 {
			r.Post(flight.OpSend, 1, fast, 8)
		}
	}()
	go func() {
		defer wg.Done()
		for range 200 {
			checkOwnEnds(t, r, slow, fast, false)
		}
	}()
	testwait.Group(t, &wg, "posts, late ends and reads of a ring of 8")
	checkOwnEnds(t, r, slow, fast, true)
}

// checkOwnEnds reads r and checks that the entries with tag fast are
// posted and those with tag slow done, or, before all have ended
// (!ended), pending.
func checkOwnEnds(t *testing.T, r *flight.Recorder, slow, fast int, ended bool) {
	es, _ := r.Entries()
	for _, e := range es {
		switch {
		case e.Tag == fast:
			assert.Equal(t, flight.Posted, e.State, "entry %d, never ended, reads %v", e.ID, e.State)
		case ended:
			assert.Equal(t, flight.Done, e.State, "entry %d, ended, reads %v", e.ID, e.State)
		default:
			assert.Contains(t, []flight.State{flight.Posted, flight.Matched, flight.Done}, e.State, "entry %d", e.ID)
		}
	}
}

// Completed is End(nil, false): the entry reads done, with its end, and a
// later End or Completed changes nothing; a stale ticket's Completed
// leaves the later entry in its slot alone; the zero Ticket's does
// nothing.
func TestCompleted(t *testing.T) {
	r := newRec(t, 4, 0, 2)
	recv := r.Post(flight.OpRecv, 1, 3, 8)
	coll := r.PostCollective(flight.OpAllreduce, flight.NoPeer, 1, "float64", "sum")
	recv.Completed()
	recv.End(nil, true)
	coll.Completed()
	coll.Completed()
	flight.Ticket{}.Completed()
	es, _ := r.Entries()
	require.Len(t, es, 2)
	for _, e := range es {
		assert.Equal(t, flight.Done, e.State, "entry %d (%v)", e.ID, e.Op)
		assert.False(t, e.Ended.IsZero(), "entry %d ended without an end time", e.ID)
	}
	// A collective after the completed one is recorded: Completed ended
	// the one in progress.
	assert.True(t, r.PostCollective(flight.OpBarrier, flight.NoPeer, 0, "", "").Valid())

	stale := r.Post(flight.OpRecv, 1, 9, 8)
	for i := range 4 {
		r.Post(flight.OpSend, 1, 10+i, 8) // the last takes stale's slot
	}
	stale.Completed()
	es, _ = r.Entries()
	last := es[len(es)-1]
	assert.Equal(t, 13, last.Tag)
	assert.Equal(t, flight.Posted, last.State, "a stale ticket's Completed changed the entry in its slot")
}
