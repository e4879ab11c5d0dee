package procs

import (
	"context"
	"encoding/binary"
	"fmt"
	"io"
	"sync"
	"sync/atomic"

	"github.com/xpu-go/xpu/comm"
	"github.com/xpu-go/xpu/impl"
	"github.com/xpu-go/xpu/internal/onesided"
	"github.com/xpu-go/xpu/internal/p2p"
	"github.com/xpu-go/xpu/memspace"
	"github.com/xpu-go/xpu/xerr"
)

// One-sided communication (comm.OneSided) over the links.
//
// A rank exposes a block of host memory; its key (package
// internal/onesided) carries this rank, the block's address and length,
// and a number that names the region among this rank's. A Put goes to the target as
// frames of at most a chunk, each with the key and the offset it writes;
// the target's link reader (the reader goroutine, or a goroutine of the
// target that holds the read role: never the target program's code)
// checks the key against its open regions and the range against the
// region, reads the bytes from the link straight into the region, and
// answers each frame. A Get asks for chunks; the target answers each with
// the bytes, written from the region. A transfer completes once every
// chunk is answered; a refused chunk (a key of no open region, or that
// does not match it) fails it with ErrInvalidArgument and writes nothing,
// and the link goes on. The target takes part only through its link
// reader, so a target busy in its own computation serves transfers as it
// serves messages.

// keySize is the length of the key a Put or Get frame carries before its
// data: the region's address, length and number.
const keySize = 24

// Answers of the target to a chunk, in the tag of its answer.
const (
	oneDone    = 0 // in place (or, for frameOneAddr, lent)
	oneRefused = 1 // the key names no open region of the target, or does not match it
	oneNoCopy  = 2 // the kernel refused the single copy: send the bytes through the link
	oneFailed  = 3 // the copy into or out of a region the host cannot touch failed (its device's)
)

// Expose makes buf, not empty, reachable by the other ranks' Put and Get
// until the Region is closed or this rank closes. The rank's regions are
// an onesided.Table. buf is host memory, or memory the host cannot touch
// that package transfer copies to and from the host (device memory): the
// link reader then copies each chunk of a Put into it, and each Get out
// of it, with its space's copies, and the origin sends no single copy nor
// batch frame for it (onesided.Staged).
func (c *Comm) Expose(buf memspace.Block) (comm.Region, error) {
	if buf.Len() == 0 {
		return nil, xerr.Errorf(Name, "expose", comm.ErrInvalidArgument, "rank %d: an empty buffer", c.rank)
	}
	data, err := onesided.HostView(buf)
	if err != nil {
		return nil, xerr.Op(Name, "expose", err)
	}
	g := c.one.Expose(c.rank, buf, data)
	if g == nil {
		return nil, c.closedErr()
	}
	c.publish(g)
	if c.shut.Load() {
		c.withdraw(g)
		_ = g.Close()
		return nil, c.closedErr()
	}
	return &region{Region: g, c: c}, nil
}

// region is an exposed block of this rank.
type region struct {
	*onesided.Region
	c *Comm
}

// Close withdraws the region and waits for the copies under way into or
// out of it. A peer that holds a range of it (a single-copy Get) and has
// not given it back within the failure bound (Config.Timeout) is cut, as
// a silent peer is, which gives the range back.
func (g *region) Close() error {
	g.c.withdraw(g.Region)
	return g.CloseWithin(g.c.cfg.Timeout, func() { g.c.cutLenders(g.Region) })
}

// cutLenders fails the links of the peers that hold a range of g.
func (c *Comm) cutLenders(g *onesided.Region) {
	for _, l := range c.links {
		if l == nil {
			continue
		}
		l.one.mu.Lock()
		holds := false
		for _, lent := range l.one.lent {
			for _, h := range lent {
				holds = holds || h == g
			}
		}
		l.one.mu.Unlock()
		if holds {
			l.fail(fmt.Errorf("rank %d kept a range of a closing region past %v", l.peer, c.cfg.Timeout))
		}
	}
}

// oneBytes returns the host view of b for op.
func oneBytes(op string, b memspace.Block) ([]byte, error) {
	data, err := hostBytes(b)
	if err != nil {
		return nil, xerr.Op(Name, op, err)
	}
	return data, nil
}

