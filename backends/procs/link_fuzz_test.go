package procs

import (
	"encoding/binary"
	"errors"
	"io"
	"net"
	"testing"
	"time"

	"github.com/xpu-go/xpu/comm"
	"github.com/xpu-go/xpu/internal/join"
	"github.com/xpu-go/xpu/memspace"
)

// FuzzLinkFrames feeds a stream of frames from a peer to a link — the
// frame handlers, not only the header decoder: eager payloads, rendezvous
// announcements, clear-to-sends, data for tokens, cancels, credits, aborts,
// goodbyes and confirmations of single copies — interleaved with what this rank does meanwhile (post
// receives, reducing ones too, send, cancel). It runs in the fuzzing
// goroutine over an in-memory connection, with no goroutine and no socket
// per execution (the reader's and writer's loops are stepped by hand), so
// that it sustains thousands of executions per second.
//
// The input is a program (see linkProg): mostly well-formed frames with
// fuzzed lengths, ids, tokens and offsets, some raw headers, and local
// actions. It checks that no frame makes the link panic or allocate beyond
// its limits, that a link fails only with a protocol, short-read or
// invalid-argument error (or the peer's goodbye), that the eager bytes held
// never exceed the budget, that a receive never reports more bytes than its
// buffer holds, and that once the link is down every request of this rank
// has completed: none is left waiting forever.
func FuzzLinkFrames(f *testing.F) {
	for _, p := range linkSeeds() {
		f.Add(p.bytes())
	}
	f.Fuzz(func(t *testing.T, in []byte) {
		runLinkProg(t, in)
	})
}

// Limits of the fuzzed link: small, so that short inputs reach them.
const (
	fuzzEager     = 64  // this rank's eager limit
	fuzzBudget    = 256 // eager bytes it holds for the peer
	fuzzChunk     = 64  // largest data frame
	fuzzPeerEager = 32  // the peer's eager limit (its hello)
	fuzzPeerBudg  = 128 // the peer's budget for this rank
	fuzzMaxTag    = 6   // tags of frames and receives are 0 … fuzzMaxTag
)

// errPause is what fuzzConn's Read returns when the bytes given so far are
// read and more may come: a frame (after a raw header) that lacks bytes
// until the next local action.
var errPause = errors.New("fuzz: no more input for now")

// fuzzConn is the link's connection: reads come from in, writes are
// counted and dropped.
type fuzzConn struct {
	in     []byte
	eof    bool // no more input will come: Read returns io.EOF once in is read
	closed bool
	wrote  int
}

func (c *fuzzConn) Read(p []byte) (int, error) {
	if c.closed {
		return 0, net.ErrClosed
	}
	if len(c.in) == 0 {
		if c.eof {
			return 0, io.EOF
		}
		return 0, errPause
	}
	n := copy(p, c.in)
	c.in = c.in[n:]
	return n, nil
}

func (c *fuzzConn) Write(p []byte) (int, error) {
	if c.closed {
		return 0, net.ErrClosed
	}
	c.wrote += len(p)
	return len(p), nil
}

func (c *fuzzConn) Close() error                     { c.closed = true; return nil }
func (c *fuzzConn) LocalAddr() net.Addr              { return &net.TCPAddr{} }
func (c *fuzzConn) RemoteAddr() net.Addr             { return &net.TCPAddr{} }
func (c *fuzzConn) SetDeadline(time.Time) error      { return nil }
func (c *fuzzConn) SetReadDeadline(time.Time) error  { return nil }
func (c *fuzzConn) SetWriteDeadline(time.Time) error { return nil }

