//go:build mpi

package mpi

import (
	"context"
	"crypto/rand"
	"encoding/binary"
	"unsafe"

	"github.com/xpu-go/xpu/comm"
	"github.com/xpu-go/xpu/xerr"
)

// Communicator constructions (Open, Dup, Split) are blocking collectives in
// MPI. To honour a context, the ranks first meet in an MPI_Ibarrier polled
// with ctx; once every rank has arrived, the blocking calls no longer wait
// for anyone. (MPI_Comm_idup would do without the barrier, but Open MPI
// issues its inner collectives lazily, and they then cross the caller's
// next collectives on the parent.) When ctx ends before the barrier
// completes, this rank still owes its part — the other ranks block in the
// construction otherwise — so it is deferred: it runs in the background
// once the barrier completes, the result is freed, and the parent's next
// collective waits for it (coord.drain).

// construct builds a communicator over parent, collectively, with the
// collective order k. c is the Comm of parent (nil for MPI_COMM_WORLD),
// kept busy until a deferred construction has run.
func construct(ctx context.Context, name string, k *coord, parent handle, c *Comm, build func() (set, error)) (*Comm, error) {
	if err := k.lock(ctx); err != nil {
		return nil, xerr.Op(Name, name, err)
	}
	defer k.unlock()
	if err := k.drain(ctx); err != nil {
		return nil, xerr.Op(Name, name, err)
	}
	if !direct(ctx) {
		lock()
		mr, rc := cIbarrier(parent)
		unlock()
		if rc != 0 {
			return nil, mpiError(name, rc)
		}
		o := &orphan{op: name, hs: []request{mr}}
		done, rc, _, err := o.await(ctx)
		if !done {
			if c == nil || c.enterAny() {
				o.k = k
				k.deferred.Add(1)
				o.then = func(ok bool) {
					if ok {
						if s, err := build(); err == nil && !cIsNull(s.main) {
							dropLater(s)
						}
					}
					k.deferred.Add(-1)
					if c != nil {
						c.exit()
					}
				}
			}
			adopt(o)
			return nil, xerr.Op(Name, name, err)
		}
		if rc != 0 {
			return nil, mpiError(name, rc)
		}
	}
	s, err := build()
	if err != nil || cIsNull(s.main) {
		return nil, err
	}
	nc, err := newComm(s)
	if err != nil {
		dropLater(s)
		return nil, err
	}
	return nc, nil
}

// set is the MPI objects of one Comm: the communicator of the user's tags,
// those of the reserved tags, the one of notifications, the window of
// one-sided transfers (made over the notification communicator, which MPI
// duplicates for its own traffic), and the secret the ranks share to
// check remote keys with (keyCheck).
type set struct {
	main   handle
	res    []handle
	note   handle
	win    window
	winOK  bool  // win was created (and must be freed)
	winErr error // why there is no window, when a communicator of several ranks has none
	secret [2]uint64
}

// freeSet frees the communicators of s, with MPI calls serialised by the
// caller, and returns the first error code. The window is freed apart
// (freeWindow): that is collective.
func freeSet(s set) int {
	rc := 0
	for _, h := range append(append([]handle{s.main}, s.res...), s.note) {
		if h == 0 {
			continue
		}
		if c := cCommFree(h); rc == 0 {
			rc = c
		}
	}
	return rc
}

// dupSet duplicates parent for user traffic, and once more per
// communicator of reserved traffic and for notifications, and makes the
// window.
func dupSet(parent handle) (set, error) {
	lock()
	defer unlock()
	return dupsOf(parent, true)
}

// dupsOf returns the communicator of user traffic — parent itself, or a
// duplicate of it when dupMain — reservedComms duplicates of parent for
// the reserved tags, one for notifications, and the window of one-sided
// transfers, locked for every rank, with its shared secret (see
// keyCheck). All of it is collective over parent. The caller serialises
// MPI calls. On failure it frees what it made and, when it does not
// duplicate it, parent.
func dupsOf(parent handle, dupMain bool) (set, error) {
	s := set{main: parent}
	if dupMain {
		m, rc := cDup(parent)
		if rc != 0 {
			return set{main: m}, rcError("dup", rc)
		}
		s.main = m
	}
	s.res = make([]handle, 0, reservedComms)
	for range reservedComms {
		r, rc := cDup(parent)
		if rc != 0 {
			freeSet(s)
			return set{main: s.main}, rcError("dup", rc)
		}
		s.res = append(s.res, r)
	}
	n, rc := cDup(parent)
	if rc != 0 {
		freeSet(s)
		return set{main: s.main}, rcError("dup", rc)
	}
	s.note = n
	if err := s.window(); err != nil {
		freeSet(s)
		return set{main: s.main}, err
	}
	return s, nil
}

