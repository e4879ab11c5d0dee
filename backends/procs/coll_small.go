package procs

import (
	"context"

	"github.com/xpu-go/xpu/comm"
	"github.com/xpu-go/xpu/internal/doubling"
	"github.com/xpu-go/xpu/memspace"
)

// tagSmall is the reserved tag of the small allreduce's messages: next to
// tagRing, above the range of the shared algorithms.
const tagSmall = tagRing + 1

// allreduceSmall is the allreduce up to ringMin: recursive doubling, in
// which partners exchange their whole vectors log2(p) times, each folding
// the partner's vector into its own, in the schedule of doubling.Schedule
// (the shared algorithm's).
//
// It does what the shared algorithm does with less around it: it runs as
// a light collective (no derived context), a receive folds what it reads
// from the socket straight into a second buffer (acc op incoming) instead
// of landing in scratch memory for a separate pass, and the two buffers
// trade places after each exchange. Partners fold the same two vectors,
// each with its own on the right, so for the commutative operators every
// rank ends with the bitwise-same result.
func (c *Comm) allreduceSmall(ctx context.Context, sc *smallColl, send, recv memspace.Block, dt comm.DType, op comm.Op) error {
	p, r := c.size, c.rank
	n := send.Len()
	run := &sc.run
	recvB, err := hostBytes(recv)
	if err != nil {
		return err
	}
	if send.Addr() != recv.Addr() || send.Space() != recv.Space() {
		sendB, err := hostBytes(send)
		if err != nil {
			return err
		}
		copy(recvB, sendB)
	}
	if err := sc.grow(n); err != nil {
		return err
	}
	// Every request that may touch the scratch vector has completed
	// before it is used again (settle).
	defer settle(sc.live[:])
	acc, accB := recv, recvB
	other, otherB := sc.tmpBlk, sc.tmp[:n]

	d := doubling.New(p, r)
	if h := d.HandsTo(); h >= 0 {
		// Hand the vector over, then take the result back.
		if err := sc.sendWait(ctx, c, h, accB); err != nil {
			return err
		}
		q, err := sc.recv(c, h, recvB, nil)
		if err != nil {
			return err
		}
		return run.wait(ctx, q, n)
	}
	if from := d.FoldsFrom(); from >= 0 {
		// Fold that rank's vector into this one, in place: nothing reads it.
		q, err := sc.recv(c, from, accB, sc.fold(acc, acc, dt, op))
		if err != nil {
			return err
		}
		if err := run.wait(ctx, q, n); err != nil {
			return err
		}
	}
	for i := range d.Steps() {
		if err := sc.exchange(ctx, c, d.Partner(i), accB, otherB, sc.fold(other, acc, dt, op)); err != nil {
			return err
		}
		acc, other = other, acc
		accB, otherB = otherB, accB
	}
	if &accB[0] != &recvB[0] {
		copy(recvB, accB)
	}
	if from := d.FoldsFrom(); from >= 0 {
		return sc.sendWait(ctx, c, from, recvB)
	}
	return nil
}

// exchange is one step of the doubling with peer: into = incoming op acc
// (red) while acc is sent. The send only reads acc, and the receive
// writes into. The send goes first, so that the partner's wait ends as
// early as it can; the partner's message, if it comes before the receive
// is posted, stays in the socket until this rank reads it for the receive
// (readrole.go).
func (sc *smallColl) exchange(ctx context.Context, c *Comm, peer int, acc, into []byte, red *reduction) error {
	s, err := sc.send(c, peer, acc)
	if err != nil {
		return err
	}
	q, err := sc.recv(c, peer, into, red)
	if err != nil {
		return err
	}
	if err := sc.run.wait(ctx, q, len(acc)); err != nil {
		return err
	}
	return sc.run.wait(ctx, s, -1)
}

// sendWait sends b to dest and waits for the send.
func (sc *smallColl) sendWait(ctx context.Context, c *Comm, dest int, b []byte) error {
	q, err := sc.send(c, dest, b)
	if err != nil {
		return err
	}
	return sc.run.wait(ctx, q, -1)
}

// smallColl is the state of a small allreduce, kept by the communicator
// between calls (collState.small) so that a call allocates little more
// than its requests: its run, the scratch vector and the fold.
type smallColl struct {
	run    collRun
	tmp    []byte
	tmpBlk memspace.Block
	red    reduction
	live   [2]*request // the receive and the send in flight
}

// getSmall takes the communicator's small-collective state, or makes one
// when another call holds it.
func (s *collState) getSmall() *smallColl {
	sc := s.small.Swap(nil)
	if sc == nil {
		sc = &smallColl{}
	}
	sc.run = collRun{}
	return sc
}

// putSmall gives the state back once its call has returned.
func (s *collState) putSmall(sc *smallColl) {
	sc.live = [2]*request{}
	sc.red = reduction{}
	s.small.Store(sc)
}

// grow makes the scratch vector at least n bytes long.
func (sc *smallColl) grow(n int) error {
	if len(sc.tmp) >= n {
		return nil
	}
	sc.tmp = make([]byte, max(n, 64))
	b, err := memspace.FromSlice(sc.tmp)
	if err != nil {
		sc.tmp = nil
		return err
	}
	sc.tmpBlk = b.Block()
	return nil
}

// fold returns the reduction dst = incoming op own, for one receive at a
// time: the previous one has completed when the next is posted.
func (sc *smallColl) fold(dst, own memspace.Block, dt comm.DType, op comm.Op) *reduction {
	sc.red = reduction{dst: dst, own: own, dt: dt, op: op}
	return &sc.red
}

// recv posts a receive of buf from src, folding when red is set.
func (sc *smallColl) recv(c *Comm, src int, buf []byte, red *reduction) (*request, error) {
	q, err := c.irecv(&request{c: c, kind: kindRecv, peer: src, tag: tagSmall, buf: buf, red: red})
	sc.live[0] = q
	return q, err
}

// send starts sending buf to dest.
func (sc *smallColl) send(c *Comm, dest int, buf []byte) (*request, error) {
	q, err := c.isend(buf, dest, tagSmall)
	sc.live[1] = q
	return q, err
}

// settle cancels the requests of qs still pending and waits for each to
// complete, which a canceled request does within a round trip to its peer
// or once the link is declared lost (Config.Timeout); a request touches
// its buffer no more once complete.
func settle(qs []*request) {
	for _, q := range qs {
		if q != nil && !q.Finishing() {
			_ = q.Cancel()
		}
	}
	for _, q := range qs {
		if q != nil {
			<-q.Chan()
		}
	}
}
