package rdma

import (
	"context"
	"fmt"
	"sync"
	"unsafe"

	"github.com/xpu-go/xpu/backends/rdma/internal/fabric"
	"github.com/xpu-go/xpu/comm"
	"github.com/xpu-go/xpu/impl"
	"github.com/xpu-go/xpu/memspace"
	"github.com/xpu-go/xpu/xerr"
)

// One-sided communication (comm.OneSided): Put is an RDMA WRITE, Get an
// RDMA READ, on the queue pair to the target, straight between the
// registered buffers; the target's CPU takes no part. A region's key is
// its address and rkey.

var _ comm.OneSided = (*Comm)(nil)

const wrOne = 4

// Kinds of one-sided request.
const (
	kindPut = 10 + iota
	kindGet
)

// region is an exposed block.
type region struct {
	c    *Comm
	blk  memspace.Block
	data []byte
	key  comm.RemoteKey
	once sync.Once
	reg  registration
	// told are the peers this rank has told the region is exposed (a
	// kKeyAnswer): they hear of its Close (kKeyGone). Guarded by c.mu.
	told map[*peer]struct{}
}

func (g *region) Block() memspace.Block { return g.blk }
func (g *region) Key() comm.RemoteKey   { return g.key }
func (g *region) contains(a uint64, n int) bool {
	return a >= g.key.Addr && n >= 0 && a+uint64(n) <= g.key.Addr+uint64(g.key.Len)
}

// Close withdraws the region: the peers that use its key hear of it
// before any later message of this rank.
func (g *region) Close() error {
	g.once.Do(func() {
		c := g.c
		c.mu.Lock()
		delete(c.exposed, g)
		for p := range g.told {
			if p.lost == nil {
				p.ctrl = append(p.ctrl, out{h: keyHeader(kKeyGone, 0, keyOf(g.key))})
				c.flush(p)
			}
		}
		g.told = nil
		c.mu.Unlock()
		g.reg.release()
	})
	return nil
}

// Expose registers buf for the other ranks' Put and Get (comm.OneSided).
// A buffer of the cpu space uses its cached registration; Go memory is
// pinned until the Region is closed.
func (c *Comm) Expose(buf memspace.Block) (comm.Region, error) {
	data, err := c.hostArgs("expose", buf, c.rank, 0, false)
	if err != nil {
		return nil, err
	}
	if len(data) == 0 {
		return nil, xerr.Errorf(Name, "expose", comm.ErrInvalidArgument, "an empty buffer")
	}
	c.mu.Lock()
	closed := c.closed
	c.mu.Unlock()
	if closed {
		return nil, c.closedErr("expose")
	}
	reg, err := c.regs.get(buf, data)
	if err != nil {
		return nil, xerr.Errorf(Name, "expose", comm.ErrNotSupported, "register %d bytes: %w", len(data), err)
	}
	g := &region{c: c, blk: buf, data: data, reg: reg, key: comm.RemoteKey{
		Rank: c.rank, Addr: uint64(uintptr(unsafe.Pointer(&data[0]))), Len: len(data), Key: uint64(reg.mr.RKey)}}
	c.mu.Lock()
	c.exposed[g] = struct{}{}
	c.mu.Unlock()
	return g, nil
}

// Put writes src into the region dst names, off bytes into it.
func (c *Comm) Put(src memspace.Block, dst comm.RemoteKey, off int) (comm.Request, error) {
	return c.oneSided(kindPut, src, dst, off)
}

// Get reads the region src names, from off bytes into it, into dst.
func (c *Comm) Get(dst memspace.Block, src comm.RemoteKey, off int) (comm.Request, error) {
	return c.oneSided(kindGet, dst, src, off)
}

