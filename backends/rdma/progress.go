package rdma

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"time"

	"github.com/xpu-go/xpu/backends/rdma/internal/fabric"
	"github.com/xpu-go/xpu/comm"
	"github.com/xpu-go/xpu/internal/p2p"
	"github.com/xpu-go/xpu/internal/rankevent"
	"github.com/xpu-go/xpu/xerr"
)

// idleWait is how long the progress engine sleeps on the completion
// channel at a time when it has armed it, and calmWait when it has not
// (nothing under way: it polls then only for messages that come unasked).
// Close, Wake and, when armed, the next completion wake it sooner.
const (
	idleWait = 20 * time.Millisecond
	calmWait = 100 * time.Millisecond
)

// progress is the progress engine: one goroutine on a locked OS thread
// that handles completions nobody waits for — eager messages arriving,
// announcements to read, credits — and sleeps on the completion channel
// while there are none, so an idle rank burns no core.
//
// A goroutine waiting for a request polls the queue itself for
// Config.Spin first (spinWait): the completion it waits for then costs no
// handoff between threads, the way an MPI that busy-polls gets its
// latency. One goroutine at a time polls: the one holding c.polling. While
// waiters spin the engine sleeps, the queue unarmed, so their completions
// cost it no wakeup; the last waiter to leave arms the queue when work is
// under way that nobody waits for (needsProgress), and else leaves it
// unarmed, so that a ping-pong's messages never wake the engine. The
// engine never spins: it would hold one of GOMAXPROCS's processors that
// the waiters of this and other ranks need.
func (c *Comm) progress() {
	defer c.bg.Done()
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	wcs := make([]fabric.Completion, 32)
	fail := func(err error) {
		c.mu.Lock()
		for _, p := range c.peers {
			if p != nil {
				c.linkFailed(p, fmt.Errorf("poll the completion queue: %w", err), false)
			}
		}
		c.mu.Unlock()
		<-c.stop
	}
	for {
		select {
		case <-c.stop:
			return
		default:
		}
		// While waiters spin they poll; the last to leave arms the queue
		// (spinWait), and the engine hears of what comes next.
		wait := calmWait
		if c.spinners.Load() == 0 {
			n, err := c.poll(wcs)
			if err != nil {
				fail(err)
				return
			}
			if n > 0 {
				continue
			}
			if n < 0 {
				// Another goroutine holds the poller's role, and may have
				// polled before what woke the engine arrived: look again
				// rather than sleep on an event already taken.
				runtime.Gosched()
				continue
			}
			// Arm only for work under way: a rank between the messages of
			// a ping-pong leaves the queue unarmed, so they never wake
			// the engine. What completes before the queue is armed raises
			// no event: arm, then poll once more before sleeping.
			if n == 0 && c.needsProgress() {
				if err := c.fc.Arm(); err != nil {
					fail(err)
					return
				}
				if n, err = c.poll(wcs); err != nil {
					fail(err)
					return
				}
				if n != 0 {
					continue
				}
				wait = idleWait
			}
		}
		_ = c.fc.Wait(wait)
	}
}

// poll takes the poller's role if it is free, polls the completion queue
// once and handles what it finds: the number of completions, or -1 when
// another goroutine polls.
func (c *Comm) poll(wcs []fabric.Completion) (int, error) {
	if !c.polling.CompareAndSwap(false, true) {
		return -1, nil
	}
	defer c.polling.Store(false)
	// The losses recorded before the poll: an empty poll means the queue
	// holds nothing their peers sent before they went. One recorded
	// during the poll waits for the next, lest it fail what was delivered.
	seen := c.lossSeq.Load()
	n, err := c.fc.Poll(wcs)
	if h := pollHook.Load(); h != nil {
		(*h)(c, n)
	}
	if n == 0 && err == nil && seen > c.lossDone.Load() {
		c.applyLosses(seen)
	}
	if err != nil || n == 0 {
		return n, err
	}
	c.mu.Lock()
	for i := range wcs[:n] {
		c.handle(&wcs[i])
	}
	c.mu.Unlock()
	return n, nil
}

// pollOnce polls the completion queue once, if no other goroutine does,
// as Test does: a loop of polls makes progress without the engine.
func (c *Comm) pollOnce() {
	var wcs [8]fabric.Completion
	_, _ = c.poll(wcs[:])
}

