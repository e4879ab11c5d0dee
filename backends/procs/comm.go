package procs

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/xpu-go/xpu/comm"
	"github.com/xpu-go/xpu/flight"
	"github.com/xpu-go/xpu/impl"
	"github.com/xpu-go/xpu/internal/match"
	"github.com/xpu-go/xpu/internal/nodecoll"
	"github.com/xpu-go/xpu/internal/onesided"
	"github.com/xpu-go/xpu/internal/p2p"
	"github.com/xpu-go/xpu/internal/shm"
	"github.com/xpu-go/xpu/memspace"
	"github.com/xpu-go/xpu/xerr"
)

// Comm is one rank of a job whose ranks talk over TCP. It implements
// comm.Comm, comm.Blocking and comm.Collectives and is safe for concurrent
// use by many goroutines. Make one with Dial, FromEnv or NewLoopbackGroup;
// Close it when done.
type Comm struct {
	cfg   Config
	rank  int
	size  int
	lim   limits
	links []*link  // by rank; nil for this rank (and while Dial connects)
	node  [32]byte // shm.NodeKey of cfg.Node

	mu     sync.Mutex
	closed bool
	lost   []error // by rank: why the peer is lost; nil while it is up
	nlost  int     // peers lost
	// tbl holds the posted receives and the unexpected messages: eager
	// payloads, announcements of rendezvous messages, and sends to this
	// rank waiting for their receive.
	tbl  table
	self p2p.Self // the eager budget of sends to this rank

	// anyLost mirrors nlost > 0, and shut mirrors closed: for waits that
	// poll and collectives that start, without mu.
	anyLost atomic.Bool
	shut    atomic.Bool
	// shmYield says that the node is oversubscribed (tuneShm).
	shmYield atomic.Bool
	nodes

	// parked counts goroutines blocked in Wait without reading a link.
	parked atomic.Int32
	// spare is a request for Recv to reuse.
	spare atomic.Pointer[request]
	// unexp counts, by source, the messages on the unexpected queue
	// (changed under mu): for the lane (lane.go), which reads it without.
	unexp []atomic.Int32

	coll collState
	one  onesided.Table // this rank's exposed regions (onesided.go)
	// pubs are the directory slots each region is published in, under
	// dirMu (onesided_direct.go).
	dirMu sync.Mutex
	pubs  map[*onesided.Region][]published
	// notes are the notifications received, not yet taken
	// (onesided_notify.go).
	notes onesided.Notes
	// noteWait is a goroutine that reads a link for a notification.
	noteWait atomic.Pointer[noteWaiter]
	// rec is the flight recorder (nil when off).
	rec *flight.Recorder
	// devPaths are the paths of the last device message with each rank
	// (DevicePath), and shares the allocations this rank shared, to tell
	// the peers that mapped them when they are freed (ipc.go).
	devPaths []atomic.Uint32
	shares   devShares
	lifecycle
}

// table is the communicator's matching table (guarded by Comm.mu), with a
// count of the receives posted, which the lane reads without the lock.
type table struct {
	match.Table[request, *request]
	posted atomic.Int32
}

// Post posts r (match.Table.Post) and counts it.
func (t *table) Post(r *request, src, tag int) {
	t.Table.Post(r, src, tag)
	t.posted.Add(1)
}

// Unpost removes the posted r (match.Table.Unpost) from the count.
func (t *table) Unpost(r *request) {
	t.Table.Unpost(r)
	t.posted.Add(-1)
}

// TakePosted is match.Table.TakePosted, counted.
func (t *table) TakePosted(src, tag int) *request {
	r := t.Table.TakePosted(src, tag)
	if r != nil {
		t.posted.Add(-1)
	}
	return r
}

// nodes are the collectives of the nodes in their shared regions
// (nodehost.go): nodeColl runs Barrier, Bcast, Reduce and Allreduce through
// them (set up at the first of them: nodeDone); nil when they run over the
// links. nodeMu guards both; nodeReady is set once nodeColl is final, for
// the calls after the first, and oneNodeColl with it: nodeColl when it
// runs the collectives of a job of one node, else nil.
type nodes struct {
	nodeMu      sync.Mutex
	nodeDone    bool
	nodeColl    *nodecoll.Node
	oneNodeColl *nodecoll.Node
	nodeReady   atomic.Bool
}

