package procs

import (
	"bufio"
	"cmp"
	"errors"
	"io"
	"net"
	"sync"
	"syscall"

	"github.com/xpu-go/xpu/comm"
	"github.com/xpu-go/xpu/internal/join"
	"github.com/xpu-go/xpu/internal/p2p"
	"github.com/xpu-go/xpu/internal/rankevent"
	"github.com/xpu-go/xpu/internal/shm"
	"github.com/xpu-go/xpu/xerr"
)

// smallCopy is the largest eager payload copied when it cannot be written
// at once, so that its send completes at once; larger ones are written
// from the user's buffer and their send completes when written.
const smallCopy = 4 << 10

// maxHeldRTS bounds the unmatched rendezvous announcements a rank keeps
// for one peer: a peer past it is cut for flooding.
const maxHeldRTS = 1 << 20

// errPeerClosed is the cause of a peer lost by its own Close.
var errPeerClosed = errors.New("the peer closed its communicator")

// link is the connection to one peer: the protocol of the frames it
// carries (sendMsg, step and the frame handlers) over four parts, each
// with its own lock:
//
//   - w, the writer (writer.go): frames out, written by the goroutine that
//     sends when the link is idle, else queued for the writer goroutine;
//     rendezvous sends waiting for their clear-to-send or streaming;
//   - rd, the reader (reader.go): the socket's frames in, and rendezvous
//     receives streaming;
//   - role, the read role (readrole.go): which goroutine reads the socket,
//     the reader goroutine or one that waits for a receive from this peer;
//   - credit (credit.go): eager flow control, both ways.
//
// The reader goroutine and the writer goroutine run from start until the
// link fails. The failure is recorded once (failOnce): downErr is set
// before downCh closes; the other fields are set before the link starts.
type link struct {
	c    *Comm
	peer int
	conn net.Conn
	shm  *shm.Conn // conn, when the link goes through shared memory

	w      writer
	rd     reader
	role   readRole
	credit credit
	cma    cmaLink    // single copies from the peer's memory (cma.go)
	one    oneLink    // one-sided transfers this rank started (onesided.go)
	dir    directLink // the directories of direct one-sided transfers (onesided_direct.go)
	ipc    ipcLink    // device blocks through the peer's mapping (ipc.go)

	failOnce sync.Once
	downErr  error         // why the link failed
	downCh   chan struct{} // closed when the link has failed
	wg       sync.WaitGroup
}

func newLink(c *Comm, peer int, conn net.Conn, h join.Terms) *link {
	l := &link{c: c, peer: peer, conn: conn, downCh: make(chan struct{})}
	l.shm, _ = conn.(*shm.Conn)
	l.w = writer{
		conn: conn, chunk: c.cfg.Chunk, heartbeat: c.cfg.Heartbeat, closedErr: c.closedErr(),
		wake:      make(chan struct{}, 1),
		announced: map[uint64]*request{},
	}
	l.w.quiet.L = &l.w.mu
	l.ipc.idle.L = &l.ipc.mu
	if l.shm != nil {
		l.w.room = l.shm.Room
		l.cma.pid = l.shm.PeerPID()
		l.cma.min = cmp.Or(c.cfg.singleCopyMin, cmaMin)
		// Frames of a quarter of the ring: the sender copies one in while
		// the receiver copies the one before out (a frame of the whole
		// ring waits for it to drain: 2.7 against 7.5 GB/s at 1 MiB; a
		// half makes a 128 KiB message wait for its one frame, 32 against
		// 27 us; an eighth costs bandwidth in frames).
		l.w.chunk = min(l.w.chunk, l.shm.RingSize()/4)
		l.startDirect()
	}
	l.w.lost = func(err error) error {
		l.fail(err)
		return l.downErr
	}
	l.rd = reader{inbound: map[uint64]*request{}}
	l.rd.br = bufio.NewReaderSize(liveReader{l}, readAhead)
	if sc, ok := conn.(syscall.Conn); ok && c.cfg.Spin > 0 {
		l.rd.raw, _ = sc.SyscallConn()
	}
	l.role = readRole{conn: conn, parked: &c.parked, ending: &c.shut, grant: make(chan struct{}, 1), wake: make(chan struct{}, 1),
		idle: cmp.Or(c.cfg.idleCheck, idleCheck)}
	l.role.released.L = &l.role.mu
	l.credit = credit{peerLimit: int(h.Limit), peerBudget: int(min(h.Budget, MaxEagerBudget)), budget: c.lim.budget}
	if l.credit.peerLimit > l.credit.peerBudget {
		l.credit.peerLimit = l.credit.peerBudget
	}
	return l
}