// needsProgress reports whether this rank has work under way that the
// engine must carry on with when no goroutine waits: receives posted,
// messages announced, queued or arrived unasked, transfers in flight.
func (c *Comm) needsProgress() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	// Regions exposed: peers ask about their keys, and a waiter for a
	// notification wants it at once.
	if len(c.rdv) > 0 || len(c.reads) > 0 || len(c.ones) > 0 || len(c.parts) > 0 || len(c.exposed) > 0 ||
		c.waiters.Load() > 0 || c.closed {
		return true
	}
	for range c.tbl.Posted() {
		return true
	}
	for range c.tbl.Arrivals() {
		return true // messages come unasked: more may follow, and want credits back
	}
	for _, p := range c.peers {
		if p != nil && (len(p.queue) > 0 || len(p.ctrl) > 0 || len(p.reads) > 0 || len(p.ops) > 0) {
			return true
		}
	}
	return false
}

// applyLosses declares lost the peers whose endpoints went down up to
// loss upto, now that the completion queue is empty: every message they
// sent before is handled. The caller holds the poller's role.
func (c *Comm) applyLosses(upto uint64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.lossDone.Store(upto)
	for _, p := range c.peers {
		if p != nil && p.lostPending != nil && p.lostSeq <= upto {
			err := p.lostPending
			p.lostPending = nil
			c.linkFailed(p, err, false)
		}
	}
}

// armForWaiter arms the completion queue for a goroutine about to block
// on a request, and takes what completed before the arming. When another
// goroutine holds the poller's role (a Test, a spinning waiter), its poll
// may have looked before a completion that raised no event, the queue
// being unarmed then: the engine is woken to look once more, lest that
// completion wait for the engine's next timed look (up to calmWait).
func (c *Comm) armForWaiter() {
	if !c.progressStarted || c.fc.Arm() != nil {
		return
	}
	var wcs [8]fabric.Completion
	if n, _ := c.poll(wcs[:]); n < 0 {
		c.fc.Wake()
	}
}

// spinWait polls the completion queue from the goroutine waiting for r
// until r completes or Config.Spin passes without a completion; it reports
// whether r completed. With whole set (a batch's waiter), it polls until
// r completes or ctx ends, however long the gaps between completions.
func (c *Comm) spinWait(ctx context.Context, r interface{ IsDone() bool }, whole bool) bool {
	if !c.progressStarted {
		return false
	}
	if c.cfg.Spin <= 0 {
		// No spinning: the waiter blocks, and the engine must hear of
		// what it waits for.
		c.armForWaiter()
		return false
	}
	c.spinners.Add(1)
	done := false
	defer func() {
		if c.spinners.Add(-1) == 0 && (!done || c.needsProgress()) {
			// Someone will wait for what comes next: arm the queue for
			// the sleeping engine, and take what came before the arming.
			// Otherwise leave it unarmed, so that this rank's next
			// messages cost the engine no wakeup: the next waiter polls,
			// and the engine polls every idleWait regardless.
			c.armForWaiter()
		}
	}()
	var wcs [8]fabric.Completion
	// The clock is read once per 64 empty polls: it is no cheaper than a
	// poll, and far dearer where the kernel has no fast clock source.
	var last time.Time
	progressed := false
	for i := 0; ; i++ {
		if r.IsDone() {
			done = true
			return true
		}
		if c.stopping.Load() {
			return false
		}
		n, err := c.poll(wcs[:])
		switch {
		case err != nil:
			return false
		case n > 0:
			progressed = true
		case i%64 == 63:
			now := timeNow()
			if last.IsZero() || progressed {
				last, progressed = now, false
			} else if !whole && now.Sub(last) >= c.cfg.Spin {
				return false
			}
			if whole && ctx.Err() != nil {
				return false
			}
			if n < 0 {
				runtime.Gosched()
			}
		}
	}
}

