//go:build mpi

package mpi

import (
	"context"

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
func construct(ctx context.Context, name string, k *coord, parent handle, c *Comm, build func() (handle, []handle, error)) (*Comm, error) {
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
						if m, r, err := build(); err == nil && !cIsNull(m) {
							lock()
							freeSet(m, r)
							unlock()
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
	m, r, err := build()
	if err != nil || cIsNull(m) {
		return nil, err
	}
	nc, err := newComm(m, r)
	if err != nil {
		lock()
		freeSet(m, r)
		unlock()
		return nil, err
	}
	return nc, nil
}

// freeSet frees main and res, with MPI calls serialised by the caller,
// and returns the first error code.
func freeSet(main handle, res []handle) int {
	rc := cCommFree(main)
	for _, r := range res {
		if c := cCommFree(r); rc == 0 {
			rc = c
		}
	}
	return rc
}

// dupSet duplicates parent for user traffic, and once more per
// communicator of reserved traffic.
func dupSet(parent handle) (handle, []handle, error) {
	lock()
	defer unlock()
	return dupsOf(parent, true)
}

// dupsOf returns the communicator of user traffic — parent itself, or a
// duplicate of it when dupMain — and reservedComms duplicates of parent
// for the reserved tags. The caller serialises MPI calls. On failure it
// frees what it made and, when it does not duplicate it, parent.
func dupsOf(parent handle, dupMain bool) (handle, []handle, error) {
	main := parent
	if dupMain {
		m, rc := cDup(parent)
		if rc != 0 {
			return m, nil, rcError("dup", rc)
		}
		main = m
	}
	res := make([]handle, 0, reservedComms)
	for range reservedComms {
		r, rc := cDup(parent)
		if rc != 0 {
			freeSet(main, res)
			return main, nil, rcError("dup", rc)
		}
		res = append(res, r)
	}
	return main, res, nil
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
	return construct(ctx, name, &c.coll, c.main, c, func() (handle, []handle, error) { return dupSet(c.main) })
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
	return construct(ctx, name, &c.coll, c.main, c, func() (handle, []handle, error) {
		lock()
		defer unlock()
		m, rc := cSplit(c.main, color, key)
		if rc != 0 || cIsNull(m) {
			return m, nil, rcError(name, rc)
		}
		// The reserved communicators duplicate m, the new group.
		return dupsOf(m, false)
	})
}