// start runs the reader goroutine and the writer goroutine.
func (l *link) start() {
	l.wg.Add(2)
	go l.readLoop()
	go func() {
		defer l.wg.Done()
		l.w.loop()
	}()
}

// fail marks the link down for cause, closes the connection (which ends
// the reader and writer), fails the sends waiting for a clear-to-send and
// tells the matching engine. Only the first call has an effect.
func (l *link) fail(cause error) {
	l.failOnce.Do(func() {
		if !l.c.shut.Load() {
			// For the launcher, before anything fails of it: the rank
			// lost this peer while it still had it (ADR 38).
			rankevent.PeerDown(l.c.rank, l.peer, errors.Is(cause, errPeerClosed), cause)
		}
		err := cause
		if !errors.Is(err, comm.ErrPeerLost) {
			err = xerr.Errorf(Name, "link", comm.ErrPeerLost, "rank %d: link to rank %d: %w", l.c.rank, l.peer, cause)
		}
		l.w.mu.Lock()
		l.w.down = err
		l.downErr = err
		out := l.w.announced
		l.w.announced = map[uint64]*request{}
		l.w.mu.Unlock()
		// The connection closes first: a peer copying a send's buffer
		// (single copy) sees the link down before the buffer is reused.
		_ = l.conn.Close()
		e := err
		if l.c.isClosed() {
			e = l.c.closedErr()
		}
		for _, r := range out {
			r.complete(comm.Status{}, e)
		}
		l.failOnes(e)
		l.ipcDown()
		l.w.kick()
		l.role.close()
		close(l.downCh)
		l.c.peerDown(l.peer, err)
		if l.c.cfg.Logf != nil && !errors.Is(cause, errPeerClosed) && !l.c.isClosed() {
			l.c.cfg.Logf("tcp: rank %d lost rank %d: %v", l.c.rank, l.peer, cause)
		}
	})
}

