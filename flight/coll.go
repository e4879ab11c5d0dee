package flight

import (
	"sync/atomic"
	"unsafe"

	"github.com/xpu-go/xpu/internal/order"
)

// The collective ring is written without a lock (ADR 48). A
// communicator's collectives run one at a time: the one in progress, which
// set r.cs's low bit, is the only writer of the ring and of r.cs until its
// End clears the bit, and the next collective, on whatever goroutine,
// sees that clear (an atomic load of a release store) after every write of
// the one before. Every word of a cslot is stored with a release and
// loaded atomically, because Entries reads the ring while a collective may
// be writing it; it tells a slot being rewritten from a whole one by the
// slot's fin word and by the count in r.cs (heldColls).
//
// A locked instruction here cost a small collective more than the rest of
// its record: it waits for the collective's last stores to shared memory,
// which the other ranks are reading, to leave the processor (ADR 48). So
// does each call of an ordering primitive, ~2–3 ns: a post makes two and
// an end one (ADR 50).

// cslot is a collective's entry in the collective ring: its words, by
// the indexes below. Its sequence number is its index in the ring's
// history plus one, and it keeps how many point-to-point entries were
// posted before it, which places it among them (Entries).
type cslot struct{ w [cWords]uint64 }

// The words of a cslot, fin first: PostCollective stores them in this
// order.
const (
	cFin    = iota // as slot's
	cCount         // an int64
	cPosted        // an int64: nanoseconds of the clock
	cBefore        // r.pn when it was posted
	cKind          // op | dtype<<8 | reduction<<16 | uint32(root)<<32
	cWords
)

// PostCollective records a collective as posted, numbering it with the
// communicator's next sequence number, and returns its ticket. root is
// NoPeer for collectives without one. A collective posted while another
// is in progress (until its ticket's End) is taken for a part of it — a
// wrapper delegating to the communicator it wraps, a collective staged
// through host memory — and not recorded: the zero Ticket is returned.
//
// A communicator's collectives are called in one order by every rank,
// never side by side: PostCollective takes no lock, and relies on that.
// Collectives that a program runs side by side on one communicator, which
// no backend allows, may leave entries of mixed words, never a word torn.
func (r *Recorder) PostCollective(op Op, root int, count int64, dtype, reduction string) Ticket {
	if r == nil || len(r.coll) == 0 {
		return Ticket{}
	}
	cs := atomic.LoadUint64(&r.cs)
	if cs&1 != 0 {
		return Ticket{}
	}
	kind := uint64(op) | uint64(r.nameIndex(dtype))<<8 | uint64(r.nameIndex(reduction))<<16 |
		uint64(uint32(int32(root)))<<32
	n := cs >> 1
	key := n + 1
	i := uint32(n & r.mask)
	now := r.now()
	// The words, fin first, and fin again last: a reader that sees any
	// later word of this entry sees the slot's new key too, or the entry's
	// end (heldColls). Then the count, with the bit that marks a collective
	// in progress.
	fin := pendingFin(key, Posted)
	order.ReleaseRecord(&r.coll[i].w, fin, uint64(count), uint64(now), r.pn.Load(), kind, fin)
	order.Release(&r.cs, key<<1|1)
	return Ticket{r: r, key: key, posted: now, at: i<<1 | 1}
}

// colls is the number of collectives ever recorded.
func (r *Recorder) colls() uint64 { return atomic.LoadUint64(&r.cs) >> 1 }

// nameIndex returns the index of s in the table of names ("" is 0, as
// "byte" for a type and none for a reduction). It reads the table without
// the lock, and adds s under it. The table holds at most 255 names: the
// types and reductions of package comm are far fewer; past it a name
// reads "?".
func (r *Recorder) nameIndex(s string) uint8 {
	if s == "" || s == "byte" { // inlined: no call for the names of most collectives
		return 0
	}
	return r.addName(s)
}

// addName is nameIndex past its first names.
func (r *Recorder) addName(s string) uint8 {
	if i, ok := indexOf(*r.names.Load(), s); ok {
		return i
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	names := *r.names.Load()
	if i, ok := indexOf(names, s); ok {
		return i
	}
	if len(names) == 255 {
		return 255
	}
	grown := append(names[:len(names):len(names)], s)
	r.names.Store(&grown)
	return uint8(len(grown) - 1)
}

// indexOf returns the index of s in names. A name is most often passed as
// the same constant each time, whose bytes are those the table keeps: the
// pointers are compared first, inline, where == calls the runtime.
func indexOf(names []string, s string) (uint8, bool) {
	for i, n := range names {
		if len(n) == len(s) && (unsafe.StringData(n) == unsafe.StringData(s) || n == s) {
			return uint8(i), true
		}
	}
	return 0, false
}

// nameOf is the name of index i in names.
func nameOf(names []string, i uint8) string {
	if int(i) < len(names) {
		return names[i]
	}
	return "?"
}

// endColl ends the collective of t, which holds r.active, and gives it
// up. A ticket whose entry has ended, or whose slot a later collective has
// taken, changes nothing.
func (t Ticket) endColl(state State, err error) {
	r := t.r
	fin := &r.coll[t.slot()].w[cFin]
	f := atomic.LoadUint64(fin)
	if !finState(f).Pending() || f>>finShift != t.key {
		return // ended already
	}
	if state == Failed {
		r.mu.Lock()
		r.cerrs = keepErr(r.cerrs, len(r.coll), t.slot(), t.key, err)
		r.mu.Unlock()
	}
	// The end, then the count without the bit: the collective in progress
	// is the last recorded, t's.
	order.ReleasePair(fin, t.endWord(state, r.now()), &r.cs, t.key<<1)
}