// Opcodes of a link program. An op is one byte, followed by its operands:
//
//	0x00-0x9f  frame of type op%10+1; then the fields its type uses
//	           (progUses), in order: tag (a byte, mod fuzzMaxTag+1), a,
//	           b, c (uvarints); an eager or data frame's payload of a bytes
//	           (at most 4096) follows it on the wire, not in the program
//	           (fuzzPayload)
//	0xa0-0xbf  raw header: the next headerSize bytes, zero-padded (the
//	           way to the frame types after the first ten, and to an
//	           announcement with an address, which this TCP-like link
//	           refuses)
//	0xc0-0xff  local action op&3: 0 post a receive (a byte: tag in its low
//	           3 bits, 7 meaning AnyTag, bit 3 AnySource; then a byte: its
//	           size), 1 post a reducing receive (a tag byte; a byte: its
//	           size in float64s, mod 16), 2 cancel request number (a byte)
//	           modulo the requests made, 3 send (a tag byte; a byte: the
//	           size in units of 2 bytes)
//
// Frames are delivered to the link when the program ends or reaches a
// local action, which then runs.
const (
	opRaw    = 0xa0
	opAction = 0xc0
)

// progUses says which fields a frame op of a program gives: those the
// frame type uses, but no address for an announcement (programs written
// before announcements carried one read the same).
func progUses(typ uint8) [4]bool {
	u := uses[typ]
	if typ == frameRTS {
		u[3] = false
	}
	return u
}

// maxLinkProg is the longest link program run: the bytes past it are
// ignored, so that the fuzzer's minimization of a new input (quadratic in
// its length, with an execution per candidate) stays short; 256 bytes
// hold some fifty frames and actions.
const maxLinkProg = 256

// fuzzPayload is the payload of eager and data frames, cut to their
// length: what the bytes are matters little, and taking them from the
// program would spend its length on them.
var fuzzPayload = func() []byte {
	b := make([]byte, 4096)
	for i := range b {
		b[i] = byte(i*7 + 3)
	}
	return b
}()

// progReader reads a link program.
type progReader struct{ b []byte }

func (r *progReader) byte() byte {
	if len(r.b) == 0 {
		return 0
	}
	v := r.b[0]
	r.b = r.b[1:]
	return v
}

func (r *progReader) uvarint() uint64 {
	v, n := binary.Uvarint(r.b)
	if n <= 0 {
		r.byte()
		return 0
	}
	r.b = r.b[n:]
	return v
}

func (r *progReader) take(n int) []byte {
	out := make([]byte, n)
	copy(out, r.b)
	r.b = r.b[min(n, len(r.b)):]
	return out
}

// fuzzLink is a rank 0 of 2 whose link to rank 1 reads from a fuzzConn.
type fuzzLink struct {
	t    *testing.T
	c    *Comm
	l    *link
	conn *fuzzConn
	reqs []*request
	err  error // why the link failed; nil while up
}

func newFuzzLink(t *testing.T) *fuzzLink {
	c := newComm(Config{Rank: 0, Size: 2, EagerLimit: fuzzEager, EagerBudget: fuzzBudget,
		Chunk: fuzzChunk, Timeout: time.Hour, Heartbeat: time.Hour, CloseTimeout: time.Second})
	conn := &fuzzConn{}
	l := newLink(c, 1, conn, join.Terms{Limit: fuzzPeerEager, Budget: fuzzPeerBudg})
	c.links[1] = l
	return &fuzzLink{t: t, c: c, l: l, conn: conn}
}

// pump delivers the frames given so far, as the reader goroutine would,
// then writes what the handlers queued, as the writer goroutine would.
func (fl *fuzzLink) pump() {
	// A step starts only with a whole header at hand (or at the end of the
	// input), so errPause comes only in the middle of a frame: the peer
	// stopped mid-frame, as a short read.
	for fl.err == nil && (fl.conn.eof || fl.l.rd.br.Buffered()+len(fl.conn.in) >= headerSize) {
		_, err := fl.l.step(nil)
		fl.check()
		if err != nil {
			fl.down(err)
		}
		fl.l.w.flush()
	}
	fl.conn.in = nil
}

// down fails the link on err, which must be a way for a link to fail.
func (fl *fuzzLink) down(err error) {
	switch {
	case errors.Is(err, ErrProtocol), errors.Is(err, comm.ErrInvalidArgument),
		errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF),
		errors.Is(err, errPeerClosed), errors.Is(err, errPause):
	default:
		fl.t.Fatalf("link failed with %v", err)
	}
	fl.err = err
	fl.l.readFailed(err)
}