// handle acts on one completion. c.mu is held.
func (c *Comm) handle(wc *fabric.Completion) {
	switch wc.ID >> 60 {
	case wrRecv:
		p := c.peers[int(wc.ID>>32&0xffff)]
		if wc.Err != nil {
			c.linkFailed(p, fmt.Errorf("receive: %w", wc.Err), false)
			return
		}
		c.onRecv(p, int(uint32(wc.ID)), wc.Len)
	case wrSend:
		p := c.peers[int(wc.ID>>32&0xffff)]
		p.inflight--
		p.freeSend = append(p.freeSend, int(uint32(wc.ID)))
		if wc.ID>>56&0xf == kBye && p.byeSent {
			c.byeDone()
		}
		if wc.Err != nil {
			c.linkFailed(p, fmt.Errorf("send: %w", wc.Err), false)
			return
		}
		c.flush(p)
		c.postReads(p)
	case wrOne:
		c.onOne(wc)
	case wrBatch:
		c.onPart(wc)
	case wrRead:
		r := c.reads[wc.ID&(1<<60-1)]
		if r == nil {
			return
		}
		p := c.peers[r.src]
		p.inflight--
		r.finished++
		if wc.Err != nil && r.failed == nil {
			r.failed = xerr.Errorf(Name, "recv", comm.ErrPeerLost, "rank %d: read from rank %d: %w", c.rank, r.src, wc.Err)
			c.linkFailed(p, fmt.Errorf("read: %w", wc.Err), false)
		}
		c.maybeFinishRead(r)
		c.flush(p)
		c.postReads(p)
	}
}

// byeDone counts a goodbye delivered (or flushed). c.mu is held.
func (c *Comm) byeDone() {
	c.byes--
	if c.byes == 0 {
		close(c.byesDone)
	}
}

// onRecv acts on a message of n bytes in receive slot s from p. c.mu is
// held.
func (c *Comm) onRecv(p *peer, s, n int) {
	if p.lost != nil {
		return
	}
	p.lastRecv = c.clock.Load()
	b := c.slotBytes(s)
	h, err := parseHeader(b, n)
	if err != nil {
		c.protocolError(p, err)
		return
	}
	p.credits += int(h.credits)
	p.budget += int(h.budget)
	if p.credits > c.cfg.Slots || p.budget > c.cfg.EagerBudget {
		c.protocolError(p, xerr.Detail(ErrProtocol, "rank %d returned more credits or budget than it was given", p.rank))
		return
	}
	ok := true
	switch h.kind {
	case kEager:
		ok = c.onEager(p, int(h.tag), b[hdrLen:n])
	case kRTS:
		ok = c.onRTS(p, h)
	case kFin:
		ok = c.onFin(p, h)
	case kCancel:
		for m := range c.tbl.UnexpectedFrom(p.rank) {
			if m.kind == kindRTSMsg && m.id == h.id {
				c.tbl.Unqueue(m)
				p.ctrl = append(p.ctrl, out{h: header{kind: kFin, flags: fCanceled, id: h.id}})
				break
			}
		}
	case kNotify:
		ok = c.onNotify(p, b[hdrLen:n])
	case kKeyQuery:
		c.onKeyQuery(p, keyID{addr: h.addr, n: h.size, rkey: h.rkey})
	case kKeyAnswer:
		ok = c.onKeyAnswer(p, keyID{addr: h.addr, n: h.size, rkey: h.rkey}, h.flags&fValid != 0)
	case kKeyGone:
		c.onKeyGone(p, keyID{addr: h.addr, n: h.size, rkey: h.rkey})
	case kCredit:
	case kBye:
		revoke := h.flags&fRevoke != 0
		c.linkFailed(p, xerr.Detail(comm.ErrPeerLost, "rank %d left the group", p.rank), true)
		if revoke {
			c.revoke(p.rank, false)
		}
		return
	case kRevoke:
		c.revoke(p.rank, false)
	}
	if !ok {
		return
	}
	if err := p.ep.PostRecv(wrID(wrRecv, p.rank, s), c.slotSGE(s, c.slot)); err != nil {
		c.linkFailed(p, fmt.Errorf("post a receive: %w", err), false)
		return
	}
	p.owedCred++
	c.flush(p)
}

