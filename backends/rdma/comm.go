package rdma

import (
	"errors"
	"fmt"
	"net"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
	"unsafe"

	"github.com/xpu-go/xpu/backends/rdma/internal/fabric"
	"github.com/xpu-go/xpu/comm"
	"github.com/xpu-go/xpu/flight"
	"github.com/xpu-go/xpu/impl"
	"github.com/xpu-go/xpu/internal/match"
	"github.com/xpu-go/xpu/internal/p2p"
	"github.com/xpu-go/xpu/memspace"
	"github.com/xpu-go/xpu/xerr"
)

// Name is the name the driver is registered under.
const Name = "rdma"

// readDepth is how many READs a peer's send queue may hold beside its
// send slots, and oneDepth how many one-sided WRITEs and READs beside
// those: a prepared batch keeps that many in flight to each peer.
const (
	readDepth = 16
	oneDepth  = 128
)

// Work request ids: the kind in the top 4 bits; for receives and sends the
// peer in bits 32-47 and the slot below; for READs the receive's rid.
const (
	wrRecv = 1
	wrSend = 2
	wrRead = 3
)

func wrID(kind uint64, peer, slot int) uint64 {
	return kind<<60 | uint64(peer)<<32 | uint64(uint32(slot))
}

// Comm is one rank of a job whose ranks talk over RDMA: reliable connected
// queue pairs, eager sends into pre-posted receive slots, and rendezvous
// by RDMA READ straight into the receive buffer. It implements comm.Comm
// and is safe for concurrent use by many goroutines.
type Comm struct {
	cfg  Config
	rank int
	size int
	// rec is the flight recorder, made by start (nil when off), closed
	// by Close.
	rec   *flight.Recorder
	fc    fabric.Context
	regs  *regCache
	peers []*peer
	// node runs the collectives in shared memory when every rank runs on
	// this machine (nodecoll.go); nil otherwise. Set under mu as the rank
	// joins, never changed after.
	node *nodeJob
	slots

	mu      sync.Mutex
	tbl     match.Table[request, *request]
	self    p2p.Self // the eager budget of sends to this rank
	sawLoss bool
	revoked error
	nlost   int
	transfers
	lifecycle
	engine
}

// slots are the registered memory of the eager protocol: every peer's
// receive and send slots in one arena.
type slots struct {
	arena []byte // receive and send slots of every peer, registered as mr
	mr    *fabric.MR
	slot  int // slot size
	// sendDepth is the send-queue depth of each endpoint.
	sendDepth int
}

// transfers are the tables of the transfers in flight that the peers
// name by id: rendezvous sends and reads, one-sided transfers and the
// regions they reach. Guarded by Comm.mu.
type transfers struct {
	nextID  uint64
	rdv     map[uint64]*request // announced rendezvous sends, by id
	reads   map[uint64]*request // rendezvous receives reading, by rid
	ones    map[uint64]*request // one-sided transfers, by rid
	exposed map[*region]struct{}
	parts   map[uint64]*part // pieces of posted batches, by id (batch.go)
	runs    map[*batchRun]struct{}
	// prepRegs are the registrations of prepared batches, kept until
	// Close (a prepared batch may be posted as long as c is open).
	prepRegs []registration
	notices
}

// notices are the notifications received and not yet taken
// (WaitNotification). Guarded by Comm.mu, but for waiters.
type notices struct {
	notes    []comm.Notification
	noteWake chan struct{} // closed and replaced when one arrives, and at Close
	// waiters counts the goroutines in WaitNotification: while there are
	// any, the engine sleeps armed, so a notification wakes them at once.
	waiters atomic.Int32
}

// lifecycle is what Close needs: whether the rank is closed (Comm.mu),
// the goodbyes it waits for, and the goroutines it stops.
type lifecycle struct {
	closed   bool
	byes     int // goodbyes not yet completed
	byesDone chan struct{}

	stop      chan struct{}
	bg        sync.WaitGroup
	closeOnce sync.Once
	// progressStarted says start ran (Close then stops what it started).
	progressStarted bool
	// mute stops the heartbeats (tests: a frozen rank).
	mute bool
}

