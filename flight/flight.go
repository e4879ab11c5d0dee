package flight

import (
	"context"
	"errors"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/xpu-go/xpu/internal/order"
	"github.com/xpu-go/xpu/xerr"
)

// The recorder's sizes, in entries.
const (
	// DefaultSize is the number of entries a recorder keeps when none is
	// given: the operations of the last few collectives of a large group,
	// or of a few hundred exchanges.
	DefaultSize = 1024
	// MaxSize is the most entries a recorder keeps (about 6 MiB).
	MaxSize = 1 << 16
	// Off, as a size, turns the recorder off: it records nothing.
	Off = 0
)

// Op is the operation an entry records.
type Op uint8

// The operations.
const (
	OpSend Op = iota + 1
	OpRecv
	OpPut
	OpGet
	OpFlush
	OpBarrier
	OpBcast
	OpReduce
	OpAllreduce
	OpGather
	OpScatter
	OpAllgather
	OpAlltoall
	OpReduceScatter
	opEnd
)

var opNames = [...]string{OpSend: "Send", OpRecv: "Recv", OpPut: "Put", OpGet: "Get", OpFlush: "Flush",
	OpBarrier: "Barrier", OpBcast: "Bcast", OpReduce: "Reduce", OpAllreduce: "Allreduce", OpGather: "Gather",
	OpScatter: "Scatter", OpAllgather: "Allgather", OpAlltoall: "Alltoall", OpReduceScatter: "ReduceScatter"}

// String is the operation's name, as the user calls it ("Allreduce").
func (o Op) String() string {
	if o > 0 && o < opEnd {
		return opNames[o]
	}
	return "Op(" + strconv.Itoa(int(o)) + ")"
}

// Collective reports whether o is a collective operation: one every rank
// of the communicator calls, in the same order, and that has a sequence
// number.
func (o Op) Collective() bool { return o >= OpBarrier && o < opEnd }

// HasRoot reports whether o's collective has a root rank.
func (o Op) HasRoot() bool { return o == OpBcast || o == OpReduce || o == OpGather || o == OpScatter }

// State is where an operation stands.
type State uint8

// The states, in the order an operation goes through them.
const (
	// Posted: started, nothing matched it yet.
	Posted State = iota + 1
	// Matched: a receive found its message, or a send its receive; the
	// bytes may still be moving.
	Matched
	// Done: completed.
	Done
	// Failed: completed with an error.
	Failed
	// Cancelled: cancelled, or its context ended, before it completed.
	Cancelled
)

var stateNames = [...]string{Posted: "posted", Matched: "matched", Done: "done", Failed: "failed", Cancelled: "cancelled"}

// String is the state's name ("posted").
func (s State) String() string {
	if s > 0 && int(s) < len(stateNames) {
		return stateNames[s]
	}
	return "State(" + strconv.Itoa(int(s)) + ")"
}

// Pending reports whether the operation has not completed.
func (s State) Pending() bool { return s == Posted || s == Matched }

// AnyPeer and AnyTag are the wildcards of a receive (comm.AnySource and
// comm.AnyTag); NoPeer is the peer of an entry that has none (Barrier).
const (
	AnyPeer = -1
	AnyTag  = -1
	NoPeer  = -2
)

// Entry is one recorded operation.
type Entry struct {
	// ID numbers the recorder's entries from 1, in the order they were
	// posted.
	ID uint64
	Op Op
	// Peer is the destination of a send, Put or Get, the source of a
	// receive (AnyPeer), the root of a rooted collective, the target of
	// a Flush (AnyPeer for all); NoPeer otherwise.
	Peer int
	// Tag is a point-to-point operation's tag (AnyTag); 0 otherwise.
	Tag int
	// Count is the number of elements of DType: bytes for point-to-point
	// and one-sided operations.
	Count int64
	// DType and Reduction name the element type and the reduction of a
	// collective ("float64", "sum"); DType is "byte" for the others.
	DType, Reduction string
	// Seq is a collective's sequence number on its communicator, from 1:
	// every rank's n-th collective has Seq n. 0 for the others.
	Seq   uint64
	State State
	// Posted is when the operation started; Ended when it completed (zero
	// while pending). Both are read from the recorder's clock.
	Posted, Ended time.Time
	// Err is the error a failed operation returned.
	Err string
}

