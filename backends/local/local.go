package local

import (
	"context"
	"errors"
	"slices"
	"sync"
	"sync/atomic"

	"github.com/xpu-go/xpu/comm"
	"github.com/xpu-go/xpu/flight"
	"github.com/xpu-go/xpu/impl"
	"github.com/xpu-go/xpu/internal/match"
	"github.com/xpu-go/xpu/internal/onesided"
	"github.com/xpu-go/xpu/memspace"
	"github.com/xpu-go/xpu/xerr"
)

// DefaultEagerLimit is the eager limit used when Options.EagerLimit is zero:
// messages up to 64 KiB are sent eagerly.
const DefaultEagerLimit = 64 << 10

// DefaultEagerBudget is the eager budget used when Options.EagerBudget is
// zero: 64 MiB per receiving rank.
const DefaultEagerBudget = 64 << 20

// MaxRanks is the largest group NewGroup makes.
const MaxRanks = 1 << 16

// Options configure a group.
type Options struct {
	// EagerLimit is the largest message, in bytes, sent eagerly: copied into
	// a private buffer so that the send completes at once. Larger messages
	// go by rendezvous: the send stays pending until a receive matches it,
	// then the bytes are copied once, straight from the send buffer into the
	// receive buffer. Zero means DefaultEagerLimit; a negative value sends
	// every message, even an empty one, by rendezvous.
	EagerLimit int
	// EagerBudget bounds the bytes of eager messages a rank holds that no
	// receive has taken yet. A message that would exceed it goes by
	// rendezvous instead, so a sender that runs ahead of its receiver
	// waits rather than growing the receiver's queue without bound. Zero
	// means DefaultEagerBudget; a negative value is refused.
	EagerBudget int
}

// group is the state the ranks of one group share.
type group struct {
	ranks  []*Comm
	eager  int // effective eager limit; -1: none
	budget int // effective eager budget per rank

	alive atomic.Int64 // ranks not yet closed or killed
	// revoked is set once a rank crashed, or left while failing: collective
	// traffic (reserved tags) that would have to wait then fails with
	// ErrPeerLost on every rank, as a collective needs the whole group.
	revoked atomic.Bool
	left    atomic.Int64 // ranks that have finished leaving

	onEmpty func() // run once, after the last rank has left; may be nil
}

// Comm is one rank of a group made by NewGroup. It implements comm.Comm and
// is safe for concurrent use by many goroutines.
type Comm struct {
	g    *group
	rank int

	// closed is written under mu and read without it by other ranks.
	closed atomic.Bool
	// sawLoss is set when an operation of this rank failed with
	// ErrPeerLost: its Close then revokes the group's collectives.
	sawLoss atomic.Bool
	// inflight counts copies under way, outside mu, into or out of this
	// rank's buffers; leave waits for them.
	inflight sync.WaitGroup

	mu sync.Mutex
	// tbl holds this rank's posted receives and the sends to it that no
	// receive has taken yet (eager copies, and rendezvous sends waiting).
	tbl  match.Table[request, *request]
	held int            // bytes of eager messages in the unexpected queue
	one  onesided.Table // this rank's exposed regions (onesided.go)
	// notes are the notifications sent to this rank, not yet taken.
	notes onesided.Notes
	// rec is the rank's flight recorder (nil when off), closed when it
	// leaves.
	rec *flight.Recorder
}

var (
	_ comm.Comm      = (*Comm)(nil)
	_ comm.Blocking  = (*Comm)(nil)
	_ comm.Recording = (*Comm)(nil)
)

// NewGroup returns a group of n ranks in this process; rank i is element i.
// Close every rank when done. n must be in [1, MaxRanks] and
// opts.EagerBudget not negative: anything else is an error matching
// comm.ErrInvalidArgument.
func NewGroup(n int, opts Options) ([]*Comm, error) {
	return newGroup(n, opts, nil)
}