// engine is the state of the progress engine (progress.go) that its
// goroutines and the waiters share without Comm.mu.
type engine struct {
	// polling is held by the goroutine polling the completion queue.
	// spinners counts the goroutines polling for their own requests
	// (spinWait).
	polling  atomic.Bool
	spinners atomic.Int32
	// lossSeq counts the endpoint losses the watchers have recorded
	// (each peer's lostSeq says which); lossDone is the highest the poller
	// has applied. A poll applies only the losses recorded before it
	// began: what the peer sent before it went was in the queue by then.
	lossSeq  atomic.Uint64
	lossDone atomic.Uint64
	// clock is a coarse clock (Unix ns) the monitor advances every tick:
	// what heartbeats and timeouts need, without a clock read per message.
	clock atomic.Int64
	// stopping is set as stop closes, for loops that poll rather than
	// select.
	stopping atomic.Bool
}

var (
	_ comm.Comm      = (*Comm)(nil)
	_ comm.Recording = (*Comm)(nil)
)

// peer is this rank's state for one other rank. Guarded by Comm.mu.
type peer struct {
	rank     int
	ep       fabric.Endpoint
	recvBase int   // first receive slot, in slots from the arena's start
	freeSend []int // send slots free, absolute
	inflight int   // send-queue requests posted, not completed
	credits  int   // receives the peer has posted for this rank
	budget   int   // eager bytes the peer still accepts unmatched
	owedCred int   // receives posted again, not yet told to the peer
	owedBud  int   // eager bytes matched here, not yet told to the peer
	held     int   // eager bytes from the peer held unmatched here
	queue    []out // data messages waiting for a slot or credits
	ctrl     []out // control messages, sent before data
	reads    []*request
	ops      []opItem // one-sided transfers waiting for send-queue room
	// opSeq counts the items appended to ops, opPosted those wholly
	// posted: a notification queued when opSeq was s goes once opPosted
	// reaches s, after the WRITEs before it (RC order).
	opSeq, opPosted uint64
	// keys are the peer's regions this rank has asked about (onesided.go).
	keys map[keyID]*keyState
	wr   [1]fabric.SendWR
	// lostPending is why the peer's endpoint went down, until the poller
	// has drained what arrived before (applyLosses).
	lostPending error
	lostSeq     uint64 // Comm.lossSeq when lostPending was recorded
	lastRecv    int64  // when something last arrived from the peer (Comm.clock)
	lastSend    int64  // when something was last posted to it (Comm.clock)
	lost        error  // why the peer is lost; nil while it is up
	byeSent     bool
}

// out is a message waiting to be sent.
type out struct {
	h    header
	r    *request // the send it carries, if any
	note []byte   // a notification's bytes (kNotify)
}

// post1 posts one work request through a slice kept for the purpose: a
// variadic call through the interface would allocate one per post. c.mu
// is held.
func (p *peer) post1(wr fabric.SendWR) error {
	p.wr[0] = wr
	return p.ep.PostSend(p.wr[:]...)
}

// queueReady reports whether the head of p's queue may go: a
// notification waits until the one-sided transfers queued before it are
// posted.
func (p *peer) queueReady() bool {
	return p.queue[0].h.kind != kNotify || p.queue[0].h.id <= p.opPosted
}

func (p *peer) unqueue(r *request) {
	for i := range p.queue {
		if p.queue[i].r == r {
			p.queue = append(p.queue[:i], p.queue[i+1:]...)
			break
		}
	}
	r.queued = false
}