// Ticket names a posted entry, for its later states. The zero Ticket
// names nothing: its calls do nothing.
type Ticket struct {
	r      *Recorder
	id     uint64
	posted int64 // the entry's posted time, for its End
	// at is the entry's slot, shifted left once, with the low bit set
	// for a collective, which ends the recorder's active one. Four
	// fields, not five: the compiler keeps a struct of at most four in
	// registers, and a fifth cost a ticket ~12 ns a post and end.
	at uint32
}

// slot is the index of t's entry in its ring.
func (t Ticket) slot() uint32 { return t.at >> 1 }

// coll reports whether t's entry is a collective's.
func (t Ticket) coll() bool { return t.at&1 != 0 }

// Recorder returns the recorder t belongs to; nil for the zero Ticket.
func (t Ticket) Recorder() *Recorder { return t.r }

// slot is an entry as a ring keeps it: times as clock readings, names
// as indexes into the recorder's table of them (0 is "byte", or none), no
// pointer, so that writing one costs stores and no write barrier. Its
// state and end share the word fin, written whole, so that an End, which
// takes no lock, changes both at once; while the entry is pending, fin
// holds its ID instead of an end (pendingFin), so that a point-to-point
// End, a compare-and-swap, changes its own entry and never the next one
// the ring puts in the slot.
type slot struct {
	id               uint64
	count            int64
	seq              uint64
	posted           int64  // nanoseconds of the clock
	fin              uint64 // state | (ended-posted)<<finShift; ended 0 while pending
	peer, tag        int32
	op               Op
	dtype, reduction uint8
}

// finShift: fin holds the state in its low bits and the time from posted
// to ended, in nanoseconds, above them (2^58 ns: nine years).
const finShift = 6

// finOf is the fin word of an entry completed in state st.
func finOf(st State, posted, ended int64) uint64 {
	return uint64(max(ended-posted, 0))<<finShift | uint64(st)
}

// pendingFin is the fin word of entry id while pending in state st.
func pendingFin(id uint64, st State) uint64 { return id<<finShift | uint64(st) }

// Recorder is a ring of the last operations of one rank of one
// communicator. It is safe for concurrent use. A nil *Recorder, or one of
// size Off, records nothing and costs a nil check.
//
// It keeps two rings of the same length: one for point-to-point and
// one-sided operations, written under mu, and one for collectives, one
// at a time, whose End takes no lock (a collective costs one lock, not
// two: ADR 46). Entries merges them by ID.
type Recorder struct {
	mu   sync.Mutex
	ring []slot // point-to-point and one-sided entries, a power of two long
	coll []slot // collectives, as long
	mask uint64 // len(ring) - 1
	// names are the names slots index: "byte", then as met.
	names []string
	// errs are the errors of failed entries still in a ring, by ID.
	errs map[uint64]string
	next uint64 // the ID of the next entry
	pn   uint64 // the entries ever posted in ring
	cn   uint64 // the entries ever posted in coll
	seq  uint64 // the last collective's sequence number
	// active is 1 while a collective is in progress: one started inside
	// it (a wrapper delegating, staging) is part of it. It is set under
	// mu and cleared by the collective's End without it (release), which
	// makes the entry's last writes visible before the next collective's
	// PostCollective sees it clear; the collective ring's slots, r.seq
	// and r.cn are written only by the collective that set it (r.seq and
	// r.cn also under mu).
	active  uint64
	clock   atomic.Pointer[clock] // nil once closed
	dumped  bool                  // DumpOnce wrote the record
	context Context
	serial  uint64 // the process's count of recorders at its making
}

// serials numbers the recorders of the process, so that each writes a
// file of its own.
var serials atomic.Uint64

