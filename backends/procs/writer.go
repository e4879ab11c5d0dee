package procs

import (
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/xpu-go/xpu/comm"
	"github.com/xpu-go/xpu/internal/shm"
)

// smallWrite is the largest write gathered into one buffer rather than
// written with writev.
const smallWrite = 4 << 10

// outFrame is a frame queued for the writer: a header, maybe a payload, and
// the eager send to complete once it is written.
type outFrame struct {
	hdr     [headerSize]byte
	pre     [keySize + 8]byte // a one-sided frame's key (and address), before its payload (preLen)
	payload []byte
	req     *request
	done    func() // called once the frame is written, or dropped
}

// preLen returns how many bytes of pre the frame carries: a key for a
// chunk of a Put or Get, a key and an address for a single-copy one.
func (f *outFrame) preLen() int { return preLen(f.hdr[0]) }

func preLen(typ uint8) int {
	switch typ {
	case framePut, frameGet, frameGetAddr:
		return keySize
	case framePutFrom:
		return keySize + 8
	}
	return 0
}

// writer is the sending half of a link: it puts frames on the socket, one
// goroutine at a time, in the order they were queued, and holds what this
// rank has yet to send the peer. A goroutine that sends writes its frame
// itself when the link is idle — nothing queued, nothing being written —
// so that the fast path hands nothing over (writeInline); otherwise the
// frame is queued, and the writer goroutine (loop) writes the queue in
// batches: every small frame queued, then one chunk of the first
// rendezvous stream, and again, so that small frames wait at most one
// chunk. When nothing has gone out for half a heartbeat interval, it sends
// a heartbeat. The reader never writes (it queues), so two ranks can never
// block each other in writes.
//
// mu guards queue, bulk, writing, byeReq, closed, down, nextID and
// announced (and the link's credit.out). iov, buf and chdr belong to the
// goroutine that holds the writing role (writing set). writes is atomic;
// the other fields are set before the link starts.
type writer struct {
	conn      net.Conn
	chunk     int           // largest data frame (Config.Chunk)
	heartbeat time.Duration // Config.Heartbeat
	closedErr error         // the error of sends once this rank has closed
	// lost fails the link on a write error and returns the link's error.
	lost func(error) error
	// room, when set, reports whether a write of n bytes would return
	// without waiting (a shared-memory ring, which holds far less than a
	// socket's buffers): a frame that would wait goes to the writer
	// goroutine, so that Isend never blocks.
	room func(n int) bool
	wake chan struct{} // wakes the writer goroutine
	// quiet (on mu) is signalled when a write ends on a link that is
	// down: for the wait of unmap.
	quiet sync.Cond
	// wrote is set by a write that finds it clear (a load per write, where
	// a count cost a locked add) and taken by loop at each tick: cheaper
	// than reading the clock per message.
	wrote atomic.Bool

	mu        sync.Mutex
	queue     []*outFrame
	bulk      []*request          // rendezvous sends cleared to stream, in order
	writing   bool                // a goroutine holds the writing role
	byeReq    bool                // Close asked for the goodbye
	closed    bool                // no frame may be queued any more
	down      error               // the link failed; set once
	nextID    uint64              // the id of the last rendezvous send announced
	announced map[uint64]*request // rendezvous sends waiting for their clear-to-send, by id

	iov  [][]byte         // scratch of the goroutine writing
	buf  []byte           // its buffer for small writes
	chdr [headerSize]byte // scratch header of the data chunk written
}

// kick wakes the writer goroutine.
func (w *writer) kick() {
	select {
	case w.wake <- struct{}{}:
	default:
	}
}

// writable reports why nothing can be queued; mu is held.
func (w *writer) writable() error {
	if w.closed {
		return w.closedErr
	}
	if w.down != nil {
		return w.down
	}
	return nil
}

// idleLocked reports whether the caller may write at once: nothing queued
// or being written. mu is held.
func (w *writer) idleLocked() bool {
	return !w.writing && len(w.queue) == 0 && len(w.bulk) == 0 && !w.byeReq
}

// inlineLocked reports whether the caller may write a frame of n bytes at
// once: the link is idle and the bytes fit without waiting. mu is held.
func (w *writer) inlineLocked(n int) bool {
	return w.idleLocked() && (w.room == nil || w.room(n))
}

// sendCtl queues a control frame; inline lets a user goroutine write it
// itself when the link is idle (never the reader).
func (w *writer) sendCtl(fr frame, inline bool) error {
	f := &outFrame{}
	fr.encode(f.hdr[:])
	w.mu.Lock()
	if err := w.writable(); err != nil {
		w.mu.Unlock()
		return err
	}
	if inline && w.inlineLocked(headerSize) {
		return w.writeInline(f.hdr[:], nil)
	}
	w.queue = append(w.queue, f)
	w.mu.Unlock()
	w.kick()
	return nil
}

// writeInline writes a frame (hdr and payload) from the calling
// goroutine. mu is held on entry and released.
func (w *writer) writeInline(hdr, payload []byte) error {
	return w.writeInlinePre(hdr, nil, payload)
}