func newGroup(n int, opts Options, onEmpty func()) ([]*Comm, error) {
	if n < 1 || n > MaxRanks {
		return nil, xerr.Errorf(Name, "new group", comm.ErrInvalidArgument, "group of %d ranks outside [1, %d]", n, MaxRanks)
	}
	if opts.EagerBudget < 0 {
		return nil, xerr.Errorf(Name, "new group", comm.ErrInvalidArgument, "eager budget %d is negative", opts.EagerBudget)
	}
	eager := opts.EagerLimit
	switch {
	case eager == 0:
		eager = DefaultEagerLimit
	case eager < 0:
		eager = -1
	}
	budget := opts.EagerBudget
	if budget == 0 {
		budget = DefaultEagerBudget
	}
	g := &group{ranks: make([]*Comm, n), eager: eager, budget: budget, onEmpty: onEmpty}
	g.alive.Store(int64(n))
	for i := range g.ranks {
		g.ranks[i] = &Comm{g: g, rank: i,
			rec: flight.New(flight.SizeFromEnv(), flight.Context{Rank: i, Size: n, Backend: Name, Comm: "world"})}
		g.ranks[i].tbl.Init(n)
	}
	return slices.Clone(g.ranks), nil
}

// GroupFunc adapts NewGroup to a comm.GroupFunc: each call makes a new
// group with opts, or fails as NewGroup does. It honours ctx only by
// returning ctx.Err() when ctx is already done, since making a group does
// not block.
func GroupFunc(opts Options) comm.GroupFunc {
	return func(ctx context.Context, n int) ([]comm.Comm, error) {
		return groupFunc(ctx, n, opts, nil)
	}
}

func groupFunc(ctx context.Context, n int, opts Options, onEmpty func()) ([]comm.Comm, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	cs, err := newGroup(n, opts, onEmpty)
	if err != nil {
		return nil, err
	}
	out := make([]comm.Comm, len(cs))
	for i, c := range cs {
		out[i] = c
	}
	return out, nil
}

// Rank returns the rank of c in its group.
func (c *Comm) Rank() int { return c.rank }

// Size returns the number of ranks of the group.
func (c *Comm) Size() int { return len(c.g.ranks) }

// EagerLimit returns the largest message sent eagerly, or -1 when every
// message goes by rendezvous.
func (c *Comm) EagerLimit() int { return c.g.eager }

// EagerBudget returns the bytes of unreceived eager messages a rank may
// hold.
func (c *Comm) EagerBudget() int { return c.g.budget }

// Isend starts sending buf to rank dest with tag (reserved tags included).
//
// A message of at most the eager limit is copied — straight into a posted
// matching receive, or else into a private buffer — and the returned
// request has already completed, unless dest already holds its eager budget
// of unreceived messages: then, like a larger message, it goes by
// rendezvous and waits for a matching receive, which copies it once from
// buf. Isend returns ErrInvalidArgument for a bad rank or tag,
// ErrNotSupported for a buffer the host cannot access, ErrClosed after
// Close, and ErrPeerLost when dest has left.
func (c *Comm) Isend(buf memspace.Block, dest, tag int) (comm.Request, error) {
	r, st, err := c.send(buf, dest, tag, c.flightPost(flight.OpSend, dest, tag, buf.Len()))
	if err != nil {
		return nil, err
	}
	if r == nil {
		r = &request{owner: c, tag: tag, eager: true}
		r.Completed(st, nil)
	}
	return r, nil
}

// Send sends buf to dest with tag and returns when the send has completed:
// Isend and Wait, without a request when the message goes eagerly. On ctx
// done a pending send is canceled and ctx.Err() returned. Unlike comm.Send,
// which checks user tags before calling it, it accepts reserved tags.
func (c *Comm) Send(ctx context.Context, buf memspace.Block, dest, tag int) error {
	r, _, err := c.send(buf, dest, tag, c.flightPost(flight.OpSend, dest, tag, buf.Len()))
	if err != nil || r == nil {
		return err
	}
	_, err = waitOrCancel(ctx, r)
	return err
}