// Context says whose record it is: it heads each dump.
type Context struct {
	Rank, Size int
	// Backend is the name the backend was opened under ("tcp").
	Backend string
	// Comm tells communicators of one rank apart ("world", "split 2").
	Comm string
}

// New returns a recorder of at least size entries (DefaultSize when size
// < 0, MaxSize when larger; rounded up to a power of two); New(Off)
// returns nil, which records nothing. Close it when the communicator
// closes.
func New(size int, ctx Context) *Recorder {
	n, ok := ringSize(size)
	if !ok {
		return nil
	}
	return newRecorder(n, ctx, true)
}

// ringSize is the ring's length for size: false for Off.
func ringSize(size int) (int, bool) {
	switch {
	case size == Off:
		return 0, false
	case size < 0:
		size = DefaultSize
	case size > MaxSize:
		size = MaxSize
	}
	n := 1
	for n < size {
		n <<= 1
	}
	return n, true
}

// newRecorder makes a recorder of n entries (a power of two); one that
// will be closed (closable) starts a share of the clock and of the
// signal watcher.
func newRecorder(n int, ctx Context, closable bool) *Recorder {
	r := &Recorder{ring: make([]slot, n), coll: make([]slot, n), mask: uint64(n - 1), names: []string{"byte"}, next: 1,
		context: ctx, serial: serials.Add(1)}
	if closable {
		r.clock.Store(startClock())
	}
	register(r, closable)
	return r
}

// NewUnclocked is New for a recorder whose Close may never come (one kept
// for a communicator by someone who does not see it close): it starts no
// goroutine, nor keeps one running, and reads time.Now for each entry.
// Like New's, it is written by WriteAll, and on the signals while a
// recorder of New is open, until it is closed.
func NewUnclocked(size int, ctx Context) *Recorder {
	n, ok := ringSize(size)
	if !ok {
		return nil
	}
	return newRecorder(n, ctx, false)
}

// Close stops the recorder's share of the clock. The record stays
// readable; later operations are still recorded, with times read from
// time.Now. Close is idempotent.
func (r *Recorder) Close() {
	if r == nil {
		return
	}
	c := r.clock.Swap(nil)
	unregister(r)
	if c != nil {
		c.stop()
	}
}

// Context returns whose record it is.
func (r *Recorder) Context() Context {
	if r == nil {
		return Context{}
	}
	return r.context
}

// now reads the clock.
func (r *Recorder) now() int64 {
	if c := r.clock.Load(); c != nil {
		return c.t.Load()
	}
	return wallNow()
}

// wallNow is the time without the shared clock.
func wallNow() int64 { return time.Now().UnixNano() }

// Post records a point-to-point or one-sided operation of count bytes as
// posted and returns its ticket. peer and tag are as Entry has them.
func (r *Recorder) Post(op Op, peer, tag int, count int64) Ticket {
	if r == nil || len(r.ring) == 0 {
		return Ticket{}
	}
	r.mu.Lock()
	i, id, now := r.put(r.ring, &r.pn, op, peer, tag, count, 0, 0, 0, Posted)
	r.mu.Unlock()
	return Ticket{r: r, id: id, posted: now, at: i << 1}
}

// PostCollective records a collective as posted, numbering it with the
// communicator's next sequence number, and returns its ticket. root is
// NoPeer for collectives without one. A collective posted while another
// is in progress (until its ticket's End) is taken for a part of it — a
// wrapper delegating to the communicator it wraps, a collective staged
// through host memory — and not recorded: the zero Ticket is returned.
// A communicator's collectives are called in one order by every rank,
// never side by side.
func (r *Recorder) PostCollective(op Op, root int, count int64, dtype, reduction string) Ticket {
	if r == nil {
		return Ticket{}
	}
	r.mu.Lock()
	if atomic.LoadUint64(&r.active) != 0 || len(r.ring) == 0 {
		r.mu.Unlock()
		return Ticket{}
	}
	order.Release(&r.active, 1)
	r.seq++
	i, id, now := r.put(r.coll, &r.cn, op, root, 0, count, r.seq, r.name(dtype), r.name(reduction), Posted)
	r.mu.Unlock()
	return Ticket{r: r, id: id, posted: now, at: i<<1 | 1}
}

