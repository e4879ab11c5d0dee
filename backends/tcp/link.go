package tcp

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/xpu-go/xpu/comm"
	"github.com/xpu-go/xpu/memspace"
)

// smallCopy is the largest eager payload copied when it cannot be written
// at once, so that its send completes at once; larger ones are written
// from the user's buffer and their send completes when written.
const smallCopy = 4 << 10

// readAhead is the size of a link's read buffer. Small frames arrive
// many to a read; a payload longer than what the buffer holds is read
// straight into its destination (bufio reads past its buffer for large
// reads), so the buffer should stay small: with 64 KiB a 64 KiB eager
// message was read into it and copied out, and a 2-rank 64 KiB allreduce
// between processes took 1.2x as long (ADR 13).
const readAhead = 4 << 10

// maxHeldRTS bounds the unmatched rendezvous announcements a rank keeps
// for one peer: a peer past it is cut for flooding.
const maxHeldRTS = 1 << 20

// errPeerClosed is the cause of a peer lost by its own Close.
var errPeerClosed = errors.New("the peer closed its communicator")

// outFrame is a frame queued for the writer: a header, maybe a payload, and
// the eager send to complete once it is written.
type outFrame struct {
	hdr     [headerSize]byte
	payload []byte
	req     *request
}

// link is the connection to one peer. A reader goroutine decodes the
// peer's frames and feeds the matching engine; a writer goroutine sends
// queued frames and streams rendezvous payloads in chunks, small frames
// first, and heartbeats when idle. A user goroutine writes its frame
// itself when nothing is queued or being written (no handoff on the fast
// path); the reader never writes, so two ranks can never block each other
// in writes.
type link struct {
	c          *Comm
	peer       int
	conn       net.Conn
	br         *bufio.Reader
	peerEager  int // largest eager message the peer accepts
	peerBudget int // eager bytes the peer holds for this rank

	// Activity counters (cheaper than reading the clock per message): the
	// monitor and the heartbeat compare them between their ticks.
	reads  atomic.Uint64 // reads that returned bytes
	writes atomic.Uint64 // writes

	// Write side, guarded by qmu.
	qmu      sync.Mutex
	queue    []*outFrame
	bulk     []*request // rendezvous sends cleared to stream, in order
	writing  bool       // a goroutine is writing to conn
	byeReq   bool       // Close asked for the goodbye
	wclosed  bool       // no frame may be queued any more
	down     error      // the link failed; set once
	eagerOut int        // eager bytes sent and not given back by the peer
	nextID   uint64
	outbound map[uint64]*request // rendezvous sends waiting for clear-to-send
	iov      [][]byte            // scratch of the goroutine writing
	wbuf     []byte              // its buffer for small writes
	chdr     [headerSize]byte    // scratch header of the data chunk written
	wake     chan struct{}

	// Read side: inbound is shared with user goroutines that match an
	// announcement (under inMu); the reader alone completes its entries.
	inMu      sync.Mutex
	inbound   map[uint64]*request // matched rendezvous receives by token
	nextToken uint64
	inDown    error
	stage     []byte         // reader's staging buffer for reductions
	stageBlk  memspace.Block // its block

	// The read role (readrole.go), guarded by rmu: who reads the socket,
	// whether a waiter asked for it, whether a kick (a read deadline in
	// the past) is set, whether the read side has ended (rDead) or must
	// end (rClosed). rWantFlag mirrors rWant for the holder's checks;
	// atBoundary is set by the holder while it waits for a frame header.
	rmu        sync.Mutex
	rOwner     int
	rWant      bool
	rKicked    bool
	rDead      bool
	rClosed    bool
	rWantFlag  atomic.Bool
	atBoundary atomic.Bool
	rGrant     chan struct{}  // the role, handed to the waiter that asked
	rWake      chan struct{}  // wakes the reader goroutine
	rwg        sync.WaitGroup // waiters holding the role
	rTaken     atomic.Int64   // times a waiter took the role
	// The contexts of waits (watchLocked): Done of the holder's context,
	// of the last wait's, and of the context whose registration is kept,
	// with the function that drops it.
	holderDone, lastDone, watchDone <-chan struct{}
	watchStop                       func() bool
	spin                            bool // the holder polls before it blocks (Config.Spin)
	raw                             syscall.RawConn

	// Guarded by c.mu: eager bytes received and not given back yet, the
	// part consumed but not yet returned, announcements held.
	eagerIn, creditDue, rtsHeld int

	failOnce sync.Once
	downErr  error         // set once, before downCh closes
	downCh   chan struct{} // closed when the link has failed
	wg       sync.WaitGroup
}

