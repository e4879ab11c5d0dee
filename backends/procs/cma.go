package procs

import (
	"errors"
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"
	"unsafe"

	"github.com/xpu-go/xpu/comm"
	"github.com/xpu-go/xpu/internal/p2p"
	"github.com/xpu-go/xpu/internal/shm"
	"github.com/xpu-go/xpu/memspace"
	"github.com/xpu-go/xpu/xerr"
)

// Single copy over shared-memory links. A rendezvous message between two
// ranks of one node would otherwise cross the link's ring: copied in by
// the sender, out by the receiver. Instead the announcement (RTS) carries
// the address of the sender's buffer (frame field c), and the receiver,
// once a receive has matched it, copies the bytes it accepts straight
// from the sender's memory into its own with process_vm_readv (package
// internal/shm), then says so (framePulled), upon which the send
// completes: one copy, made by the kernel, with no round trip before it.
//
// The receiver alone writes its memory, and only with its own system
// calls: nothing the peer does can write it, or make this process fault
// (an address the peer does not map is an error of the call, which cuts
// the link as a protocol violation). The sender's buffer stays in use
// until the receiver's framePulled (or the link's end), as until the last
// data frame otherwise. The copy is made by the goroutine that matches
// the announcement — the holder of the read role for a receive posted
// first, Irecv for an announcement already there — and for messages of
// cmaSplit bytes and more by a helper goroutine too, the two taking
// pieces in turn, so that two processors copy at once while the sender's
// rank waits. A reducing receive (the ring allreduce) pulls pieces into
// a staging buffer and folds each into its result.
//
// Messages of cmaMin bytes and more travel so. Smaller rendezvous
// messages cross the ring in data frames of a quarter of its size, which
// the sender copies in while the receiver copies the one before out: two
// processors copy at once there too, faster than one call's single copy.
//
// Where the kernel refuses (Yama's ptrace_scope, seccomp, a peer that is
// not dumpable), the receive answers with a clear-to-send instead and the
// message crosses the ring; the link then stops trying. shm.SingleCopy
// says beforehand whether this machine allows it (xpu info).

// Sizes of single copies.
const (
	// cmaMin is the smallest message announced with its address. Below
	// it the double copy through the ring is faster on a 2-core machine
	// (real data, 2 processes, 256 KiB rings in 64 KiB frames): 7.5
	// against 5.1 GB/s at 1 MiB, 6.9 against 5.7 at 2 MiB; from 4 MiB on
	// they tie and then the single copy wins (9 against 7 GB/s at 32
	// MiB), and it leaves the sender's processor free.
	cmaMin = 4 << 20
	// cmaSplit is the smallest message two goroutines copy: with two,
	// a 4 MiB message of real data (not fresh pages) arrives 1.3 times
	// as fast on a 2-core machine, a 1 MiB one about as fast, a smaller
	// one slower (waking the helper costs as much as it saves). The
	// helper starts late: Go's scheduler leaves a goroutine just started
	// in its processor's next slot, which an idle processor takes only
	// after a back-off of one usleep(3) (26-75 µs on a virtual machine's
	// timers), and the link's writer goroutine is often taken first; of
	// a 4 MiB copy (~350 µs here) the helper does about 40%
	// (docs/results/shm.md has the trace and what was tried).
	cmaSplit = 1 << 20
	// cmaPiece is the most one system call copies when two goroutines
	// share a message: small enough that they share it evenly, large
	// enough that the calls cost little. A multiple of every element's
	// size, as folds need.
	cmaPiece = 256 << 10
	// cmaStage is the staging buffer of a reducing receive's pieces.
	cmaStage = 128 << 10
)

var (
	// cmaOff turns single copies off in this process: announcements carry
	// no address, and the addresses that come are not used (tests).
	cmaOff atomic.Bool
	// cmaWorkers is how many goroutines copy a message of cmaSplit bytes
	// or more, at most GOMAXPROCS.
	cmaWorkers = 2
	// cmaRead copies from another process: shm.ReadFrom, or a test's.
	cmaRead = shm.ReadFrom
	// cmaWrite copies into another process: shm.WriteTo, or a test's.
	cmaWrite = shm.WriteTo
)

// cmaLink is a link's single-copy state.
type cmaLink struct {
	// pid is the peer's process, set before the link starts; 0 when the
	// link makes no single copies (TCP, or a peer of unknown PID).
	pid int
	// min is the smallest message announced with its address (cmaMin,
	// or a test's), set before the link starts.
	min int
	// refused says that the kernel refused a copy from the peer: its
	// announcements are taken through the ring from then on.
	refused atomic.Bool
	// pulls counts the messages received by single copy.
	pulls atomic.Uint64

	mu sync.Mutex
	// held are the addresses of announcements waiting for a receive on
	// the unexpected queue, by message id.
	held map[uint64]uint64
}

