package procs

import (
	"context"
	"encoding/binary"
	"fmt"
	"io"
	"sync/atomic"

	"github.com/xpu-go/xpu/comm"
	"github.com/xpu-go/xpu/internal/onesided"
	"github.com/xpu-go/xpu/internal/stage"
	"github.com/xpu-go/xpu/memspace"
	"github.com/xpu-go/xpu/transfer"
	"github.com/xpu-go/xpu/xerr"
)

// One-sided transfers whose origin block the host cannot touch (device
// memory; docs/adr/0041-device-blocks-on-procs-links.md).
//
// Mapped: to a peer on a shared-memory link, a block whose space shares
// it (memspace.Sharer) goes as one frame that carries its description
// (frameOneIPC: ipc.go's encoding, followed by the region's key, the offset
// and the operation) instead of its bytes. The target's reader checks
// the key and the range against its region as for any chunk (a refusal
// writes nothing), holds the region (Find), finds an importer
// (memspace.ImporterFor) and maps the block; a goroutine of the link
// copies with transfer.CopyBlock — a Put from the mapping into the
// region, a Get from the region into the mapping — gives the mapping and
// the region back, and answers (frameOneDone). The transfer completes on
// the answer: the origin's block is in use until then. A region's Close
// waits for such a copy as it waits for every copy into or out of it.
//
// A target that cannot map the block (no importer, or one that fails,
// memspace.ErrNotShareable above all) answers oneNoCopy: the origin then
// stages the block through a host stand-in, off the reader, and sends
// the transfer again under the same id as chunks of bytes.
//
// Staged: everywhere else (a TCP link, this rank's own region, a block
// its space will not share) the transfer takes a host stand-in at once —
// a Put's copied in before its frames go, a Get's copied out into the
// block before the transfer completes — and goes as a transfer of host
// bytes does.

// oneIPCTrailer is what a frameOneIPC carries after the
// description: the region's key (keySize), the offset in it (8) and the
// operation (1: oneIPCPut or oneIPCGet).
const oneIPCTrailer = keySize + 8 + 1

// Operations of a frameOneIPC.
const (
	oneIPCPut = 0
	oneIPCGet = 1
)

// oneStage is the host stand-in of a transfer's device block.
type oneStage struct {
	blk   memspace.Block // the origin's block
	stand memspace.Block // its host stand-in
	// claim is taken by the one goroutine that completes the transfer:
	// it copies a Get's bytes out and frees the stand-in.
	claim atomic.Bool
}

// newOneStage gives blk (not empty) a host stand-in, with blk's bytes
// for a Put.
func newOneStage(op string, put bool, blk memspace.Block) (*oneStage, error) {
	h := allocStand(stage.Space(blk.Space()), blk.Len())
	if put {
		// Put takes no context: the copy is the device's, bounded by it.
		if err := transfer.CopyBlock(context.Background(), h, blk); err != nil {
			_ = stage.Free(h)
			return nil, xerr.Op(Name, op, fmt.Errorf("copying %v into its host stand-in: %w", blk, err))
		}
	}
	return &oneStage{blk: blk, stand: h}, nil
}

// settle ends a transfer staged through s with st and err: a Get that
// succeeded copies the stand-in into the block; the stand-in is freed.
func (s *oneStage) settle(put bool, st comm.Status, err error) (comm.Status, error) {
	op := "put"
	if !put {
		op = "get"
		if err == nil {
			if cerr := transfer.CopyBlock(context.Background(), s.blk, s.stand); cerr != nil {
				st, err = comm.Status{}, xerr.Op(Name, op, fmt.Errorf("copying the bytes from their host stand-in into %v: %w", s.blk, cerr))
			}
		}
	}
	if ferr := stage.Free(s.stand); ferr != nil && err == nil {
		st, err = comm.Status{}, xerr.Op(Name, op, fmt.Errorf("freeing the host stand-in %v: %w", s.stand, ferr))
	}
	s.stand = memspace.Block{}
	return st, err
}

// begin records the outcome of r (p2p.Done.Begin), settling its stand-in
// first; false when another goroutine completes r.
func (r *oneOp) begin(st comm.Status, err error) bool {
	if s := r.stage; s != nil {
		if !s.claim.CompareAndSwap(false, true) {
			return false
		}
		st, err = s.settle(r.put, st, err)
	}
	return r.Begin(st, err)
}

// Complete completes r (p2p.Done.Complete), settling its stand-in first;
// only the first call has an effect.
func (r *oneOp) Complete(st comm.Status, err error) bool {
	if !r.begin(st, err) {
		return false
	}
	r.Publish()
	return true
}