// newComm makes rank of size over fc with its slots registered; its peers
// are connected afterwards (connect), their receives posted by prepost.
func newComm(cfg Config, rank, size int, fc fabric.Context) (*Comm, error) {
	c := &Comm{
		cfg: cfg, rank: rank, size: size, fc: fc,
		peers: make([]*peer, size),
		slots: slots{slot: cfg.slotSize(), sendDepth: cfg.Slots + readDepth + oneDepth + 4},
		transfers: transfers{rdv: map[uint64]*request{}, reads: map[uint64]*request{},
			ones: map[uint64]*request{}, exposed: map[*region]struct{}{},
			parts: map[uint64]*part{}, runs: map[*batchRun]struct{}{},
			notices: notices{noteWake: make(chan struct{})}},
		lifecycle: lifecycle{stop: make(chan struct{}), byesDone: make(chan struct{})},
	}
	c.tbl.Init(size)
	c.regs = newRegCache(fc)
	per := 2 * cfg.Slots // receive slots, then send slots
	n := max(size-1, 1) * per * c.slot
	arena, err := syscall.Mmap(-1, 0, n, syscall.PROT_READ|syscall.PROT_WRITE, syscall.MAP_PRIVATE|syscall.MAP_ANON)
	if err != nil {
		return nil, xerr.Errorf(Name, "open", memspace.ErrOutOfMemory, "%d bytes of slots: %w", n, err)
	}
	c.arena = arena
	c.mr, err = fc.Register(unsafe.Pointer(&arena[0]), n)
	if err != nil {
		_ = syscall.Munmap(arena)
		return nil, xerr.Errorf(Name, "open", xerr.ErrUnavailable, "register %d bytes of slots: %w", n, err)
	}
	i := 0
	for r := range size {
		if r == rank {
			continue
		}
		p := &peer{rank: r, recvBase: i * per, credits: cfg.Slots, budget: cfg.EagerBudget, keys: map[keyID]*keyState{}}
		for s := range cfg.Slots {
			p.freeSend = append(p.freeSend, i*per+cfg.Slots+s)
		}
		c.peers[r] = p
		i++
	}
	return c, nil
}

func (c *Comm) slotBytes(s int) []byte { return c.arena[s*c.slot : (s+1)*c.slot] }

func (c *Comm) slotSGE(s, n int) fabric.SGE {
	return fabric.SGE{Addr: c.mr.Addr + uintptr(s*c.slot), Len: uint32(n), LKey: c.mr.LKey}
}

// prepost posts p's receive slots on ep, before the connection is up.
func (c *Comm) prepost(p *peer, ep fabric.Endpoint) error {
	for s := range c.cfg.Slots {
		if err := ep.PostRecv(wrID(wrRecv, p.rank, p.recvBase+s), c.slotSGE(p.recvBase+s, c.slot)); err != nil {
			return err
		}
	}
	return nil
}

// start runs the progress engine and the watchers of the peers' endpoints.
func (c *Comm) start() {
	c.rec = flight.New(flight.SizeFromEnv(), flight.Context{Rank: c.rank, Size: c.size, Backend: Name, Comm: "world"})
	c.progressStarted = true
	now := timeNow().UnixNano()
	c.clock.Store(now)
	for _, p := range c.peers {
		if p != nil {
			p.lastRecv, p.lastSend = now, now
		}
	}
	c.bg.Add(1)
	go c.progress()
	c.bg.Add(1)
	go c.monitor()
	for _, p := range c.peers {
		if p == nil {
			continue
		}
		c.bg.Add(1)
		go func(p *peer, ep fabric.Endpoint) {
			defer c.bg.Done()
			select {
			case <-ep.Lost():
				// What the peer sent before it went may still wait in the
				// completion queue: the poller declares the peer lost once
				// it has drained the queue (applyLosses).
				c.mu.Lock()
				if p.lost == nil && p.lostPending == nil {
					p.lostPending = fmt.Errorf("connection to rank %d lost: %w", p.rank, ep.Err())
					p.lostSeq = c.lossSeq.Add(1)
				}
				c.mu.Unlock()
				c.fc.Wake()
			case <-c.stop:
			}
		}(p, p.ep)
	}
}