// oneOp is a Put or a Get under way: a comm.Request.
type oneOp struct {
	p2p.Done
	// direct is the link whose read role a goroutine that waits for the
	// transfer holds, for finish to kick (readFor).
	direct atomic.Pointer[link]
	via    *link // the link to the target; nil for a transfer to this rank
	put    bool
	// ordered says that the bytes travel in the link's frames, in order
	// (a chunked Put): a notification written after them follows them.
	ordered bool
	peer    int
	buf     []byte // the origin's buffer
	left    int    // chunks not yet answered; guarded by the link's one.mu
	all     int    // chunks in all
	// unwritten counts a Put's chunks not yet written: a Put completes
	// once the writer is done with its buffer too (guarded likewise).
	unwritten int
	err       error          // the first refusal; guarded likewise
	key       comm.RemoteKey // the target's region, and where in it
	off       int
	// batch is what a batch frame carries, for a transfer of a batch
	// (onesided_batch.go); nil for a Put or a Get.
	batch *opBatch
	// parent is the batch transfer (of id parentID) that a descriptor
	// resent on its own belongs to, at index of the batch; nil for others.
	parent   *oneOp
	parentID uint64
	index    int
	// dev is the origin's block the host cannot touch, for a transfer
	// of one (onesided_ipc.go); the zero Block for others.
	dev memspace.Block
	// mapped says that the transfer waits for the target to copy
	// through its mapping of dev (guarded by the link's one.mu).
	mapped bool
	// stage is dev's host stand-in, once the transfer is staged; nil
	// while none (set under the link's one.mu, or before r is shared).
	stage *oneStage
}

// setChunks makes r wait for n chunks, answered (and, for a Put,
// written). The link's one.mu is held, or r is not shared yet.
func (r *oneOp) setChunks(n int) {
	r.left, r.all = n, n
	if r.put {
		r.unwritten = n
	}
}

var _ comm.Request = (*oneOp)(nil)

// Wait blocks until the transfer completes or ctx ends. The waiting
// goroutine reads the target's answers itself when the link's read role is
// free, as a receive's does (ADR 10): a wake-up less per transfer.
func (r *oneOp) Wait(ctx context.Context) (comm.Status, error) {
	if r.IsDone() {
		return r.Result()
	}
	if ctx == nil {
		return comm.Status{}, xerr.Errorf(Name, "wait", comm.ErrInvalidArgument, "nil context")
	}
	l := r.via
	if l != nil && l.readFor(ctx, &r.Done, &r.direct) {
		if r.IsDone() {
			return r.Result()
		}
		if err := ctx.Err(); err != nil {
			return comm.Status{}, err
		}
		// The link went down: r completes with its error below.
	}
	if l != nil {
		l.c.parked.Add(1)
		defer l.c.parked.Add(-1)
		l.role.wakeReader()
	}
	return r.Done.Wait(ctx, Name)
}

// Test reports without blocking whether the transfer has completed; when
// it has not, it makes sure the link's answers are read meanwhile.
func (r *oneOp) Test() (comm.Status, bool, error) {
	if !r.IsDone() && r.via != nil {
		r.via.role.wakeReader()
	}
	return r.Done.Test()
}

// Cancel does nothing: a transfer cannot be taken back once started.
func (r *oneOp) Cancel() error { return nil }

// oneLink is a link's transfers under way that this rank started.
type oneLink struct {
	mu   sync.Mutex
	next uint64
	ops  map[uint64]*oneOp
	down error // set when the link fails: no transfer starts after
	// lent are ranges of this rank's regions that the peer copies from
	// (a single-copy Get), by its transfer id, until it gives them back.
	lent map[uint64][]*onesided.Region
	// streams are the streamed batches of Puts the peer is sending, by
	// transfer id (onesided_batch.go).
	streams map[uint64]*putStream
	// scratch holds a chunk of a Put to a region the host cannot touch
	// on its way in: the link reader's alone.
	scratch []byte
}

// addLocked registers r under a new transfer id, which it returns; mu is
// held and the link is up (down is nil). Set what the answers read of r
// before, or under the same hold of mu.
func (o *oneLink) addLocked(r *oneOp) uint64 {
	if o.ops == nil {
		o.ops = map[uint64]*oneOp{}
	}
	o.next++
	o.ops[o.next] = r
	return o.next
}