// finState is the state a fin word holds.
func finState(fin uint64) State { return State(fin & (1<<finShift - 1)) }

// name returns the index of s in the table of names ("" is 0, as
// "byte" for a type and none for a reduction); r.mu is held. The table
// holds at most 255 names: the types and reductions of package comm are
// far fewer; past it a name reads "?".
func (r *Recorder) name(s string) uint8 {
	if s == "" {
		return 0
	}
	for i, n := range r.names {
		if n == s {
			return uint8(i)
		}
	}
	if len(r.names) == 255 {
		return 255
	}
	r.names = append(r.names, s)
	return uint8(len(r.names) - 1)
}

// nameOf is the name of index i; r.mu is held.
func (r *Recorder) nameOf(i uint8) string {
	if int(i) < len(r.names) {
		return r.names[i]
	}
	return "?"
}

// Record records an operation that completed as it started (an eager
// send written at once): posted and done in one entry.
func (r *Recorder) Record(op Op, peer, tag int, count int64) {
	if r == nil || len(r.ring) == 0 {
		return
	}
	r.mu.Lock()
	r.put(r.ring, &r.pn, op, peer, tag, count, 0, 0, 0, Done)
	r.mu.Unlock()
}

// forget drops the error of entry id, which the ring drops; r.mu is
// held.
func (r *Recorder) forget(id uint64) { delete(r.errs, id) }

// put writes the next entry of ring, of which *n have been posted, with
// the next ID, and returns its slot, ID and posted time; r.mu is held.
// Its words but fin are written plainly: Entries reads them under r.mu
// too, and the collective that last held a slot of the collective ring
// ended (its End's release of r.active) before this one could post. fin
// is stored and loaded atomically: the End of the slot's last
// point-to-point entry may be looking at it without r.mu (Ticket.settle).
func (r *Recorder) put(ring []slot, n *uint64, op Op, peer, tag int, count int64, seq uint64, dtype, reduction uint8, st State) (uint32, uint64, int64) {
	id := r.next
	r.next++
	i := uint32(*n & r.mask)
	*n++
	s := &ring[i]
	if finState(atomic.LoadUint64(&s.fin)) == Failed {
		r.forget(s.id)
	}
	fin := uint64(st)
	if st.Pending() {
		fin = pendingFin(id, st)
	}
	now := r.now()
	// Field by field: a composite literal is built apart and copied.
	s.id, s.count, s.seq, s.posted = id, count, seq, now
	s.peer, s.tag, s.op, s.dtype, s.reduction = int32(peer), int32(tag), op, dtype, reduction
	order.Release(&s.fin, fin)
	return i, id, now
}

// Matched records that the operation found its match.
func (t Ticket) Matched() {
	if t.r == nil || t.coll() {
		return
	}
	atomic.CompareAndSwapUint64(&t.r.ring[t.slot()].fin, pendingFin(t.id, Posted), pendingFin(t.id, Matched))
}

// Finish is End with the state told by err: done when nil, cancelled when
// it matches xerr.ErrCanceled or a context's end, failed otherwise.
func (t Ticket) Finish(err error) {
	if t.r == nil {
		return
	}
	t.End(err, err != nil && (errors.Is(err, xerr.ErrCanceled) ||
		errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded)))
}

