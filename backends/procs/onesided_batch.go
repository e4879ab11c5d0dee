package procs

import (
	"context"
	"encoding/binary"
	"io"
	"unsafe"

	"github.com/xpu-go/xpu/comm"
	"github.com/xpu-go/xpu/internal/onesided"
	"github.com/xpu-go/xpu/internal/shm"
	"github.com/xpu-go/xpu/xerr"
)

// Batches (comm.Batcher). A prepared batch keeps each descriptor's host
// bytes and its descriptors grouped by target rank. Posted, the
// descriptors to a peer over a link that makes single copies go as one
// frame per batchMax of them (frameBatch), when they move batchSingleMin
// bytes or more: the target checks every key and range, and for a Put
// copies every range from the origin's buffers into its regions with one
// process_vm_readv; for a Get it lends every range and the origin copies
// them all into its buffers with one call, then gives them back
// (frameOneFree) — as the single copies of one transfer do
// (onesided_cma.go), a list at a time. A descriptor the target refuses
// fails the whole frame before a byte moves, naming that descriptor. The
// other descriptors (to this rank, over links without single copies, to
// a region the host cannot touch, or too few bytes to be worth a system
// call) start one by one, as Put and Get do.

const (
	// batchMax is the most descriptors one batch frame carries: the
	// ranges of one process_vm_readv.
	batchMax = shm.MaxVec
	// batchDescSize is the length of a descriptor in a batch frame: the
	// key, the offset in the region, the length, and the origin's
	// address of a Put's bytes.
	batchDescSize = keySize + 24
	// batchSingleMin is the fewest bytes a batch must move to a peer to
	// go to it as batch frames.
	batchSingleMin = 64 << 10
)

var (
	_ comm.Batcher = (*Comm)(nil)
	// cmaReadVec copies a list of ranges from another process:
	// shm.ReadVec, or a test's; cmaWriteVec into it: shm.WriteVec, or a
	// test's.
	cmaReadVec  = shm.ReadVec
	cmaWriteVec = shm.WriteVec
)

// prepared is a batch of transfers prepared by PrepareXfers.
type prepared struct {
	c     *Comm
	put   bool
	xfers []comm.Xfer
	bufs  [][]byte   // the host bytes of each descriptor's block
	peers []peerList // the descriptors by target rank
}

// peerList is the descriptors of a batch to one rank.
type peerList struct {
	peer  int
	idx   []int
	bytes int
	each  bool // start one by one, never as batch frames
}

// opBatch is the part of a prepared batch that one batch frame carries.
type opBatch struct {
	p     *prepared
	idx   []int
	bytes int
	// pieces are the chunks in which a streamed batch of Gets is
	// answered, in order; nil for a batch by single copy.
	pieces []piece
}

// piece is a chunk of a streamed answer: n bytes of the buffer of
// descriptor idx, from off.
type piece struct{ idx, off, n int }

// Kinds of batch frame, in its tag.
const (
	batchGet       = 0 // lend the ranges; the origin copies them (single copy)
	batchPut       = 1 // copy the ranges from the origin (single copy)
	batchGetStream = 2 // answer with the ranges' bytes, in chunks, in order
	batchPutStream = 3 // the ranges' bytes follow, in chunks, in order (frameBatchData)
)

// putStream is a streamed batch of Puts being received: the ranges its
// chunks go to, in order, the chunks still due, and the descriptor
// refused (-1: none), whose batch writes nothing.
type putStream struct {
	pieces  []piece // idx indexes ranges
	ranges  [][]byte
	next    int
	refused int
}