// send starts a send, recorded as t. It returns the request when the send
// is pending, or nil and the status when it has completed; err when it did
// not start.
func (c *Comm) send(buf memspace.Block, dest, tag int, t flight.Ticket) (r *request, st comm.Status, err error) {
	r, st, err = c.startSend(buf, dest, tag, t)
	if r == nil {
		t.End(err, false)
	}
	return r, st, err
}

// startSend is send; a pending request carries t.
func (c *Comm) startSend(buf memspace.Block, dest, tag int, t flight.Ticket) (*request, comm.Status, error) {
	if err := impl.CheckRank(dest, len(c.g.ranks), false); err != nil {
		return nil, comm.Status{}, xerr.Op(Name, "send", err)
	}
	if err := impl.CheckWireTag(tag, false); err != nil {
		return nil, comm.Status{}, xerr.Op(Name, "send", err)
	}
	data, err := hostBytes(buf)
	if err != nil {
		return nil, comm.Status{}, xerr.Op(Name, "send", err)
	}
	d := c.g.ranks[dest]
	st := comm.Status{Source: dest, Tag: tag, Count: len(data)}

	d.mu.Lock()
	// c.closed is read under d.mu: a rank that leaves sets it before it
	// sweeps d's queues under d.mu, so a send queued here is swept.
	if c.closed.Load() {
		d.mu.Unlock()
		return nil, comm.Status{}, xerr.Errorf(Name, "send", comm.ErrClosed, "rank %d", c.rank)
	}
	if d.closed.Load() {
		d.mu.Unlock()
		return nil, comm.Status{}, c.lost(tag, xerr.Errorf(Name, "send", comm.ErrPeerLost, "rank %d to %d", c.rank, dest))
	}
	if rr := d.tbl.TakePosted(c.rank, tag); rr != nil {
		d.inflight.Add(1)
		d.mu.Unlock()
		rr.complete(deliver(rr, data, c.rank, tag))
		d.inflight.Done()
		return nil, st, nil
	}
	r := &request{src: c.rank, dst: d, owner: c, tag: tag}
	if len(data) <= c.g.eager && d.held+len(data) <= c.g.budget {
		r.buf, r.pooled = eagerCopy(data)
		r.eager = true
		r.Completed(st, nil)
		d.held += len(data)
		d.enqueue(r)
		d.mu.Unlock()
		return nil, st, nil
	}
	if tag > comm.MaxTag && c.g.revoked.Load() {
		d.mu.Unlock()
		return nil, comm.Status{}, c.lost(tag, xerr.Errorf(Name, "send", errRevoked, "rank %d to %d", c.rank, dest))
	}
	r.buf = data
	r.Flight = t
	d.enqueue(r)
	d.mu.Unlock()
	return r, comm.Status{}, nil
}

// Irecv starts receiving into buf from source (or comm.AnySource) with tag
// (or comm.AnyTag, which matches user tags only).
//
// A message longer than buf fails the receive with ErrTruncated: the first
// len(buf) bytes are delivered and Status.Count is that number. Irecv
// returns ErrInvalidArgument for a bad rank or tag, ErrNotSupported for a
// buffer the host cannot access, ErrClosed after Close, and ErrPeerLost
// when no message can come: source has left and left no matching message
// behind, or, for AnySource, every other rank has left.
func (c *Comm) Irecv(buf memspace.Block, source, tag int) (comm.Request, error) {
	r, st, res, err := c.recv(buf, source, tag, c.flightPost(flight.OpRecv, source, tag, buf.Len()))
	if err != nil {
		return nil, err
	}
	if r == nil {
		r = &request{recv: true, owner: c}
		r.Completed(st, res)
	}
	return r, nil
}