// Put writes src into the region dst names, off bytes into it. The
// request completes once the bytes are in the target's memory. src may be
// memory the host cannot touch whose space has transfer paths to and from
// host memory (TakesDevice): over a shared-memory link, when its space
// shares it, the target copies it through its mapping of it; elsewhere it
// is staged through a host stand-in (onesided_ipc.go).
func (c *Comm) Put(src memspace.Block, dst comm.RemoteKey, off int) (comm.Request, error) {
	return c.oneSided("put", true, src, dst, off)
}

// Get reads the region src names, from off bytes into it, into dst. dst
// may be memory the host cannot touch, as Put's src may.
func (c *Comm) Get(dst memspace.Block, src comm.RemoteKey, off int) (comm.Request, error) {
	return c.oneSided("get", false, dst, src, off)
}

func (c *Comm) oneSided(op string, put bool, local memspace.Block, key comm.RemoteKey, off int) (comm.Request, error) {
	data, err := oneBytes(op, local)
	device := false
	switch {
	case err == nil:
	case local.Len() == 0 && isDevice(local, err):
		data = nil // an empty device block: nothing to move
	case isDevice(local, err) && c.TakesDevice(local):
		device = true // mapped by the target, or staged (onesided_ipc.go)
	default:
		return nil, err
	}
	if err := impl.CheckRank(key.Rank, c.size, false); err != nil {
		return nil, xerr.Op(Name, op, err)
	}
	n := len(data)
	if device {
		n = local.Len()
	}
	if off < 0 || key.Len < 0 || off > key.Len || n > key.Len-off {
		return nil, xerr.Errorf(Name, op, comm.ErrInvalidArgument, "rank %d: %d bytes at offset %d of %v", c.rank, n, off, key)
	}
	if c.shut.Load() {
		return nil, c.closedErr()
	}
	if device {
		return c.oneDevice(op, put, local, key, off)
	}
	r := &oneOp{put: put, peer: key.Rank, buf: data}
	if err := c.startHost(op, r, key, off); err != nil {
		return nil, err
	}
	return r, nil
}

// startHost starts the transfer r of host bytes (r.buf): a copy for this
// rank's own region, else through the link.
func (c *Comm) startHost(op string, r *oneOp, key comm.RemoteKey, off int) error {
	if key.Rank == c.rank {
		return c.oneSelf(op, r, key, off)
	}
	l := c.links[key.Rank]
	r.via = l
	if len(r.buf) >= directMin && l.direct(r, key, off) {
		return nil
	}
	if err := l.startOne(r, key, off); err != nil {
		return xerr.Errorf(Name, op, comm.ErrPeerLost, "rank %d: %w", c.rank, err)
	}
	return nil
}

// oneSelf copies between r's buffer and this rank's own region.
func (c *Comm) oneSelf(op string, r *oneOp, key comm.RemoteKey, off int) error {
	g, _ := c.one.Find(key, off, len(r.buf))
	if g == nil {
		return xerr.Errorf(Name, op, comm.ErrInvalidArgument, "rank %d: %v names no open region of this rank, or does not match it", c.rank, key)
	}
	var err error
	if r.put {
		err = g.Store(context.Background(), off, r.buf)
	} else {
		err = g.Load(context.Background(), off, r.buf)
	}
	g.Done()
	if err != nil {
		return xerr.Op(Name, op, err)
	}
	r.Complete(comm.Status{Source: c.rank, Count: len(r.buf)}, nil)
	return nil
}

// startOne sends the frames of the transfer r: chunks of the link's
// chunk size, each carrying the key. An empty transfer completes at once.
func (l *link) startOne(r *oneOp, key comm.RemoteKey, off int) error {
	n := len(r.buf)
	chunks := (n + l.w.chunk - 1) / l.w.chunk
	single := l.singleCopies(n) && !onesided.Staged(key)
	l.one.mu.Lock()
	if l.one.down != nil {
		l.one.mu.Unlock()
		return l.one.down
	}
	if n == 0 {
		l.one.mu.Unlock()
		r.Complete(comm.Status{Source: key.Rank}, nil)
		return nil
	}
	r.setChunks(chunks)
	if single {
		r.setChunks(1)
		r.unwritten = 0
	}
	r.key, r.off = key, off
	r.ordered = r.put && !single
	id := l.one.addLocked(r)
	l.one.mu.Unlock()
	kb := keyBytes(key)
	if single {
		return l.startSingle(r, id, kb, off)
	}
	if chunks == 1 && n <= smallWrite && l.tryInline(r, id, key, kb[:keySize], off) {
		return nil
	}
	return l.queueChunks(r, id, kb, off)
}