// PrepareXfers prepares xfers, which comm.PrepareBatch has checked, for
// Puts (put) or Gets.
func (c *Comm) PrepareXfers(put bool, xfers []comm.Xfer) (comm.PreparedXfers, error) {
	p := &prepared{c: c, put: put, xfers: xfers, bufs: make([][]byte, len(xfers))}
	at := make(map[int]int)
	for i, x := range xfers {
		b, err := oneBytes("prepare", x.Local)
		if err != nil {
			return nil, &comm.XferError{Index: i, Err: err}
		}
		if x.Remote.Rank < 0 || x.Remote.Rank >= c.size {
			return nil, &comm.XferError{Index: i, Err: xerr.Errorf(Name, "prepare", comm.ErrInvalidArgument, "rank %d: %v is a key of no rank of %d", c.rank, x.Remote, c.size)}
		}
		p.bufs[i] = b
		// Descriptors to a region the host cannot touch start one by one,
		// in a list of their own (each), whose chunks the target copies in.
		to := x.Remote.Rank
		if onesided.Staged(x.Remote) {
			to = -1 - to
		}
		j, ok := at[to]
		if !ok {
			j = len(p.peers)
			at[to] = j
			p.peers = append(p.peers, peerList{peer: x.Remote.Rank, each: to < 0})
		}
		p.peers[j].idx = append(p.peers[j].idx, i)
		p.peers[j].bytes += len(b)
	}
	return p, nil
}

// Post starts every transfer of the batch.
func (p *prepared) Post(ctx context.Context) (comm.Request, error) {
	c := p.c
	if c.shut.Load() {
		return nil, c.closedErr()
	}
	op := "get"
	if p.put {
		op = "put"
	}
	br := &batchReq{}
	for _, pl := range p.peers {
		l := c.links[pl.peer]
		if l != nil && !pl.each && pl.bytes >= directMin {
			if r, ok := l.directBatch(p, pl.idx); ok {
				br.add(r, pl.idx[0])
				continue
			}
		}
		single := l != nil && l.cma.pid != 0 && !l.cma.refused.Load() && singleCopy()
		if l != nil && !pl.each && pl.bytes >= batchSingleMin {
			for s := 0; s < len(pl.idx); s += batchMax {
				ob := &opBatch{p: p, idx: pl.idx[s:min(s+batchMax, len(pl.idx))]}
				for _, i := range ob.idx {
					ob.bytes += len(p.bufs[i])
				}
				if !single {
					ob.pieces = chunkPieces(ob, l.w.chunk)
				}
				r := &oneOp{put: p.put, peer: pl.peer, via: l, batch: ob}
				if err := l.startBatch(r); err != nil {
					_, _ = br.Wait(ctx)
					return nil, &comm.XferError{Index: ob.idx[0], Err: xerr.Errorf(Name, op, comm.ErrPeerLost, "rank %d: %w", c.rank, err)}
				}
				br.add(r, ob.idx[0])
			}
			continue
		}
		for _, i := range pl.idx {
			x := p.xfers[i]
			r, err := c.oneSided(op, p.put, x.Local, x.Remote, x.RemoteOff)
			if err != nil {
				_, _ = br.Wait(ctx)
				return nil, &comm.XferError{Index: i, Err: err}
			}
			br.add(r, i)
		}
	}
	return br, nil
}

// batchReq is the request of a posted batch: its parts, each a batch
// frame's transfer or one descriptor's, with the index of its first
// descriptor.
type batchReq struct {
	parts []comm.Request
	first []int
}

func (b *batchReq) add(r comm.Request, first int) {
	b.parts = append(b.parts, r)
	b.first = append(b.first, first)
}

// Wait waits for every part; its error is the first part's that failed,
// as an *comm.XferError.
func (b *batchReq) Wait(ctx context.Context) (comm.Status, error) {
	var first error
	n := 0
	for k, r := range b.parts {
		st, err := r.Wait(ctx)
		switch {
		case err != nil && ctx.Err() != nil:
			return comm.Status{}, ctx.Err()
		case err != nil && first == nil:
			first = err
			if _, ok := err.(*comm.XferError); !ok {
				first = &comm.XferError{Index: b.first[k], Err: err}
			}
		case err == nil:
			n += st.Count
		}
	}
	if first != nil {
		return comm.Status{}, first
	}
	return comm.Status{Source: comm.AnySource, Count: n}, nil
}