// Recv receives into buf from source (or comm.AnySource) with tag (or
// comm.AnyTag): Irecv and Wait, without a request when a message is
// waiting. On ctx done a receive no message has matched is canceled and
// ctx.Err() returned. Unlike comm.Recv, it accepts reserved tags.
func (c *Comm) Recv(ctx context.Context, buf memspace.Block, source, tag int) (comm.Status, error) {
	r, st, res, err := c.recv(buf, source, tag, c.flightPost(flight.OpRecv, source, tag, buf.Len()))
	if err != nil {
		return comm.Status{}, err
	}
	if r == nil {
		return st, res
	}
	return waitOrCancel(ctx, r)
}

// recv starts a receive, recorded as t. It returns the request when the
// receive is pending, or nil and its outcome (st, res) when it has
// completed; err when it did not start.
func (c *Comm) recv(buf memspace.Block, source, tag int, t flight.Ticket) (r *request, st comm.Status, res, err error) {
	r, st, res, err = c.startRecv(buf, source, tag, t)
	if r == nil {
		if err != nil {
			t.End(err, false)
		} else {
			t.End(res, false)
		}
	}
	return r, st, res, err
}

// startRecv is recv; a pending request carries t.
func (c *Comm) startRecv(buf memspace.Block, source, tag int, t flight.Ticket) (r *request, st comm.Status, res, err error) {
	if err := impl.CheckRank(source, len(c.g.ranks), true); err != nil {
		return nil, comm.Status{}, nil, xerr.Op(Name, "recv", err)
	}
	if err := impl.CheckWireTag(tag, true); err != nil {
		return nil, comm.Status{}, nil, xerr.Op(Name, "recv", err)
	}
	data, err := hostBytes(buf)
	if err != nil {
		return nil, comm.Status{}, nil, xerr.Op(Name, "recv", err)
	}

	c.mu.Lock()
	if c.closed.Load() {
		c.mu.Unlock()
		return nil, comm.Status{}, nil, xerr.Errorf(Name, "recv", comm.ErrClosed, "rank %d", c.rank)
	}
	if m := c.takeUnexpected(source, tag); m != nil {
		if !m.eager {
			m.owner.inflight.Add(1)
		}
		c.mu.Unlock()
		st, res = deliverTo(c.rank, data, m.buf, m.src, m.tag)
		release(m.pooled)
		if !m.eager {
			m.complete(comm.Status{Source: c.rank, Tag: m.tag, Count: len(m.buf)}, nil)
			m.owner.inflight.Done()
		}
		return nil, st, res, nil
	}
	if source == comm.AnySource {
		if len(c.g.ranks) > 1 && c.g.alive.Load() <= 1 {
			c.mu.Unlock()
			return nil, comm.Status{}, nil, c.lost(tag, xerr.Errorf(Name, "recv", comm.ErrPeerLost, "rank %d from any source: every other rank has left", c.rank))
		}
	} else if c.g.ranks[source].closed.Load() {
		c.mu.Unlock()
		return nil, comm.Status{}, nil, c.lost(tag, xerr.Errorf(Name, "recv", comm.ErrPeerLost, "rank %d from %d", c.rank, source))
	}
	if tag > comm.MaxTag && c.g.revoked.Load() {
		c.mu.Unlock()
		return nil, comm.Status{}, nil, c.lost(tag, xerr.Errorf(Name, "recv", errRevoked, "rank %d from %d", c.rank, source))
	}
	r = &request{recv: true, src: source, dst: c, owner: c, tag: tag, buf: data}
	r.Flight = t
	c.tbl.Post(r, r.src, r.tag)
	c.mu.Unlock()
	return r, comm.Status{}, nil, nil
}

// waitOrCancel waits for r; on ctx done it cancels r and reports a
// completion that won the race, else ctx.Err().
func waitOrCancel(ctx context.Context, r *request) (comm.Status, error) {
	st, err := r.Wait(ctx)
	if err == nil || ctx == nil || ctx.Err() == nil || !errors.Is(err, ctx.Err()) {
		return st, err
	}
	_ = r.Cancel()
	<-r.Chan()
	if st, rerr := r.Result(); rerr == nil {
		return st, nil
	}
	return comm.Status{}, err
}