// monitor sends heartbeats to the peers this rank has sent nothing to for
// Timeout/4, and cuts the link to a peer silent for Timeout.
func (c *Comm) monitor() {
	defer c.bg.Done()
	beat := max(c.cfg.Timeout/4, time.Millisecond)
	tick := time.NewTicker(max(beat/2, time.Millisecond))
	defer tick.Stop()
	for {
		select {
		case <-c.stop:
			return
		case <-tick.C:
		}
		now := timeNow().UnixNano()
		c.clock.Store(now)
		c.mu.Lock()
		for _, p := range c.peers {
			if p == nil || p.lost != nil {
				continue
			}
			if silent := time.Duration(now - p.lastRecv); silent > c.cfg.Timeout {
				_ = p.ep.Fail()
				c.linkFailed(p, fmt.Errorf("nothing from rank %d for %v (the timeout is %v)", p.rank, silent.Round(time.Millisecond), c.cfg.Timeout), false)
				continue
			}
			if !c.closed && !c.mute && time.Duration(now-p.lastSend) >= beat && len(p.ctrl) == 0 {
				p.ctrl = append(p.ctrl, out{h: header{kind: kCredit}})
				c.flush(p)
			}
		}
		c.mu.Unlock()
	}
}

// Rank returns this process's rank.
func (c *Comm) Rank() int { return c.rank }

// Size returns the number of ranks.
func (c *Comm) Size() int { return c.size }

func (c *Comm) closedErr(op string) error {
	return xerr.Errorf(Name, op, comm.ErrClosed, "rank %d", c.rank)
}

// hostArgs checks an operation's arguments and returns buf's host view.
func (c *Comm) hostArgs(op string, buf memspace.Block, rank, tag int, wildcard bool) ([]byte, error) {
	if err := impl.CheckRank(rank, c.size, wildcard); err != nil {
		return nil, xerr.Op(Name, op, err)
	}
	if err := impl.CheckWireTag(tag, wildcard); err != nil {
		return nil, xerr.Op(Name, op, err)
	}
	if buf.IsZero() {
		return nil, nil
	}
	if !buf.HostAccessible() {
		return nil, xerr.Errorf(Name, op, memspace.ErrNotHostAccessible, "buffer %v is not host-accessible", buf)
	}
	b, err := buf.Bytes()
	if err != nil {
		return nil, xerr.Op(Name, op, err)
	}
	return b, nil
}

// Isend starts sending buf to rank dest with tag (reserved tags included).
//
// A message of at most the eager limit goes at once while the peer has
// eager budget left for this rank: it is copied into a registered slot,
// and the send completes then. A larger one is announced; the receiver
// reads it from buf with RDMA READ once a receive matches it, and the send
// completes when the receiver says it is done. Isend returns
// ErrInvalidArgument for a bad rank or tag, ErrNotSupported for a buffer
// the host cannot access, ErrClosed after Close and ErrPeerLost once dest
// is lost.
func (c *Comm) Isend(buf memspace.Block, dest, tag int) (comm.Request, error) {
	data, err := c.hostArgs("send", buf, dest, tag, false)
	if err != nil {
		return nil, err
	}
	r := &request{c: c, kind: kindSend, peer: dest, tag: tag, buf: data, blk: buf}
	r.Flight = c.flightPost(flight.OpSend, dest, tag, len(data))
	rq, err := c.isend(r, dest, tag, data)
	if err != nil {
		r.Flight.End(err, false)
		return nil, err
	}
	return rq, nil
}

// isend starts the send r.
func (c *Comm) isend(r *request, dest, tag int, data []byte) (comm.Request, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return nil, c.closedErr("send")
	}
	if tag > comm.MaxTag && c.revoked != nil {
		return nil, c.revoked
	}
	if dest == c.rank {
		return c.sendSelf(r)
	}
	p := c.peers[dest]
	if p.lost != nil {
		return nil, c.lostOp("send", tag, p.lost)
	}
	n := len(data)
	if c.cfg.EagerLimit >= 0 && n <= c.cfg.EagerLimit && n <= p.budget {
		p.budget -= n
		r.queued = true
		p.queue = append(p.queue, out{h: header{kind: kEager, tag: uint32(tag), size: uint64(n)}, r: r})
		c.flush(p)
		return r, nil
	}
	if n > 0 {
		if err := c.registerSend(r); err != nil {
			return nil, err
		}
	}
	c.nextID++
	r.id = c.nextID
	r.queued = true
	p.queue = append(p.queue, out{h: header{kind: kRTS, tag: uint32(tag), size: uint64(n), id: r.id}, r: r})
	c.flush(p)
	return r, nil
}