// release waits until nothing reads or writes a link that has failed —
// its reader and writer goroutines have ended, no waiter holds its read
// role (a failed link's role goes to none), no write is under way (none
// starts on a failed link) — and then unmaps its segment if it goes
// through shared memory. Close calls it; the segment of a link never
// released goes with the link, once the collector finds its connection
// unreachable.
func (l *link) release() {
	l.wg.Wait()
	l.role.awaitHolder()
	l.awaitIPC()
	if l.shm != nil {
		l.w.awaitQuiet()
		l.stopDirect()
		_ = l.shm.Unmap()
	}
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

// closing reports whether the link has failed.
func (l *link) closing() bool { return l.failed() != nil }

// sendMsg starts sending data with tag on behalf of r: eagerly when the
// peer accepts it and has budget left, else by announcing it (rendezvous).
// done reports that the send has completed (written, or copied). With r
// nil it only tries: it writes the message from the calling goroutine when
// it can go eagerly and the link is idle, and otherwise does nothing and
// reports done false.
func (l *link) sendMsg(r *request, data []byte, tag int) (done bool, err error) {
	n := len(data)
	var hdr [headerSize]byte
	l.w.mu.Lock()
	if err := l.w.writable(); err != nil {
		l.w.mu.Unlock()
		return false, err
	}
	eager := l.credit.fits(n)
	if eager && l.shm != nil && n <= smallWrite && l.w.idleLocked() {
		// An idle shared-memory link takes a small frame as one record,
		// its header and payload copied into the ring in place.
		if sent, err := l.w.writeEager(l.shm, tag, data); sent || err != nil {
			if sent {
				l.credit.out += n
			}
			l.w.mu.Unlock()
			l.w.noteWrite()
			if err != nil {
				return false, l.w.lost(err)
			}
			return true, nil
		}
		// No room: as any frame that would wait.
	}
	size := headerSize
	if eager {
		size += n
	}
	inline := l.w.inlineLocked(size)
	if r == nil && !(eager && inline) {
		l.w.mu.Unlock()
		return false, nil
	}
	var payload []byte
	if eager {
		l.credit.out += n
		frame{typ: frameEager, tag: uint32(tag), a: uint64(n)}.encode(hdr[:])
		payload = data
	} else {
		l.w.nextID++
		r.id = l.w.nextID
		r.via = l
		r.addr = l.announceAddr(data)
		l.w.announced[r.id] = r
		frame{typ: frameRTS, tag: uint32(tag), a: uint64(n), b: r.id, c: r.addr}.encode(hdr[:])
	}
	if inline {
		if err := l.w.writeInline(hdr[:], payload); err != nil {
			return false, err
		}
		if !eager {
			l.role.wakeReader()
		}
		return eager, nil
	}
	f := &outFrame{hdr: hdr, payload: payload}
	if eager {
		if n <= smallCopy {
			f.payload = append([]byte(nil), data...)
			done = true
		} else {
			f.req = r
		}
	}
	l.w.queue = append(l.w.queue, f)
	l.w.mu.Unlock()
	l.w.kick()
	if !eager {
		// The answer to the announcement (clear-to-send, or pulled) must
		// be read while the sender's goroutine may wait on another link:
		// a ring's rank waits for its left neighbour while its sends to
		// the right await their answers. Unread, they waited for the
		// reader goroutine's idle check (50 ms a message).
		l.role.wakeReader()
	}
	return done, nil
}

// step reads and handles one frame. It returns yield when a kick
// interrupted the read at a frame boundary, before any byte of the frame
// was consumed, or when the receive r the caller waits for (nil for the
// reader goroutine) has completed; a kick in the middle of a frame is
// absorbed (liveReader) and the frame finished.
func (l *link) step(r *p2p.Done) (yield bool, err error) {
	// A goroutine that completes r kicks the holder if it finds it at a
	// boundary: with the check of r after the flag is set, either the
	// holder sees r completed or the completer sees the flag.
	// (Swap: a store then a load needs a full fence, which Store is not
	// under the race detector.)
	l.role.atBoundary.Swap(true)
	if r != nil && r.Finishing() {
		l.role.atBoundary.Store(false)
		return true, nil
	}
	if l.shm != nil && l.rd.br.Buffered() == 0 {
		if handled, yield, err := l.stepRecord(); handled {
			return yield, err
		}
	}
	hdr, err := l.rd.br.Peek(headerSize)
	l.role.atBoundary.Store(false)
	if err != nil {
		if isKicked(err) {
			return true, nil
		}
		return false, err
	}
	shm.RaceAcquire() // after what the writer of any link of this process did before it
	f, err := decodeFrame(hdr, l.c.lim)
	if err != nil {
		return false, err
	}
	if _, err := l.rd.br.Discard(headerSize); err != nil {
		return false, err
	}
	switch f.typ {
	case frameEager:
		err = l.onEager(int(f.tag), int(f.a))
	case frameRTS:
		err = l.onRTS(int(f.tag), int(f.a), f.b, f.c)
	case frameCTS:
		err = l.onCTS(int(f.a), f.b, f.c)
	case frameData:
		err = l.onData(int(f.a), f.b, int(f.c))
	case frameCancel:
		l.onCancel(f.b)
	case frameCanceled:
		err = l.onCanceled(f.b)
	case frameCredit:
		err = l.onCredit(int(f.a))
	case frameHeartbeat:
	case frameAbort:
		l.c.abortColl(f.a, l.peer, nil)
	case frameBye:
		return false, errPeerClosed
	case framePulled:
		err = l.onPulled(int(f.a), f.b)
	case framePut:
		err = l.onPut(int(f.a), f.b, f.c)
	case frameGet:
		err = l.onGet(int(f.a), f.b, f.c)
	case frameOneDone:
		err = l.onOneDone(f.tag, int(f.a), f.b)
	case frameOneData:
		err = l.onOneData(f.tag, int(f.a), f.b)
	case framePutFrom:
		err = l.onPutFrom(int(f.a), f.b, f.c)
	case frameGetAddr:
		err = l.onGetAddr(int(f.a), f.b, f.c)
	case frameOneAddr:
		err = l.onOneAddr(f.tag, int(f.a), f.b, f.c)
	case frameOneFree:
		err = l.onOneFree(f.b)
	case frameNotify:
		err = l.onNotify(int(f.a))
	case frameBatch:
		err = l.onBatch(f.tag, int(f.a), f.b)
	case frameBatchDone:
		err = l.onBatchDone(f.tag, int(f.a), f.b)
	case frameBatchData:
		err = l.onBatchData(int(f.a), f.b)
	case frameIPC:
		err = l.onIPC(int(f.tag), int(f.a), f.b, int(f.c))
	case frameIPCDone:
		err = l.onIPCDone(f.tag, int(f.a), f.b)
	case frameOneIPC:
		err = l.onOneIPCFrame(int(f.a), f.b, int(f.c))
	case frameForget:
		err = l.onForget(int(f.a))
	}
	return false, err
}

// stepRecord is step on a shared-memory link whose buffered reader holds
// nothing: it waits for the ring's next record and, when the record is
// one eager frame and nothing else, takes the message from the ring in
// place (onEagerRecord) — no copy into the buffered reader, one copy into
// the receive. handled is false for any other record, which the caller
// then reads through the buffered reader as usual, from the same first
// byte (Next consumes nothing). The caller set atBoundary.
func (l *link) stepRecord() (handled, yield bool, err error) {
	a, b, err := l.shm.Next()
	l.role.atBoundary.Store(false)
	if err != nil {
		if isKicked(err) {
			return true, true, nil
		}
		return true, false, protocolErr(err)
	}
	l.rd.hear()
	tag, n, whole := eagerRecord(a, b, l.c.lim)
	if !whole {
		return false, false, nil
	}
	return true, false, l.onEagerRecord(tag, n, a[headerSize:], b, nil)
}

// onEagerRecord is onEager for a message of n bytes that lies in the
// ring, in p and q (stepRecord, and the lane's poll): it is copied (or
// folded) from there once, and the record freed. lane, when not nil, is
// the receive of the lane reading the ring (lane.go), which takes the
// message when no posted receive does.
func (l *link) onEagerRecord(tag, n int, p, q []byte, lane *laneRecv) error {
	c := l.c
	r, mine, closed, err := l.matchEager(tag, n, lane)
	if err != nil {
		return err
	}
	if closed {
		l.shm.Consume()
		return nil
	}
	if mine {
		l.deliverLane(lane, tag, n)
		return nil
	}
	if r != nil {
		if r.dev != nil {
			r.dev.standIn(r, n)
		}
		k := min(n, len(r.buf))
		err := l.rd.fromRecord(r, p, q, k)
		l.shm.Consume()
		if err != nil {
			r.complete(comm.Status{}, l.lostErr(err))
			return err
		}
		r.complete(p2p.Outcome(Name, c.rank, l.peer, tag, n, k))
		return nil
	}
	buf, h := getBuf(n)
	shm.Gather(buf, p, q, 0)
	l.shm.Consume()
	return l.holdEager(&request{c: c, kind: kindEagerMsg, peer: l.peer, tag: tag, buf: buf, pooled: h, via: l}, n)
}

// matchEager counts an eager message of n bytes with tag against this
// rank's budget and matches it, under the communicator's lock: to the
// posted receive r, else to the lane's receive (mine; lane may be nil),
// else to neither, and the caller holds it as unexpected. A message that
// goes straight into a receive is never held: its bytes are given back at
// once. closed reports a closed rank, which drops the message; err a peer
// past its budget.
func (l *link) matchEager(tag, n int, lane *laneRecv) (r *request, mine, closed bool, err error) {
	c := l.c
	c.mu.Lock()
	switch {
	case c.closed:
		closed = true
	case !l.credit.receive(n):
		err = l.credit.overBudget(l.peer, n)
	default:
		r = c.tbl.TakePosted(l.peer, tag)
		mine = r == nil && lane.takes(tag)
		if r != nil || mine {
			l.consumed(n)
		}
	}
	c.mu.Unlock()
	return r, mine, closed, err
}

// onEager takes an eager message of n bytes: straight into a matching
// posted receive, else into a private buffer on the unexpected queue.
func (l *link) onEager(tag, n int) error {
	c := l.c
	r, _, closed, err := l.matchEager(tag, n, nil)
	if err != nil {
		return err
	}
	if closed {
		return l.rd.discard(n)
	}
	if r != nil {
		if r.dev != nil {
			r.dev.standIn(r, n)
		}
		k := min(n, len(r.buf))
		if err := l.rd.readInto(r, 0, k); err != nil {
			r.complete(comm.Status{}, l.lostErr(err))
			return err
		}
		if err := l.rd.discard(n - k); err != nil {
			r.complete(comm.Status{}, l.lostErr(err))
			return err
		}
		r.complete(p2p.Outcome(Name, c.rank, l.peer, tag, n, k))
		return nil
	}
	buf, h := getBuf(n)
	if _, err := io.ReadFull(l.rd.br, buf); err != nil {
		putBuf(h)
		return err
	}
	return l.holdEager(&request{c: c, kind: kindEagerMsg, peer: l.peer, tag: tag, buf: buf, pooled: h, via: l}, n)
}

// holdEager queues the eager message m, read into a buffer of its own, as
// unexpected — unless a receive for it was posted meanwhile, which then
// takes it.
func (l *link) holdEager(m *request, n int) error {
	c := l.c
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		putBuf(m.pooled)
		return nil
	}
	if r := c.tbl.TakePosted(l.peer, m.tag); r != nil {
		l.consumed(n)
		c.mu.Unlock()
		r.complete(deliverMsg(r, m))
		putBuf(m.pooled)
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
	return xerr.Errorf(Name, "recv", comm.ErrPeerLost, "rank %d: link to rank %d: %w", l.c.rank, l.peer, err)
}

// onRTS takes an announcement (of size bytes at addr in the peer, 0 when
// it carries no address): matched to a posted receive, it is copied from
// the peer (cma.go) or answered with a clear-to-send; else it waits on
// the unexpected queue.
func (l *link) onRTS(tag, size int, id, addr uint64) error {
	if err := l.checkAddr(addr, size); err != nil {
		return err
	}
	c := l.c
	r, err := l.matchAnnounced(tag, func() {
		if l.pullable(addr) {
			// Kept before the announcement can be matched.
			l.hold(id, addr)
		}
		c.enqueue(&request{c: c, kind: kindRTSMsg, peer: l.peer, tag: tag, id: id, size: size, via: l})
	})
	if r == nil || err != nil {
		return err
	}
	return l.accept(r, tag, id, size, addr, false)
}

// matchAnnounced takes an announcement of the peer with tag (onRTS,
// onIPC): it returns the posted receive the announcement matches, or nil
// once queue, under the communicator's lock, has put it on the unexpected
// queue — or dropped it, on a closed rank. A peer that keeps more than
// maxHeldRTS announcements unmatched breaks the protocol.
func (l *link) matchAnnounced(tag int, queue func()) (*request, error) {
	c := l.c
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return nil, nil
	}
	if l.credit.rtsHeld >= maxHeldRTS {
		return nil, xerr.Detail(ErrProtocol, "rank %d announced over %d unmatched messages", l.peer, maxHeldRTS)
	}
	r := c.tbl.TakePosted(l.peer, tag)
	if r == nil {
		queue()
	}
	return r, nil
}

