package flight

import (
	"context"
	"errors"
	"math/bits"
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
	r *Recorder
	// key numbers the entry in its ring, from 1: a pending entry's fin
	// word holds it (pendingFin), so that a ticket changes its own entry
	// and never one the ring put in its slot later.
	key    uint64
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

// slot is a point-to-point or one-sided entry as the ring keeps it: its
// words, by the indexes below, with times as clock readings and no
// pointer, so that writing one costs stores and no write barrier. Every
// word is stored with a release and loaded atomically: Post and Record
// write the ring without a lock, while Entries may be reading it (ADR 48).
// The entry's state and end share the word fin, written whole, so that an
// End, which takes no lock, changes both at once. While the entry is
// pending, fin holds its key (pendingFin), so that an End changes its own
// entry and not the next one the ring puts in the slot; once ended, it
// holds the entry's generation (finOf), so that Entries tells an end that
// landed on a later entry's slot from that entry's own (settle).
type slot struct{ w [pWords]uint64 }

// The words of a slot, in the order put stores them.
const (
	pSeq    = iota // key<<1|1 while the entry is being written, key<<1 once written
	pCount         // an int64
	pPosted        // an int64: nanoseconds of the clock
	pMeta          // op, peer and tag (metaOf)
	pFin           // state | generation | time to its end (finOf); its key while pending
	pWords
)

// metaOf packs an entry's operation, peer and tag into one word: the op
// in the low byte, the peer's 24 bits above it (ranks and AnyPeer,
// NoPeer), the tag's 32 bits on top.
func metaOf(op Op, peer, tag int) uint64 {
	return uint64(op) | uint64(uint32(int32(peer))&(1<<24-1))<<8 | uint64(uint32(int32(tag)))<<32
}

// unmeta is metaOf's inverse.
func unmeta(m uint64) (op Op, peer, tag int) {
	return Op(m), int(int32(uint32(m>>8)<<8) >> 8), int(int32(uint32(m >> 32)))
}

// The fin word of an ended entry: its state in the low finShift bits,
// its generation in the genBits above them, and the time from posted to
// ended, in units of 2^durUnit ns (~1 µs), in the rest (up to maxDur
// units, ~78 hours; a longer time reads as maxDur). A pending entry's
// holds its key above its state.
const (
	finShift = 6
	genBits  = 20
	durShift = finShift + genBits
	durUnit  = 10
	maxDur   = 1<<(64-durShift) - 1
)

// gen is the generation of the entry of key (from 1) in a ring of
// 1<<shift slots: how many times the ring had gone round before it, in
// genBits bits. Two entries of one slot have generations that differ
// unless 2^20 rounds of the ring came between them.
func gen(key uint64, shift uint8) uint64 { return (key - 1) >> shift & (1<<genBits - 1) }

// finOf is the fin word of an entry of generation g completed in state
// st.
func finOf(st State, g uint64, posted, ended int64) uint64 {
	return min(uint64(max(ended-posted, 0))>>durUnit, maxDur)<<durShift | g<<finShift | uint64(st)
}

// finGen is the generation an ended entry's fin word holds.
func finGen(fin uint64) uint64 { return fin >> finShift & (1<<genBits - 1) }

// finDur is the time from posted to ended that an ended entry's fin word
// holds, in nanoseconds, to its unit (~1 µs).
func finDur(fin uint64) int64 { return int64(fin>>durShift) << durUnit }

// pendingFin is the fin word of the entry of key while pending in state
// st.
func pendingFin(key uint64, st State) uint64 { return key<<finShift | uint64(st) }

// finState is the state a fin word holds.
func finState(fin uint64) State { return State(fin & (1<<finShift - 1)) }

// Recorder is a ring of the last operations of one rank of one
// communicator. It is safe for concurrent use. A nil *Recorder, or one of
// size Off, records nothing and costs a nil check.
//
// It keeps two rings of the same length: one for point-to-point and
// one-sided operations, and one for collectives, which run one at a time.
// Both are written without a lock (ADR 48); the lock serializes readers,
// and keeps errors and names. Entries merges the rings in the order their
// entries were posted, and numbers them.
type Recorder struct {
	mu    sync.Mutex
	ring  []slot  // point-to-point and one-sided entries, a power of two long
	coll  []cslot // collectives, as long
	mask  uint64  // len(ring) - 1
	shift uint8   // log2(len(ring))
	// names are the names of types and reductions that collective entries
	// index: "byte", then as met. The slice is replaced, never changed,
	// under mu, so that PostCollective reads it without the lock.
	names atomic.Pointer[[]string]
	// perrs and cerrs are the errors of failed entries, by slot of each
	// ring, with their keys (made at the first). Under mu.
	perrs, cerrs []entryErr
	// pn counts the entries ever put in ring: Post and Record each take
	// the next index with one atomic add.
	pn atomic.Uint64
	// cs counts the collectives ever recorded, shifted left once, with
	// the low bit set while one is in progress: one started inside it (a
	// wrapper delegating, staging) is part of it. It is written only by the
	// collective in progress, with a release, and read atomically
	// (coll.go): one word, so that a post and an end store it once each.
	cs uint64
	// clk is the shared clock the recorder reads (now), or noClock: it
	// reads 0 once stopped, and the recorder then reads time.Now.
	clk     *clock
	closed  atomic.Bool
	dumped  bool // DumpOnce wrote the record
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
	r := &Recorder{ring: make([]slot, n), coll: make([]cslot, n), mask: uint64(n - 1),
		shift: uint8(bits.TrailingZeros(uint(n))), context: ctx,
		serial: serials.Add(1), clk: &noClock}
	r.names.Store(&[]string{"byte"})
	if closable {
		r.clk = startClock()
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
// readable; later operations are still recorded, with times read from the
// clock while other recorders keep it running, and from time.Now once it
// stops. Close is idempotent.
func (r *Recorder) Close() {
	if r == nil {
		return
	}
	unregister(r)
	if !r.closed.Swap(true) && r.clk != nil && r.clk != &noClock {
		r.clk.stop()
	}
}

// Context returns whose record it is.
func (r *Recorder) Context() Context {
	if r == nil {
		return Context{}
	}
	return r.context
}

// now reads the clock, and time.Now when the clock is not running. It
// is inlined: a call cost a record ~1–2 ns (ADR 50).
func (r *Recorder) now() int64 {
	if t := atomic.LoadInt64(&r.clk.t); t != 0 {
		return t
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
	i, key, now := r.put(op, peer, tag, count, Posted)
	return Ticket{r: r, key: key, posted: now, at: i << 1}
}

// Record records an operation that completed as it started (an eager
// send written at once): posted and done in one entry.
func (r *Recorder) Record(op Op, peer, tag int, count int64) {
	if r == nil || len(r.ring) == 0 {
		return
	}
	r.put(op, peer, tag, count, Done)
}

// put writes the next entry of the point-to-point ring and returns its
// slot, key and posted time. It takes the entry's index with one atomic
// add, the only locked instruction of a record: the lock and unlock it
// replaced cost a turn of BenchmarkTurnaround ~35 ns (ADR 48). The slot's
// words are stored in order, each with a release, in one call
// (order.ReleaseRecord): pSeq first, marked being written, then the
// entry, then pSeq marked written. A reader that sees the entry's key
// written in pSeq before and after reading the other words has read them
// whole (heldP2P). Two writers meet in one slot only when one is a ring's
// length of entries late; the slot is then left marked by one of them,
// possibly with words of both, never a word torn.
func (r *Recorder) put(op Op, peer, tag int, count int64, st State) (uint32, uint64, int64) {
	key := r.pn.Add(1)
	i := uint32((key - 1) & r.mask)
	fin := gen(key, r.shift)<<finShift | uint64(st) // finOf, ended as posted
	if st.Pending() {
		fin = pendingFin(key, st)
	}
	now := r.now()
	order.ReleaseRecord(&r.ring[i].w, key<<1|1, uint64(count), uint64(now), metaOf(op, peer, tag), fin, key<<1)
	return i, key, now
}

// Matched records that the operation found its match.
func (t Ticket) Matched() {
	if t.r == nil || t.coll() {
		return
	}
	atomic.CompareAndSwapUint64(&t.r.ring[t.slot()].w[pFin], pendingFin(t.key, Posted), pendingFin(t.key, Matched))
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

// Completed records that the operation completed without an error: it is
// End(nil, false), made in fewer calls, for the path every successful
// operation takes (ADR 50).
func (t Ticket) Completed() {
	if t.r == nil {
		return
	}
	if t.coll() {
		t.endColl(Done, nil)
		return
	}
	t.settle(&t.r.ring[t.slot()].w[pFin], Done)
}

// End records how the operation completed: done when err is nil,
// cancelled when cancelled, failed otherwise. Only the first End counts;
// a ticket's Ends come one at a time (its operation completes once), as
// they do from its request. End takes no lock, nor any locked
// instruction, unless the operation failed: an End is a load and a
// release store of the entry's fin word (settle, ADR 50), and a
// collective's ticket is ended once, by one goroutine at a time (its
// later Ends, in order, change nothing), with a release store. A receive
// posted before its message came thus pays less for its record, at its
// completion, than Record does (ADR 47).
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
	fin := &t.r.ring[t.slot()].w[pFin]
	if state != Failed {
		t.settle(fin, state)
		return
	}
	// The error goes with the state, under r.mu, where Entries reads both.
	t.r.mu.Lock()
	if t.settle(fin, state) {
		t.r.perrs = keepErr(t.r.perrs, len(t.r.ring), t.slot(), t.key, err)
	}
	t.r.mu.Unlock()
}

// settle writes the end of t's point-to-point entry into its fin word
// while the entry is pending and still t's, and reports whether it did.
// The word holds t's key while pending (pendingFin), so a slot that the
// ring has given to a later entry, whose fin holds another key, is left
// alone.
//
// It is a load and a release store, not a compare-and-swap: a locked
// instruction here cost ~9 ns of every receive that waited, between its
// message and the caller (ADR 50). A Matched between the load and the
// store is overwritten by the end, as after it. Only one End of a ticket
// counts: its callers complete a request once (p2p.Done). The one case
// the swap covered and the store does not: a ring's length of entries
// posted between the load and the store, the goroutine off its processor
// there. The slot is then a later entry's, and the store may land on its
// fin word. That word then holds t's generation, not the slot's (finOf),
// and Entries leaves the entry out, counted as dropped, rather than give
// it t's end.
func (t Ticket) settle(fin *uint64, state State) bool {
	if f := atomic.LoadUint64(fin); !finState(f).Pending() || f>>finShift != t.key {
		return false
	}
	order.Release(fin, t.endWord(state, t.r.now()))
	return true
}

// endWord is the fin word of t's entry ended at now in state.
func (t Ticket) endWord(state State, now int64) uint64 {
	return finOf(state, gen(t.key, t.r.shift), t.posted, now)
}

// entryErr is the error of a failed entry, kept by its slot with the
// entry's key: a later entry in the slot has another.
type entryErr struct {
	key uint64
	err string
}

// keepErr keeps err, the error of entry key, in slot i of errs, a ring's
// table of n slots made at its first error, and returns the table; r.mu
// is held.
func keepErr(errs []entryErr, n int, i uint32, key uint64, err error) []entryErr {
	if errs == nil {
		errs = make([]entryErr, n)
	}
	errs[i] = entryErr{key: key, err: err.Error()}
	return errs
}

// errOf returns the error kept in slot i of errs for entry key, if any.
func errOf(errs []entryErr, i, key uint64) string {
	if errs != nil && errs[i].key == key {
		return errs[i].err
	}
	return ""
}

// Valid reports whether t names an entry.
func (t Ticket) Valid() bool { return t.r != nil }
