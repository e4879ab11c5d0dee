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
}

func (g *region) Block() memspace.Block { return g.blk }
func (g *region) Key() comm.RemoteKey   { return g.key }
func (g *region) contains(a uint64, n int) bool {
	return a >= g.key.Addr && n >= 0 && a+uint64(n) <= g.key.Addr+uint64(g.key.Len)
}

// Close withdraws the region.
func (g *region) Close() error {
	g.once.Do(func() {
		c := g.c
		c.mu.Lock()
		delete(c.exposed, g)
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
		return r, c.oneSidedSelf(r, op)
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
	p.ops = append(p.ops, r)
	c.postOps(p)
	return r, nil
}

// oneSidedSelf copies between this rank's own buffer and region. c.mu is
// held.
func (c *Comm) oneSidedSelf(r *request, op string) error {
	for g := range c.exposed {
		if g.contains(r.addr, r.size) {
			at := g.data[r.addr-g.key.Addr:]
			if r.kind == kindPut {
				copy(at, r.buf)
			} else {
				copy(r.buf, at[:r.size])
			}
			r.complete(comm.Status{Source: c.rank, Count: r.size}, nil)
			return nil
		}
	}
	return xerr.Errorf(Name, op, comm.ErrInvalidArgument, "rank %d exposes no region at %#x+%d", c.rank, r.addr, r.size)
}

// postOps posts p's one-sided transfers while its send queue has room.
// c.mu is held.
func (c *Comm) postOps(p *peer) {
	for len(p.ops) > 0 && p.lost == nil && p.inflight < c.sendDepth {
		r := p.ops[0]
		p.ops = p.ops[1:]
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
	for _, r := range p.ops {
		c.finishOne(r, xerr.Errorf(Name, "one-sided", comm.ErrPeerLost, "rank %d: %w", c.rank, cause))
	}
	p.ops = nil
}

// Flush waits until every Put and Get this rank started to rank
// (comm.AnySource: to any rank) has completed, or ctx ends. It returns the
// first error of those transfers.
func (c *Comm) Flush(ctx context.Context, rank int) error {
	if err := impl.CheckRank(rank, c.size, true); err != nil {
		return xerr.Op(Name, "flush", err)
	}
	if ctx == nil {
		return xerr.Errorf(Name, "flush", comm.ErrInvalidArgument, "nil context")
	}
	c.mu.Lock()
	var wait []*request
	for _, r := range c.ones {
		if rank == comm.AnySource || r.peer == rank {
			wait = append(wait, r)
		}
	}
	c.mu.Unlock()
	var first error
	for _, r := range wait {
		if err := impl.WaitDone(ctx, r.Chan()); err != nil {
			return err
		}
		if _, err := r.Result(); err != nil && first == nil {
			first = err
		}
	}
	return first
}