// lifecycle is what Close needs: it runs once, stops the goroutines, and
// keeps its error.
type lifecycle struct {
	closeOnce sync.Once
	stop      chan struct{} // closed by Close
	bg        sync.WaitGroup
	closeErr  error
}

var (
	_ comm.Comm        = (*Comm)(nil)
	_ comm.Blocking    = (*Comm)(nil)
	_ comm.Collectives = (*Comm)(nil)
	_ comm.OneSided    = (*Comm)(nil)
	_ comm.Recording   = (*Comm)(nil)
)

func newComm(cfg Config) *Comm {
	c := &Comm{
		cfg: cfg, rank: cfg.Rank, size: cfg.Size,
		lim:       limits{eager: cfg.EagerLimit, chunk: cfg.Chunk, budget: cfg.EagerBudget},
		links:     make([]*link, cfg.Size),
		lost:      make([]error, cfg.Size),
		devPaths:  make([]atomic.Uint32, cfg.Size),
		unexp:     make([]atomic.Int32, cfg.Size),
		lifecycle: lifecycle{stop: make(chan struct{})},
		node:      shm.NodeKey(cfg.Node),
	}
	c.tbl.Init(cfg.Size)
	return c
}

// FlightRecorder returns the communicator's flight recorder
// (comm.Recording), nil when XPU_FLIGHT_SIZE turned it off. The requests
// of user tags are recorded; those of the collective algorithms (reserved
// tags) are part of their collective's entry.
func (c *Comm) FlightRecorder() *flight.Recorder { return c.rec }

// flightPost records a point-to-point request of a user tag as posted.
func (c *Comm) flightPost(op flight.Op, peer, tag, n int) flight.Ticket {
	if tag > comm.MaxTag || c.rec == nil {
		return flight.Ticket{}
	}
	return c.rec.Post(op, peer, tag, int64(n))
}

// Rank returns this process's rank.
func (c *Comm) Rank() int { return c.rank }

// Size returns the number of ranks of the job.
func (c *Comm) Size() int { return c.size }

// Timeout returns the failure-detection bound in force (Config.Timeout).
func (c *Comm) Timeout() time.Duration { return c.cfg.Timeout }

func (c *Comm) isClosed() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.closed
}

func (c *Comm) closedErr() error {
	return xerr.Errorf(Name, "close", comm.ErrClosed, "rank %d", c.rank)
}

// Isend starts sending buf to rank dest with tag (reserved tags included).
//
// A message of at most the peer's eager limit goes at once while the peer
// has eager budget left for this rank: its send completes when written to
// the socket (at once for up to 4 KiB, which are copied). A larger message
// is announced and streamed straight from buf once the peer has matched a
// receive; its send completes when the last byte is written. A send to this
// rank itself is matched in memory. A block the host cannot touch is
// mapped by the peer or staged through host memory (see Device memory in
// the package documentation). Isend returns ErrInvalidArgument for a bad
// rank or tag, ErrNotSupported (ErrNotHostAccessible) for a block the host
// cannot touch whose space has no transfer path to host memory, ErrClosed
// after Close and ErrPeerLost once dest is lost.
func (c *Comm) Isend(buf memspace.Block, dest, tag int) (comm.Request, error) {
	data, err := c.hostArgs("send", buf, dest, tag, false)
	if err != nil {
		if isDevice(buf, err) {
			return c.isendDevice(buf, dest, tag)
		}
		return nil, err
	}
	// An eager message the link takes at once is written here, and its
	// request is its status alone.
	if done, err := c.sendAtOnce(data, dest, tag); err != nil {
		return nil, err
	} else if done {
		c.flightDone(flight.OpSend, dest, tag, len(data), nil)
		return &sent{Source: dest, Tag: tag, Count: len(data)}, nil
	}
	return c.isend(data, dest, tag)
}

// flightDone records a send or receive of a user tag that completed as it
// started, with its outcome: a send written at once, a receive the lane
// took (lane.go).
func (c *Comm) flightDone(op flight.Op, peer, tag, n int, err error) {
	if tag > comm.MaxTag {
		return
	}
	if err == nil {
		c.rec.Record(op, peer, tag, int64(n))
	} else if t := c.flightPost(op, peer, tag, n); t.Valid() {
		t.Finish(err)
	}
}