// FlightRecorder returns the rank's flight recorder (comm.Recording), nil
// when XPU_FLIGHT_SIZE turned it off. The requests of user tags are
// recorded; those of the collective algorithms (reserved tags) are part
// of their collective's entry.
func (c *Comm) FlightRecorder() *flight.Recorder { return c.rec }

// flightPost records a request of a user tag as posted.
func (c *Comm) flightPost(op flight.Op, peer, tag, n int) flight.Ticket {
	if tag > comm.MaxTag || c.rec == nil {
		return flight.Ticket{}
	}
	return c.rec.Post(op, peer, tag, int64(n))
}

// Close leaves the group. Pending requests of c fail with ErrClosed; a
// pending rendezvous send to c fails with ErrPeerLost, and so do peers'
// pending and later operations that need c. Eager messages c sent before
// Close stay deliverable. Close waits for copies under way into or out of
// c's buffers, so no buffer of c is used after it returns. It is idempotent
// and returns nil.
func (c *Comm) Close() error {
	c.leave(false)
	return nil
}

// Kill simulates a crash of c: like Close, except that the messages c sent
// and no receive has taken yet are lost with it, eager ones included. It is
// for failure tests. Kill after Close (or Kill) does nothing.
func (c *Comm) Kill() { c.leave(true) }

func (c *Comm) leave(crash bool) {
	g := c.g
	c.mu.Lock()
	if c.closed.Load() {
		c.mu.Unlock()
		return
	}
	// A rank that crashes, that has seen a peer fail, or that leaves in the
	// middle of a collective (a reserved-tag receive still posted) takes the
	// group's collectives down with it.
	revoke := crash || c.sawLoss.Load() || c.hasPostedReserved()
	c.closed.Store(true)
	g.alive.Add(-1)
	closedErr := xerr.Errorf(Name, "close", comm.ErrClosed, "rank %d left the group", c.rank)
	c.notes.Close(closedErr)
	lostErr := xerr.Errorf(Name, "close", comm.ErrPeerLost, "rank %d left the group", c.rank)
	for r := range c.tbl.Posted() {
		c.tbl.Unpost(r)
		r.complete(comm.Status{}, closedErr)
	}
	for m := range c.tbl.Arrivals() {
		c.unqueue(m)
		switch {
		case m.eager:
			// Dropped: the receiver is gone.
			release(m.pooled)
		case m.owner == c:
			m.complete(comm.Status{}, closedErr)
		default:
			m.complete(comm.Status{}, lostErr)
		}
	}
	c.mu.Unlock()

	sweptReserved := false // a peer's collective operation failed on this departure
	for _, p := range g.ranks {
		if p == c {
			continue
		}
		p.mu.Lock()
		if !p.closed.Load() {
			for m := range p.tbl.UnexpectedFrom(c.rank) {
				if !m.eager {
					p.unqueue(m)
					sweptReserved = sweptReserved || m.tag > comm.MaxTag
					m.complete(comm.Status{}, closedErr)
				} else if crash {
					p.unqueue(m)
					release(m.pooled)
				}
			}
			for r := range p.tbl.PostedFrom(c.rank) {
				p.tbl.Unpost(r)
				sweptReserved = sweptReserved || r.tag > comm.MaxTag
				r.complete(comm.Status{}, lostErr)
			}
			if len(g.ranks) > 1 && g.alive.Load() <= 1 {
				for r := range p.tbl.PostedAny() {
					p.tbl.Unpost(r)
					r.complete(comm.Status{}, xerr.Errorf(Name, "close", comm.ErrPeerLost, "every rank but %d left the group", p.rank))
				}
			}
		}
		p.mu.Unlock()
	}
	if revoke || sweptReserved {
		g.revoke(c.rank)
	}
	c.one.Close()
	c.inflight.Wait()
	c.rec.Close()
	if g.left.Add(1) == int64(len(g.ranks)) && g.onEmpty != nil {
		g.onEmpty()
	}
}

