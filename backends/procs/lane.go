package procs

import (
	"context"
	"encoding/binary"
	"time"

	"github.com/xpu-go/xpu/comm"
	"github.com/xpu-go/xpu/flight"
	"github.com/xpu-go/xpu/impl"
	"github.com/xpu-go/xpu/internal/p2p"
	"github.com/xpu-go/xpu/internal/shm"
)

// The small-message lane (ADR 44). A blocking Recv from one peer over a
// shared-memory link, into host memory, first tries to take its message
// straight from the link's ring: it takes the link's read role when it is
// free, polls the ring's next record itself, and when that record is one
// eager frame it matches it — without the communicator's lock when no
// receive is posted, else once under it — and copies the payload from the
// ring into its buffer. It makes no request: nothing is posted, nothing
// completed, nothing published, no buffered reader is filled and no read
// role waits for a handoff. Anything else — a record of any other kind or
// of several frames, frames left in the buffered reader, a message already
// queued from the peer, the role held or asked for, the link or the
// communicator closing, the context ending, a quarter of the spin budget
// spent — sends the receive back to the general path with the record
// unread, as if the lane had not been tried.
//
// Why the lane cannot take a message another receive is owed:
//
//   - Only the holder of a link's read role takes the peer's messages off
//     the link (readrole.go), and the lane holds it: while it polls, no
//     message from the peer reaches the matching table but through the
//     lane.
//   - So the unexpected messages from the peer, counted under Comm.mu
//     (Comm.unexp), can only shrink while the lane holds the role: the
//     count read once after the role is taken, zero, stays zero, and no
//     message that arrived before the receive was called can be owed to
//     it instead of the one in the ring. Frames a reader before it read
//     ahead into the buffered reader come before the ring's next record:
//     the lane leaves them to the general path.
//   - Each message the lane reads goes first to a posted receive that
//     matches it: with none posted (Comm.tbl counts them), none can; else
//     it is matched under Comm.mu, posted receives first, as onEager
//     matches. A receive posted before the Recv (by this goroutine, as an
//     Irecv, or by one ordered before it) is counted before the Recv
//     begins. The lane's receive is not posted, so it comes after every
//     posted one: the order of a thread's receives is kept, and receives
//     of goroutines running at once have no order between them to keep.
//   - Messages not for the lane and not for any posted receive are queued
//     as unexpected, exactly as the general path queues them.
//
// The records of the lane are the ones TryWriteFrame publishes: an idle
// link's small eager send writes its header and payload as one record
// (link.sendMsg), which the lane reads in place.

// laneRecv is the receive of a lane: what it wants, and once it has its
// message, the outcome.
type laneRecv struct {
	buf []byte // the receive's buffer
	tag int    // the tag wanted, or comm.AnyTag
	got bool   // the message is delivered: st and err are its outcome
	st  comm.Status
	err error
	// flight is the receive's entry in the flight recorder, posted once
	// the ring's first look found nothing (poll), or none.
	flight flight.Ticket
}

// takes reports whether the lane's receive takes a message with tag; a
// nil lane takes none.
func (lr *laneRecv) takes(tag int) bool { return lr != nil && impl.MatchTag(lr.tag, tag) }

// recvLane receives into data a message with tag from l's peer through
// the lane, for Comm.Recv; handled is false when the lane could not, and
// the caller then receives through the general path, with the receive's
// flight entry in *posted when the lane posted one (else the zero
// Ticket).
//
// A receive whose message is in the ring at once is recorded as it
// completes (Recorder.Record). One that waits is posted while it waits,
// and ended when its message comes: an End takes no lock, where Record
// takes one, so the record costs less between the message and the
// caller, which is a ping-pong's round trip (ADR 47).
func (l *link) recvLane(ctx context.Context, data []byte, tag int, posted *flight.Ticket) (st comm.Status, handled bool, err error) {
	c := l.c
	done := ctx.Done()
	if !l.role.tryTake() {
		return comm.Status{}, false, nil
	}
	lr := laneRecv{buf: data, tag: tag}
	// Frames a reader before it read ahead into the buffered reader come
	// before the ring's next record: the general path takes them.
	if c.unexp[l.peer].Load() == 0 && l.rd.br.Buffered() == 0 {
		l.poll(done, &lr)
	}
	l.role.releaseLane()
	switch {
	case !lr.got:
		*posted = lr.flight
		return comm.Status{}, false, nil
	case lr.err == nil && lr.flight.Valid():
		lr.flight.Completed()
	case lr.flight.Valid():
		lr.flight.Finish(lr.err)
	default:
		c.flightDone(flight.OpRecv, l.peer, tag, len(data), lr.err)
	}
	return lr.st, true, lr.err
}

