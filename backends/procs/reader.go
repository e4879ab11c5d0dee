package procs

import (
	"bufio"
	"cmp"
	"errors"
	"io"
	"sync"
	"sync/atomic"
	"syscall"

	"github.com/xpu-go/xpu/impl"
	"github.com/xpu-go/xpu/internal/shm"
	"github.com/xpu-go/xpu/memspace"
	"github.com/xpu-go/xpu/xerr"
)

// readAhead is the size of a link's read buffer. Small frames arrive
// many to a read; a payload longer than what the buffer holds is read
// straight into its destination (bufio reads past its buffer for large
// reads), so the buffer should stay small: with 64 KiB a 64 KiB eager
// message was read into it and copied out, and a 2-rank 64 KiB allreduce
// between processes took 1.2x as long (ADR 13).
const readAhead = 4 << 10

// reader is the receiving half of a link: it reads the peer's frames from
// the socket, and their payloads into the receives they are for. Only the
// holder of the link's read role (readrole.go) reads, and br, spin,
// stage, stageBlk, lanes and laneDue are its. mu guards inbound,
// nextToken and down, which the goroutines that match an announcement
// share with the holder (the holder alone completes the receives in
// inbound). heard is atomic; raw is set before the link starts.
type reader struct {
	br *bufio.Reader // over the link's liveReader
	// heard is set by a read that returns bytes, when it finds it clear
	// (a load per read, where a count cost a locked add), and cleared by
	// the monitor at each tick: cheaper than reading the clock per message.
	heard    atomic.Bool
	raw      syscall.RawConn // the socket, to poll; nil unless Config.Spin is set
	spin     bool            // the holder polls the socket before it blocks (Config.Spin)
	stage    []byte          // staging buffer of reducing receives
	stageBlk memspace.Block  // its block
	lanes    int64           // messages the lane took (lane.go): for tests, read under the role's mu
	laneDue  int             // eager bytes the lane took without the lock, not given back yet (takeLane)

	mu        sync.Mutex
	inbound   map[uint64]*request // matched rendezvous receives, by token
	nextToken uint64              // the last token given
	down      error               // why no receive may register any more; set once
}

// register gives r a token under which the peer streams its data.
func (rd *reader) register(r *request) (uint64, error) {
	rd.mu.Lock()
	defer rd.mu.Unlock()
	if rd.down != nil {
		return 0, rd.down
	}
	rd.nextToken++
	rd.inbound[rd.nextToken] = r
	return rd.nextToken, nil
}

// lookup returns the receive registered under token, nil if none is.
func (rd *reader) lookup(token uint64) *request {
	rd.mu.Lock()
	defer rd.mu.Unlock()
	return rd.inbound[token]
}

// unregister drops the receive of token once it has all its data.
func (rd *reader) unregister(token uint64) {
	rd.mu.Lock()
	delete(rd.inbound, token)
	rd.mu.Unlock()
}

// shut ends the read side with err, which later registrations return, and
// returns the receives registered, for the caller to fail.
func (rd *reader) shut(err error) map[uint64]*request {
	rd.mu.Lock()
	defer rd.mu.Unlock()
	in := rd.inbound
	rd.inbound = nil
	rd.down = err
	return in
}

// discard reads and drops n payload bytes.
func (rd *reader) discard(n int) error {
	_, err := rd.br.Discard(n)
	return err
}

// readInto reads n payload bytes into r at offset off: a copy, or a fold
// for a reducing receive. Long reads go in pieces so that the link stays
// alive while a slow one lasts.
func (rd *reader) readInto(r *request, off, n int) error {
	const piece = 256 << 10
	if r.red == nil {
		for n > 0 {
			k := min(n, piece)
			if _, err := io.ReadFull(rd.br, r.buf[off:off+k]); err != nil {
				return err
			}
			off, n = off+k, n-k
		}
		return nil
	}
	rd.growStage()
	for n > 0 {
		k := min(n, len(rd.stage))
		if _, err := io.ReadFull(rd.br, rd.stage[:k]); err != nil {
			return err
		}
		if err := r.red.fold(off, rd.stageBlk, k); err != nil {
			return err
		}
		off, n = off+k, n-k
	}
	return nil
}

// fromRecord copies the first k bytes of a message that lies in a ring
// record, in p and then q, into r — or folds them, for a reducing
// receive, through the staging buffer (fold reads a block).
func (rd *reader) fromRecord(r *request, p, q []byte, k int) error {
	if r.red == nil {
		shm.Gather(r.buf[:k], p, q, 0)
		return nil
	}
	rd.growStage()
	for off := 0; off < k; {
		m := min(k-off, len(rd.stage))
		shm.Gather(rd.stage[:m], p, q, off)
		if err := r.red.fold(off, rd.stageBlk, m); err != nil {
			return err
		}
		off += m
	}
	return nil
}

// growStage makes the staging buffer of reducing receives.
func (rd *reader) growStage() {
	if rd.stage == nil {
		rd.stage = make([]byte, 64<<10)
		b, _ := memspace.FromSlice(rd.stage)
		rd.stageBlk = b.Block()
	}
}

// fold computes dst[off:off+k] = in[:k] op own[off:off+k].
func (red *reduction) fold(off int, in memspace.Block, k int) error {
	d, err1 := red.dst.Bytes()
	o, err2 := red.own.Bytes()
	x, err3 := in.Bytes()
	if err := cmp.Or(err1, err2, err3); err != nil {
		return err
	}
	if off+k > len(d) || off+k > len(o) || k > len(x) {
		return xerr.Detail(xerr.ErrInvalidArgument, "fold of bytes [%d, %d) of a %d-byte receive", off, off+k, len(d))
	}
	return impl.ReduceBytes(d[off:off+k], x[:k], o[off:off+k], red.dt, red.op)
}

// hear marks the link heard from since the monitor's last tick.
func (rd *reader) hear() {
	if !rd.heard.Load() {
		rd.heard.Store(true)
	}
}

// protocolErr is err, or, for a shared-memory ring that breaks its
// format (shm.ErrCorrupt), an error matching ErrProtocol: the peer broke
// the link's protocol.
func protocolErr(err error) error {
	if err != nil && errors.Is(err, shm.ErrCorrupt) {
		return xerr.Detail(ErrProtocol, "shared-memory link: %w", err)
	}
	return err
}

// liveReader is what a link's reader.br reads: the socket, polled first
// while the holder spins. It counts the reads that bring bytes, and
// absorbs a kick (a read deadline set to interrupt the holder of the read
// role) that lands in the middle of a frame: the frame is finished, and
// the holder yields at the next boundary.
type liveReader struct{ l *link }

func (lr liveReader) Read(p []byte) (int, error) {
	l := lr.l
	for {
		var n int
		var err error
		if l.rd.spin {
			n, err = l.spinRead(p)
		} else {
			n, err = l.conn.Read(p)
		}
		if n > 0 {
			l.rd.hear()
		}
		if n == 0 && err != nil && isKicked(err) && !l.role.atBoundary.Load() {
			l.role.unkick()
			continue
		}
		return n, protocolErr(err)
	}
}