// keyBytes encodes key as Put and Get frames carry it.
func keyBytes(key comm.RemoteKey) [keySize + 8]byte {
	var kb [keySize + 8]byte
	binary.LittleEndian.PutUint64(kb[0:], key.Addr)
	binary.LittleEndian.PutUint64(kb[8:], uint64(key.Len))
	binary.LittleEndian.PutUint64(kb[16:], key.Key)
	return kb
}

// queueChunks queues the frames of the transfer r (id): chunks of the
// link's chunk size, each carrying the key.
func (l *link) queueChunks(r *oneOp, id uint64, kb [keySize + 8]byte, off int) error {
	n := len(r.buf)
	frames := make([]*outFrame, 0, (n+l.w.chunk-1)/l.w.chunk)
	for at := 0; at < n; at += l.w.chunk {
		k := min(l.w.chunk, n-at)
		f := &outFrame{pre: kb}
		if r.put {
			frame{typ: framePut, a: uint64(k), b: id, c: uint64(off + at)}.encode(f.hdr[:])
			f.payload = r.buf[at : at+k]
			f.done = func() { l.chunkWritten(id, r) }
		} else {
			frame{typ: frameGet, a: uint64(k), b: id, c: uint64(off + at)}.encode(f.hdr[:])
		}
		frames = append(frames, f)
	}
	return l.w.queueFrames(frames)
}

// The reader answers a chunk itself over a shared-memory link, when the
// link is idle and the ring has room for the answer (sendCtl's inline,
// answer): that write cannot block, and it spares the target a wake-up of
// its writer goroutine per chunk (several microseconds). Over TCP it
// queues, as the reader never writes to a socket, which could block.

// tryInline writes the one frame of a small transfer r (id) from the
// calling goroutine when the link is idle and, over shared memory, the
// ring has room, as an eager send is written (sendMsg): a wake-up of the
// writer goroutine less. It reports whether it wrote (or the link failed,
// which fails r).
func (l *link) tryInline(r *oneOp, id uint64, key comm.RemoteKey, kb []byte, off int) bool {
	n := len(r.buf)
	var hdr [headerSize]byte
	var payload []byte
	if r.put {
		frame{typ: framePut, a: uint64(n), b: id, c: uint64(off)}.encode(hdr[:])
		payload = r.buf
	} else {
		frame{typ: frameGet, a: uint64(n), b: id, c: uint64(off)}.encode(hdr[:])
	}
	l.w.mu.Lock()
	if l.w.writable() != nil || !l.w.inlineLocked(headerSize+keySize+len(payload)) {
		l.w.mu.Unlock()
		return false
	}
	err := l.w.writeInlinePre(hdr[:], kb, payload)
	if r.put {
		l.chunkWritten(id, r)
	}
	return err == nil || l.closing()
}

// onPut takes a chunk of a Put: n bytes for offset off of the region its
// key names, answered with oneDone once they are in place, or discarded
// and answered with oneRefused.
func (l *link) onPut(n int, id uint64, off uint64) error {
	key, err := l.readKey()
	if err != nil {
		return err
	}
	g, _ := l.c.one.Find(key, int(min(off, maxMessage)), n)
	status := uint32(oneDone)
	switch {
	case g == nil:
		status = oneRefused
		err = l.rd.discard(n)
	case g.Data() == nil:
		status, err = l.storeChunk(g, int(off), n)
	default:
		_, err = io.ReadFull(l.rd.br, g.Data()[off:int(off)+n])
		g.Done()
	}
	if err != nil {
		return err
	}
	return l.w.sendCtl(frame{typ: frameOneDone, tag: status, a: uint64(n), b: id}, l.shm != nil)
}