// laneBurst is how many times the lane looks at the ring between its
// looks at everything else (the role, the link, the communicator, the
// context, the spin budget): a burst is a tight loop of loads, so that a
// record is seen within a few nanoseconds of its publication, and the
// other looks, which cost more than a look at the ring, are made every
// ~100 ns.
const laneBurst = 16

// laneSpin divides the spin budget (Config.ShmSpin) for the lane: a
// receive whose message does not come within a quarter of it polls on in
// the general path, for the whole budget, before it sleeps. A small
// message's round trip is a few hundred nanoseconds; a longer wait is
// the program's, and polling it twice over would spend a processor that
// a node's other ranks may need.
const laneSpin = 4

// poll reads the ring for the lane's receive lr until it has its message
// or must leave it to the general path. The caller holds the read role.
func (l *link) poll(done <-chan struct{}, lr *laneRecv) {
	var until time.Time
	spin, yield := l.c.cfg.ShmSpin/laneSpin, l.c.shmYield.Load()
	for polls := 0; ; polls++ {
		p, q, ok, err := l.shm.Peek(laneBurst)
		if err != nil {
			return // the general path meets it again, and fails the link
		}
		if ok {
			// The answer, if any, is written next: its line is taken now.
			l.shm.PrepareWrite()
			tag, n, whole := eagerRecord(p, q, l.c.lim)
			if !whole {
				return
			}
			l.rd.hear()
			if l.takeLane(lr, tag, n) {
				return
			}
			if err := l.onEagerRecord(tag, n, p[headerSize:], q, lr); err != nil {
				l.readFailed(err)
				return
			}
			if lr.got {
				return
			}
			continue
		}
		if l.role.wantFlag.Load() || l.c.shut.Load() || l.closing() {
			return
		}
		if polls == 0 {
			// The message is not there yet: the receive is posted while it
			// waits (recvLane).
			lr.flight = l.c.flightPost(flight.OpRecv, l.peer, lr.tag, len(lr.buf))
		}
		select {
		case <-done:
			return
		default:
		}
		if !shm.Polling(spin, yield, polls, &until) {
			return
		}
	}
}

// takeLane gives the lane's receive the message of n bytes with tag in
// the record Peek returned, without the communicator's lock when nothing can be owed it
// instead: no receive is posted (Comm.tbl counts them), so none can match
// it first, and nothing is queued from the peer (checked when the lane
// began, and only the lane can add to it). A receive posted by another
// goroutine at the same moment has no order with the lane's to keep. It
// reports false, having done nothing, when that is not so: onEagerRecord
// then matches under the lock.
//
// The lane counts the eager bytes it takes in rd.laneDue, which only the
// holder of the read role touches, and gives them back a quarter of the
// budget at a time, as consume does for the others. They never enter
// credit.in: a message the lane takes is never held, so the budget that
// bounds what a rank holds for its peer stays bounded by what it holds.
func (l *link) takeLane(lr *laneRecv, tag, n int) bool {
	c := l.c
	if !lr.takes(tag) || c.tbl.posted.Load() != 0 || c.shut.Load() {
		return false
	}
	l.deliverLane(lr, tag, n)
	l.rd.laneDue += n
	if l.rd.laneDue >= l.credit.giveBackAt() {
		_ = l.w.sendCtl(frame{typ: frameCredit, a: uint64(l.rd.laneDue)}, true)
		l.rd.laneDue = 0
	}
	return true
}

// eagerRecord reports whether the record p, q (one or two pieces) is one
// eager frame and nothing else, with a header decodeFrame accepts, and
// returns its tag and length: the checks of decodeFrame for the one type,
// without its table (half of the lane's decoding cost). Anything else,
// well-formed or not, is for the general path, which decodes it in full.
func eagerRecord(p, q []byte, lim limits) (tag, n int, whole bool) {
	if len(p) < headerSize {
		return 0, 0, false
	}
	h := p[:headerSize:headerSize]
	if h[0] != frameEager || h[1]|h[2]|h[3] != 0 {
		return 0, 0, false
	}
	t := binary.LittleEndian.Uint32(h[4:])
	a := binary.LittleEndian.Uint64(h[8:])
	if binary.LittleEndian.Uint64(h[16:])|binary.LittleEndian.Uint64(h[24:]) != 0 ||
		t > comm.MaxReservedTag || a > uint64(lim.eager) || headerSize+a != uint64(len(p)+len(q)) {
		return 0, 0, false
	}
	return int(t), int(a), true
}

// deliverLane copies the message of n bytes with tag, the ring's record
// Peek returned, into the lane's receive, and frees the record.
func (l *link) deliverLane(lr *laneRecv, tag, n int) {
	k := min(n, len(lr.buf))
	l.shm.Take(lr.buf[:k], headerSize)
	lr.st, lr.err = p2p.Outcome(Name, l.c.rank, l.peer, tag, n, k)
	lr.got = true
	l.rd.lanes++
}
