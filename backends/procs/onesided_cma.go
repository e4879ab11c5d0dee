package procs

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"unsafe"

	"github.com/xpu-go/xpu/comm"
	"github.com/xpu-go/xpu/internal/onesided"
	"github.com/xpu-go/xpu/internal/shm"
	"github.com/xpu-go/xpu/xerr"
)

// Single copies of one-sided transfers over shared-memory links. A large
// transfer crosses no ring: a Put tells the target where the bytes are in
// the origin (framePutFrom), and the target's link reader, once it has
// checked the key and the range, copies them from the origin's memory
// into the region itself (process_vm_readv) and answers; a Get asks the
// target to lend the range (frameGetAddr), and the origin, told where it
// is (frameOneAddr), copies it into its own buffer and gives it back
// (frameOneFree), the region staying open until then. Each side writes
// only its own memory, with its own system calls, as single copies of
// messages do (cma.go): a peer can make this process copy from the wrong
// place of the peer, never write where it should not. Where the kernel
// refuses the copy, the transfer goes through the link in chunks instead
// (oneNoCopy), and the link stops trying.

// oneSingleMin is the smallest one-sided transfer made by single copy:
// below it the chunks through the ring cost less than a system call and
// the answer's round trip.
const oneSingleMin = 256 << 10

// singleCopies reports whether a transfer of n bytes on l goes by single
// copy.
func (l *link) singleCopies(n int) bool {
	return l.cma.pid != 0 && n >= oneSingleMin && !l.cma.refused.Load() && singleCopy()
}

// startSingle sends the one frame of a single-copy transfer r (id).
func (l *link) startSingle(r *oneOp, id uint64, kb [keySize + 8]byte, off int) error {
	n := len(r.buf)
	f := &outFrame{pre: kb}
	if r.put {
		binary.LittleEndian.PutUint64(f.pre[keySize:], uint64(uintptr(unsafe.Pointer(&r.buf[0]))))
		frame{typ: framePutFrom, a: uint64(n), b: id, c: uint64(off)}.encode(f.hdr[:])
	} else {
		frame{typ: frameGetAddr, a: uint64(n), b: id, c: uint64(off)}.encode(f.hdr[:])
	}
	return l.w.queueFrames([]*outFrame{f})
}

// readKeyAddr reads the key, and for framePutFrom the origin's address,
// that a single-copy frame carries.
func (l *link) readKeyAddr(typ uint8) (comm.RemoteKey, uint64, error) {
	key, err := l.readKey()
	if err != nil || typ != framePutFrom {
		return key, 0, err
	}
	var ab [8]byte
	if _, err := io.ReadFull(l.rd.br, ab[:]); err != nil {
		return key, 0, err
	}
	return key, binary.LittleEndian.Uint64(ab[:]), nil
}

// singleTarget reads the rest of a single-copy frame of type typ (n
// bytes at off, transfer id) and finds the region it names, its busy
// count raised. When there is none it answers with a refusal in a frame
// of type answer and returns a nil region, with the error of the link if
// any.
func (l *link) singleTarget(typ, answer uint8, n int, id, off uint64) (*onesided.Region, uint64, error) {
	key, addr, err := l.readKeyAddr(typ)
	if err != nil {
		return nil, 0, err
	}
	if l.cma.pid == 0 {
		return nil, 0, xerr.Detail(ErrProtocol, "rank %d asked for a single copy over a link that makes none", l.peer)
	}
	g, _ := l.c.one.Find(key, int(min(off, maxMessage)), n)
	if g == nil {
		return nil, 0, l.w.sendCtl(frame{typ: answer, tag: oneRefused, a: uint64(n), b: id}, true)
	}
	if g.Data() == nil {
		g.Done()
		return nil, 0, xerr.Detail(ErrProtocol, "rank %d asked for a single copy of a region the host cannot touch", l.peer)
	}
	return g, addr, nil
}

// onPutFrom copies n bytes from addr in the origin into the region the
// key names, at off, and answers.
func (l *link) onPutFrom(n int, id, off uint64) error {
	g, addr, err := l.singleTarget(framePutFrom, frameOneDone, n, id, off)
	if g == nil {
		return err
	}
	cerr := cmaPieces(n, func(o, k int) error {
		return cmaRead(l.cma.pid, g.Data()[int(off)+o:int(off)+o+k], addr+uint64(o))
	})
	g.Done()
	if cerr != nil {
		if err := l.copyFailed(cerr, n, addr); err != nil {
			return err
		}
		return l.w.sendCtl(frame{typ: frameOneDone, tag: oneNoCopy, a: uint64(n), b: id}, true)
	}
	return l.w.sendCtl(frame{typ: frameOneDone, tag: oneDone, a: uint64(n), b: id}, true)
}