func newLink(c *Comm, peer int, conn net.Conn, h hello) *link {
	l := &link{
		c: c, peer: peer, conn: conn,
		peerEager: int(h.eager), peerBudget: int(min(h.budget, 1<<40)),
		outbound: map[uint64]*request{},
		inbound:  map[uint64]*request{},
		wake:     make(chan struct{}, 1),
		downCh:   make(chan struct{}),
		rGrant:   make(chan struct{}, 1),
		rWake:    make(chan struct{}, 1),
	}
	if l.peerEager > l.peerBudget {
		l.peerEager = l.peerBudget
	}
	l.br = bufio.NewReaderSize(liveReader{l}, readAhead)
	if sc, ok := conn.(syscall.Conn); ok && c.cfg.Spin > 0 {
		l.raw, _ = sc.SyscallConn()
	}
	return l
}

// start runs the reader and writer.
func (l *link) start() {
	l.wg.Add(2)
	go l.readLoop()
	go l.writeLoop()
}

// liveReader records when bytes last arrived, and absorbs a kick (a read
// deadline set to interrupt the holder of the read role) that lands in the
// middle of a frame: the frame is finished, and the holder yields at the
// next boundary.
type liveReader struct{ l *link }

func (r liveReader) Read(p []byte) (int, error) {
	l := r.l
	for {
		var n int
		var err error
		if l.spin {
			n, err = l.spinRead(p)
		} else {
			n, err = l.conn.Read(p)
		}
		if n > 0 {
			l.reads.Add(1)
		}
		if n == 0 && err != nil && isKicked(err) && !l.atBoundary.Load() {
			l.rmu.Lock()
			l.unkickLocked()
			l.rmu.Unlock()
			continue
		}
		return n, err
	}
}

func (l *link) kick() {
	select {
	case l.wake <- struct{}{}:
	default:
	}
}

// fail marks the link down for cause, closes the connection (which ends
// the reader and writer), fails the sends waiting for a clear-to-send and
// tells the matching engine. Only the first call has an effect.
func (l *link) fail(cause error) {
	l.failOnce.Do(func() {
		err := cause
		if !errors.Is(err, comm.ErrPeerLost) {
			err = opErr("link", fmt.Errorf("rank %d: link to rank %d: %w: %w", l.c.rank, l.peer, comm.ErrPeerLost, cause))
		}
		l.qmu.Lock()
		l.down = err
		l.downErr = err
		out := l.outbound
		l.outbound = map[uint64]*request{}
		l.qmu.Unlock()
		e := err
		if l.c.isClosed() {
			e = l.c.closedErr()
		}
		for _, r := range out {
			r.complete(comm.Status{}, e)
		}
		_ = l.conn.Close()
		l.kick()
		l.closeRead()
		close(l.downCh)
		l.c.peerDown(l.peer, err)
		if l.c.cfg.Logf != nil && !errors.Is(cause, errPeerClosed) && !l.c.isClosed() {
			l.c.cfg.Logf("tcp: rank %d lost rank %d: %v", l.c.rank, l.peer, cause)
		}
	})
}

// failed returns the link's error, nil while it is up.
func (l *link) failed() error {
	select {
	case <-l.downCh:
		return l.downErr
	default:
		return nil
	}
}

// ---- write side ----

// sendMsg starts sending data with tag on behalf of r: eagerly when the
// peer accepts it and has budget left, else by announcing it (rendezvous).
// done reports that the send has completed (written, or copied). With r
// nil it only tries: it writes the message from the calling goroutine when
// it can go eagerly and the link is idle, and otherwise does nothing and
// reports done false.
func (l *link) sendMsg(r *request, data []byte, tag int) (done bool, err error) {
	n := len(data)
	var hdr [headerSize]byte
	l.qmu.Lock()
	if err := l.writable(); err != nil {
		l.qmu.Unlock()
		return false, err
	}
	eager := n <= l.peerEager && l.eagerOut+n <= l.peerBudget
	if r == nil && !(eager && l.idleLocked()) {
		l.qmu.Unlock()
		return false, nil
	}
	var payload []byte
	if eager {
		l.eagerOut += n
		frame{typ: frameEager, tag: uint32(tag), a: uint64(n)}.encode(hdr[:])
		payload = data
	} else {
		l.nextID++
		r.id = l.nextID
		r.via = l
		r.done = make(chan struct{}) // r is shared from here
		l.outbound[r.id] = r
		frame{typ: frameRTS, tag: uint32(tag), a: uint64(n), b: r.id}.encode(hdr[:])
	}
	if l.idleLocked() {
		if err := l.writeInline(hdr[:], payload); err != nil {
			return false, err
		}
		return eager, nil
	}
	f := &outFrame{hdr: hdr, payload: payload}
	if eager {
		if n <= smallCopy {
			f.payload = append([]byte(nil), data...)
			done = true
		} else {
			r.done = make(chan struct{})
			f.req = r
		}
	}
	l.queue = append(l.queue, f)
	l.qmu.Unlock()
	l.kick()
	return done, nil
}

