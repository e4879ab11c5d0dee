package flight

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/xpu-go/xpu/internal/order"
)

// An End whose goroutine left its processor between its look at the fin
// word and its store, while the ring went round and gave the slot to a
// later, pending entry, lands on that entry's fin word. Entries then
// leaves that entry out, counted as dropped: it never reads as ended with
// another entry's end.
func TestLateEndOnAReusedSlot(t *testing.T) {
	r := New(4, Context{})
	defer r.Close()
	first := r.Post(OpRecv, 1, 7, 8)
	for i := 1; i <= 4; i++ {
		r.Post(OpSend, 1, i, 8) // the fifth entry, tag 4, takes first's slot
	}
	// settle's store, after its look found first's key.
	order.Release(&r.ring[first.slot()].w[pFin], first.endWord(Done, r.now()))
	es, dropped := r.Entries()
	require.Len(t, es, 3)
	assert.Equal(t, uint64(2), dropped)
	for i, e := range es {
		assert.Equal(t, i+1, e.Tag)
		assert.Equal(t, Posted, e.State, "entry %d (tag %d)", e.ID, e.Tag)
	}
	// first's own End, late too, finds a word that is not its pending
	// one, and changes nothing.
	first.End(nil, false)
	es, dropped = r.Entries()
	require.Len(t, es, 3)
	assert.Equal(t, uint64(2), dropped)
}

// An entry's fin word keeps its generation and its time to its end: in
// units of 1,024 ns, rounded down, and at most maxDur units, which a
// longer wait reads as.
func TestFinWord(t *testing.T) {
	const unit = 1024 * time.Nanosecond
	for _, c := range []struct {
		dur, want time.Duration
	}{
		{0, 0},
		{unit - 1, 0},
		{unit, unit},
		{1500 * time.Microsecond, 1464 * unit},
		{3 * time.Hour, 3 * time.Hour / unit * unit},
		{1000 * time.Hour, maxDur * unit},
	} {
		f := finOf(Failed, 1<<genBits-1, 100, 100+int64(c.dur))
		assert.Equal(t, Failed, finState(f))
		assert.Equal(t, uint64(1<<genBits-1), finGen(f))
		assert.Equal(t, c.want, time.Duration(finDur(f)), "a time of %v", c.dur)
	}
	assert.Greater(t, time.Duration(maxDur)*unit, 72*time.Hour)
	assert.Equal(t, uint64(0), gen(4, 2))
	assert.Equal(t, uint64(1), gen(5, 2))
	assert.Equal(t, uint64(0), gen(1<<(genBits+2)+1, 2), "generations wrap at 2^genBits rounds")
	assert.Equal(t, time.Duration(0), time.Duration(finDur(finOf(Done, 0, 200, 100))), "an end before its post")
}