// window draws the secret rank 0 broadcasts and, when the communicator
// has other ranks, makes the dynamic window over the notification
// communicator (collective). When MPI cannot make it on some rank (Open
// MPI 4.1 has no one-sided component over its TCP transport), the ranks
// agree to do without: winErr says why, and transfers to other ranks
// fail with comm.ErrNotSupported.
func (s *set) window() error {
	b := make([]byte, 16)
	if cRank(s.note) == 0 {
		_, _ = rand.Read(b)
	}
	if rc := cBcastBytes(unsafe.Pointer(&b[0]), len(b), 0, s.note); rc != 0 {
		return rcError("window", rc)
	}
	s.secret = [2]uint64{binary.LittleEndian.Uint64(b), binary.LittleEndian.Uint64(b[8:])}
	if cSize(s.note) == 1 {
		return nil // transfers to this rank are copies: no window needed
	}
	w, rc := cWinDynamic(s.note)
	ok := []int32{0}
	if rc == 0 {
		ok[0] = 1
	}
	if arc := cAllreduce(unsafe.Pointer(&ok[0]), unsafe.Pointer(&ok[0]), 1, dtInt32, opMin, true, s.note); arc != 0 {
		return rcError("window", arc)
	}
	switch {
	case ok[0] == 1:
		s.win, s.winOK = w, true
	case rc != 0:
		s.winErr = rcError("window", rc)
	default:
		// This rank has a window and another has none: it cannot be freed
		// (that is collective), and is left to MPI_Finalize.
		s.winErr = xerr.Errorf(Name, "window", comm.ErrNotSupported, "another rank could not make its window")
	}
	return nil
}

// dropLater frees s, which no Comm holds, in the background: its window's
// freeing is collective, so this rank joins an MPI_Ibarrier on the
// notification communicator, and frees the window (which then waits for
// no one) and the communicators once every rank has arrived — once the
// other ranks close their Comm of the same construction.
func dropLater(s set) {
	if !s.winOK {
		lock()
		freeSet(s)
		unlock()
		return
	}
	lock()
	mr, rc := cIbarrier(s.note)
	unlock()
	if rc != 0 {
		// No way to meet the others: leave the window (and its
		// communicator) to MPI_Finalize.
		return
	}
	o := &orphan{op: "free", hs: []request{mr}}
	o.then = func(bool) {
		lock()
		cWinFree(s.win)
		freeSet(s)
		unlock()
	}
	adoptAny(o)
}

// Dup returns a new communicator over the same ranks, whose messages never
// meet c's (MPI_Comm_dup). It is collective over c and honours ctx (see
// Split).
func (c *Comm) Dup(ctx context.Context) (*Comm, error) {
	const name = "dup"
	if err := check(ctx, name); err != nil {
		return nil, err
	}
	if !c.enter() {
		return nil, errClosed(name)
	}
	defer c.exit()
	return construct(ctx, name, &c.coll, c.main, c, func() (set, error) { return dupSet(c.main) })
}

// Split partitions the ranks of c by color into new communicators
// (MPI_Comm_split): ranks passing the same color share one, ordered by key
// and then by their rank in c. A rank passing Undefined joins none and
// gets nil. It is collective over c.
//
// MPI has no nonblocking split, so with a context that can end Split first
// waits, honouring ctx, in an MPI_Ibarrier until every rank has arrived,
// then splits (which no longer waits for anyone). When ctx ends first, the
// rank still takes its part in the background once the barrier completes
// — the others would block otherwise — and frees the result; the next
// collective on c waits for that first.
func (c *Comm) Split(ctx context.Context, color, key int) (*Comm, error) {
	const name = "split"
	if err := check(ctx, name); err != nil {
		return nil, err
	}
	if color < 0 && color != Undefined {
		return nil, xerr.Errorf(Name, name, comm.ErrInvalidArgument, "color %d is negative (use mpi.Undefined to join no group)", color)
	}
	if color == Undefined {
		color = cUndefined()
	}
	if !c.enter() {
		return nil, errClosed(name)
	}
	defer c.exit()
	return construct(ctx, name, &c.coll, c.main, c, func() (set, error) {
		lock()
		defer unlock()
		m, rc := cSplit(c.main, color, key)
		if rc != 0 || cIsNull(m) {
			return set{main: m}, rcError(name, rc)
		}
		// The reserved communicators duplicate m, the new group.
		return dupsOf(m, false)
	})
}