// writeEager writes an eager frame of data with tag into the ring of sc,
// the link's connection, as one record when it has room now; sent
// reports that it did. mu is held, the link idle: the caller unlocks.
func (w *writer) writeEager(sc *shm.Conn, tag int, data []byte) (sent bool, err error) {
	var hdr [shm.FrameHeader]byte
	frame{typ: frameEager, tag: uint32(tag), a: uint64(len(data))}.encode(hdr[:])
	shm.RaceRelease() // a reader of this process may see the frame next
	sent, err = sc.TryWriteFrame(&hdr, data)
	shm.RaceRelease() // the payload is read (see write)
	return sent, err
}

// writeInlinePre writes a frame whose payload starts with pre (a
// one-sided frame's key), as writeInline does.
func (w *writer) writeInlinePre(hdr, pre, payload []byte) error {
	shm.RaceRelease() // a reader of this process may see the frame next
	if w.room != nil && len(pre)+len(payload) <= smallWrite {
		// A ring with room for the frame (inlineLocked asked) takes it
		// without waiting: it is written under mu, which spares taking
		// the writing role and giving it back under mu again.
		buf := append(append(append(w.buf[:0], hdr...), pre...), payload...)
		w.buf = buf
		_, err := w.conn.Write(buf)
		shm.RaceRelease() // the payload is read (see write)
		w.mu.Unlock()
		w.noteWrite()
		if err != nil {
			return w.lost(err)
		}
		return nil
	}
	w.writing = true
	w.mu.Unlock()
	var err error
	if len(pre)+len(payload) <= smallWrite {
		buf := append(append(append(w.buf[:0], hdr...), pre...), payload...)
		w.buf = buf
		_, err = w.conn.Write(buf)
		shm.RaceRelease() // the payload is read (see write)
		w.noteWrite()
	} else {
		f := outFrame{payload: payload}
		copy(f.hdr[:], hdr)
		copy(f.pre[:], pre)
		err = w.write([]*outFrame{&f}, nil, 0, 0, false)
	}
	w.mu.Lock()
	w.writing = false
	more := len(w.queue) > 0 || len(w.bulk) > 0 || w.byeReq
	if w.down != nil {
		w.quiet.Broadcast()
	}
	w.mu.Unlock()
	if more {
		w.kick()
	}
	if err != nil {
		return w.lost(err)
	}
	return nil
}

// write sends batch, then chunk [off, off+n) of a rendezvous send, then
// the goodbye, in one writev. The caller holds the writing role.
func (w *writer) write(batch []*outFrame, chunk *request, off, n int, bye bool) error {
	iov := w.iov[:0]
	for _, f := range batch {
		iov = append(iov, f.hdr[:])
		if n := f.preLen(); n > 0 {
			iov = append(iov, f.pre[:n])
		}
		if len(f.payload) > 0 {
			iov = append(iov, f.payload)
		}
	}
	if chunk != nil {
		frame{typ: frameData, a: uint64(n), b: chunk.token, c: uint64(off)}.encode(w.chdr[:])
		iov = append(iov, w.chdr[:], chunk.buf[off:off+n])
	}
	var byeHdr [headerSize]byte
	if bye {
		frame{typ: frameBye}.encode(byeHdr[:])
		iov = append(iov, byeHdr[:])
	}
	shm.RaceRelease() // a reader of this process may see the frames next
	var err error
	if total := iovLen(iov); total <= smallWrite {
		// One copy and a plain write cost less than a writev here.
		buf := w.buf[:0]
		for _, b := range iov {
			buf = append(buf, b...)
		}
		w.buf = buf
		_, err = w.conn.Write(buf)
	} else {
		bufs := net.Buffers(iov)
		_, err = bufs.WriteTo(w.conn)
	}
	// The payloads have been read (copied into the ring, or by the
	// socket's write): release again, so that a goroutine that learns
	// through the peer that they arrived, and writes their memory next
	// (a region a Get was answered from), is ordered after these reads
	// for the race detector too.
	shm.RaceRelease()
	clear(iov)
	w.iov = iov[:0]
	w.noteWrite()
	return err
}

// awaitQuiet waits until no goroutine writes: once the link is down,
// none starts.
func (w *writer) awaitQuiet() {
	w.mu.Lock()
	for w.writing {
		w.quiet.Wait()
	}
	w.mu.Unlock()
}

// noteWrite marks the link written since loop's last tick.
func (w *writer) noteWrite() {
	if !w.wrote.Load() {
		w.wrote.Store(true)
	}
}

func iovLen(iov [][]byte) int {
	n := 0
	for _, b := range iov {
		n += len(b)
	}
	return n
}

// loop is the writer goroutine: it flushes the queue whenever woken, and
// sends a heartbeat when the link has been quiet for a heartbeat interval.
// It returns once the link has failed or the goodbye is sent.
func (w *writer) loop() {
	// Every half heartbeat, a heartbeat goes out if nothing did since
	// the last tick: at most a heartbeat interval passes between writes.
	half := max(w.heartbeat/2, time.Millisecond)
	t := time.NewTimer(half)
	defer t.Stop()
	for {
		if !w.flush() {
			return
		}
		select {
		case <-w.wake:
		case <-t.C:
			if !w.wrote.Swap(false) {
				_ = w.sendCtl(frame{typ: frameHeartbeat}, false)
			}
			t.Reset(half)
		}
	}
}