func (c *Comm) oneSided(kind int, local memspace.Block, key comm.RemoteKey, off int) (comm.Request, error) {
	op := map[int]string{kindPut: "put", kindGet: "get"}[kind]
	data, err := c.hostArgs(op, local, key.Rank, 0, false)
	if err != nil {
		return nil, err
	}
	n := len(data)
	if off < 0 || key.Len < 0 || off > key.Len || n > key.Len-off || key.Key > 1<<32-1 {
		return nil, xerr.Errorf(Name, op, comm.ErrInvalidArgument, "%d bytes at offset %d of %v", n, off, key)
	}
	r := &request{c: c, kind: kind, peer: key.Rank, buf: data, blk: local, size: n,
		addr: key.Addr + uint64(off), rkey: uint32(key.Key)}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return nil, c.closedErr(op)
	}
	if n == 0 {
		r.complete(comm.Status{Source: key.Rank, Count: 0}, nil)
		return r, nil
	}
	if key.Rank == c.rank {
		return r, c.oneSidedSelf(r, op, keyOf(key))
	}
	p := c.peers[key.Rank]
	if p.lost != nil {
		return nil, xerr.Errorf(Name, op, comm.ErrPeerLost, "rank %d: %v", c.rank, p.lost)
	}
	if err := c.register(r, data); err != nil {
		return nil, xerr.Errorf(Name, op, comm.ErrNotSupported, "register %d bytes: %w", n, err)
	}
	c.nextID++
	r.rid = c.nextID
	c.ones[r.rid] = r
	// A key this rank has not seen answered valid waits for the target's
	// answer: a key the target does not expose would break the queue pair.
	k := keyOf(key)
	ks := p.keys[k]
	switch {
	case ks == nil:
		if ks = c.queryKey(p, k); p.lost != nil {
			// Asking failed the link.
			err := xerr.Errorf(Name, op, comm.ErrPeerLost, "rank %d: %v", c.rank, p.lost)
			c.finishOne(r, err)
			return nil, err
		}
		fallthrough
	case !ks.known:
		r.keyWait = true
		ks.waiting = append(ks.waiting, r)
	default:
		c.queueOp(p, opItem{r: r})
	}
	return r, nil
}

// keyID names a region of a peer as its key does: address, length and
// rkey, all of which must match the region the peer exposes.
type keyID struct {
	addr uint64
	n    uint64
	rkey uint32
}

func keyOf(k comm.RemoteKey) keyID { return keyID{addr: k.Addr, n: uint64(k.Len), rkey: uint32(k.Key)} }

func (k keyID) String() string { return fmt.Sprintf("region %#x+%d (rkey %#x)", k.addr, k.n, k.rkey) }

// keyHeader is the header of a key message of kind about k.
func keyHeader(kind, flags uint8, k keyID) header {
	return header{kind: kind, flags: flags, addr: k.addr, size: k.n, rkey: k.rkey}
}

// keyState is what this rank knows of a key of a peer's: asked (known
// false, ready open), or answered valid (known, valid). A key answered
// invalid leaves the table, so that it is asked again.
type keyState struct {
	known, valid bool
	ready        chan struct{} // closed once answered (or the peer lost)
	waiting      []*request    // transfers waiting for the answer
}

// queryKey asks p whether it exposes k. c.mu is held.
func (c *Comm) queryKey(p *peer, k keyID) *keyState {
	ks := &keyState{ready: make(chan struct{})}
	p.keys[k] = ks
	p.ctrl = append(p.ctrl, out{h: keyHeader(kKeyQuery, 0, k)})
	c.flush(p)
	return ks
}

// onKeyQuery answers p's question about a region of this rank. c.mu is
// held.
func (c *Comm) onKeyQuery(p *peer, k keyID) {
	var flags uint8
	if g := c.findRegion(k); g != nil && !c.closed {
		flags = fValid
		if g.told == nil {
			g.told = map[*peer]struct{}{}
		}
		g.told[p] = struct{}{}
	}
	p.ctrl = append(p.ctrl, out{h: keyHeader(kKeyAnswer, flags, k)})
}

// findRegion returns the open region of this rank whose key is k, or
// nil. c.mu is held.
func (c *Comm) findRegion(k keyID) *region {
	for g := range c.exposed {
		if keyOf(g.key) == k {
			return g
		}
	}
	return nil
}