// oneDevice starts a Put or Get whose origin block dev (not empty) the
// host cannot touch; the key and the range are checked.
func (c *Comm) oneDevice(op string, put bool, dev memspace.Block, key comm.RemoteKey, off int) (comm.Request, error) {
	r := &oneOp{put: put, peer: key.Rank, dev: dev}
	if key.Rank != c.rank {
		if l := c.links[key.Rank]; l != nil && l.shm != nil {
			if s, ok := c.share(dev, key.Rank); ok {
				r.via = l
				if err := l.startMapped(r, s, key, off); err != nil {
					return nil, xerr.Errorf(Name, op, comm.ErrPeerLost, "rank %d: %w", c.rank, err)
				}
				return r, nil
			}
		}
		c.notePath(key.Rank, pathStaged)
	}
	st, err := newOneStage(op, put, dev)
	if err != nil {
		return nil, err
	}
	r.stage = st
	r.buf = hostView(st.stand)
	if err := c.startHost(op, r, key, off); err != nil {
		if st.claim.CompareAndSwap(false, true) {
			_ = stage.Free(st.stand)
		}
		return nil, err
	}
	return r, nil
}

// startMapped sends the transfer r of its device block, described by s,
// as one frame for the target to copy through its mapping.
func (l *link) startMapped(r *oneOp, s memspace.Shared, key comm.RemoteKey, off int) error {
	payload := encodeOneIPC(s, key, off, r.put)
	l.one.mu.Lock()
	if l.one.down != nil {
		l.one.mu.Unlock()
		return l.one.down
	}
	r.setChunks(1)
	r.unwritten = 0
	r.key, r.off = key, off
	r.mapped = true
	id := l.one.addLocked(r)
	l.one.mu.Unlock()
	f := &outFrame{payload: payload}
	frame{typ: frameOneIPC, a: uint64(s.Len), b: id, c: uint64(len(payload))}.encode(f.hdr[:])
	return l.w.queueFrames([]*outFrame{f})
}

// encodeOneIPC writes the payload of a frameOneIPC: the
// description s, then the key, the offset and the operation.
func encodeOneIPC(s memspace.Shared, key comm.RemoteKey, off int, put bool) []byte {
	p := encodeShared(s)
	kb := keyBytes(key)
	p = append(p, kb[:keySize]...)
	p = binary.LittleEndian.AppendUint64(p, uint64(off))
	op := byte(oneIPCGet)
	if put {
		op = oneIPCPut
	}
	return append(p, op)
}

// onOneIPCFrame reads a frameOneIPC's payload of n bytes — the origin
// block's description, then the trailer — and serves the transfer.
func (l *link) onOneIPCFrame(size int, id uint64, n int) error {
	var p [ipcDescMax]byte
	if _, err := io.ReadFull(l.rd.br, p[:n]); err != nil {
		return err
	}
	if l.shm == nil {
		return xerr.Detail(ErrProtocol, "a one-sided transfer of a device block by its description on a TCP link")
	}
	k := n - oneIPCTrailer
	return l.onOneIPC(size, id, p[:k], p[k:n])
}

// onOneIPC takes a one-sided transfer by description (ipc.go's onIPC):
// size bytes of the block desc describes, to copy into (a Put) or out of
// (a Get) the region the trailer names, at its offset. The checks and
// the mapping are the reader's; the copy runs in a goroutine of the
// link, which answers.
func (l *link) onOneIPC(size int, id uint64, desc, trailer []byte) error {
	s, err := decodeShared(desc, size)
	if err != nil {
		return err
	}
	key := comm.RemoteKey{Rank: l.c.rank, Addr: binary.LittleEndian.Uint64(trailer[0:]),
		Len: int(min(binary.LittleEndian.Uint64(trailer[8:]), maxMessage)), Key: binary.LittleEndian.Uint64(trailer[16:])}
	off := int(min(binary.LittleEndian.Uint64(trailer[keySize:]), maxMessage))
	put := trailer[keySize+8] == oneIPCPut
	if op := trailer[keySize+8]; op != oneIPCPut && op != oneIPCGet {
		return xerr.Detail(ErrProtocol, "a one-sided transfer by description with operation %d", op)
	}
	answer := func(status uint32, n int) error {
		return l.w.sendCtl(frame{typ: frameOneDone, tag: status, a: uint64(n), b: id}, true)
	}
	g, _ := l.c.one.Find(key, off, size)
	if g == nil {
		return answer(oneRefused, 0)
	}
	part, err := g.Block().Slice(off, size)
	if err != nil {
		g.Done()
		l.copyLogf("a region's range of %d bytes at offset %d: %v", size, off, err)
		return answer(oneFailed, 0)
	}
	imp, ok := memspace.ImporterFor(s, part)
	if !ok {
		g.Done()
		return l.noMapping(s, fmt.Errorf("no importer of %q", s.Kind), answer)
	}
	mapped, done, err := l.importShared(imp, s)
	if err != nil {
		g.Done()
		return l.noMapping(s, err, answer)
	}
	dst, src := part, mapped
	if !put {
		dst, src = mapped, part
	}
	if _, err := transfer.Lookup(dst.Space(), src.Space()); err != nil {
		// Mapped where no path reaches: the bytes come through host
		// memory, which both have paths to.
		done()
		g.Done()
		return l.noMapping(s, err, answer)
	}
	if !l.ipcGo(func() { l.copyOneIPC(g, id, dst, src, done) }) {
		done()
		g.Done()
	}
	return nil
}