// Test reports whether every part has completed.
func (b *batchReq) Test() (comm.Status, bool, error) {
	for _, r := range b.parts {
		if _, done, _ := r.Test(); !done {
			return comm.Status{}, false, nil
		}
	}
	st, err := b.Wait(context.Background())
	return st, true, err
}

// Cancel does nothing: transfers cannot be taken back once started.
func (b *batchReq) Cancel() error { return nil }

// startBatch sends the batch frame of r.
func (l *link) startBatch(r *oneOp) error {
	ob := r.batch
	l.one.mu.Lock()
	if l.one.down != nil {
		l.one.mu.Unlock()
		return l.one.down
	}
	r.setChunks(1)
	r.unwritten = 0
	switch {
	case ob.pieces != nil && r.put:
		r.unwritten = len(ob.pieces) // the bytes follow the list; one answer
	case ob.pieces != nil:
		r.setChunks(len(ob.pieces)) // answered by the bytes
	}
	id := l.one.addLocked(r)
	l.one.mu.Unlock()
	payload := make([]byte, len(ob.idx)*batchDescSize)
	for k, i := range ob.idx {
		d := payload[k*batchDescSize:]
		x, buf := ob.p.xfers[i], ob.p.bufs[i]
		kb := keyBytes(x.Remote)
		copy(d, kb[:keySize])
		binary.LittleEndian.PutUint64(d[keySize:], uint64(x.RemoteOff))
		binary.LittleEndian.PutUint64(d[keySize+8:], uint64(len(buf)))
		if r.put && len(buf) > 0 {
			binary.LittleEndian.PutUint64(d[keySize+16:], uint64(uintptr(unsafe.Pointer(&buf[0]))))
		}
	}
	f := &outFrame{payload: payload}
	kind := uint32(batchGet)
	switch {
	case r.put:
		kind = batchPut
	case ob.pieces != nil:
		kind = batchGetStream
	}
	fs := []*outFrame{f}
	if r.put && ob.pieces != nil {
		kind = batchPutStream
		for _, pc := range ob.pieces {
			d := &outFrame{payload: ob.p.bufs[pc.idx][pc.off : pc.off+pc.n], done: func() { l.chunkWritten(id, r) }}
			frame{typ: frameBatchData, a: uint64(pc.n), b: id}.encode(d.hdr[:])
			fs = append(fs, d)
		}
	}
	frame{typ: frameBatch, tag: kind, a: uint64(len(ob.idx)), b: id}.encode(f.hdr[:])
	return l.w.queueFrames(fs)
}

// chunkPieces cuts the buffers of ob into the chunks (of at most chunk
// bytes, none across two buffers) in which a streamed answer comes.
func chunkPieces(ob *opBatch, chunk int) []piece {
	var ps []piece
	for _, i := range ob.idx {
		n := len(ob.p.bufs[i])
		for off := 0; off < n; off += chunk {
			ps = append(ps, piece{idx: i, off: off, n: min(chunk, n-off)})
		}
	}
	return ps
}