// onKeyAnswer takes p's answer about k: the transfers waiting for it are
// queued, or fail with ErrInvalidArgument. false: p answered a question
// never asked. c.mu is held.
func (c *Comm) onKeyAnswer(p *peer, k keyID, valid bool) bool {
	ks := p.keys[k]
	if ks == nil || ks.known {
		c.protocolError(p, xerr.Detail(ErrProtocol, "rank %d answered about %v, which was not asked", p.rank, k))
		return false
	}
	c.answerKey(p, k, ks, valid)
	return true
}

// answerKey settles ks, p's key k. c.mu is held.
func (c *Comm) answerKey(p *peer, k keyID, ks *keyState, valid bool) {
	ks.known, ks.valid = true, valid
	close(ks.ready)
	waiting := ks.waiting
	ks.waiting = nil
	if !valid {
		delete(p.keys, k)
	}
	for _, r := range waiting {
		r.keyWait = false
		if r.IsDone() {
			continue
		}
		if valid {
			c.queueOp(p, opItem{r: r})
			continue
		}
		c.finishOne(r, c.noRegion(r.kind, p.rank, k))
	}
}

// noRegion is the error of a transfer to rank whose key names no region
// rank exposes.
func (c *Comm) noRegion(kind, rank int, k keyID) error {
	op := map[int]string{kindPut: "put", kindGet: "get"}[kind]
	return xerr.Errorf(Name, op, comm.ErrInvalidArgument, "rank %d: rank %d exposes no %v (never exposed, or closed)", c.rank, rank, k)
}

// onKeyGone forgets p's region k, which p closed. c.mu is held.
func (c *Comm) onKeyGone(p *peer, k keyID) {
	if ks := p.keys[k]; ks != nil && ks.known {
		delete(p.keys, k)
	}
}

// oneSidedSelf copies between this rank's own buffer and region. c.mu is
// held.
func (c *Comm) oneSidedSelf(r *request, op string, k keyID) error {
	g := c.findRegion(k)
	if g == nil || !g.contains(r.addr, r.size) {
		return xerr.Errorf(Name, op, comm.ErrInvalidArgument, "rank %d exposes no %v, or not %#x+%d", c.rank, k, r.addr, r.size)
	}
	at := g.data[r.addr-g.key.Addr:]
	if r.kind == kindPut {
		copy(at, r.buf)
	} else {
		copy(r.buf, at[:r.size])
	}
	r.complete(comm.Status{Source: c.rank, Count: r.size}, nil)
	return nil
}

// opItem is a one-sided transfer waiting for send-queue room: a single
// Put or Get, or a piece of a batch.
type opItem struct {
	r    *request
	part *part
}

// queueOp queues a transfer whose key is valid and posts what fits.
// c.mu is held.
func (c *Comm) queueOp(p *peer, it opItem) {
	p.ops = append(p.ops, it)
	p.opSeq++
	c.postOps(p)
}

// postOps posts p's one-sided transfers while its send queue has room,
// then what waited for them (a notification). c.mu is held.
func (c *Comm) postOps(p *peer) {
	posted := false
	for len(p.ops) > 0 && p.lost == nil && p.inflight < c.sendDepth {
		it := p.ops[0]
		if it.part != nil {
			if !c.postPart(p, it.part) {
				return
			}
			if it.part.next < len(it.part.wrs) {
				break // no more room
			}
			p.ops = p.ops[1:]
			p.opPosted++
			posted = true
			continue
		}
		r := it.r
		p.ops = p.ops[1:]
		p.opPosted++
		posted = true
		if r.IsDone() {
			continue
		}
		fop := fabric.OpWrite
		if r.kind == kindGet {
			fop = fabric.OpRead
		}
		wr := fabric.SendWR{
			ID: wrOne<<60 | r.rid, Op: fop, Signaled: true,
			Local:      fabric.SGE{Addr: uintptr(unsafe.Pointer(&r.buf[0])), Len: uint32(r.size), LKey: r.mr.LKey},
			RemoteAddr: r.addr, RKey: r.rkey,
		}
		if err := p.post1(wr); err != nil {
			c.finishOne(r, xerr.Errorf(Name, "put", comm.ErrPeerLost, "rank %d: post: %w", c.rank, err))
			c.linkFailed(p, fmt.Errorf("post a one-sided transfer: %w", err), false)
			return
		}
		r.posted = 1
		p.inflight++
	}
	if posted && len(p.queue) > 0 && p.queue[0].h.kind == kNotify {
		c.flush(p)
	}
}