// sendAtOnce writes data to dest, another rank, from the calling goroutine
// when it can go eagerly and its link is idle; done reports that it went,
// and nothing is done otherwise.
func (c *Comm) sendAtOnce(data []byte, dest, tag int) (done bool, err error) {
	if dest == c.rank {
		return false, nil
	}
	return c.links[dest].sendMsg(nil, data, tag)
}

// sent is the request of a send that completed as it started: its status,
// three words the collector need not scan, where a request is 35 words
// with pointers (1 KiB messages stream 1.3 times as fast for it).
type sent comm.Status

func (s *sent) Wait(context.Context) (comm.Status, error) { return comm.Status(*s), nil }
func (s *sent) Test() (comm.Status, bool, error)          { return comm.Status(*s), true, nil }
func (s *sent) Cancel() error                             { return nil }

// Send sends buf to dest with tag and returns once the send has completed
// (comm.Blocking): Isend and a wait that cancels on ctx done, as comm.Send
// does, except that an eager message the link can take at once is written
// by the calling goroutine with no request made.
func (c *Comm) Send(ctx context.Context, buf memspace.Block, dest, tag int) error {
	data, err := c.hostArgs("send", buf, dest, tag, false)
	if err != nil {
		if isDevice(buf, err) {
			return c.sendDevice(ctx, buf, dest, tag)
		}
		return err
	}
	return c.sendBytes(ctx, data, dest, tag)
}

// Send and Recv of package comm hand host Blocks to c as bytes.
var _ comm.HostPointToPoint = (*Comm)(nil)

// SendBytes is Send of host bytes (comm.HostPointToPoint).
func (c *Comm) SendBytes(ctx context.Context, data []byte, dest, tag int) error {
	if err := c.checkArgs("send", dest, tag, false); err != nil {
		return err
	}
	return c.sendBytes(ctx, data, dest, tag)
}

// sendBytes is Send of host bytes whose arguments have been checked.
func (c *Comm) sendBytes(ctx context.Context, data []byte, dest, tag int) error {
	if done, err := c.sendAtOnce(data, dest, tag); done || err != nil {
		if done {
			c.flightDone(flight.OpSend, dest, tag, len(data), nil)
		}
		return err
	}
	r, err := c.isend(data, dest, tag)
	if err != nil {
		return err
	}
	_, err = comm.Await(ctx, r)
	return err
}

func (c *Comm) isend(data []byte, dest, tag int) (*request, error) {
	r := &request{c: c, kind: kindSend, peer: dest, other: dest, tag: tag, buf: data}
	r.Flight = c.flightPost(flight.OpSend, dest, tag, len(data))
	if dest == c.rank {
		return c.sendSelf(r)
	}
	// The link knows whether it can take the send: it is down once dest
	// is lost, and closed to sends once Close has begun to say goodbye.
	done, err := c.links[dest].sendMsg(r, data, tag)
	if err != nil {
		r.Flight.End(err, false)
		return nil, err
	}
	if done {
		// Written or copied: r was never shared.
		r.Completed(r.sendStatus(), nil)
	}
	return r, nil
}

// sendSelf matches a message to this rank in memory.
func (c *Comm) sendSelf(r *request) (*request, error) {
	n := len(r.buf)
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		err := c.closedErr()
		r.Flight.End(err, false)
		return nil, err
	}
	if rr := c.tbl.TakePosted(c.rank, r.tag); rr != nil {
		rr.complete(deliverTo(c.rank, rr, r.buf, c.rank, r.tag))
		r.Completed(r.sendStatus(), nil)
		return r, nil
	}
	if c.self.Take(n, c.lim.eager, c.lim.budget) {
		c.enqueue(&request{c: c, kind: kindEagerMsg, peer: c.rank, tag: r.tag, buf: append([]byte(nil), r.buf...)})
		r.Completed(r.sendStatus(), nil)
		return r, nil
	}
	r.kind = kindSelf
	c.enqueue(r)
	return r, nil
}