// noMapping answers a one-sided transfer by the description s that this
// rank cannot map (why): the origin stages its block and sends the bytes.
func (l *link) noMapping(s memspace.Shared, why error, answer func(uint32, int) error) error {
	l.c.logger().Debug("procs: one-sided device block from a peer staged: it cannot be mapped here", "rank", l.c.rank, "peer", l.peer, "block", s.String(), "err", why)
	l.c.notePath(l.peer, pathStaged)
	return answer(oneNoCopy, 0)
}

// copyOneIPC copies src into dst (a mapping and a range of the region g,
// in the transfer's direction), gives the mapping (done) and the region
// back, and answers the transfer id.
func (l *link) copyOneIPC(g *onesided.Region, id uint64, dst, src memspace.Block, done func()) {
	// The copy is the device's, which bounds it; the context is not the
	// link's to cancel midway.
	err := transfer.CopyBlock(context.Background(), dst, src)
	done()
	g.Done()
	if err != nil {
		l.copyLogf("a transfer of %d bytes through a mapping: %v", dst.Len(), err)
		_ = l.w.sendCtl(frame{typ: frameOneDone, tag: oneFailed, b: id}, false)
		return
	}
	l.ipc.answered.Add(1)
	l.c.notePath(l.peer, pathIPC)
	// A failure to queue means the link is down, which fails the
	// transfer at the origin.
	_ = l.w.sendCtl(frame{typ: frameOneDone, tag: oneDone, a: uint64(dst.Len()), b: id}, false)
}

// mappedOp returns the transfer id when it waits for the target's copy
// through its mapping, else nil.
func (l *link) mappedOp(id uint64) *oneOp {
	l.one.mu.Lock()
	defer l.one.mu.Unlock()
	if r := l.one.ops[id]; r != nil && r.mapped {
		return r
	}
	return nil
}

// onMappedDone takes the target's answer to the transfer r (id) by
// description: copied (n bytes), refused, failed, or not mapped, upon
// which r is staged and sent again.
func (l *link) onMappedDone(r *oneOp, status uint32, n int, id uint64) error {
	if status == oneDone && n != r.dev.Len() {
		return xerr.Detail(ErrProtocol, "rank %d copied %d bytes of the %d-byte transfer %d", l.peer, n, r.dev.Len(), id)
	}
	if status == oneNoCopy {
		l.c.notePath(l.peer, pathStaged)
		if !l.ipcGo(func() { l.restage(r, id) }) {
			l.endMapped(r, id, comm.Status{}, l.reqErr())
		}
		return nil
	}
	op := "get"
	if r.put {
		op = "put"
	}
	switch status {
	case oneDone:
		l.c.notePath(l.peer, pathIPC)
		l.endMapped(r, id, comm.Status{Source: l.peer, Count: n}, nil)
	case oneRefused:
		l.endMapped(r, id, comm.Status{}, xerr.Errorf(Name, op, comm.ErrInvalidArgument, "rank %d: rank %d has no open region that the key names, or it does not match it", l.c.rank, l.peer))
	default:
		l.endMapped(r, id, comm.Status{}, xerr.Errorf(Name, op, memspace.ErrDeviceLost, "rank %d: rank %d could not copy through its mapping of the block", l.c.rank, l.peer))
	}
	return nil
}

// endMapped completes the transfer r (id) unless the link's failure has
// taken it already.
func (l *link) endMapped(r *oneOp, id uint64, st comm.Status, err error) {
	l.one.mu.Lock()
	if l.one.ops[id] != r {
		l.one.mu.Unlock()
		return
	}
	delete(l.one.ops, id)
	r.mapped = false
	l.one.mu.Unlock()
	l.finish(r, st, err)
}

// restage sends the transfer r (id), which the target could not map, as
// a transfer of host bytes: its block staged through a host stand-in,
// under the same id.
func (l *link) restage(r *oneOp, id uint64) {
	op := "get"
	if r.put {
		op = "put"
	}
	st, err := newOneStage(op, r.put, r.dev)
	if err != nil {
		l.endMapped(r, id, comm.Status{}, err)
		return
	}
	l.one.mu.Lock()
	if l.one.ops[id] != r {
		// The link failed meanwhile, which failed r.
		l.one.mu.Unlock()
		_ = stage.Free(st.stand)
		return
	}
	r.mapped = false
	r.stage = st
	r.buf = hostView(st.stand)
	r.setChunks((len(r.buf) + l.w.chunk - 1) / l.w.chunk)
	// r stays unordered: a notification may have passed over it already
	// and be written before its chunks are queued (awaitUnordered).
	l.one.mu.Unlock()
	// An error has failed the link, and r.
	_ = l.queueChunks(r, id, keyBytes(r.key), r.off)
}