// registerSend registers a rendezvous send's buffer for the peer to read.
func (c *Comm) registerSend(r *request) error {
	if err := c.register(r, r.buf); err != nil {
		return xerr.Errorf(Name, "send", comm.ErrNotSupported, "register a %d-byte buffer: %w", len(r.buf), err)
	}
	r.addr, r.rkey = uint64(uintptr(unsafe.Pointer(&r.buf[0]))), r.mr.RKey
	return nil
}

// register registers data (r.buf or a prefix) for r's message.
func (c *Comm) register(r *request, data []byte) error {
	reg, err := c.regs.get(r.blk, data)
	if err != nil {
		return err
	}
	r.mr, r.unreg = reg.mr, reg.release
	return nil
}

// release gives back what a rendezvous request registered.
func (c *Comm) release(r *request) {
	if r.unreg != nil {
		r.unreg()
		r.unreg, r.mr = nil, nil
	}
}

// sendSelf matches a message to this rank in memory. c.mu is held.
func (c *Comm) sendSelf(r *request) (*request, error) {
	n := len(r.buf)
	if rr := c.tbl.TakePosted(c.rank, r.tag); rr != nil {
		k := copy(rr.buf, r.buf)
		rr.complete(p2p.Outcome(Name, c.rank, c.rank, r.tag, n, k))
		r.complete(r.sendStatus(), nil)
		return r, nil
	}
	if c.self.Take(n, c.cfg.EagerLimit, c.cfg.EagerBudget) {
		c.tbl.Arrive(&request{c: c, kind: kindEagerMsg, peer: c.rank, tag: r.tag, buf: append([]byte(nil), r.buf...)}, c.rank, r.tag)
		r.complete(r.sendStatus(), nil)
		return r, nil
	}
	r.kind = kindSelf
	c.tbl.Arrive(r, c.rank, r.tag)
	return r, nil
}

// Irecv starts receiving into buf from source (or comm.AnySource) with tag
// (or comm.AnyTag, which matches user tags only). A message longer than
// buf fails the receive with ErrTruncated after delivering what fits.
func (c *Comm) Irecv(buf memspace.Block, source, tag int) (comm.Request, error) {
	data, err := c.hostArgs("recv", buf, source, tag, true)
	if err != nil {
		return nil, err
	}
	r := &request{c: c, kind: kindRecv, peer: source, tag: tag, buf: data, blk: buf}
	r.Flight = c.flightPost(flight.OpRecv, source, tag, len(data))
	rq, err := c.irecv(r, source, tag)
	if err != nil {
		r.Flight.End(err, false)
		return nil, err
	}
	return rq, nil
}

// FlightRecorder returns the communicator's flight recorder
// (comm.Recording), nil when XPU_FLIGHT_SIZE turned it off. The requests
// of user tags are recorded; those of the collective algorithms (reserved
// tags) are part of their collective's entry.
func (c *Comm) FlightRecorder() *flight.Recorder { return c.rec }

// flightPost records a request of a user tag as posted.
func (c *Comm) flightPost(op flight.Op, peer, tag, n int) flight.Ticket {
	if tag > comm.MaxTag || c.rec == nil {
		return flight.Ticket{}
	}
	return c.rec.Post(op, peer, tag, int64(n))
}

// irecv starts the receive r.
func (c *Comm) irecv(r *request, source, tag int) (comm.Request, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return nil, c.closedErr("recv")
	}
	if m := c.tbl.TakeUnexpected(source, tag); m != nil {
		c.deliverUnexpected(r, m)
		return r, nil
	}
	if tag > comm.MaxTag && c.revoked != nil {
		return nil, c.revoked
	}
	switch {
	case source == comm.AnySource:
		if c.size > 1 && c.nlost == c.size-1 {
			return nil, c.lostOp("recv", tag, xerr.Detail(comm.ErrPeerLost, "rank %d: every other rank is lost", c.rank))
		}
	case source != c.rank:
		if p := c.peers[source]; p.lost != nil {
			return nil, c.lostOp("recv", tag, p.lost)
		}
	}
	c.tbl.Post(r, source, tag)
	return r, nil
}