// End records how the operation completed: done when err is nil,
// cancelled when cancelled, failed otherwise. Only the first End counts.
// End takes no lock unless the operation failed: a point-to-point End is
// a compare-and-swap of the entry's fin word (settle), and a collective's
// ticket is ended once, by one goroutine at a time (its later Ends, in
// order, change nothing), with a release store. A receive posted before
// its message came thus pays less for its record, at its completion, than
// Record does (ADR 47).
func (t Ticket) End(err error, cancelled bool) {
	if t.r == nil {
		return
	}
	state := Done
	switch {
	case cancelled:
		state = Cancelled
	case err != nil:
		state = Failed
	}
	if t.coll() {
		t.endColl(state, err)
		return
	}
	fin := &t.r.ring[t.slot()].fin
	if state != Failed {
		t.settle(fin, state)
		return
	}
	// The error goes with the state, under r.mu, where Entries reads both
	// and put forgets it.
	t.r.mu.Lock()
	if t.settle(fin, state) {
		t.r.failed(t.id, err)
	}
	t.r.mu.Unlock()
}

// settle writes the end of t's point-to-point entry into its fin word
// while the entry is pending and still t's, and reports whether it did.
// The word holds t's ID while pending (pendingFin), so a slot that the
// ring has given to a later entry, whose fin holds another ID, is left
// alone; Matched may change the word under it, and settle looks again.
func (t Ticket) settle(fin *uint64, state State) bool {
	for {
		f := atomic.LoadUint64(fin)
		if !finState(f).Pending() || f>>finShift != t.id {
			return false
		}
		if atomic.CompareAndSwapUint64(fin, f, finOf(state, t.posted, t.r.now())) {
			return true
		}
	}
}

// endColl ends the collective of t, which holds r.active: its slot is
// written by it alone, and read whole by Entries.
func (t Ticket) endColl(state State, err error) {
	r := t.r
	s := &r.coll[t.slot()]
	if s.id != t.id || !finState(atomic.LoadUint64(&s.fin)).Pending() {
		return // ended already
	}
	if state == Failed {
		r.mu.Lock()
		r.failed(s.id, err)
		r.mu.Unlock()
	}
	order.Release(&s.fin, finOf(state, t.posted, r.now()))
	order.Release(&r.active, 0)
}

// failed keeps the error of entry id; r.mu is held.
func (r *Recorder) failed(id uint64, err error) {
	if r.errs == nil {
		r.errs = map[uint64]string{}
	}
	r.errs[id] = err.Error()
}

// Valid reports whether t names an entry.
func (t Ticket) Valid() bool { return t.r != nil }

// Entries returns the entries the recorder holds, oldest first, and how
// many older ones it dropped.
func (r *Recorder) Entries() (entries []Entry, dropped uint64) {
	if r == nil {
		return nil, 0
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	p := r.held(r.ring, r.pn)
	c := r.held(r.coll, r.cn)
	// Merge by ID, and keep the newest len(r.ring).
	all := make([]Entry, 0, len(p)+len(c))
	for len(p) > 0 || len(c) > 0 {
		if len(c) == 0 || len(p) > 0 && p[0].ID < c[0].ID {
			all, p = append(all, p[0]), p[1:]
		} else {
			all, c = append(all, c[0]), c[1:]
		}
	}
	if len(all) > len(r.ring) {
		all = all[len(all)-len(r.ring):]
	}
	return all, r.next - 1 - uint64(len(all))
}

// held returns the entries of ring, of which n were ever posted, oldest
// first; r.mu is held. The fin words are read atomically: a collective's
// End writes its own without r.mu.
func (r *Recorder) held(ring []slot, n uint64) []Entry {
	size := uint64(len(ring))
	first := uint64(0)
	if n > size {
		first = n - size
	}
	es := make([]Entry, 0, n-first)
	for k := first; k < n; k++ {
		s := &ring[k&r.mask]
		fin := atomic.LoadUint64(&s.fin)
		e := Entry{ID: s.id, Op: s.op, Peer: int(s.peer), Tag: int(s.tag), Count: s.count, DType: r.nameOf(s.dtype),
			Seq: s.seq, State: finState(fin), Posted: time.Unix(0, s.posted), Err: r.errs[s.id]}
		if s.reduction != 0 {
			e.Reduction = r.nameOf(s.reduction)
		}
		if !e.State.Pending() {
			e.Ended = time.Unix(0, s.posted+int64(fin>>finShift))
		}
		es = append(es, e)
	}
	return es
}