// flush writes what is queued: all small frames, then one chunk of the
// first rendezvous stream, and again, so small frames wait at most one
// chunk. It returns false when the writer should end (the link failed or
// the goodbye was sent).
func (w *writer) flush() bool {
	for {
		w.mu.Lock()
		if w.down != nil {
			q, b, err := w.queue, w.bulk, w.down
			w.queue, w.bulk = nil, nil
			w.mu.Unlock()
			failFrames(q, err)
			failReqs(b, err)
			return false
		}
		if w.writing {
			w.mu.Unlock()
			return true
		}
		bye := w.byeReq
		if len(w.queue) == 0 && len(w.bulk) == 0 && !bye {
			w.mu.Unlock()
			return true
		}
		batch := w.queue
		w.queue = nil
		var chunk *request
		var off, n int
		last := false
		var dropped []*request
		if bye {
			dropped, w.bulk = w.bulk, nil
		} else if len(w.bulk) > 0 {
			chunk = w.bulk[0]
			off = chunk.sent
			n = min(w.chunk, chunk.accept-off)
			chunk.sent += n
			if chunk.sent == chunk.accept {
				w.bulk[0] = nil
				w.bulk = w.bulk[1:]
				last = true
			}
		}
		w.writing = true
		w.mu.Unlock()
		failReqs(dropped, w.closedErr)
		err := w.write(batch, chunk, off, n, bye)
		w.mu.Lock()
		w.writing = false
		if w.down != nil {
			w.quiet.Broadcast()
		}
		w.mu.Unlock()
		if err != nil {
			down := w.lost(err)
			failFrames(batch, down)
			if last {
				chunk.complete(comm.Status{}, down)
			}
			continue
		}
		for _, f := range batch {
			if f.req != nil {
				f.req.complete(f.req.sendStatus(), nil)
			}
			if f.done != nil {
				f.done()
			}
		}
		if last {
			chunk.complete(chunk.sendStatus(), nil)
		}
		if bye {
			if tc, ok := w.conn.(interface{ CloseWrite() error }); ok {
				_ = tc.CloseWrite()
			}
			return false
		}
	}
}

func failFrames(fs []*outFrame, err error) {
	for _, f := range fs {
		if f.req != nil {
			f.req.complete(comm.Status{}, err)
		}
		if f.done != nil {
			f.done()
		}
	}
}

// answer writes f at once when the link is idle and the ring has room for
// it, else queues it; f.done is called once it is written. The link's
// reader calls it, over shared memory only: a write into a ring with room
// does not block.
func (w *writer) answer(f *outFrame) error {
	w.mu.Lock()
	if err := w.writable(); err != nil {
		w.mu.Unlock()
		failFrames([]*outFrame{f}, err)
		return err
	}
	if w.room != nil && len(f.payload) <= smallWrite && w.inlineLocked(headerSize+len(f.payload)) {
		err := w.writeInline(f.hdr[:], f.payload)
		if f.done != nil {
			f.done()
		}
		return err
	}
	w.queue = append(w.queue, f)
	w.mu.Unlock()
	w.kick()
	return nil
}

// queueFrames queues frames for the writer goroutine; on a link that is
// down it drops them (their done called) and returns why.
func (w *writer) queueFrames(fs []*outFrame) error {
	w.mu.Lock()
	if err := w.writable(); err != nil {
		w.mu.Unlock()
		failFrames(fs, err)
		return err
	}
	w.queue = append(w.queue, fs...)
	w.mu.Unlock()
	w.kick()
	return nil
}

func failReqs(rs []*request, err error) {
	for _, r := range rs {
		r.complete(comm.Status{}, err)
	}
}

// bye asks the writer goroutine to send what is queued and the goodbye,
// then close its side. Rendezvous sends not yet streamed fail with
// ErrClosed, except those announced with an address or a description:
// the peer may be copying them (single copy, or from its mapping), so
// they stay in use until it says so or the link ends.
func (w *writer) bye() {
	w.mu.Lock()
	if w.closed {
		w.mu.Unlock()
		return
	}
	w.closed = true
	w.byeReq = true
	var out []*request
	for id, r := range w.announced {
		if r.addr == 0 && (r.dev == nil || !r.dev.ipc) {
			delete(w.announced, id)
			out = append(out, r)
		}
	}
	w.mu.Unlock()
	failReqs(out, w.closedErr)
	w.kick()
}

// cancel asks the peer to withdraw the announcement of r, if r still
// waits for its clear-to-send.
func (w *writer) cancel(r *request) {
	w.mu.Lock()
	if w.announced[r.id] != r || r.cancelReq || w.writable() != nil {
		w.mu.Unlock()
		return
	}
	r.cancelReq = true
	f := &outFrame{}
	frame{typ: frameCancel, b: r.id}.encode(f.hdr[:])
	w.queue = append(w.queue, f)
	w.mu.Unlock()
	w.kick()
}