// deliverUnexpected hands the unexpected message m to the receive r.
// c.mu is held.
func (c *Comm) deliverUnexpected(r *request, m *request) {
	switch m.kind {
	case kindEagerMsg:
		k := copy(r.buf, m.buf)
		if m.peer == c.rank {
			c.self.Give(len(m.buf))
		} else {
			p := c.peers[m.peer]
			p.held -= len(m.buf)
			p.owedBud += len(m.buf)
			c.flush(p)
		}
		r.complete(p2p.Outcome(Name, c.rank, m.peer, m.tag, len(m.buf), k))
	case kindSelf:
		k := copy(r.buf, m.buf)
		r.complete(p2p.Outcome(Name, c.rank, c.rank, m.tag, len(m.buf), k))
		m.complete(m.sendStatus(), nil)
	case kindRTSMsg:
		c.startRead(r, m)
	}
}

// startRead starts reading the announced message m into the receive r.
// c.mu is held.
func (c *Comm) startRead(r *request, m *request) {
	p := c.peers[m.peer]
	r.src, r.tag, r.size, r.id, r.addr, r.rkey = m.peer, m.tag, m.size, m.id, m.addr, m.rkey
	r.accept = min(m.size, len(r.buf))
	if r.accept > 0 {
		if err := c.register(r, r.buf[:r.accept]); err != nil {
			// Refuse the message rather than leave the sender waiting:
			// as a rank that is going (its device closed under it, a
			// crash on its way), so that the sender sees its peer lost
			// and not a cancel; else as a refusal.
			flags := uint8(fCanceled)
			if errors.Is(err, xerr.ErrClosed) || errors.Is(err, net.ErrClosed) {
				flags = fClosed
			}
			p.ctrl = append(p.ctrl, out{h: header{kind: kFin, flags: flags, id: m.id}})
			c.flush(p)
			r.complete(comm.Status{}, xerr.Errorf(Name, "recv", comm.ErrNotSupported, "register a %d-byte buffer: %w", r.accept, err))
			return
		}
	}
	c.nextID++
	r.rid = c.nextID
	c.reads[r.rid] = r
	p.reads = append(p.reads, r)
	c.postReads(p)
	c.maybeFinishRead(r)
}

// postReads posts the READs of p's matched rendezvous receives while its
// send queue has room. c.mu is held.
func (c *Comm) postReads(p *peer) {
	for len(p.reads) > 0 && p.lost == nil && p.inflight < c.sendDepth {
		r := p.reads[0]
		off := r.posted * c.cfg.Chunk
		if off >= r.accept {
			p.reads = p.reads[1:]
			continue
		}
		n := min(c.cfg.Chunk, r.accept-off)
		wr := fabric.SendWR{
			ID: wrRead<<60 | r.rid, Op: fabric.OpRead, Signaled: true,
			Local:      fabric.SGE{Addr: uintptr(unsafe.Pointer(&r.buf[off])), Len: uint32(n), LKey: r.mr.LKey},
			RemoteAddr: r.addr + uint64(off), RKey: r.rkey,
		}
		if err := p.post1(wr); err != nil {
			c.linkFailed(p, fmt.Errorf("post a READ: %w", err), false)
			return
		}
		r.posted++
		p.inflight++
	}
	c.postOps(p)
}