// onBatch serves a batch frame of n descriptors (transfer id): a Put's
// ranges copied from the origin, or a Get's lent to it.
func (l *link) onBatch(kind uint32, n int, id uint64) error {
	desc := make([]byte, n*batchDescSize)
	if _, err := io.ReadFull(l.rd.br, desc); err != nil {
		return err
	}
	if l.cma.pid == 0 && kind < batchGetStream {
		return xerr.Detail(ErrProtocol, "rank %d sent a batch over a link that makes no single copies", l.peer)
	}
	regions := make([]*onesided.Region, 0, n)
	locals := make([][]byte, 0, n)
	addrs := make([]uint64, 0, n)
	release := func() {
		for _, g := range regions {
			g.Done()
		}
	}
	for k := range n {
		d := desc[k*batchDescSize:]
		key := comm.RemoteKey{Rank: l.c.rank, Addr: binary.LittleEndian.Uint64(d[0:]),
			Len: int(min(binary.LittleEndian.Uint64(d[8:]), maxMessage)), Key: binary.LittleEndian.Uint64(d[16:])}
		off := int(min(binary.LittleEndian.Uint64(d[keySize:]), maxMessage))
		size := int(min(binary.LittleEndian.Uint64(d[keySize+8:]), maxMessage))
		g, _ := l.c.one.Find(key, off, size)
		if g == nil {
			release()
			if kind == batchPutStream {
				return l.expectPuts(id, desc, n, nil, nil, k)
			}
			return l.w.sendCtl(frame{typ: frameBatchDone, tag: oneRefused, a: uint64(k), b: id}, true)
		}
		regions = append(regions, g)
		if g.Data() == nil {
			release()
			return xerr.Detail(ErrProtocol, "rank %d sent a batch naming a region the host cannot touch (descriptor %d)", l.peer, k)
		}
		locals = append(locals, g.Data()[off:off+size])
		addrs = append(addrs, binary.LittleEndian.Uint64(d[keySize+16:]))
	}
	switch kind {
	case batchGet:
		return l.lend(id, regions)
	case batchGetStream:
		return l.stream(id, regions, locals)
	case batchPutStream:
		return l.expectPuts(id, desc, n, regions, locals, -1)
	}
	cerr := readVecPieces(l.cma.pid, locals, addrs)
	release()
	if cerr != nil {
		if err := l.copyFailed(cerr, len(locals), addrs[0]); err != nil {
			return err
		}
		return l.w.sendCtl(frame{typ: frameBatchDone, tag: oneNoCopy, b: id}, true)
	}
	return l.w.sendCtl(frame{typ: frameBatchDone, tag: oneDone, b: id}, true)
}

// stream answers a streamed batch of Gets (transfer id): the bytes of
// ranges, in chunks of the link's chunk size, each frame's region held
// until the frame is written.
func (l *link) stream(id uint64, regions []*onesided.Region, ranges [][]byte) error {
	var fs []*outFrame
	for k, b := range ranges {
		if len(b) == 0 {
			regions[k].Done()
			continue
		}
		for off := 0; off < len(b); off += l.w.chunk {
			m := min(l.w.chunk, len(b)-off)
			f := &outFrame{payload: b[off : off+m]}
			if off+m == len(b) {
				f.done = regions[k].Done
			}
			frame{typ: frameOneData, tag: oneDone, a: uint64(m), b: id}.encode(f.hdr[:])
			fs = append(fs, f)
		}
	}
	return l.w.queueFrames(fs)
}

// lend lends the ranges of regions to the origin for transfer id, until
// it gives them back (onOneFree), and says so.
func (l *link) lend(id uint64, regions []*onesided.Region) error {
	l.one.mu.Lock()
	if l.one.lent == nil {
		l.one.lent = map[uint64][]*onesided.Region{}
	}
	if l.one.lent[id] != nil {
		l.one.mu.Unlock()
		for _, g := range regions {
			g.Done()
		}
		return xerr.Detail(ErrProtocol, "rank %d asked twice for the ranges of transfer %d", l.peer, id)
	}
	l.one.lent[id] = regions
	l.one.mu.Unlock()
	return l.w.sendCtl(frame{typ: frameBatchDone, tag: oneDone, b: id}, true)
}

// onBatchDone takes the target's answer to a batch frame: done (a Put's
// ranges copied, a Get's lent: this rank copies them now), a refusal of
// descriptor at, or the kernel's refusal, upon which the descriptors go
// one by one through the link.
func (l *link) onBatchDone(status uint32, at int, id uint64) error {
	r, err := l.answered(id, status)
	if err != nil {
		return err
	}
	ob := r.batch
	if ob == nil || at >= len(ob.idx) {
		return xerr.Detail(ErrProtocol, "rank %d answered transfer %d as a batch, descriptor %d", l.peer, id, at)
	}
	switch {
	case status == oneRefused:
		l.one.mu.Lock()
		r.err = &comm.XferError{Index: ob.idx[at], Err: r.err}
		r.left = 1 // a streamed batch expects no chunk after a refusal
		l.one.mu.Unlock()
	case status == oneNoCopy:
		l.resendBatch(id, r)
		return nil
	case !r.put:
		dsts := make([][]byte, len(ob.idx))
		addrs := make([]uint64, len(ob.idx))
		for k, i := range ob.idx {
			x := ob.p.xfers[i]
			dsts[k], addrs[k] = ob.p.bufs[i], x.Remote.Addr+uint64(x.RemoteOff)
		}
		cerr := readVecPieces(l.cma.pid, dsts, addrs)
		if err := l.w.sendCtl(frame{typ: frameOneFree, b: id}, true); err != nil {
			return err
		}
		if cerr != nil {
			if err := l.copyFailed(cerr, ob.bytes, addrs[0]); err != nil {
				return err
			}
			l.resendBatch(id, r)
			return nil
		}
	}
	l.chunkDone(id, r)
	return nil
}

