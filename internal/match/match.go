package match

import (
	"iter"

	"github.com/xpu-go/xpu/comm"
	"github.com/xpu-go/xpu/impl"
)

// Entry is the part of a request or message that a Table keeps; embed it.
// Its fields belong to the Table that holds the entry.
type Entry[T any] struct {
	src, tag int
	seq      uint64 // posting order of a receive
	queued   bool
	l        [2]links[T]
}

// links are one pair of list pointers.
type links[T any] struct{ prev, next *T }

// The lists an entry is on: a receive is on one source's list (or the
// AnySource list); a message on its source's list and the arrival list.
const (
	bySource  = 0
	byArrival = 1
)

func (e *Entry[T]) entry() *Entry[T] { return e }

// Queued reports whether the entry is in a Table.
func (e *Entry[T]) Queued() bool { return e.queued }

// Ptr is a pointer to a type that embeds Entry.
type Ptr[T any] interface {
	*T
	entry() *Entry[T]
}

// queue is a doubly linked list through one of the entries' link pairs.
type queue[T any, P Ptr[T]] struct{ head, tail *T }

func (q *queue[T, P]) push(x *T, k int) {
	P(x).entry().l[k] = links[T]{prev: q.tail}
	if q.tail == nil {
		q.head = x
	} else {
		P(q.tail).entry().l[k].next = x
	}
	q.tail = x
}

func (q *queue[T, P]) remove(x *T, k int) {
	e := P(x).entry()
	p, n := e.l[k].prev, e.l[k].next
	if p == nil {
		q.head = n
	} else {
		P(p).entry().l[k].next = n
	}
	if n == nil {
		q.tail = p
	} else {
		P(n).entry().l[k].prev = p
	}
	e.l[k] = links[T]{}
}

// all yields the entries of q in order, through link pair k. The loop body
// may remove the entry it is given, and no other.
func (q *queue[T, P]) all(k int) iter.Seq[P] {
	return func(yield func(P) bool) {
		for x := q.head; x != nil; {
			next := P(x).entry().l[k].next
			if !yield(P(x)) {
				return
			}
			x = next
		}
	}
}

// first returns the first entry of q, through link pair k, that tag
// matches: as a message's tag when recv (q holds posted receives), as a
// receive's tag otherwise (q holds messages).
func (q *queue[T, P]) first(k int, tag int, recv bool) P {
	for x := q.head; x != nil; x = P(x).entry().l[k].next {
		e := P(x).entry()
		if recv && impl.MatchTag(e.tag, tag) || !recv && impl.MatchTag(tag, e.tag) {
			return P(x)
		}
	}
	return nil
}

// Table is the matching state of one rank of a group of Size ranks. The
// zero Table is not ready: call Init.
type Table[T any, P Ptr[T]] struct {
	posted    []queue[T, P] // posted receives by source (not AnySource)
	postedAny queue[T, P]   // posted AnySource receives
	seq       uint64
	unexp     []queue[T, P] // unexpected messages by source
	arrivals  queue[T, P]   // every unexpected message, in arrival order
}

// Init readies t for a group of size ranks, emptying it.
func (t *Table[T, P]) Init(size int) {
	*t = Table[T, P]{posted: make([]queue[T, P], size), unexp: make([]queue[T, P], size)}
}

// Post queues the receive r for a message from src (or comm.AnySource)
// with tag (or comm.AnyTag). r must not be queued.
func (t *Table[T, P]) Post(r P, src, tag int) {
	e := r.entry()
	t.seq++
	*e = Entry[T]{src: src, tag: tag, seq: t.seq, queued: true}
	if src == comm.AnySource {
		t.postedAny.push((*T)(r), bySource)
		return
	}
	t.posted[src].push((*T)(r), bySource)
}

// Unpost removes the posted receive r, which must be queued.
func (t *Table[T, P]) Unpost(r P) {
	e := r.entry()
	if e.src == comm.AnySource {
		t.postedAny.remove((*T)(r), bySource)
	} else {
		t.posted[e.src].remove((*T)(r), bySource)
	}
	e.queued = false
}

// TakePosted removes and returns the receive that a message from src with
// tag goes to (see the package documentation), or nil.
func (t *Table[T, P]) TakePosted(src, tag int) P {
	a := t.posted[src].first(bySource, tag, true)
	b := t.postedAny.first(bySource, tag, true)
	if a == nil || (b != nil && b.entry().seq < a.entry().seq) {
		a = b
	}
	if a != nil {
		t.Unpost(a)
	}
	return a
}

// Arrive queues the unexpected message m from src with tag. m must not be
// queued.
func (t *Table[T, P]) Arrive(m P, src, tag int) {
	*m.entry() = Entry[T]{src: src, tag: tag, queued: true}
	t.unexp[src].push((*T)(m), bySource)
	t.arrivals.push((*T)(m), byArrival)
}

// Unqueue removes the unexpected message m, which must be queued.
func (t *Table[T, P]) Unqueue(m P) {
	e := m.entry()
	t.unexp[e.src].remove((*T)(m), bySource)
	t.arrivals.remove((*T)(m), byArrival)
	e.queued = false
}

// TakeUnexpected removes and returns the earliest arrived message that a
// receive from src (or comm.AnySource) with tag (or comm.AnyTag) takes,
// or nil.
func (t *Table[T, P]) TakeUnexpected(src, tag int) P {
	var m P
	if src == comm.AnySource {
		m = t.arrivals.first(byArrival, tag, false)
	} else {
		m = t.unexp[src].first(bySource, tag, false)
	}
	if m != nil {
		t.Unqueue(m)
	}
	return m
}

// PostedFrom yields the receives posted for src, in posting order. The
// loop body may unpost the receive it is given, and no other.
func (t *Table[T, P]) PostedFrom(src int) iter.Seq[P] { return t.posted[src].all(bySource) }

// PostedAny yields the AnySource receives, in posting order. The loop body
// may unpost the receive it is given, and no other.
func (t *Table[T, P]) PostedAny() iter.Seq[P] { return t.postedAny.all(bySource) }

// Posted yields every posted receive: those for each source in turn, then
// the AnySource ones. The loop body may unpost the receive it is given,
// and no other.
func (t *Table[T, P]) Posted() iter.Seq[P] {
	return func(yield func(P) bool) {
		for i := range t.posted {
			for r := range t.posted[i].all(bySource) {
				if !yield(r) {
					return
				}
			}
		}
		for r := range t.postedAny.all(bySource) {
			if !yield(r) {
				return
			}
		}
	}
}

// UnexpectedFrom yields the unexpected messages from src, in arrival
// order. The loop body may unqueue the message it is given, and no other.
func (t *Table[T, P]) UnexpectedFrom(src int) iter.Seq[P] { return t.unexp[src].all(bySource) }

// Arrivals yields every unexpected message, in arrival order. The loop
// body may unqueue the message it is given, and no other.
func (t *Table[T, P]) Arrivals() iter.Seq[P] { return t.arrivals.all(byArrival) }