// onEager takes an eager message's payload from p: into a posted receive,
// or into the unexpected queue within p's eager budget. false: p broke the
// protocol and is cut. c.mu is held.
func (c *Comm) onEager(p *peer, tag int, payload []byte) bool {
	if c.closed {
		return true
	}
	if r := c.tbl.TakePosted(p.rank, tag); r != nil {
		k := copy(r.buf, payload)
		p.owedBud += len(payload)
		r.complete(p2p.Outcome(Name, c.rank, p.rank, tag, len(payload), k))
		return true
	}
	if p.held+len(payload) > c.cfg.EagerBudget {
		c.protocolError(p, xerr.Detail(ErrProtocol, "rank %d sent eager bytes beyond its budget", p.rank))
		return false
	}
	p.held += len(payload)
	c.tbl.Arrive(&request{c: c, kind: kindEagerMsg, peer: p.rank, tag: tag, buf: append([]byte(nil), payload...)}, p.rank, tag)
	return true
}

// onRTS takes p's announcement of a large message: a posted receive reads
// it, else it waits in the unexpected queue; a closed rank, or a revoked
// one for a collective's message, refuses it. false: p broke the protocol
// and is cut. c.mu is held.
func (c *Comm) onRTS(p *peer, h header) bool {
	tag := int(h.tag)
	if h.size > 1<<62 || (h.size > 0 && h.rkey == 0 && h.addr == 0) {
		c.protocolError(p, xerr.Detail(ErrProtocol, "rank %d announced a %d-byte message at %#x", p.rank, h.size, h.addr))
		return false
	}
	m := &request{c: c, kind: kindRTSMsg, peer: p.rank, tag: tag, size: int(h.size), id: h.id, addr: h.addr, rkey: h.rkey}
	switch {
	case c.closed:
		p.ctrl = append(p.ctrl, out{h: header{kind: kFin, flags: fClosed, id: h.id}})
	case tag > comm.MaxTag && c.revoked != nil:
		p.ctrl = append(p.ctrl, out{h: header{kind: kFin, flags: fRevoke, id: h.id}})
	default:
		if r := c.tbl.TakePosted(p.rank, tag); r != nil {
			c.startRead(r, m)
		} else {
			c.tbl.Arrive(m, p.rank, tag)
		}
	}
	return true
}

// onFin completes the rendezvous send p has finished reading, refused or
// canceled. false: p broke the protocol and is cut. c.mu is held.
func (c *Comm) onFin(p *peer, h header) bool {
	r := c.rdv[h.id]
	if r == nil || r.peer != p.rank {
		c.protocolError(p, xerr.Detail(ErrProtocol, "rank %d finished message %d, which it was not sent", p.rank, h.id))
		return false
	}
	switch {
	case h.flags&fRevoke != 0:
		c.finishSend(r, comm.Status{}, c.revokedErr(p.rank))
	case h.flags&fClosed != 0:
		c.finishSend(r, comm.Status{}, xerr.Errorf(Name, "send", comm.ErrPeerLost, "rank %d: rank %d closed before receiving it", c.rank, p.rank))
	case h.flags&fCanceled != 0:
		c.finishSend(r, comm.Status{}, xerr.Errorf(Name, "send", comm.ErrCanceled, "rank %d: refused or canceled by rank %d", c.rank, p.rank))
	default:
		c.finishSend(r, r.sendStatus(), nil)
	}
	return true
}

// protocolError cuts the link to p after a message that breaks the
// protocol. c.mu is held.
func (c *Comm) protocolError(p *peer, err error) {
	_ = p.ep.Fail()
	c.linkFailed(p, err, false)
}