// check verifies what must hold after every frame.
func (fl *fuzzLink) check() {
	c := fl.c
	c.mu.Lock()
	in, rts := fl.l.credit.in, fl.l.credit.rtsHeld
	c.mu.Unlock()
	if in < 0 || in > fuzzBudget {
		fl.t.Fatalf("%d eager bytes held, budget %d", in, fuzzBudget)
	}
	if rts < 0 || rts > maxHeldRTS {
		fl.t.Fatalf("%d announcements held", rts)
	}
}

func fuzzTag(b byte) int {
	if b&7 == 7 {
		return comm.AnyTag
	}
	return int(b&7) % (fuzzMaxTag + 1)
}

// action runs local action k.
func (fl *fuzzLink) action(k byte, r *progReader) {
	c := fl.c
	switch k {
	case 0:
		tb := r.byte()
		src := 1
		if tb&8 != 0 {
			src = comm.AnySource
		}
		q := &request{c: c, kind: kindRecv, peer: src, tag: fuzzTag(tb), buf: make([]byte, r.byte())}
		if q, err := c.irecv(q); err == nil {
			fl.reqs = append(fl.reqs, q)
		}
	case 1:
		tb := r.byte()
		n := int(r.byte() % 16)
		dst, _ := memspace.FromSlice(make([]float64, n))
		own, _ := memspace.FromSlice(make([]float64, n))
		buf, err := hostBytes(dst.Block())
		if err != nil {
			fl.t.Fatal(err)
		}
		q := &request{c: c, kind: kindRecv, peer: 1, tag: int(tb&7) % (fuzzMaxTag + 1), buf: buf,
			red: &reduction{dst: dst.Block(), own: own.Block(), dt: comm.Float64, op: comm.Sum}}
		if q, err := c.irecv(q); err == nil {
			fl.reqs = append(fl.reqs, q)
		}
	case 2:
		i := int(r.byte())
		if len(fl.reqs) > 0 {
			_ = fl.reqs[i%len(fl.reqs)].Cancel()
		}
	case 3:
		tag := int(r.byte()) % (fuzzMaxTag + 1)
		q, err := c.isend(make([]byte, 2*int(r.byte())), 1, tag)
		if err == nil {
			fl.reqs = append(fl.reqs, q)
		}
	}
	fl.l.w.flush()
}

// runLinkProg runs the link program in and checks the outcome.
func runLinkProg(t *testing.T, in []byte) {
	if len(in) > maxLinkProg {
		in = in[:maxLinkProg]
	}
	fl := newFuzzLink(t)
	r := &progReader{b: in}
	var hdr [headerSize]byte
	for len(r.b) > 0 {
		op := r.byte()
		switch {
		case op < opRaw:
			f := frame{typ: op%10 + 1}
			u := progUses(f.typ)
			if u[0] {
				f.tag = uint32(r.byte()) % (fuzzMaxTag + 1)
			}
			for i, p := range []*uint64{&f.a, &f.b, &f.c} {
				if u[i+1] {
					*p = r.uvarint()
				}
			}
			f.encode(hdr[:])
			fl.conn.in = append(fl.conn.in, hdr[:]...)
			if f.typ == frameEager || f.typ == frameData {
				fl.conn.in = append(fl.conn.in, fuzzPayload[:min(f.a, uint64(len(fuzzPayload)))]...)
			}
		case op < opAction:
			fl.conn.in = append(fl.conn.in, r.take(headerSize)...)
		default:
			fl.pump()
			fl.action(op&3, r)
		}
	}
	fl.conn.eof = true
	fl.pump()
	if fl.err == nil {
		t.Fatal("the link read past the end of its input")
	}
	// The link is down: every request must have completed, with a count
	// its buffer holds.
	for i, q := range fl.reqs {
		if !q.Finishing() {
			t.Fatalf("request %d (kind %d, tag %d, %d bytes) still pending after the link failed with %v",
				i, q.kind, q.tag, len(q.buf), fl.err)
		}
		if st, _ := q.Result(); q.kind == kindRecv && st.Count > len(q.buf) {
			t.Fatalf("receive %d of %d bytes reports %d", i, len(q.buf), st.Count)
		}
	}
	fl.c.mu.Lock()
	posted := 0
	for range fl.c.tbl.Posted() {
		posted++
	}
	fl.c.mu.Unlock()
	if posted != 0 {
		t.Fatalf("%d receives still posted after the only peer was lost", posted)
	}
}