// Irecv starts receiving into buf from source (or comm.AnySource) with tag
// (or comm.AnyTag, which matches user tags only).
//
// A message longer than buf fails the receive with ErrTruncated: the first
// len(buf) bytes are delivered, Status.Count says how many, and the rest is
// never sent (rendezvous) or dropped (eager). A block the host cannot
// touch receives as Device memory in the package documentation says: what
// arrived is in it when the receive completes. Irecv returns
// ErrInvalidArgument for a bad rank or tag, ErrNotSupported
// (ErrNotHostAccessible) for a block the host cannot touch whose space has
// no transfer path to host memory, ErrClosed after Close, and ErrPeerLost when no
// message can come: source is lost and left no matching message, or, for
// AnySource, every other rank is lost.
func (c *Comm) Irecv(buf memspace.Block, source, tag int) (comm.Request, error) {
	data, err := c.hostArgs("recv", buf, source, tag, true)
	if err != nil {
		if isDevice(buf, err) {
			return c.irecvDevice(buf, source, tag)
		}
		return nil, err
	}
	r := &request{c: c, kind: kindRecv, peer: source, tag: tag, buf: data}
	r.Flight = c.flightPost(flight.OpRecv, source, tag, len(data))
	rr, err := c.irecv(r)
	if err != nil {
		r.Flight.End(err, false)
		return nil, err
	}
	return rr, nil
}

// Recv receives into buf from source (or comm.AnySource) with tag (or
// comm.AnyTag) and returns once the receive has completed (comm.Blocking):
// Irecv and a wait that cancels on ctx done, as comm.Recv does, with the
// request reused from call to call.
func (c *Comm) Recv(ctx context.Context, buf memspace.Block, source, tag int) (comm.Status, error) {
	data, err := c.hostArgs("recv", buf, source, tag, true)
	if err != nil {
		if isDevice(buf, err) {
			return c.recvDevice(ctx, buf, source, tag)
		}
		return comm.Status{}, err
	}
	return c.recvBytes(ctx, data, source, tag)
}

// RecvBytes is Recv into host bytes (comm.HostPointToPoint).
func (c *Comm) RecvBytes(ctx context.Context, data []byte, source, tag int) (comm.Status, error) {
	if err := c.checkArgs("recv", source, tag, true); err != nil {
		return comm.Status{}, err
	}
	return c.recvBytes(ctx, data, source, tag)
}

// recvBytes is Recv into host bytes whose arguments have been checked.
func (c *Comm) recvBytes(ctx context.Context, data []byte, source, tag int) (comm.Status, error) {
	var posted flight.Ticket // the lane's entry for the receive
	if uint(source) < uint(c.size) && source != c.rank && ctx != nil {
		if l := c.links[source]; l != nil && l.shm != nil {
			if st, ok, err := l.recvLane(ctx, data, tag, &posted); ok {
				return st, err
			}
		}
	}
	r := c.spare.Swap(nil)
	if r == nil {
		r = new(request)
	}
	*r = request{c: c, kind: kindRecv, peer: source, tag: tag, buf: data}
	r.Flight = posted
	if !posted.Valid() {
		r.Flight = c.flightPost(flight.OpRecv, source, tag, len(data))
	}
	if _, err := c.irecv(r); err != nil {
		r.Flight.End(err, false)
		c.spare.Store(r)
		return comm.Status{}, err
	}
	st, err := comm.Await(ctx, r)
	if r.IsDone() {
		// Completed: no one else refers to r any more (complete touches
		// nothing after it marks it done; queues and maps drop r first).
		// The next Recv writes every field; until then r must not keep
		// the caller's buffer or an error alive — the rest it refers to
		// lives as long as c (zeroing all of it cost ~5 ns a message).
		r.buf = nil
		r.Forget()
		c.spare.Store(r)
	}
	// Else still pending past the grace: it stays with the link.
	return st, err
}

// irecv starts the receive r (kind, peer, tag, buf and red set).
func (c *Comm) irecv(r *request) (*request, error) {
	r.other = r.peer
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return nil, c.closedErr()
	}
	if m := c.takeUnexpected(r.peer, r.tag); m != nil {
		switch m.kind {
		case kindEagerMsg:
			if m.via != nil {
				m.via.consumed(len(m.buf))
			} else {
				c.self.Give(len(m.buf))
			}
			c.mu.Unlock()
			st, err := deliverMsg(r, m)
			putBuf(m.pooled)
			r.Completed(st, err)
			return r, nil
		case kindSelf:
			st, err := deliverTo(c.rank, r, m.buf, c.rank, m.tag)
			c.mu.Unlock()
			m.complete(m.sendStatus(), nil)
			r.Completed(st, err)
			return r, nil
		case kindRTSMsg:
			c.mu.Unlock()
			if m.dev != nil {
				// Announced by description (ipc.go); an error has
				// failed the link, and r.
				_ = m.via.acceptIPC(r, m.tag, m.id, m.dev.shared, true)
			} else {
				m.via.acceptRdv(r, m.tag, m.id, m.size, true)
			}
			return r, nil
		}
	}
	if r.peer == comm.AnySource {
		if c.size > 1 && c.nlost == c.size-1 {
			c.mu.Unlock()
			return nil, c.allLostErr()
		}
	} else if err := c.lost[r.peer]; err != nil {
		c.mu.Unlock()
		return nil, err
	}
	c.tbl.Post(r, r.peer, r.tag)
	c.mu.Unlock()
	return r, nil
}