// copyFailed says what a failed single copy of n bytes at addr in the
// peer means: nil when the kernel refused it (the bytes then go through
// the link, and the link stops trying), else the link's failure.
func (l *link) copyFailed(cerr error, n int, addr uint64) error {
	switch {
	case l.closing() || l.peerGone() != nil:
		return fmt.Errorf("single copy from the peer's memory: %w", cerr)
	case errors.Is(cerr, shm.ErrFault):
		return xerr.Detail(ErrProtocol, "rank %d named %d bytes at %#x, which it does not map: %w", l.peer, n, addr, cerr)
	case errors.Is(cerr, shm.ErrNotPermitted):
		if !l.cma.refused.Swap(true) && l.c.cfg.Logf != nil {
			l.c.cfg.Logf("procs: rank %d: single copy from rank %d refused (%v): one-sided transfers cross the ring", l.c.rank, l.peer, cerr)
		}
		return nil
	}
	return fmt.Errorf("single copy from rank %d failed: %w", l.peer, cerr)
}

// onGetAddr lends the range of n bytes at off of the region the key
// names to the origin, which copies it and gives it back (onOneFree).
func (l *link) onGetAddr(n int, id, off uint64) error {
	g, _, err := l.singleTarget(frameGetAddr, frameOneAddr, n, id, off)
	if g == nil {
		return err
	}
	l.one.mu.Lock()
	if l.one.lent == nil {
		l.one.lent = map[uint64][]*onesided.Region{}
	}
	if l.one.lent[id] != nil {
		l.one.mu.Unlock()
		g.Done()
		return xerr.Detail(ErrProtocol, "rank %d asked twice for the range of transfer %d", l.peer, id)
	}
	l.one.lent[id] = []*onesided.Region{g}
	l.one.mu.Unlock()
	at := uint64(uintptr(unsafe.Pointer(&g.Data()[off])))
	return l.w.sendCtl(frame{typ: frameOneAddr, tag: oneDone, a: uint64(n), b: id, c: at}, true)
}

// onOneFree takes back the range lent for transfer id.
func (l *link) onOneFree(id uint64) error {
	l.one.mu.Lock()
	lent := l.one.lent[id]
	delete(l.one.lent, id)
	l.one.mu.Unlock()
	if lent == nil {
		return xerr.Detail(ErrProtocol, "rank %d gave back the range of transfer %d, which it was not lent", l.peer, id)
	}
	for _, g := range lent {
		g.Done()
	}
	return nil
}

// onOneAddr takes the target's answer to a single-copy Get: the range's
// address, from which this rank copies and then gives it back; a
// refusal; or the kernel's refusal, upon which the Get goes in chunks.
func (l *link) onOneAddr(status uint32, n int, id, addr uint64) error {
	r, err := l.answered(id, status)
	if err != nil {
		return err
	}
	if status != oneDone {
		if status == oneNoCopy {
			return l.resend(id, r)
		}
		l.chunkDone(id, r)
		return nil
	}
	if n != len(r.buf) {
		return xerr.Detail(ErrProtocol, "rank %d lent %d bytes for a Get of %d", l.peer, n, len(r.buf))
	}
	cerr := cmaPieces(n, func(o, k int) error {
		return cmaRead(l.cma.pid, r.buf[o:o+k], addr+uint64(o))
	})
	if err := l.w.sendCtl(frame{typ: frameOneFree, b: id}, true); err != nil {
		return err
	}
	if cerr != nil {
		if err := l.copyFailed(cerr, n, addr); err != nil {
			return err
		}
		return l.resend(id, r)
	}
	l.chunkDone(id, r)
	return nil
}

// resend sends the transfer r (id), which the kernel would not copy,
// through the link in chunks; the link makes no single copies from then
// on, whichever side the kernel refused.
func (l *link) resend(id uint64, r *oneOp) error {
	l.cma.refused.Store(true)
	n := len(r.buf)
	l.one.mu.Lock()
	if l.one.ops[id] != r {
		l.one.mu.Unlock()
		return nil // failed meanwhile
	}
	r.setChunks((n + l.w.chunk - 1) / l.w.chunk)
	l.one.mu.Unlock()
	// An error has failed the link, and r.
	_ = l.queueChunks(r, id, keyBytes(r.key), r.off)
	return nil
}

// freeLent gives back every range lent on a link that failed.
func (l *link) freeLent() {
	l.one.mu.Lock()
	lent := l.one.lent
	l.one.lent = nil
	l.one.mu.Unlock()
	for _, held := range lent {
		for _, g := range held {
			g.Done()
		}
	}
}