// acceptRdv answers the announcement id (size bytes with tag), taken from
// the unexpected queue, for the receive r, as accept does.
func (l *link) acceptRdv(r *request, tag int, id uint64, size int, inline bool) {
	var addr uint64
	if l.cma.pid != 0 {
		addr = l.unhold(id)
	}
	// An error has failed the link, and r.
	_ = l.accept(r, tag, id, size, addr, inline)
}

// accept answers the announcement id (size bytes with tag, at addr in the
// peer or 0) for the receive r: it copies what fits in r from the peer's
// memory when it can, else answers with a clear-to-send for it. It
// returns the error that failed the link, if any.
func (l *link) accept(r *request, tag int, id uint64, size int, addr uint64, inline bool) error {
	r.Flight.Matched()
	r.peer, r.tag, r.size = l.peer, tag, size
	if r.dev != nil {
		r.dev.standIn(r, size)
	}
	r.accept = min(size, len(r.buf))
	if r.accept == 0 {
		_ = l.w.sendCtl(frame{typ: frameCTS, b: id}, inline)
		r.complete(p2p.Outcome(Name, l.c.rank, l.peer, tag, size, 0))
		return nil
	}
	if l.pullable(addr) {
		if handled, err := l.pull(r, id, addr, inline); handled {
			return err
		}
	}
	token, err := l.rd.register(r)
	if err != nil {
		r.complete(comm.Status{}, err)
		return nil
	}
	// A failure to queue means the link is down: the reader then fails r.
	_ = l.w.sendCtl(frame{typ: frameCTS, a: uint64(r.accept), b: id, c: token}, inline)
	return nil
}