// onOne acts on the completion of a one-sided transfer. c.mu is held.
func (c *Comm) onOne(wc *fabric.Completion) {
	r := c.ones[wc.ID&(1<<60-1)]
	if r == nil {
		return
	}
	p := c.peers[r.peer]
	p.inflight--
	if wc.Err != nil {
		c.finishOne(r, xerr.Errorf(Name, "one-sided", comm.ErrPeerLost, "rank %d: with rank %d: %w", c.rank, r.peer, wc.Err))
		c.linkFailed(p, fmt.Errorf("one-sided transfer: %w", wc.Err), false)
		return
	}
	c.finishOne(r, nil)
	c.flush(p)
	c.postReads(p)
}

// finishOne completes a one-sided transfer. c.mu is held.
func (c *Comm) finishOne(r *request, err error) {
	delete(c.ones, r.rid)
	c.release(r)
	if err != nil {
		r.complete(comm.Status{}, err)
		return
	}
	r.complete(comm.Status{Source: r.peer, Count: r.size}, nil)
}

// failOnes fails p's one-sided transfers once p is lost: those not posted
// at once, the posted ones when their (flushed) completions come, as
// their buffers are in use until then. c.mu is held.
func (c *Comm) failOnes(p *peer, cause error) {
	lost := xerr.Errorf(Name, "one-sided", comm.ErrPeerLost, "rank %d: %w", c.rank, cause)
	for _, it := range p.ops {
		if it.part != nil {
			it.part.cutPart(c, lost)
			continue
		}
		c.finishOne(it.r, lost)
	}
	p.ops = nil
	for k, ks := range p.keys {
		delete(p.keys, k)
		if !ks.known {
			close(ks.ready)
			for _, r := range ks.waiting {
				c.finishOne(r, lost)
			}
		}
	}
}

// Flush waits until every Put and Get this rank started to rank
// (comm.AnySource: to any rank), batches' included, has completed, or ctx
// ends. It returns the first error of those transfers.
func (c *Comm) Flush(ctx context.Context, rank int) error {
	if err := impl.CheckRank(rank, c.size, true); err != nil {
		return xerr.Op(Name, "flush", err)
	}
	if ctx == nil {
		return xerr.Errorf(Name, "flush", comm.ErrInvalidArgument, "nil context")
	}
	c.mu.Lock()
	wait := c.pendingTo(rank, true)
	c.mu.Unlock()
	var first error
	for _, w := range wait {
		if err := impl.WaitDone(ctx, w.Chan()); err != nil {
			return err
		}
		if _, err := w.Result(); err != nil && first == nil {
			first = err
		}
	}
	return first
}

// waitable is a transfer, or a batch, that Flush and Notify wait for.
type waitable interface {
	Chan() <-chan struct{}
	Result() (comm.Status, error)
}

// pendingTo returns the transfers to rank (comm.AnySource: any) not yet
// complete: every one, or (puts false) the Gets only, and those still
// waiting for their key's answer. c.mu is held.
func (c *Comm) pendingTo(rank int, puts bool) []waitable {
	var wait []waitable
	for _, r := range c.ones {
		if rank == comm.AnySource || r.peer == rank {
			if puts || r.kind == kindGet || r.keyWait {
				wait = append(wait, r)
			}
		}
	}
	for b := range c.runs {
		if (puts || !b.put) && (rank == comm.AnySource || b.reaches(rank)) {
			wait = append(wait, b)
		}
	}
	return wait
}