// singleCopy reports whether this process makes single copies: the
// machine allows them and no test turned them off.
func singleCopy() bool {
	if cmaOff.Load() {
		return false
	}
	ok, _ := shm.SingleCopy()
	return ok
}

// singleCopyInfo describes how large messages between ranks of one node
// travel on this machine, for the driver's Info: by single copy, or
// through the rings and why.
func singleCopyInfo() string {
	if ok, why := shm.SingleCopy(); !ok {
		return "double copy through the ring: " + why
	}
	return fmt.Sprintf("single copy by process_vm_readv from %d MiB, double copy through the ring below", cmaMin>>20)
}

// announceAddr returns the address an announcement of data carries: that
// of data on a link that makes single copies, else 0.
func (l *link) announceAddr(data []byte) uint64 {
	if l.cma.pid == 0 || len(data) < l.cma.min || !singleCopy() {
		return 0
	}
	return uint64(uintptr(unsafe.Pointer(unsafe.SliceData(data))))
}

// checkAddr checks the address of an announcement of size bytes: only a
// shared-memory link may carry one.
func (l *link) checkAddr(addr uint64, size int) error {
	if addr == 0 {
		return nil
	}
	if l.shm == nil {
		return xerr.Detail(ErrProtocol, "an announcement with an address (%#x) on a TCP link", addr)
	}
	if addr+uint64(size) < addr {
		return xerr.Detail(ErrProtocol, "an announcement of %d bytes at %#x", size, addr)
	}
	return nil
}

// pullable reports whether the announcement at addr may be copied from
// the peer: it has an address, and the link makes single copies.
func (l *link) pullable(addr uint64) bool {
	return addr != 0 && l.cma.pid != 0 && !l.cma.refused.Load() && !cmaOff.Load()
}

// hold keeps the address of the announcement id, which waits on the
// unexpected queue.
func (l *link) hold(id, addr uint64) {
	l.cma.mu.Lock()
	if l.cma.held == nil {
		l.cma.held = map[uint64]uint64{}
	}
	l.cma.held[id] = addr
	l.cma.mu.Unlock()
}

// unhold returns and forgets the address of the announcement id (0 when
// none is kept).
func (l *link) unhold(id uint64) uint64 {
	l.cma.mu.Lock()
	defer l.cma.mu.Unlock()
	addr, ok := l.cma.held[id]
	if ok {
		delete(l.cma.held, id)
	}
	return addr
}

// peerGone returns why the doorbell of a shared-memory link has ended
// (the peer's process has exited, or closed the link), nil while it is up.
func (l *link) peerGone() error {
	if l.shm == nil {
		return nil
	}
	return l.shm.Peer()
}

// reqErr is the error of a request of this link once it has failed.
func (l *link) reqErr() error {
	if l.c.isClosed() {
		return l.c.closedErr()
	}
	return l.downErr
}