// enqueue queues an unexpected message. c.mu is held.
func (c *Comm) enqueue(m *request) {
	c.tbl.Arrive(m, m.src, m.tag)
}

// unqueue removes an unexpected message. c.mu is held.
func (c *Comm) unqueue(m *request) {
	c.tbl.Unqueue(m)
	c.unqueued(m)
}

// unqueued gives back the budget an eager message held once it has left
// the unexpected queue. c.mu is held.
func (c *Comm) unqueued(m *request) {
	if m.eager {
		c.held -= len(m.buf)
	}
}

// takeUnexpected removes and returns the earliest arrived message that a
// receive from source with tag matches. c.mu is held.
func (c *Comm) takeUnexpected(source, tag int) *request {
	m := c.tbl.TakeUnexpected(source, tag)
	if m != nil {
		c.unqueued(m)
	}
	return m
}

// deliver copies a message from src with tag into the receive r and
// returns the receive's outcome.
func deliver(r *request, msg []byte, src, tag int) (comm.Status, error) {
	return deliverTo(r.owner.rank, r.buf, msg, src, tag)
}

// deliverTo copies a message from src with tag into buf of rank and
// returns the receive's outcome.
func deliverTo(rank int, buf, msg []byte, src, tag int) (comm.Status, error) {
	n := copy(buf, msg)
	st := comm.Status{Source: src, Tag: tag, Count: n}
	if n < len(msg) {
		return st, xerr.Errorf(Name, "recv", comm.ErrTruncated, "rank %d: %d-byte message from %d tag %d into a %d-byte buffer",
			rank, len(msg), src, tag, len(buf))
	}
	return st, nil
}

// hostBytes returns the host view of b. The zero Block is an empty buffer.
func hostBytes(b memspace.Block) ([]byte, error) {
	if b.IsZero() {
		return nil, nil
	}
	if !b.HostAccessible() {
		return nil, xerr.Detail(memspace.ErrNotHostAccessible, "buffer %v", b)
	}
	return b.Bytes()
}

// errRevoked is the cause of collective operations failed by a revocation.
var errRevoked = xerr.Detail(comm.ErrPeerLost, "collectives revoked after a rank failed")

// lost records that an operation of c on tag failed with ErrPeerLost and
// returns err. A collective operation (reserved tag) that meets a lost peer
// revokes the group's collectives, so ranks that never talk to the lost one
// learn of it too. No lock may be held.
func (c *Comm) lost(tag int, err error) error {
	c.sawLoss.Store(true)
	if tag > comm.MaxTag && !c.g.revoked.Load() {
		c.g.revoke(c.rank)
	}
	return err
}

// hasPostedReserved reports whether c has a reserved-tag receive posted.
// c.mu is held.
func (c *Comm) hasPostedReserved() bool {
	for r := range c.tbl.Posted() {
		if r.tag > comm.MaxTag {
			return true
		}
	}
	return false
}

// revoke fails, on every rank still in the group, the collective traffic
// that waits: posted reserved-tag receives and queued reserved-tag
// rendezvous sends. Later collective operations that would have to wait
// fail at once; messages already delivered can still be received.
func (g *group) revoke(culprit int) {
	g.revoked.Store(true)
	err := xerr.Errorf(Name, "revoke", errRevoked, "rank %d failed", culprit)
	for _, p := range g.ranks {
		p.mu.Lock()
		if !p.closed.Load() {
			for r := range p.tbl.Posted() {
				if r.tag > comm.MaxTag {
					p.tbl.Unpost(r)
					r.complete(comm.Status{}, err)
				}
			}
			for m := range p.tbl.Arrivals() {
				if !m.eager && m.tag > comm.MaxTag {
					p.unqueue(m)
					m.complete(comm.Status{}, err)
				}
			}
		}
		p.mu.Unlock()
	}
}