// allLostErr is the error of a receive from any source once every other
// rank is lost.
func (c *Comm) allLostErr() error {
	return xerr.Errorf(Name, "recv", comm.ErrPeerLost, "rank %d from any source: every other rank is lost", c.rank)
}

// deliverMsg delivers the held message m into the receive r.
func deliverMsg(r *request, m *request) (comm.Status, error) {
	return deliverTo(r.c.rank, r, m.buf, m.peer, m.tag)
}

// deliverTo copies (or folds) msg from src with tag into the receive r and
// returns the receive's outcome.
func deliverTo(rank int, r *request, msg []byte, src, tag int) (comm.Status, error) {
	if r.dev != nil {
		r.dev.standIn(r, len(msg))
	}
	k := min(len(msg), len(r.buf))
	if r.red != nil && k > 0 {
		b, _ := memspace.FromSlice(msg[:k])
		if err := r.red.fold(0, b.Block(), k); err != nil {
			return comm.Status{}, err
		}
	} else {
		copy(r.buf, msg)
	}
	return p2p.Outcome(Name, rank, src, tag, len(msg), k)
}

// peerDown records that peer is lost and fails what waits on it: receives
// posted for it, its unmatched announcements, and AnySource receives once
// every peer is lost. Eager messages it sent before remain deliverable.
func (c *Comm) peerDown(peer int, err error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.lost[peer] != nil {
		return
	}
	c.lost[peer] = err
	c.nlost++
	c.anyLost.Store(true)
	if c.closed {
		return
	}
	for r := range c.tbl.PostedFrom(peer) {
		c.tbl.Unpost(r)
		r.complete(comm.Status{}, err)
	}
	for m := range c.tbl.UnexpectedFrom(peer) {
		if m.kind == kindRTSMsg {
			c.unqueue(m)
		}
	}
	if c.nlost == c.size-1 {
		all := c.allLostErr()
		for r := range c.tbl.PostedAny() {
			c.tbl.Unpost(r)
			r.complete(comm.Status{}, all)
		}
	}
}

// Close leaves the job: pending requests of this rank fail with ErrClosed,
// and so do later calls; peers see ErrPeerLost for operations that need
// this rank. Frames already queued (eager sends) are flushed before the
// goodbye. Close waits for the peers to acknowledge, at most
// Config.CloseTimeout, then cuts the links and waits for its goroutines:
// when it returns no buffer of this rank is in use. It is idempotent.
func (c *Comm) Close() error {
	c.closeOnce.Do(c.shutdown)
	return c.closeErr
}

func (c *Comm) shutdown() {
	c.mu.Lock()
	c.closed = true
	c.shut.Store(true)
	closed := c.closedErr()
	c.notes.Close(closed)
	for r := range c.tbl.Posted() {
		c.tbl.Unpost(r)
		r.complete(comm.Status{}, closed)
	}
	for m := range c.tbl.Arrivals() {
		c.unqueue(m)
		putBuf(m.pooled)
		if m.kind == kindSelf {
			m.complete(comm.Status{}, closed)
		}
	}
	links := append([]*link(nil), c.links...)
	c.mu.Unlock()
	c.coll.closeAll()
	c.withdrawAll()
	c.shares.close()

	close(c.stop)
	for _, l := range links {
		if l != nil {
			l.w.bye()
			l.role.wakeReader() // to read the peer's goodbye
		}
	}
	deadline := time.NewTimer(c.cfg.CloseTimeout)
	defer deadline.Stop()
	for _, l := range links {
		if l == nil {
			continue
		}
		select {
		case <-l.downCh:
		case <-deadline.C:
			deadline.Reset(0)
			l.fail(fmt.Errorf("no goodbye within %v", c.cfg.CloseTimeout))
		}
	}
	for _, l := range links {
		if l != nil {
			l.fail(errPeerClosed)
			l.release()
		}
	}
	c.bg.Wait()
	c.rec.Close()
	c.one.Close()
	c.nodeMu.Lock()
	if c.nodeColl != nil {
		c.nodeColl.Close()
	}
	c.nodeDone = true
	c.nodeMu.Unlock()
}