// onGet answers a chunk of a Get: n bytes from offset off of the region
// its key names, written from the region, or a refusal.
func (l *link) onGet(n int, id uint64, off uint64) error {
	key, err := l.readKey()
	if err != nil {
		return err
	}
	g, _ := l.c.one.Find(key, int(min(off, maxMessage)), n)
	if g == nil {
		return l.w.sendCtl(frame{typ: frameOneData, tag: oneRefused, b: id}, l.shm != nil)
	}
	var f *outFrame
	if g.Data() != nil {
		f = &outFrame{payload: g.Data()[off : int(off)+n], done: g.Done}
	} else {
		// A region the host cannot touch: its bytes are copied out now,
		// and the answer carries the copy.
		f = &outFrame{payload: make([]byte, n)}
		err := g.Load(context.Background(), int(off), f.payload)
		g.Done()
		if err != nil {
			l.copyLogf("a Get of %d bytes at offset %d: %v", n, off, err)
			return l.w.sendCtl(frame{typ: frameOneData, tag: oneFailed, b: id}, l.shm != nil)
		}
	}
	frame{typ: frameOneData, tag: oneDone, a: uint64(n), b: id}.encode(f.hdr[:])
	if l.shm != nil {
		return l.w.answer(f)
	}
	return l.w.queueFrames([]*outFrame{f})
}

// readKey reads the key that a Put or Get frame carries.
func (l *link) readKey() (comm.RemoteKey, error) {
	var kb [keySize]byte
	if _, err := io.ReadFull(l.rd.br, kb[:]); err != nil {
		return comm.RemoteKey{}, err
	}
	return comm.RemoteKey{Rank: l.c.rank, Addr: binary.LittleEndian.Uint64(kb[0:]),
		Len: int(min(binary.LittleEndian.Uint64(kb[8:]), maxMessage)), Key: binary.LittleEndian.Uint64(kb[16:])}, nil
}

// onOneDone takes the target's answer to a chunk of a Put.
func (l *link) onOneDone(status uint32, n int, id uint64) error {
	if r := l.mappedOp(id); r != nil {
		return l.onMappedDone(r, status, n, id) // a transfer through the target's mapping
	}
	r, err := l.answered(id, status)
	if r == nil || err != nil {
		return err
	}
	if status == oneNoCopy {
		return l.resend(id, r) // a single-copy Put the kernel would not copy
	}
	l.chunkDone(id, r)
	return nil
}

// onOneData takes the target's answer to a chunk of a Get: n bytes, read
// into the Get's buffer where the chunk goes (its offset is the order of
// the answer: chunks are answered in the order they were asked for).
func (l *link) onOneData(status uint32, n int, id uint64) error {
	r, err := l.answered(id, status)
	if err != nil {
		return err
	}
	if r == nil {
		return l.rd.discard(n)
	}
	if status == oneDone && r.batch != nil {
		return l.onStreamed(r, id, n)
	}
	if status == oneDone {
		at := (r.all - r.left) * l.w.chunk // r.left is the reader's to change
		if at >= len(r.buf) || n != min(l.w.chunk, len(r.buf)-at) {
			return xerr.Detail(ErrProtocol, "rank %d answered a Get with %d bytes where chunk %d wants %d", l.peer, n, at/l.w.chunk, min(l.w.chunk, len(r.buf)-at))
		}
		if _, err := io.ReadFull(l.rd.br, r.buf[at:at+n]); err != nil {
			return err
		}
	}
	l.chunkDone(id, r)
	return nil
}

// answered finds the transfer id that the peer answered, recording a
// refusal. An answer to no transfer of this link breaks the protocol.
func (l *link) answered(id uint64, status uint32) (*oneOp, error) {
	l.one.mu.Lock()
	defer l.one.mu.Unlock()
	r := l.one.ops[id]
	if r == nil {
		return nil, xerr.Detail(ErrProtocol, "rank %d answered transfer %d, which is not under way", l.peer, id)
	}
	op := "get"
	if r.put {
		op = "put"
	}
	switch {
	case r.err != nil:
	case status == oneRefused:
		r.err = xerr.Errorf(Name, op, comm.ErrInvalidArgument, "rank %d: rank %d has no open region that the key names, or it does not match it", l.c.rank, l.peer)
	case status == oneFailed:
		r.err = xerr.Errorf(Name, op, memspace.ErrDeviceLost, "rank %d: rank %d could not copy into or out of its region (memory the host cannot touch)", l.c.rank, l.peer)
	}
	return r, nil
}

// chunkDone counts a chunk of r answered, and chunkWritten one written;
// the last of both completes r.
func (l *link) chunkDone(id uint64, r *oneOp) {
	l.one.mu.Lock()
	r.left--
	l.maybeFinish(id, r)
}