// linkFailed records that p is lost (graceful: it said goodbye) and fails
// everything that needs it. A peer lost without a goodbye crashed, and
// revokes collectives. c.mu is held.
func (c *Comm) linkFailed(p *peer, cause error, graceful bool) {
	if p.lost != nil {
		return
	}
	if !errors.Is(cause, comm.ErrPeerLost) {
		cause = xerr.Detail(comm.ErrPeerLost, "%w", cause)
	}
	if !c.closed {
		// For the launcher, before anything fails of it: the rank lost
		// this peer while it still had it (ADR 38).
		rankevent.PeerDown(c.rank, p.rank, graceful, cause)
	}
	p.lost = cause
	c.nlost++
	if c.node != nil {
		// Every rank of the job is a rank of the node: a collective in the
		// region waits for p, goodbye or not.
		c.node.cancel(xerr.Op(Name, "collective", fmt.Errorf("rank %d: rank %d of the node is lost: %w", c.rank, p.rank, cause)))
	}
	lost := func(op string) error { return xerr.Errorf(Name, op, comm.ErrPeerLost, "rank %d: %w", c.rank, cause) }
	reserved := false
	fail := func(r *request, op string) {
		reserved = reserved || r.tag > comm.MaxTag
		c.sawLoss = true
		c.finishSend(r, comm.Status{}, lost(op))
	}
	for _, o := range p.queue {
		if o.r != nil {
			o.r.queued = false
			fail(o.r, "send")
		}
	}
	p.queue, p.ctrl = nil, nil
	for _, r := range c.rdv {
		if r.peer == p.rank {
			fail(r, "send")
		}
	}
	// Reads in flight finish (flushed) before their receives complete:
	// their buffers are written until then.
	for _, r := range c.reads {
		if r.src == p.rank && r.failed == nil {
			reserved = reserved || r.tag > comm.MaxTag
			c.sawLoss = true
			r.failed = lost("recv")
			c.maybeFinishRead(r)
		}
	}
	p.reads = nil
	c.failOnes(p, cause)
	for r := range c.tbl.PostedFrom(p.rank) {
		c.tbl.Unpost(r)
		fail(r, "recv")
	}
	if c.nlost == c.size-1 {
		for r := range c.tbl.PostedAny() {
			c.tbl.Unpost(r)
			fail(r, "recv")
		}
	}
	for m := range c.tbl.UnexpectedFrom(p.rank) {
		if m.kind == kindRTSMsg {
			c.tbl.Unqueue(m)
		}
	}
	if p.byeSent {
		// Its completion may never come now.
		p.byeSent = false
		c.byeDone()
	}
	if !graceful || reserved {
		c.revoke(p.rank, true)
	}
}

// errRevoked is the cause of collective operations failed by a revocation.
var errRevoked = xerr.Detail(comm.ErrPeerLost, "collectives revoked after a rank failed")

func (c *Comm) revokedErr(culprit int) error {
	return xerr.Errorf(Name, "revoke", errRevoked, "rank %d: rank %d failed", c.rank, culprit)
}

// revoke fails the collective traffic of this rank that waits — posted
// reserved-tag receives, announced reserved-tag messages not yet matched,
// queued reserved-tag sends — and, when tell, asks every peer to do the
// same. Later reserved-tag operations that would wait fail at once. c.mu
// is held.
func (c *Comm) revoke(culprit int, tell bool) {
	if c.revoked != nil {
		return
	}
	c.revoked = c.revokedErr(culprit)
	if c.node != nil {
		c.node.cancel(c.revoked)
	}
	for r := range c.tbl.Posted() {
		if r.tag > comm.MaxTag {
			c.tbl.Unpost(r)
			r.complete(comm.Status{}, c.revoked)
		}
	}
	for m := range c.tbl.Arrivals() {
		if m.tag <= comm.MaxTag {
			continue
		}
		switch m.kind {
		case kindSelf:
			c.tbl.Unqueue(m)
			m.complete(comm.Status{}, c.revoked)
		case kindRTSMsg:
			c.tbl.Unqueue(m)
			if p := c.peers[m.peer]; p.lost == nil {
				p.ctrl = append(p.ctrl, out{h: header{kind: kFin, flags: fRevoke, id: m.id}})
			}
		}
	}
	for _, p := range c.peers {
		if p == nil || p.lost != nil {
			continue
		}
		q := p.queue[:0]
		for _, o := range p.queue {
			if o.r != nil && o.r.tag > comm.MaxTag {
				o.r.queued = false
				c.finishSend(o.r, comm.Status{}, c.revoked)
				continue
			}
			q = append(q, o)
		}
		p.queue = q
		if tell {
			p.ctrl = append(p.ctrl, out{h: header{kind: kRevoke}})
		}
		c.flush(p)
	}
}

// Close leaves the group: pending requests of this rank fail with
// ErrClosed; every peer is told goodbye (after the messages already
// sent), and sees ErrPeerLost for operations that need this rank. A rank
// that has seen a peer lost, or closes in the middle of a collective,
// revokes the collectives of the others. Close waits for the goodbyes at
// most Config.CloseTimeout, and always returns.
func (c *Comm) Close() error {
	c.closeOnce.Do(c.close)
	return nil
}

