package flight

import (
	"sync/atomic"
	"time"
)

// held is an entry read from a ring, with its index in that ring's
// history and, for a collective, the point-to-point entries posted before
// it.
type held struct {
	Entry
	at, before uint64
}

// Entries returns the entries the recorder holds, oldest first, and how
// many older ones it dropped.
//
// The two rings are merged in the order their entries were posted: a
// collective comes after the point-to-point entries posted before it
// (its word cBefore), and before the others. A point-to-point entry posted at
// the same moment as a collective, on another goroutine, may come on
// either side of it. IDs number the merged record from 1.
func (r *Recorder) Entries() (entries []Entry, dropped uint64) {
	if r == nil || len(r.ring) == 0 { // off, or a Recorder's zero value
		return nil, 0
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	names := *r.names.Load()
	// The collectives first: each was posted after the point-to-point
	// entries it counts, so all of those are below pn, read after. A read
	// that finds no whole collective where some were recorded met a storm
	// of them, a ring's length during one read (the reader was off its
	// processor): read again, a few times, before giving up the
	// point-to-point entries that cannot be placed without them.
	var c []held
	var cfirst, cn uint64
	for range entriesReads {
		if c, cfirst, cn = r.heldColls(names); len(c) > 0 || cn == 0 {
			break
		}
	}
	pn := r.pn.Load()
	p := r.heldP2P(pn)
	if cfirst > 0 {
		// Collectives before c were dropped, and a point-to-point entry
		// posted before c[0] may have come before or after them: its ID is
		// not known. Those entries are older than the ring's length of
		// collectives, and are dropped too: all of them, counted in
		// dropped, when no collective was read whole in entriesReads
		// reads.
		bound := pn
		if len(c) > 0 {
			bound = c[0].before
		}
		for len(p) > 0 && p[0].at < bound {
			p = p[1:]
		}
	}
	all := make([]Entry, 0, len(p)+len(c))
	colls := cfirst // the collectives merged so far, or dropped
	for len(p) > 0 || len(c) > 0 {
		if len(c) > 0 && (len(p) == 0 || c[0].before <= p[0].at) {
			e := c[0].Entry
			e.ID = c[0].before + c[0].at + 1
			all, c = append(all, e), c[1:]
			colls++
		} else {
			e := p[0].Entry
			e.ID = p[0].at + colls + 1
			all, p = append(all, e), p[1:]
		}
	}
	// Keep the newest len(r.ring).
	if len(all) > len(r.ring) {
		all = all[len(all)-len(r.ring):]
	}
	return all, pn + cn - uint64(len(all))
}

// entriesReads is how many times Entries reads the collective ring when
// a storm of collectives overruns it during the read.
const entriesReads = 4

// heldP2P returns the whole entries of the point-to-point ring among the
// last pn ever put, oldest first; r.mu is held, and Post and Record may be
// writing the ring meanwhile (put). An entry is read whole when its slot's
// pSeq holds its key, marked written, before and after its other words
// are read; an entry still being written, or whose slot a later entry is
// taking, is left out.
func (r *Recorder) heldP2P(pn uint64) []held {
	size := uint64(len(r.ring))
	first := pn - min(pn, size)
	hs := make([]held, 0, pn-first)
	for k := first; k < pn; k++ {
		i := k & r.mask
		s := &r.ring[i]
		seq := atomic.LoadUint64(&s.w[pSeq])
		if seq != (k+1)<<1 {
			continue
		}
		count, posted := atomic.LoadUint64(&s.w[pCount]), atomic.LoadUint64(&s.w[pPosted])
		meta, fin := atomic.LoadUint64(&s.w[pMeta]), atomic.LoadUint64(&s.w[pFin])
		if atomic.LoadUint64(&s.w[pSeq]) != seq || !ownFin(fin, k+1, r.shift) {
			continue
		}
		op, peer, tag := unmeta(meta)
		h := held{Entry: Entry{Op: op, Peer: peer, Tag: tag, Count: int64(count), DType: "byte"}, at: k}
		h.setTimes(int64(posted), fin)
		if h.State == Failed {
			h.Err = errOf(r.perrs, i, k+1)
		}
		hs = append(hs, h)
	}
	return hs
}

// ownFin reports whether fin is the fin word of the entry of key, in a
// ring of 1<<shift slots: its key while pending, its generation once
// ended. An End whose slot the ring gave to a later entry between its
// look and its store (Ticket.settle) leaves the later entry a word of
// another generation.
func ownFin(fin, key uint64, shift uint8) bool {
	if finState(fin).Pending() {
		return fin>>finShift == key
	}
	return finGen(fin) == gen(key, shift)
}

// heldColls returns the whole entries of the collective ring, oldest
// first, the index of the first (those before were dropped) and the
// collectives ever recorded, as last read; r.mu is held, and a collective
// may be writing the ring meanwhile. An entry read while a later
// collective rewrote its slot is left out: that collective wrote the
// slot's fin word first, with its own key, and counts itself in r.cs
// before it can end, so after the entry's words are read, fin holds
// another key, or r.cs's count has gone past the entry's index by the ring's
// length.
func (r *Recorder) heldColls(names []string) (hs []held, first, cn uint64) {
	size := uint64(len(r.coll))
	start := r.colls()
	first = start - min(start, size)
	hs = make([]held, 0, start-first)
	for k := first; k < start; k++ {
		i := k & r.mask
		s := &r.coll[i]
		count, posted := atomic.LoadUint64(&s.w[cCount]), atomic.LoadUint64(&s.w[cPosted])
		before, kind := atomic.LoadUint64(&s.w[cBefore]), atomic.LoadUint64(&s.w[cKind])
		fin := atomic.LoadUint64(&s.w[cFin])
		if st := finState(fin); st.Pending() && fin>>finShift != k+1 {
			continue
		}
		h := held{Entry: Entry{Op: Op(kind), Peer: int(int32(uint32(kind >> 32))), Count: int64(count),
			DType: nameOf(names, uint8(kind>>8)), Seq: k + 1}, at: k, before: before}
		if red := uint8(kind >> 16); red != 0 {
			h.Reduction = nameOf(names, red)
		}
		h.setTimes(int64(posted), fin)
		if h.State == Failed {
			h.Err = errOf(r.cerrs, i, k+1)
		}
		hs = append(hs, h)
	}
	if collsRead != nil {
		collsRead()
	}
	cn = r.colls()
	for len(hs) > 0 && hs[0].at+size <= cn-1 {
		hs = hs[1:]
	}
	if len(hs) > 0 {
		first = hs[0].at
	} else {
		first = cn
	}
	return hs, first, cn
}

// collsRead, when set (white-box tests), runs in heldColls after the
// ring's slots are read and before r.cs is read again.
var collsRead func()

// setTimes sets the state and times of h from its slot's posted time and
// fin word.
func (h *held) setTimes(posted int64, fin uint64) {
	h.State = finState(fin)
	h.Posted = time.Unix(0, posted)
	if !h.State.Pending() {
		h.Ended = time.Unix(0, posted+finDur(fin))
	}
}