func (l *link) chunkWritten(id uint64, r *oneOp) {
	l.one.mu.Lock()
	r.unwritten--
	l.maybeFinish(id, r)
}

// maybeFinish completes r once every chunk is answered and written. The
// link's one.mu is held, and released.
func (l *link) maybeFinish(id uint64, r *oneOp) {
	last := r.left == 0 && r.unwritten == 0 && l.one.ops[id] == r
	if last {
		delete(l.one.ops, id)
	}
	err := r.err
	l.one.mu.Unlock()
	if !last {
		return
	}
	n := len(r.buf)
	if r.batch != nil {
		n = r.batch.bytes
	}
	if err != nil {
		l.finish(r, comm.Status{}, err)
		return
	}
	l.finish(r, comm.Status{Source: l.peer, Count: n}, nil)
}

// finish completes r, and counts it done in the batch it belongs to. A
// goroutine that waits for r reading its link itself is kicked when it
// is blocked there, as request.complete does: r may complete elsewhere —
// a Put whose answer was read before the writer was done with its
// buffer completes in the writer.
func (l *link) finish(r *oneOp, st comm.Status, err error) {
	if r.begin(st, err) {
		if w := r.direct.Load(); w != nil && w.role.atBoundary.Load() {
			w.role.kickWaiter()
		}
		r.Publish()
	}
	if r.parent != nil {
		l.childDone(r, err)
	}
}

// failOnes fails the transfers under way on a link that failed with err,
// and every one started later.
func (l *link) failOnes(err error) {
	l.one.mu.Lock()
	l.one.down = err
	ops := l.one.ops
	l.one.ops = nil
	l.one.mu.Unlock()
	for _, r := range ops {
		r.Complete(comm.Status{}, err) // a batch's parent is failed here too
	}
	l.freeLent()
}

// Flush waits until every Put and Get this rank started to rank
// (comm.AnySource: to every rank) has completed, or ctx ends. It returns
// the first error of those transfers, ErrPeerLost for a lost rank.
func (c *Comm) Flush(ctx context.Context, rank int) error {
	if ctx == nil {
		return xerr.Errorf(Name, "flush", comm.ErrInvalidArgument, "nil context")
	}
	if err := impl.CheckRank(rank, c.size, true); err != nil {
		return xerr.Op(Name, "flush", err)
	}
	var first error
	for peer, l := range c.links {
		if l == nil || (rank != comm.AnySource && peer != rank) {
			continue
		}
		l.one.mu.Lock()
		var wait []*oneOp
		for _, r := range l.one.ops {
			wait = append(wait, r)
		}
		down := l.one.down
		l.one.mu.Unlock()
		for _, r := range wait {
			if _, err := r.Wait(ctx); err != nil {
				if ctx.Err() != nil {
					return ctx.Err()
				}
				if first == nil {
					first = err
				}
			}
		}
		if down != nil && first == nil && rank != comm.AnySource {
			first = xerr.Errorf(Name, "flush", comm.ErrPeerLost, "rank %d: %w", c.rank, down)
		}
	}
	return first
}

// storeChunk reads the n bytes of a Put's chunk into the scratch of the
// link's reader and copies them into g, a region the host cannot touch,
// at off, giving g back; the status answers the chunk. A failed copy is
// answered, not the link's failure.
func (l *link) storeChunk(g *onesided.Region, off, n int) (uint32, error) {
	defer g.Done()
	if cap(l.one.scratch) < n {
		l.one.scratch = make([]byte, n)
	}
	b := l.one.scratch[:n]
	if _, err := io.ReadFull(l.rd.br, b); err != nil {
		return 0, err
	}
	// The copy is the region's space's (a device driver's), which bounds
	// it; the context is not the link's to cancel midway.
	if err := g.Store(context.Background(), off, b); err != nil {
		l.copyLogf("a Put of %d bytes at offset %d: %v", n, off, err)
		return oneFailed, nil
	}
	return oneDone, nil
}

// copyLogf logs a failed copy into or out of a region the host cannot
// touch, which the peer is told of as a failed transfer.
func (l *link) copyLogf(format string, args ...any) {
	if l.c.cfg.Logf != nil {
		l.c.cfg.Logf("procs: rank %d: serving rank %d: "+format, append([]any{l.c.rank, l.peer}, args...)...)
	}
}