// maybeFinishRead completes the rendezvous receive r once its READs have
// all finished, and tells the sender. c.mu is held.
func (c *Comm) maybeFinishRead(r *request) {
	chunks := (r.accept + c.cfg.Chunk - 1) / c.cfg.Chunk
	if r.failed == nil && r.finished < chunks || r.finished < r.posted {
		return
	}
	delete(c.reads, r.rid)
	c.release(r)
	p := c.peers[r.src]
	if r.failed != nil {
		r.complete(comm.Status{}, r.failed)
		return
	}
	p.ctrl = append(p.ctrl, out{h: header{kind: kFin, id: r.id}})
	c.flush(p)
	r.complete(p2p.Outcome(Name, c.rank, r.src, r.tag, r.size, r.accept))
}

// flush sends what waits for p while slots, credits and send-queue room
// allow, then credits alone if p is owed many. c.mu is held.
func (c *Comm) flush(p *peer) {
	if c.mute {
		return
	}
	for p.lost == nil && len(p.freeSend) > 0 && p.inflight < c.sendDepth {
		var o out
		switch {
		case len(p.ctrl) > 0 && p.credits >= 2:
			o = p.ctrl[0]
			p.ctrl = p.ctrl[1:]
		case len(p.ctrl) == 0 && len(p.queue) > 0 && p.credits >= 2 && p.queueReady():
			o = p.queue[0]
			p.queue = p.queue[1:]
		case p.credits >= 1 && (p.owedCred >= c.cfg.Slots/2 || p.owedBud >= c.cfg.EagerBudget/2 && p.owedBud > 0):
			o = out{h: header{kind: kCredit}}
		default:
			return
		}
		c.post(p, o)
	}
}

// post writes o into a send slot and posts it. c.mu is held.
func (c *Comm) post(p *peer, o out) {
	s := p.freeSend[len(p.freeSend)-1]
	p.freeSend = p.freeSend[:len(p.freeSend)-1]
	h := o.h
	h.credits, h.budget = uint16(p.owedCred), uint32(p.owedBud)
	p.owedCred, p.owedBud = 0, 0
	b := c.slotBytes(s)
	n := hdrLen
	r := o.r
	if h.kind == kNotify {
		n += copy(b[hdrLen:], o.note)
	}
	if r != nil {
		r.queued = false
		if h.kind == kEager {
			n += copy(b[hdrLen:], r.buf)
		} else {
			h.addr, h.rkey = r.addr, r.rkey
		}
	}
	h.put(b)
	if h.kind == kBye {
		p.byeSent = true
	}
	err := p.post1(fabric.SendWR{ID: wrID(wrSend, p.rank, s) | uint64(h.kind)<<56, Op: fabric.OpSend, Local: c.slotSGE(s, n), Signaled: true})
	if err != nil {
		p.freeSend = append(p.freeSend, s)
		if r != nil {
			c.finishSend(r, comm.Status{}, c.lostOp("send", r.tag, xerr.Detail(comm.ErrPeerLost, "rank %d: post a send: %w", p.rank, err)))
		}
		c.linkFailed(p, fmt.Errorf("post a send: %w", err), false)
		return
	}
	p.credits--
	p.inflight++
	p.lastSend = c.clock.Load()
	if r != nil {
		if h.kind == kEager {
			r.complete(r.sendStatus(), nil)
		} else {
			r.announced = true
			c.rdv[r.id] = r
		}
	}
}

// finishSend completes a send, releasing its registration. c.mu is held.
func (c *Comm) finishSend(r *request, st comm.Status, err error) {
	if r.announced {
		delete(c.rdv, r.id)
	}
	c.release(r)
	r.complete(st, err)
}

// lostOp records that an operation on tag failed with a lost peer and
// returns the error: a collective operation revokes the collectives of
// every rank. c.mu is held.
func (c *Comm) lostOp(op string, tag int, cause error) error {
	c.sawLoss = true
	err := xerr.Errorf(Name, op, comm.ErrPeerLost, "rank %d: %w", c.rank, cause)
	if tag > comm.MaxTag {
		c.revoke(c.rank, true)
	}
	return err
}

// timeNow is replaced in tests.
var timeNow = time.Now

// pollHook, when set (tests), runs after every poll of the completion
// queue with the number of completions it took.
var pollHook atomic.Pointer[func(c *Comm, n int)]