func (c *Comm) close() {
	c.mu.Lock()
	// A rank that saw a loss, or leaves with a collective's receive posted,
	// asks its peers to revoke their collectives.
	revoke := c.sawLoss
	for r := range c.tbl.Posted() {
		revoke = revoke || r.tag > comm.MaxTag
	}
	c.settleForClose()
	c.sayGoodbyes(revoke)
	c.mu.Unlock()

	// The node's collectives end (the one running fails) while the queue
	// pairs say their goodbyes.
	if c.node != nil {
		c.node.close(c.closedErr("close"))
	}
	t := time.NewTimer(c.cfg.CloseTimeout)
	select {
	case <-c.byesDone:
	case <-t.C:
	}
	t.Stop()

	for _, p := range c.peers {
		if p != nil && p.ep != nil {
			_ = p.ep.Close()
		}
	}
	c.stopping.Store(true)
	close(c.stop)
	c.fc.Wake()
	c.bg.Wait()
	c.rec.Close()
	for _, g := range c.failInFlight() {
		_ = g.Close()
	}
	c.mu.Lock()
	regs := c.prepRegs
	c.prepRegs = nil
	c.mu.Unlock()
	for _, reg := range regs {
		reg.release()
	}
	c.regs.close()
	_ = c.fc.Deregister(c.mr)
	_ = c.fc.Close()
	_ = syscallMunmap(c.arena)
}

// settleForClose marks c closed and fails what no peer's message can
// complete any more: posted receives, sends to this rank, and the sends
// still queued for want of credits; it refuses the announcements of
// messages not yet matched. c.mu is held.
func (c *Comm) settleForClose() {
	c.closed = true
	close(c.noteWake) // WaitNotification fails with ErrClosed
	c.noteWake = make(chan struct{})
	c.notes = nil
	closed := func(op string) error { return c.closedErr(op) }
	for r := range c.tbl.Posted() {
		c.tbl.Unpost(r)
		r.complete(comm.Status{}, closed("recv"))
	}
	for m := range c.tbl.Arrivals() {
		c.tbl.Unqueue(m)
		switch m.kind {
		case kindSelf:
			m.complete(comm.Status{}, closed("send"))
		case kindRTSMsg:
			if p := c.peers[m.peer]; p.lost == nil {
				p.ctrl = append(p.ctrl, out{h: header{kind: kFin, flags: fClosed, id: m.id}})
			}
		}
	}
	for _, p := range c.peers {
		if p == nil || p.lost != nil {
			continue
		}
		for _, o := range p.queue {
			if o.r != nil {
				o.r.queued = false
				c.finishSend(o.r, comm.Status{}, closed("send"))
			}
		}
		p.queue = nil
	}
}

// sayGoodbyes queues a goodbye to every peer still up, asking it to
// revoke its collectives when revoke is set, and flushes every peer. c.mu
// is held.
func (c *Comm) sayGoodbyes(revoke bool) {
	for _, p := range c.peers {
		if p == nil || p.lost != nil {
			continue
		}
		var flags uint8
		if revoke {
			flags = fRevoke
		}
		p.queue = append(p.queue, out{h: header{kind: kBye, flags: flags}})
		c.byes++
	}
	if c.byes == 0 {
		close(c.byesDone)
	}
	for _, p := range c.peers {
		if p != nil {
			c.flush(p)
		}
	}
}

// failInFlight fails, once the engine has stopped, the transfers that
// were in flight (rendezvous sends and reads, one-sided transfers), marks
// every peer closed, and returns the exposed regions.
func (c *Comm) failInFlight() []*region {
	closed := func(op string) error { return c.closedErr(op) }
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, p := range c.peers {
		if p != nil && p.lost == nil {
			p.lost = xerr.Detail(comm.ErrClosed, "rank %d closed", c.rank)
		}
	}
	for _, r := range c.rdv {
		c.finishSend(r, comm.Status{}, closed("send"))
	}
	for _, r := range c.reads {
		delete(c.reads, r.rid)
		c.release(r)
		r.complete(comm.Status{}, closed("recv"))
	}
	for _, r := range c.ones {
		c.finishOne(r, closed("one-sided"))
	}
	for _, pt := range c.parts {
		pt.failRest(closed("one-sided"))
		c.finishPart(pt)
	}
	regions := make([]*region, 0, len(c.exposed))
	for g := range c.exposed {
		regions = append(regions, g)
	}
	return regions
}
