package procs

import (
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/xpu-go/xpu/comm"
	"github.com/xpu-go/xpu/internal/onesided"
	"github.com/xpu-go/xpu/internal/shm"
	"github.com/xpu-go/xpu/xerr"
)

// Direct one-sided transfers over shared-memory links (ADR 37). A rank
// publishes each region it exposes in the directory of every
// shared-memory link (shm.Dir): the region's key, address and length, in
// the slot its key's number picks. An origin whose key names a published
// range copies into it (a Put, process_vm_writev) or out of it (a Get,
// process_vm_readv) by itself, from the goroutine that calls Put or Get:
// the target's goroutines take no part, and the request has completed
// when the call returns. The slot counts the copies under way; closing
// the region withdraws it from every directory and waits until no copy
// is under way, so no byte moves once Close has returned.
//
// Whatever the directory does not name — a region exposed while its slot
// held another, one the host cannot touch, a key that is stale, forged or
// out of date — goes by the frames of onesided.go, where the target's
// reader checks the key and refuses what is wrong; so does every transfer
// once the kernel has refused a copy.

// directMin is the smallest transfer made directly. Below it the frames
// cost less than the system call, whose fixed part (pinning the peer's
// pages) is a few microseconds here: 8-byte Put and flush 1.7 µs by
// frames against 2.2 µs direct, windows of 4 KiB Gets 3.2 against 2.0
// GB/s, of 8 KiB Puts even, of 8 KiB Gets 2.0 against 3.7, of 16 KiB
// and more direct ahead, 1 MiB 7 against 10-12 GB/s (ADR 37).
const directMin = 8 << 10

// directLink is a link's part of its segment's directories.
type directLink struct {
	// mu is held, read, while a directory is used; release takes it to
	// let the segment go.
	mu sync.RWMutex
	// own is where this rank publishes its regions for the peer, peer
	// where the peer publishes its own; nil when the link has none (TCP,
	// no single copies here) or once the segment is let go.
	own, peer *shm.Dir
}

// published is a slot of a link's directory that names a region.
type published struct {
	l    *link
	slot int
}

// dirSlot is the slot of a directory that key's region is published in.
func dirSlot(key comm.RemoteKey) int { return int(uint32(key.Key) % shm.DirSlots) }

// startDirect sets up l's directories when the link makes single copies.
func (l *link) startDirect() {
	if l.shm != nil && l.cma.pid != 0 && singleCopy() && !l.c.cfg.noDirect {
		l.dir.own, l.dir.peer = l.shm.Dirs()
	}
}

// stopDirect lets the directories go, once no copy uses them.
func (l *link) stopDirect() {
	l.dir.mu.Lock()
	l.dir.own, l.dir.peer = nil, nil
	l.dir.mu.Unlock()
}

// publish names g, a host region, in the directory of every link that has
// one and whose slot for it is free.
func (c *Comm) publish(g *onesided.Region) {
	key := g.Key()
	if onesided.Staged(key) {
		return
	}
	slot := dirSlot(key)
	c.dirMu.Lock()
	defer c.dirMu.Unlock()
	var pubs []published
	for _, l := range c.links {
		if l == nil {
			continue
		}
		l.dir.mu.RLock()
		if own := l.dir.own; own != nil && l.failed() == nil && own.Free(slot) {
			own.Publish(slot, key.Key, key.Addr, uint64(key.Len))
			pubs = append(pubs, published{l: l, slot: slot})
		}
		l.dir.mu.RUnlock()
	}
	if len(pubs) > 0 {
		if c.pubs == nil {
			c.pubs = map[*onesided.Region][]published{}
		}
		c.pubs[g] = pubs
	}
}

// withdraw takes g out of every directory it is published in and waits
// until no peer copies into or out of it. A peer whose copies are still
// under way after the failure bound (Config.Timeout) has its link cut; a
// peer whose process has gone is not waited for.
func (c *Comm) withdraw(g *onesided.Region) {
	c.dirMu.Lock()
	pubs := c.pubs[g]
	delete(c.pubs, g)
	c.dirMu.Unlock()
	c.withdrawPubs(pubs)
}

// withdrawAll withdraws every published region: the rank is closing.
func (c *Comm) withdrawAll() {
	c.dirMu.Lock()
	var all []published
	for g, pubs := range c.pubs {
		all = append(all, pubs...)
		delete(c.pubs, g)
	}
	c.dirMu.Unlock()
	c.withdrawPubs(all)
}

func (c *Comm) withdrawPubs(pubs []published) {
	if len(pubs) == 0 {
		return
	}
	for _, p := range pubs {
		p.l.dir.mu.RLock()
		if own := p.l.dir.own; own != nil {
			own.Withdraw(p.slot)
		}
		p.l.dir.mu.RUnlock()
	}
	deadline := time.Now().Add(c.cfg.Timeout)
	for _, p := range pubs {
		for pause := time.Microsecond; p.l.copying(p.slot); pause = min(2*pause, time.Millisecond) {
			if time.Now().After(deadline) {
				p.l.fail(fmt.Errorf("rank %d kept copying into a withdrawn region past %v", p.l.peer, c.cfg.Timeout))
				break
			}
			time.Sleep(pause)
		}
	}
}

// copying reports whether the peer has a copy under way in slot of this
// rank's directory, and may finish it: its process is still there.
func (l *link) copying(slot int) bool {
	l.dir.mu.RLock()
	defer l.dir.mu.RUnlock()
	own := l.dir.own
	return own != nil && own.Busy(slot) != 0 && l.peerGone() == nil
}