// pull copies the r.accept bytes of the announcement id (of r.size bytes
// at addr in the peer) into r, tells the peer (framePulled) and completes
// r. handled is false when the kernel refused the copy: nothing of r is
// delivered yet, and the caller answers with a clear-to-send. err is the
// link's failure: an address the peer does not map, or a peer that has
// gone; r has then completed with the link's error.
func (l *link) pull(r *request, id, addr uint64, inline bool) (handled bool, err error) {
	if l.closing() {
		r.complete(comm.Status{}, l.reqErr())
		return true, nil
	}
	n := r.accept
	var folded atomic.Bool
	var cerr error
	if r.red == nil {
		cerr = cmaPieces(n, func(off, k int) error {
			return cmaRead(l.cma.pid, r.buf[off:off+k], addr+uint64(off))
		})
	} else {
		cerr = cmaPieces(n, func(off, k int) error {
			st := stagePool.Get().(*cmaStaging)
			defer stagePool.Put(st)
			for done := 0; done < k; {
				m := min(k-done, len(st.buf))
				if err := cmaRead(l.cma.pid, st.buf[:m], addr+uint64(off+done)); err != nil {
					return err
				}
				folded.Store(true)
				if err := r.red.fold(off+done, st.blk, m); err != nil {
					return err
				}
				done += m
			}
			return nil
		})
	}
	if cerr != nil {
		var fault error
		switch {
		case l.closing() || l.peerGone() != nil:
			// The peer is gone, or the link: its memory with it.
			fault = fmt.Errorf("single copy from the peer's memory: %w", cerr)
		case errors.Is(cerr, shm.ErrFault):
			fault = xerr.Detail(ErrProtocol, "rank %d announced %d bytes at %#x, which it does not map: %w", l.peer, r.size, addr, cerr)
		case errors.Is(cerr, shm.ErrNoProcess):
			fault = fmt.Errorf("the process of rank %d has gone: %w", l.peer, cerr)
		case folded.Load() || !errors.Is(cerr, shm.ErrNotPermitted):
			// Part of a reduction is folded, which cannot be taken
			// back; or the copy failed for want of memory, or of a
			// reason unknown: the message cannot be had.
			fault = fmt.Errorf("single copy from rank %d failed: %w", l.peer, cerr)
		default:
			if !l.cma.refused.Swap(true) && l.c.cfg.Logf != nil {
				l.c.cfg.Logf("tcp: rank %d: single copy from rank %d refused (%v): messages cross the ring", l.c.rank, l.peer, cerr)
			}
			return false, nil
		}
		l.fail(fault)
		r.complete(comm.Status{}, l.reqErr())
		return true, fault
	}
	if gone := l.peerGone(); gone != nil || l.closing() {
		// The peer may have stopped waiting for this message and reused
		// its buffer before the copy ended: the bytes are not sure.
		err := l.lostErr(gone)
		if gone == nil {
			err = l.reqErr()
		}
		r.complete(comm.Status{}, err)
		return true, nil
	}
	l.cma.pulls.Add(1)
	// A failure to queue means the link is down; the message is whole.
	_ = l.w.sendCtl(frame{typ: framePulled, a: uint64(n), b: id}, inline)
	r.complete(p2p.Outcome(Name, l.c.rank, l.peer, r.tag, r.size, n))
	return true, nil
}

// onPulled completes the send id: the receiver has copied taken bytes of
// it.
func (l *link) onPulled(taken int, id uint64) error {
	r, err := l.announcedLocked(id, "pulled")
	if r == nil {
		return err
	}
	if r.addr == 0 {
		l.w.mu.Unlock()
		return xerr.Detail(ErrProtocol, "message %d pulled, which was announced without an address", id)
	}
	if taken > len(r.buf) {
		l.w.mu.Unlock()
		return xerr.Detail(ErrProtocol, "%d bytes pulled of the %d-byte message %d", taken, len(r.buf), id)
	}
	delete(l.w.announced, id)
	l.w.mu.Unlock()
	r.complete(r.sendStatus(), nil)
	return nil
}

// cmaPieces runs do over [0, n) in pieces: in one call from this
// goroutine, or, from cmaSplit bytes, in pieces of cmaPiece that this
// goroutine and helpers (cmaWorkers in all) take in turn. It returns once
// every piece is done or no more will be (an error): the error of a fault
// first, else the first.
func cmaPieces(n int, do func(off, k int) error) error {
	if n < cmaSplit {
		return do(0, n)
	}
	return cmaShare(n, cmaPiece, do)
}

// cmaShare runs do over [0, n) in pieces of piece, which this goroutine
// and helpers (cmaWorkers in all, at most GOMAXPROCS) take in turn, as
// cmaPieces says.
func cmaShare(n, piece int, do func(off, k int) error) error {
	workers := min(cmaWorkers, runtime.GOMAXPROCS(0))
	if workers < 2 {
		return do(0, n)
	}
	var next atomic.Int64
	var stop atomic.Bool
	run := func() error {
		for !stop.Load() {
			off := int(next.Add(int64(piece))) - piece
			if off >= n {
				return nil
			}
			if err := do(off, min(piece, n-off)); err != nil {
				stop.Store(true)
				return err
			}
		}
		return nil
	}
	errs := make([]error, workers)
	var wg sync.WaitGroup
	for i := 1; i < workers; i++ {
		wg.Go(func() { errs[i] = run() })
	}
	errs[0] = run()
	wg.Wait()
	var first error
	for _, err := range errs {
		if errors.Is(err, shm.ErrFault) {
			return err
		}
		if first == nil {
			first = err
		}
	}
	return first
}

// cmaStaging is a staging buffer of a reducing receive's pieces.
type cmaStaging struct {
	buf []byte
	blk memspace.Block
}

var stagePool = sync.Pool{New: func() any {
	st := &cmaStaging{buf: make([]byte, cmaStage)}
	b, _ := memspace.FromSlice(st.buf)
	st.blk = b.Block()
	return st
}}