// sendCtl queues a control frame; inline lets a user goroutine write it
// itself when the link is idle (never the reader).
func (l *link) sendCtl(fr frame, inline bool) error {
	f := &outFrame{}
	fr.encode(f.hdr[:])
	l.qmu.Lock()
	if err := l.writable(); err != nil {
		l.qmu.Unlock()
		return err
	}
	if inline && l.idleLocked() {
		return l.writeInline(f.hdr[:], nil)
	}
	l.queue = append(l.queue, f)
	l.qmu.Unlock()
	l.kick()
	return nil
}

// writable reports why nothing can be queued; qmu is held.
func (l *link) writable() error {
	if l.wclosed {
		return l.c.closedErr()
	}
	if l.down != nil {
		return l.down
	}
	return nil
}

// idleLocked reports whether the caller may write at once: nothing queued
// or being written. qmu is held.
func (l *link) idleLocked() bool {
	return !l.writing && len(l.queue) == 0 && len(l.bulk) == 0 && !l.byeReq
}

// writeInline writes a frame (hdr and payload) from the calling
// goroutine. qmu is held on entry and released.
func (l *link) writeInline(hdr, payload []byte) error {
	l.writing = true
	l.qmu.Unlock()
	var err error
	if len(payload) <= smallWrite {
		buf := append(append(l.wbuf[:0], hdr...), payload...)
		l.wbuf = buf
		_, err = l.conn.Write(buf)
		l.writes.Add(1)
	} else {
		f := outFrame{payload: payload}
		copy(f.hdr[:], hdr)
		err = l.write([]*outFrame{&f}, nil, 0, 0, false)
	}
	l.qmu.Lock()
	l.writing = false
	more := len(l.queue) > 0 || len(l.bulk) > 0 || l.byeReq
	l.qmu.Unlock()
	if more {
		l.kick()
	}
	if err != nil {
		l.fail(err)
		return l.downErr
	}
	return nil
}

// write sends batch, then chunk [off, off+n) of a rendezvous send, then
// the goodbye, in one writev. The caller holds the writing role.
func (l *link) write(batch []*outFrame, chunk *request, off, n int, bye bool) error {
	iov := l.iov[:0]
	for _, f := range batch {
		iov = append(iov, f.hdr[:])
		if len(f.payload) > 0 {
			iov = append(iov, f.payload)
		}
	}
	if chunk != nil {
		frame{typ: frameData, a: uint64(n), b: chunk.token, c: uint64(off)}.encode(l.chdr[:])
		iov = append(iov, l.chdr[:], chunk.buf[off:off+n])
	}
	var byeHdr [headerSize]byte
	if bye {
		frame{typ: frameBye}.encode(byeHdr[:])
		iov = append(iov, byeHdr[:])
	}
	var err error
	if total := iovLen(iov); total <= smallWrite {
		// One copy and a plain write cost less than a writev here.
		buf := l.wbuf[:0]
		for _, b := range iov {
			buf = append(buf, b...)
		}
		l.wbuf = buf
		_, err = l.conn.Write(buf)
	} else {
		bufs := net.Buffers(iov)
		_, err = bufs.WriteTo(l.conn)
	}
	clear(iov)
	l.iov = iov[:0]
	l.writes.Add(1)
	return err
}

// smallWrite is the largest write gathered into one buffer rather than
// written with writev.
const smallWrite = 4 << 10

func iovLen(iov [][]byte) int {
	n := 0
	for _, b := range iov {
		n += len(b)
	}
	return n
}