// direct makes r, a transfer of len(r.buf) bytes at off of the region key
// names on l's peer, by a copy of this goroutine's when the peer's
// directory names that region: it reports whether it did (r has then
// completed, or failed). Otherwise nothing has happened, and r goes by
// frames.
func (l *link) direct(r *oneOp, key comm.RemoteKey, off int) bool {
	if onesided.Staged(key) || l.cma.refused.Load() {
		return false
	}
	l.dir.mu.RLock()
	defer l.dir.mu.RUnlock()
	peer := l.dir.peer
	slot := dirSlot(key)
	if peer == nil || l.failed() != nil || !peer.Enter(slot, key.Key, key.Addr, uint64(key.Len)) {
		return false
	}
	n := len(r.buf)
	addr := key.Addr + uint64(off)
	// One call up to cmaSplit, two goroutines above: at 1 MiB one call
	// read 12.3-13.2 GB/s in windows of Puts against 10.4-12.3 shared; at
	// 4 MiB shared 14-19 against 12.
	pieces := cmaPieces
	if n <= cmaSplit {
		pieces = func(n int, do func(off, k int) error) error { return do(0, n) }
	}
	cerr := pieces(n, func(o, k int) error {
		if r.put {
			return cmaWrite(l.cma.pid, addr+uint64(o), r.buf[o:o+k])
		}
		return cmaRead(l.cma.pid, r.buf[o:o+k], addr+uint64(o))
	})
	peer.Leave(slot)
	if cerr == nil {
		r.Complete(comm.Status{Source: key.Rank, Count: n}, nil)
		return true
	}
	op := "get"
	if r.put {
		op = "put"
	}
	switch {
	case errors.Is(cerr, shm.ErrNotPermitted):
		if !l.cma.refused.Swap(true) && l.c.cfg.Logf != nil {
			l.c.cfg.Logf("procs: rank %d: single copy with rank %d refused (%v): one-sided transfers cross the ring", l.c.rank, l.peer, cerr)
		}
		return false
	case l.peerGone() != nil || l.failed() != nil:
		r.Complete(comm.Status{}, xerr.Errorf(Name, op, comm.ErrPeerLost, "rank %d: rank %d: %w", l.c.rank, l.peer, cerr))
	case errors.Is(cerr, shm.ErrFault):
		// The peer published memory it does not map: its program freed
		// the memory of an open region.
		r.Complete(comm.Status{}, xerr.Errorf(Name, op, comm.ErrInvalidArgument,
			"rank %d: rank %d's region %v is not mapped in its memory: %w", l.c.rank, l.peer, key, cerr))
	default:
		r.Complete(comm.Status{}, xerr.Errorf(Name, op, comm.ErrPeerLost, "rank %d: single copy with rank %d: %w", l.c.rank, l.peer, cerr))
	}
	return true
}

// directBatch makes the descriptors idx of p, all to l's peer and none to
// a region the host cannot touch, by vectored copies of this goroutine's
// (batchMax ranges a call) when the peer's directory names every region
// they address: it returns their request, which has completed, and true.
// Otherwise nothing has happened, and it returns false.
func (l *link) directBatch(p *prepared, idx []int) (comm.Request, bool) {
	if l.cma.refused.Load() {
		return nil, false
	}
	l.dir.mu.RLock()
	defer l.dir.mu.RUnlock()
	peer := l.dir.peer
	if peer == nil || l.failed() != nil {
		return nil, false
	}
	entered := map[int]uint64{} // slot -> key
	leave := func() {
		for slot := range entered {
			peer.Leave(slot)
		}
	}
	bufs := make([][]byte, len(idx))
	addrs := make([]uint64, len(idx))
	total := 0
	for k, i := range idx {
		x := p.xfers[i]
		slot := dirSlot(x.Remote)
		if key, ok := entered[slot]; ok && key != x.Remote.Key {
			leave() // two regions of one slot: one of them is not published
			return nil, false
		} else if !ok {
			if !peer.Enter(slot, x.Remote.Key, x.Remote.Addr, uint64(x.Remote.Len)) {
				leave()
				return nil, false
			}
			entered[slot] = x.Remote.Key
		}
		bufs[k], addrs[k] = p.bufs[i], x.Remote.Addr+uint64(x.RemoteOff)
		total += len(bufs[k])
	}
	vec := cmaReadVec
	if p.put {
		vec = cmaWriteVec
	}
	var cerr error
	for s := 0; s < len(idx) && cerr == nil; s += batchMax {
		e := min(s+batchMax, len(idx))
		cerr = vecPieces(vec, l.cma.pid, bufs[s:e], addrs[s:e])
	}
	leave()
	r := &oneOp{put: p.put, peer: l.peer, via: l}
	if cerr == nil {
		r.Complete(comm.Status{Source: l.peer, Count: total}, nil)
		return r, true
	}
	if errors.Is(cerr, shm.ErrNotPermitted) {
		if !l.cma.refused.Swap(true) && l.c.cfg.Logf != nil {
			l.c.cfg.Logf("procs: rank %d: single copy with rank %d refused (%v): one-sided transfers cross the ring", l.c.rank, l.peer, cerr)
		}
		return nil, false
	}
	op := "get"
	if p.put {
		op = "put"
	}
	err := xerr.Errorf(Name, op, comm.ErrPeerLost, "rank %d: single copy with rank %d: %w", l.c.rank, l.peer, cerr)
	if l.peerGone() == nil && l.failed() == nil && errors.Is(cerr, shm.ErrFault) {
		err = xerr.Errorf(Name, op, comm.ErrInvalidArgument, "rank %d: a region of rank %d is not mapped in its memory: %w", l.c.rank, l.peer, cerr)
	}
	r.Complete(comm.Status{}, &comm.XferError{Index: idx[0], Err: err})
	return r, true
}
