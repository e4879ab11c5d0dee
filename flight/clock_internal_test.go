package flight

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Entries carry the time they were posted and ended: from the shared
// clock while it runs, to a tick; from time.Now in a recorder that keeps
// none, and in one whose clock has stopped — never a stopped clock's last
// tick, which is older than any time read after it stopped.
func TestTimesWithAndWithoutTheClock(t *testing.T) {
	record := func(r *Recorder) {
		r.Record(OpSend, 1, 0, 8)
		r.Post(OpRecv, 1, 0, 8).End(nil, false)
		r.PostCollective(OpBarrier, NoPeer, 0, "", "").End(nil, false)
	}
	// check checks the last three entries of r.
	check := func(name string, r *Recorder, from time.Time) {
		t.Helper()
		es, _ := r.Entries()
		require.GreaterOrEqual(t, len(es), 3, name)
		to := time.Now()
		for _, e := range es[len(es)-3:] {
			assert.True(t, !e.Posted.Before(from) && !e.Posted.After(to), "%s: entry %d posted at %v, not between %v and %v",
				name, e.ID, e.Posted, from, to)
			assert.False(t, e.Ended.Before(e.Posted), "%s: entry %d", name, e.ID)
		}
	}
	clocked := New(8, Context{})
	closed := New(8, Context{})
	unclocked := NewUnclocked(8, Context{})
	t.Cleanup(unclocked.Close)
	start := time.Now()
	record(clocked)
	check("running clock", clocked, start.Add(-DefaultTick))

	closed.Close()
	clocked.Close()
	clocks.mu.Lock()
	running := clocks.c != nil
	clocks.mu.Unlock()
	require.False(t, running, "another recorder keeps the clock running")
	stopped := time.Now()
	for name, r := range map[string]*Recorder{"stopped clock": clocked, "closed": closed, "unclocked": unclocked} {
		record(r)
		check(name, r, stopped)
	}
}