// resendBatch sends the descriptors of the batch transfer r (id), which
// the kernel would not copy, one by one through the link in chunks; r
// completes once they all have. The link makes no single copies from then
// on.
func (l *link) resendBatch(id uint64, r *oneOp) {
	l.cma.refused.Store(true)
	ob := r.batch
	l.one.mu.Lock()
	if l.one.ops[id] != r {
		l.one.mu.Unlock()
		return // failed meanwhile
	}
	r.left = len(ob.idx)
	l.one.mu.Unlock()
	for _, i := range ob.idx {
		x := ob.p.xfers[i]
		child := &oneOp{put: r.put, ordered: r.put, peer: r.peer, via: l, buf: ob.p.bufs[i],
			parent: r, parentID: id, index: i, key: x.Remote, off: x.RemoteOff}
		n := len(child.buf)
		l.one.mu.Lock()
		if l.one.down != nil {
			l.one.mu.Unlock()
			return // r failed with the link
		}
		if n == 0 {
			r.left--
			l.maybeFinish(id, r)
			continue
		}
		child.setChunks((n + l.w.chunk - 1) / l.w.chunk)
		cid := l.one.addLocked(child)
		l.one.mu.Unlock()
		// An error has failed the link, and r.
		_ = l.queueChunks(child, cid, keyBytes(x.Remote), x.RemoteOff)
	}
}

// readVecPieces copies the ranges of a batch frame from process pid:
// in one call, or, from cmaSplit bytes, in runs of about cmaPiece bytes
// that this goroutine and helpers take in turn, as cmaPieces shares one
// transfer's copy.
func readVecPieces(pid int, dsts [][]byte, addrs []uint64) error {
	return vecPieces(cmaReadVec, pid, dsts, addrs)
}

// vecPieces copies the ranges of bufs from or to addrs of process pid with
// vec (cmaReadVec or cmaWriteVec), as readVecPieces reads.
func vecPieces(vec func(int, [][]byte, []uint64) error, pid int, dsts [][]byte, addrs []uint64) error {
	total := 0
	for _, d := range dsts {
		total += len(d)
	}
	if total < cmaSplit {
		return vec(pid, dsts, addrs)
	}
	var cuts []int // the first range of each run
	run := cmaPiece
	for i, d := range dsts {
		if run >= cmaPiece {
			cuts = append(cuts, i)
			run = 0
		}
		run += len(d)
	}
	cuts = append(cuts, len(dsts))
	return cmaShare(len(cuts)-1, 1, func(at, k int) error {
		for r := at; r < at+k; r++ {
			if err := vec(pid, dsts[cuts[r]:cuts[r+1]], addrs[cuts[r]:cuts[r+1]]); err != nil {
				return err
			}
		}
		return nil
	})
}

// childDone counts a descriptor of a resent batch done, recording its
// error by index; the last completes the batch.
func (l *link) childDone(child *oneOp, err error) {
	r := child.parent
	l.one.mu.Lock()
	if err != nil && r.err == nil {
		r.err = &comm.XferError{Index: child.index, Err: err}
	}
	r.left--
	l.maybeFinish(child.parentID, r)
}