// writeLoop flushes the queue whenever woken, and sends a heartbeat when
// the link has been quiet for a heartbeat interval.
func (l *link) writeLoop() {
	defer l.wg.Done()
	// Every half heartbeat, a heartbeat goes out if nothing did since
	// the last tick: at most a heartbeat interval passes between writes.
	half := max(l.c.cfg.Heartbeat/2, time.Millisecond)
	t := time.NewTimer(half)
	defer t.Stop()
	seen := l.writes.Load()
	for {
		if !l.flush() {
			return
		}
		select {
		case <-l.wake:
		case <-t.C:
			if w := l.writes.Load(); w == seen {
				_ = l.sendCtl(frame{typ: frameHeartbeat}, false)
				seen = l.writes.Load()
			} else {
				seen = w
			}
			t.Reset(half)
		}
	}
}

// flush writes what is queued: all small frames, then one chunk of the
// first rendezvous stream, and again, so small frames wait at most one
// chunk. It returns false when the writer should end (the link failed or
// the goodbye was sent).
func (l *link) flush() bool {
	for {
		l.qmu.Lock()
		if l.down != nil {
			q, b, err := l.queue, l.bulk, l.down
			l.queue, l.bulk = nil, nil
			l.qmu.Unlock()
			failFrames(q, err)
			failReqs(b, err)
			return false
		}
		if l.writing {
			l.qmu.Unlock()
			return true
		}
		bye := l.byeReq
		if len(l.queue) == 0 && len(l.bulk) == 0 && !bye {
			l.qmu.Unlock()
			return true
		}
		batch := l.queue
		l.queue = nil
		var chunk *request
		var off, n int
		last := false
		var dropped []*request
		if bye {
			dropped, l.bulk = l.bulk, nil
		} else if len(l.bulk) > 0 {
			chunk = l.bulk[0]
			off = chunk.sent
			n = min(l.c.cfg.Chunk, chunk.accept-off)
			chunk.sent += n
			if chunk.sent == chunk.accept {
				l.bulk[0] = nil
				l.bulk = l.bulk[1:]
				last = true
			}
		}
		l.writing = true
		l.qmu.Unlock()
		failReqs(dropped, l.c.closedErr())
		err := l.write(batch, chunk, off, n, bye)
		l.qmu.Lock()
		l.writing = false
		l.qmu.Unlock()
		if err != nil {
			l.fail(err)
			failFrames(batch, l.downErr)
			if last {
				chunk.complete(comm.Status{}, l.downErr)
			}
			continue
		}
		for _, f := range batch {
			if f.req != nil {
				f.req.complete(sendStatus(f.req), nil)
			}
		}
		if last {
			chunk.complete(sendStatus(chunk), nil)
		}
		if bye {
			if tc, ok := l.conn.(interface{ CloseWrite() error }); ok {
				_ = tc.CloseWrite()
			}
			return false
		}
	}
}

func sendStatus(r *request) comm.Status {
	return comm.Status{Source: r.peer, Tag: r.tag, Count: len(r.buf)}
}

func failFrames(fs []*outFrame, err error) {
	for _, f := range fs {
		if f.req != nil {
			f.req.complete(comm.Status{}, err)
		}
	}
}

func failReqs(rs []*request, err error) {
	for _, r := range rs {
		r.complete(comm.Status{}, err)
	}
}

// bye asks the writer to send what is queued and the goodbye, then close
// its side. Rendezvous sends not yet streamed fail with ErrClosed.
func (l *link) bye() {
	l.qmu.Lock()
	if l.wclosed {
		l.qmu.Unlock()
		return
	}
	l.wclosed = true
	l.byeReq = true
	out := l.outbound
	l.outbound = map[uint64]*request{}
	l.qmu.Unlock()
	failReqs(mapValues(out), l.c.closedErr())
	l.kick()
}

func mapValues(m map[uint64]*request) []*request {
	out := make([]*request, 0, len(m))
	for _, r := range m {
		out = append(out, r)
	}
	return out
}

// cancelSend asks the peer to withdraw the announcement of r, if r still
// waits for its clear-to-send.
func (l *link) cancelSend(r *request) {
	l.qmu.Lock()
	if l.outbound[r.id] != r || r.cancelReq || l.writable() != nil {
		l.qmu.Unlock()
		return
	}
	r.cancelReq = true
	f := &outFrame{}
	frame{typ: frameCancel, b: r.id}.encode(f.hdr[:])
	l.queue = append(l.queue, f)
	l.qmu.Unlock()
	l.kick()
}

// ---- read side ----

// registerInbound gives r a token under which the peer streams its data.
func (l *link) registerInbound(r *request) (uint64, error) {
	l.inMu.Lock()
	defer l.inMu.Unlock()
	if l.inDown != nil {
		return 0, l.inDown
	}
	l.nextToken++
	l.inbound[l.nextToken] = r
	return l.nextToken, nil
}