// linkProg builds link programs (the seeds).
type linkProg []byte

func (p linkProg) frame(f frame) linkProg {
	p = append(p, f.typ-1)
	u := progUses(f.typ)
	if u[0] {
		p = append(p, byte(f.tag))
	}
	for i, v := range []uint64{f.a, f.b, f.c} {
		if u[i+1] {
			p = binary.AppendUvarint(p, v)
		}
	}
	return p
}

func (p linkProg) raw(f frame) linkProg { return append(append(p, opRaw), encoded(f)...) }
func (p linkProg) recv(tag, size byte) linkProg {
	return append(p, opAction|0, tag, size)
}
func (p linkProg) reduce(tag, n byte) linkProg  { return append(p, opAction|1, tag, n) }
func (p linkProg) cancel(i byte) linkProg       { return append(p, opAction|2, i) }
func (p linkProg) send(tag, half byte) linkProg { return append(p, opAction|3, tag, half) }
func (p linkProg) bytes() []byte                { return p }

func linkSeeds() []linkProg {
	var none linkProg
	return []linkProg{
		// Eager messages: expected, unexpected, truncated, over budget.
		none.recv(1, 16).frame(frame{typ: frameEager, tag: 1, a: 10}).
			frame(frame{typ: frameEager, tag: 2, a: 20}).recv(2, 8),
		none.frame(frame{typ: frameEager, tag: 3, a: 64}).frame(frame{typ: frameEager, tag: 3, a: 64}).
			frame(frame{typ: frameEager, tag: 3, a: 64}).frame(frame{typ: frameEager, tag: 3, a: 64}).
			frame(frame{typ: frameEager, tag: 3, a: 1}),
		// A rendezvous receive: announced, matched, streamed in chunks.
		none.frame(frame{typ: frameRTS, tag: 2, a: 100, b: 1}).recv(2, 100).
			frame(frame{typ: frameData, a: 64, b: 1}).frame(frame{typ: frameData, a: 36, b: 1, c: 64}),
		// A reducing receive folding two data frames.
		none.reduce(4, 12).frame(frame{typ: frameRTS, tag: 4, a: 96, b: 7}).
			frame(frame{typ: frameData, a: 64, b: 1}).frame(frame{typ: frameData, a: 32, b: 1, c: 64}),
		// A rendezvous send cleared, then one canceled, then credit.
		none.send(1, 50).frame(frame{typ: frameCTS, a: 100, b: 1, c: 9}).
			send(2, 60).cancel(1).frame(frame{typ: frameCanceled, b: 2}).
			send(3, 10).frame(frame{typ: frameCredit, a: 20}),
		// The peer cancels an announcement; a heartbeat, an abort, a goodbye.
		none.frame(frame{typ: frameRTS, tag: 5, a: 1000, b: 3}).frame(frame{typ: frameCancel, b: 3}).
			frame(frame{typ: frameHeartbeat}).frame(frame{typ: frameAbort, a: 4}).frame(frame{typ: frameBye}),
		// Receives from any source with any tag, then a raw eager header.
		none.recv(7|8, 30).recv(0, 0).raw(frame{typ: frameEager, tag: 0, a: 5}),
		// Protocol errors: data for no token, a clear-to-send for no send.
		none.frame(frame{typ: frameData, a: 8, b: 5}),
		none.frame(frame{typ: frameCTS, a: 1, b: 1, c: 1}),
		// Single copy over a TCP link: an announcement with an address, a
		// copy confirmed for a send announced without one.
		none.raw(frame{typ: frameRTS, tag: 1, a: 100, b: 1, c: 0x7f00_0000_1000}),
		none.send(1, 50).raw(frame{typ: framePulled, a: 100, b: 1}),
	}
}