// announcedLocked returns the send id announced on l, which an answer of
// the peer (what: "clear-to-send") names, with w.mu held. When there is
// none it releases w.mu and returns nil and the error of the answer:
// ErrProtocol, or nil once this rank is closing (its sends are settled).
func (l *link) announcedLocked(id uint64, what string) (*request, error) {
	l.w.mu.Lock()
	if r := l.w.announced[id]; r != nil {
		return r, nil
	}
	l.w.mu.Unlock()
	if l.c.isClosed() {
		return nil, nil
	}
	return nil, xerr.Detail(ErrProtocol, "%s for unknown message %d", what, id)
}

func (l *link) onCTS(accept int, id, token uint64) error {
	r, err := l.announcedLocked(id, "clear-to-send")
	if r == nil {
		return err
	}
	if r.dev != nil && r.dev.ipc {
		// Announced by description: the receiver cannot map it.
		return l.refusedIPC(r, accept, id, token)
	}
	if accept > len(r.buf) {
		l.w.mu.Unlock()
		return xerr.Detail(ErrProtocol, "clear-to-send for %d bytes of a %d-byte message", accept, len(r.buf))
	}
	delete(l.w.announced, id)
	r.Flight.Matched()
	r.token, r.accept = token, accept
	if accept == 0 {
		l.w.mu.Unlock()
		r.complete(r.sendStatus(), nil)
		return nil
	}
	if l.w.closed {
		// A send announced with an address outlives the goodbye (bye),
		// but no data may follow it.
		l.w.mu.Unlock()
		r.complete(comm.Status{}, l.w.closedErr)
		return nil
	}
	l.w.bulk = append(l.w.bulk, r)
	l.w.mu.Unlock()
	l.w.kick()
	return nil
}