func protoErr(format string, args ...any) error {
	return fmt.Errorf("%w: "+format, append([]any{ErrProtocol}, args...)...)
}

// onEager takes an eager message of n bytes: straight into a matching
// posted receive, else into a private buffer on the unexpected queue.
func (l *link) onEager(tag, n int) error {
	c := l.c
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return l.discard(n)
	}
	if l.eagerIn+n > c.lim.budget {
		c.mu.Unlock()
		return protoErr("rank %d sent %d eager bytes beyond the budget of %d", l.peer, l.eagerIn+n-c.lim.budget, c.lim.budget)
	}
	l.eagerIn += n
	r := c.tbl.TakePosted(l.peer, tag)
	if r != nil {
		// The message goes straight into r, never held: its bytes are
		// given back at once.
		c.consumed(l, n)
	}
	c.mu.Unlock()
	if r != nil {
		k := min(n, len(r.buf))
		if err := l.readInto(r, 0, k); err != nil {
			r.complete(comm.Status{}, l.lostErr(err))
			return err
		}
		if err := l.discard(n - k); err != nil {
			r.complete(comm.Status{}, l.lostErr(err))
			return err
		}
		r.complete(recvOutcome(c.rank, l.peer, tag, n, k))
		return nil
	}
	buf, h := getBuf(n)
	if _, err := io.ReadFull(l.br, buf); err != nil {
		putBuf(h)
		return err
	}
	m := &request{c: c, kind: kindEagerMsg, peer: l.peer, tag: tag, buf: buf, pooled: h, via: l}
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		putBuf(h)
		return nil
	}
	if r := c.tbl.TakePosted(l.peer, tag); r != nil {
		c.consumed(l, n)
		c.mu.Unlock()
		r.complete(deliverMsg(r, m))
		putBuf(h)
		return nil
	}
	c.enqueue(m)
	c.mu.Unlock()
	return nil
}

// lostErr is the error of a request the reader abandons on err.
func (l *link) lostErr(err error) error {
	if l.c.isClosed() {
		return l.c.closedErr()
	}
	return opErr("recv", fmt.Errorf("rank %d: link to rank %d: %w: %w", l.c.rank, l.peer, comm.ErrPeerLost, err))
}

// discard reads and drops n payload bytes.
func (l *link) discard(n int) error {
	_, err := l.br.Discard(n)
	return err
}

// readInto reads n payload bytes into r at offset off: a copy, or a fold
// for a reducing receive. Long reads go in pieces so that the link stays
// alive while a slow one lasts.
func (l *link) readInto(r *request, off, n int) error {
	const piece = 256 << 10
	if r.red == nil {
		for n > 0 {
			k := min(n, piece)
			if _, err := io.ReadFull(l.br, r.buf[off:off+k]); err != nil {
				return err
			}
			off, n = off+k, n-k
		}
		return nil
	}
	if l.stage == nil {
		l.stage = make([]byte, 64<<10)
		b, _ := memspace.FromSlice(l.stage)
		l.stageBlk = b.Block()
	}
	for n > 0 {
		k := min(n, len(l.stage))
		if _, err := io.ReadFull(l.br, l.stage[:k]); err != nil {
			return err
		}
		if err := r.red.fold(off, l.stageBlk, k); err != nil {
			return err
		}
		off, n = off+k, n-k
	}
	return nil
}

// fold computes dst[off:off+k] = in[:k] op own[off:off+k].
func (red *reduction) fold(off int, in memspace.Block, k int) error {
	d, err1 := red.dst.Slice(off, k)
	o, err2 := red.own.Slice(off, k)
	x, err3 := in.Slice(0, k)
	if err := errors.Join(err1, err2, err3); err != nil {
		return err
	}
	return comm.ReduceLocal(d, x, o, red.dt, red.op)
}

// onRTS takes an announcement: matched to a posted receive, it is answered
// with a clear-to-send; else it waits on the unexpected queue.
func (l *link) onRTS(tag, size int, id uint64) error {
	c := l.c
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return nil
	}
	if l.rtsHeld >= maxHeldRTS {
		c.mu.Unlock()
		return protoErr("rank %d announced over %d unmatched messages", l.peer, maxHeldRTS)
	}
	r := c.tbl.TakePosted(l.peer, tag)
	if r == nil {
		c.enqueue(&request{c: c, kind: kindRTSMsg, peer: l.peer, tag: tag, id: id, size: size, via: l})
		c.mu.Unlock()
		return nil
	}
	c.mu.Unlock()
	l.acceptRdv(r, tag, id, size, false)
	return nil
}