// onStreamed reads a chunk of the answer to a streamed batch of Gets r
// (id): n bytes, into the buffer of the descriptor it belongs to (the
// order of the answer says which).
func (l *link) onStreamed(r *oneOp, id uint64, n int) error {
	ob := r.batch
	k := r.all - r.left // r.left is the reader's to change
	if ob.pieces == nil || k >= len(ob.pieces) || n != ob.pieces[k].n {
		return xerr.Detail(ErrProtocol, "rank %d answered a batch of Gets with %d bytes where none or other are due", l.peer, n)
	}
	pc := ob.pieces[k]
	if _, err := io.ReadFull(l.rd.br, ob.p.bufs[pc.idx][pc.off:pc.off+n]); err != nil {
		return err
	}
	l.chunkDone(id, r)
	return nil
}

// expectPuts gets ready for the chunks of a streamed batch of Puts (id)
// of n descriptors: into ranges, whose regions stay held until the last
// chunk is in (as a lent range is: a link that fails gives them back),
// or, when descriptor refused was refused, nowhere. A batch of no bytes
// is answered at once.
func (l *link) expectPuts(id uint64, desc []byte, n int, regions []*onesided.Region, ranges [][]byte, refused int) error {
	ps := &putStream{ranges: ranges, refused: refused}
	for k := range n {
		size := int(min(binary.LittleEndian.Uint64(desc[k*batchDescSize+keySize+8:]), maxMessage))
		for off := 0; off < size; off += l.w.chunk {
			ps.pieces = append(ps.pieces, piece{idx: k, off: off, n: min(l.w.chunk, size-off)})
		}
	}
	l.one.mu.Lock()
	if l.one.lent == nil {
		l.one.lent = map[uint64][]*onesided.Region{}
	}
	if l.one.streams == nil {
		l.one.streams = map[uint64]*putStream{}
	}
	if l.one.lent[id] != nil || l.one.streams[id] != nil {
		l.one.mu.Unlock()
		for _, g := range regions {
			g.Done()
		}
		return xerr.Detail(ErrProtocol, "rank %d sent batch %d twice", l.peer, id)
	}
	if len(regions) > 0 {
		l.one.lent[id] = regions
	}
	l.one.streams[id] = ps
	l.one.mu.Unlock()
	if len(ps.pieces) == 0 {
		return l.putsIn(id, ps)
	}
	return nil
}

// onBatchData reads a chunk of n bytes of the streamed batch of Puts id
// into the range it goes to, and answers the batch after its last chunk.
func (l *link) onBatchData(n int, id uint64) error {
	l.one.mu.Lock()
	ps := l.one.streams[id]
	l.one.mu.Unlock()
	if ps == nil || ps.next >= len(ps.pieces) || ps.pieces[ps.next].n != n {
		return xerr.Detail(ErrProtocol, "rank %d sent %d bytes of batch %d, which expects none or other", l.peer, n, id)
	}
	pc := ps.pieces[ps.next]
	ps.next++
	var err error
	if ps.refused >= 0 {
		err = l.rd.discard(n)
	} else {
		_, err = io.ReadFull(l.rd.br, ps.ranges[pc.idx][pc.off:pc.off+n])
	}
	if err != nil {
		return err
	}
	if ps.next == len(ps.pieces) {
		return l.putsIn(id, ps)
	}
	return nil
}

// putsIn answers the streamed batch of Puts id, whose chunks are all in,
// and gives its regions back.
func (l *link) putsIn(id uint64, ps *putStream) error {
	l.one.mu.Lock()
	held := l.one.lent[id]
	delete(l.one.lent, id)
	delete(l.one.streams, id)
	l.one.mu.Unlock()
	for _, g := range held {
		g.Done()
	}
	if ps.refused >= 0 {
		return l.w.sendCtl(frame{typ: frameBatchDone, tag: oneRefused, a: uint64(ps.refused), b: id}, l.shm != nil)
	}
	return l.w.sendCtl(frame{typ: frameBatchDone, tag: oneDone, b: id}, l.shm != nil)
}