// enqueue queues an unexpected message. c.mu is held.
func (c *Comm) enqueue(m *request) {
	c.tbl.Arrive(m, m.peer, m.tag)
	c.unexp[m.peer].Add(1)
	if m.kind == kindRTSMsg {
		m.via.credit.rtsHeld++
	}
}

// unqueue removes an unexpected message. c.mu is held.
func (c *Comm) unqueue(m *request) {
	c.tbl.Unqueue(m)
	c.unqueued(m)
}

// unqueued keeps the counts of unexpected messages and of a link's held
// announcements once m has left the unexpected queue. c.mu is held.
func (c *Comm) unqueued(m *request) {
	c.unexp[m.peer].Add(-1)
	if m.kind == kindRTSMsg {
		m.via.credit.rtsHeld--
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

// hostArgs checks the arguments of a point-to-point call op (rank is the
// destination, or the source where wildcard allows AnySource and AnyTag)
// and returns the host view of buf.
func (c *Comm) hostArgs(op string, buf memspace.Block, rank, tag int, wildcard bool) ([]byte, error) {
	if uint(rank) < uint(c.size) && uint(tag) <= comm.MaxReservedTag {
		// The common case — a host buffer, a rank of the group, a tag
		// in range — answered by Block.Bytes, a call. A Block is five
		// words, which the compiler keeps in memory: an inlined method
		// of it (HostPointer, Len) copies the block the caller has just
		// stored, 16 bytes at a time from 8-byte stores, and each such
		// load waits for the stores to reach the cache instead of being
		// forwarded from them: ~12 ns a call (ADR 47).
		if data, err := buf.Bytes(); err == nil && data != nil {
			return data, nil
		}
	}
	if err := c.checkArgs(op, rank, tag, wildcard); err != nil {
		return nil, err
	}
	data, err := hostBytes(buf)
	if err != nil {
		return nil, xerr.Op(Name, op, err)
	}
	return data, nil
}

// checkArgs checks the rank and tag of a point-to-point call op.
func (c *Comm) checkArgs(op string, rank, tag int, wildcard bool) error {
	if uint(rank) < uint(c.size) && uint(tag) <= comm.MaxReservedTag {
		return nil
	}
	if err := impl.CheckRank(rank, c.size, wildcard); err != nil {
		return xerr.Op(Name, op, err)
	}
	if err := impl.CheckWireTag(tag, wildcard); err != nil {
		return xerr.Op(Name, op, err)
	}
	return nil
}

// hostBytes returns the host view of b. The zero Block is an empty buffer.
func hostBytes(b memspace.Block) ([]byte, error) {
	if b.IsZero() {
		return nil, nil
	}
	if !b.HostAccessible() {
		return nil, xerr.Detail(memspace.ErrNotHostAccessible, "buffer %v is not host-accessible", b)
	}
	return b.Bytes()
}

// detailOf returns what err says after its place when err is an error of
// this backend, else err: the cause for an error that names the place
// again, so that the place is named once.
func detailOf(err error) error {
	if e, ok := err.(*xerr.Error); ok && e.Backend == Name {
		return e.Err
	}
	return err
}

// monitor cuts links that have been silent for the timeout.
func (c *Comm) monitor() {
	defer c.bg.Done()
	tick := time.NewTicker(max(c.cfg.Heartbeat/2, time.Millisecond))
	defer tick.Stop()
	// Per rank: the link last seen, and when it was last heard from.
	since := make([]time.Time, c.size)
	known := make([]*link, c.size)
	for {
		select {
		case <-c.stop:
			return
		case <-tick.C:
		}
		c.mu.Lock()
		links := append([]*link(nil), c.links...)
		c.mu.Unlock()
		now := time.Now()
		for i, l := range links {
			if l == nil || l.failed() != nil {
				continue
			}
			if heard := l.rd.heard.Swap(false); known[i] != l || heard {
				known[i], since[i] = l, now
				continue
			}
			if idle := now.Sub(since[i]); idle > c.cfg.Timeout {
				l.fail(fmt.Errorf("nothing heard for %v (timeout %v)", idle.Round(time.Millisecond), c.cfg.Timeout))
			}
		}
	}
}