// acceptRdv answers the announcement id (size bytes with tag) for the
// receive r with a clear-to-send for what fits in r.
func (l *link) acceptRdv(r *request, tag int, id uint64, size int, inline bool) {
	r.peer, r.tag, r.size = l.peer, tag, size
	r.accept = min(size, len(r.buf))
	if r.accept == 0 {
		_ = l.sendCtl(frame{typ: frameCTS, b: id}, inline)
		r.complete(recvOutcome(l.c.rank, l.peer, tag, size, 0))
		return
	}
	token, err := l.registerInbound(r)
	if err != nil {
		r.complete(comm.Status{}, err)
		return
	}
	// A failure to queue means the link is down: the reader then fails r.
	_ = l.sendCtl(frame{typ: frameCTS, a: uint64(r.accept), b: id, c: token}, inline)
}

func (l *link) onCTS(accept int, id, token uint64) error {
	l.qmu.Lock()
	r := l.outbound[id]
	if r == nil {
		l.qmu.Unlock()
		if l.c.isClosed() {
			return nil
		}
		return protoErr("clear-to-send for unknown message %d", id)
	}
	if accept > len(r.buf) {
		l.qmu.Unlock()
		return protoErr("clear-to-send for %d bytes of a %d-byte message", accept, len(r.buf))
	}
	delete(l.outbound, id)
	r.token, r.accept = token, accept
	if accept == 0 {
		l.qmu.Unlock()
		r.complete(sendStatus(r), nil)
		return nil
	}
	l.bulk = append(l.bulk, r)
	l.qmu.Unlock()
	l.kick()
	return nil
}

func (l *link) onData(n int, token uint64, off int) error {
	l.inMu.Lock()
	r := l.inbound[token]
	l.inMu.Unlock()
	if r == nil {
		return protoErr("data for unknown token %d", token)
	}
	if off != r.got || n > r.accept-r.got {
		return protoErr("data [%d, %d) of a message expecting offset %d of %d", off, off+n, r.got, r.accept)
	}
	if err := l.readInto(r, off, n); err != nil {
		return err
	}
	r.got += n
	if r.got == r.accept {
		l.inMu.Lock()
		delete(l.inbound, token)
		l.inMu.Unlock()
		r.complete(recvOutcome(l.c.rank, r.peer, r.tag, r.size, r.accept))
	}
	return nil
}

// onCancel withdraws the announcement id if no receive has matched it.
func (l *link) onCancel(id uint64) {
	c := l.c
	c.mu.Lock()
	var found *request
	for m := range c.tbl.UnexpectedFrom(l.peer) {
		if m.kind == kindRTSMsg && m.id == id {
			found = m
			break
		}
	}
	if found != nil {
		c.unqueue(found)
	}
	c.mu.Unlock()
	if found != nil {
		_ = l.sendCtl(frame{typ: frameCanceled, b: id}, false)
	}
}

func (l *link) onCanceled(id uint64) error {
	l.qmu.Lock()
	r := l.outbound[id]
	if r == nil || !r.cancelReq {
		l.qmu.Unlock()
		if l.c.isClosed() {
			return nil
		}
		return protoErr("cancel confirmed for message %d, which asked none", id)
	}
	delete(l.outbound, id)
	l.qmu.Unlock()
	r.complete(comm.Status{}, opErr("send", fmt.Errorf("rank %d: %w", l.c.rank, comm.ErrCanceled)))
	return nil
}

func (l *link) onCredit(n int) error {
	l.qmu.Lock()
	defer l.qmu.Unlock()
	if n > l.eagerOut {
		return protoErr("credit of %d bytes where %d are outstanding", n, l.eagerOut)
	}
	l.eagerOut -= n
	return nil
}

// recvOutcome is the status of a receive of a size-byte message from src
// of which k bytes were taken, with ErrTruncated when k < size.
func recvOutcome(rank, src, tag, size, k int) (comm.Status, error) {
	st := comm.Status{Source: src, Tag: tag, Count: k}
	if k < size {
		return st, opErr("recv", fmt.Errorf("rank %d: %d-byte message from %d tag %d into a %d-byte buffer: %w",
			rank, size, src, tag, k, comm.ErrTruncated))
	}
	return st, nil
}