func (l *link) onData(n int, token uint64, off int) error {
	r := l.rd.lookup(token)
	if r == nil {
		return xerr.Detail(ErrProtocol, "data for unknown token %d", token)
	}
	if off != r.got || n > r.accept-r.got {
		return xerr.Detail(ErrProtocol, "data [%d, %d) of a message expecting offset %d of %d", off, off+n, r.got, r.accept)
	}
	if err := l.rd.readInto(r, off, n); err != nil {
		return err
	}
	r.got += n
	if r.got == r.accept {
		l.rd.unregister(token)
		r.complete(p2p.Outcome(Name, l.c.rank, r.peer, r.tag, r.size, r.accept))
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
		if l.cma.pid != 0 {
			l.unhold(id)
		}
		_ = l.w.sendCtl(frame{typ: frameCanceled, b: id}, false)
	}
}

func (l *link) onCanceled(id uint64) error {
	l.w.mu.Lock()
	r := l.w.announced[id]
	if r == nil || !r.cancelReq {
		l.w.mu.Unlock()
		if l.c.isClosed() {
			return nil
		}
		return xerr.Detail(ErrProtocol, "cancel confirmed for message %d, which asked none", id)
	}
	delete(l.w.announced, id)
	l.w.mu.Unlock()
	r.complete(comm.Status{}, xerr.Errorf(Name, "send", comm.ErrCanceled, "rank %d", l.c.rank))
	return nil
}

func (l *link) onCredit(n int) error {
	l.w.mu.Lock()
	defer l.w.mu.Unlock()
	return l.credit.refund(n)
}

// consumed gives back n eager bytes once a receive has taken them (credit
// frames of at least a quarter of the budget). Comm.mu is held.
func (l *link) consumed(n int) {
	if amt := l.credit.consume(n); amt > 0 {
		_ = l.w.sendCtl(frame{typ: frameCredit, a: uint64(amt)}, false)
	}
}
