package tcp

import (
	"context"
	"errors"
	"os"
	"time"

	"github.com/xpu-go/xpu/comm"
)

// The read role. Exactly one goroutine at a time reads a link's socket and
// runs the frame handlers: the role's holder. Most of the time that is the
// link's reader goroutine, but a goroutine that waits for a receive from
// this peer takes the role and reads the socket itself, so the message it
// waits for is read by the goroutine that wants it: a goroutine that reads
// its own socket is woken straight by the network poller, where a handoff
// from a reader goroutine costs one more wake-up per message, which on
// loopback is most of the latency (ADR 10).
//
// The waiter gets the role at once when it is free, or by asking the reader
// goroutine to yield: a read deadline in the past interrupts its blocked
// read, and it hands the role over at the next frame boundary. When the
// waiter's receive completes it frees the role without waking the reader
// goroutine (a wake-up on every message would cost what the role saves).
// The reader goroutine takes the free role back when asked for it (a
// goroutine that blocks without reading: Test, a send waiting for its
// clear-to-send, a second waiter) and otherwise checks on its own every
// idleCheck: nothing the peer sends goes unread longer than that.
const (
	roleFree   = iota
	roleReader // the link's reader goroutine
	roleWaiter // a goroutine waiting for a receive
)

// idleCheck is how often the reader goroutine looks for a free role while
// others hold it. It must stay long: while it is pending, every wait of the
// process in the network poller arms a kernel timer this close, and on a
// virtual machine short ones cost more than the read role saves (ADR 13:
// checks every 2 ms made a two-process ping-pong 1.5x raw Go; every 50 ms,
// 1.2x).
const idleCheck = 50 * time.Millisecond

// kickLocked interrupts the holder's blocked read; rmu is held.
func (l *link) kickLocked() {
	if !l.rKicked {
		l.rKicked = true
		_ = l.conn.SetReadDeadline(time.Unix(1, 0))
	}
}

// unkickLocked clears the read deadline of a kick; rmu is held.
func (l *link) unkickLocked() {
	if l.rKicked {
		l.rKicked = false
		_ = l.conn.SetReadDeadline(time.Time{})
	}
}

// handOverLocked frees the role, or gives it to the waiter that asked for
// it. rmu is held.
func (l *link) handOverLocked() {
	l.unkickLocked()
	l.rOwner = roleFree
	if l.rWant && !l.rDead && !l.rClosed {
		l.rWant = false
		l.rWantFlag.Store(false)
		l.rOwner = roleWaiter
		l.rwg.Add(1)
		l.rGrant <- struct{}{}
	}
}

// wakeReader asks the reader goroutine to take the role if it is free:
// for a goroutine about to block on something this link must read.
func (l *link) wakeReader() {
	l.rmu.Lock()
	free := l.rOwner == roleFree
	l.rmu.Unlock()
	if free {
		select {
		case l.rWake <- struct{}{}:
		default:
		}
	}
}

// isKicked reports whether err is a read deadline's: a kick.
func isKicked(err error) bool { return errors.Is(err, os.ErrDeadlineExceeded) }

// step reads and handles one frame. It returns yield when a kick
// interrupted the read at a frame boundary, before any byte of the frame
// was consumed, or when the receive r the caller waits for (nil for the
// reader goroutine) has completed; a kick in the middle of a frame is
// absorbed (liveReader) and the frame finished.
func (l *link) step(r *request) (yield bool, err error) {
	// A goroutine that completes r kicks the holder if it finds it at a
	// boundary: with the check of r after the flag is set, either the
	// holder sees r completed or the completer sees the flag.
	l.atBoundary.Store(true)
	if r != nil && r.fin.Load() {
		l.atBoundary.Store(false)
		return true, nil
	}
	hdr, err := l.br.Peek(headerSize)
	l.atBoundary.Store(false)
	if err != nil {
		if isKicked(err) {
			return true, nil
		}
		return false, err
	}
	f, err := decodeFrame(hdr, l.c.lim)
	if err != nil {
		return false, err
	}
	if _, err := l.br.Discard(headerSize); err != nil {
		return false, err
	}
	switch f.typ {
	case frameEager:
		err = l.onEager(int(f.tag), int(f.a))
	case frameRTS:
		err = l.onRTS(int(f.tag), int(f.a), f.b)
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
	}
	return false, err
}

// readFailed ends the read side on err (the holder of the role saw it):
// the link fails, and the rendezvous receives it was streaming fail too.
// Only the first call has an effect.
func (l *link) readFailed(err error) {
	l.fail(err)
	l.rmu.Lock()
	if l.rDead {
		l.rmu.Unlock()
		return
	}
	l.rDead = true
	l.rmu.Unlock()
	e := l.downErr
	if l.c.isClosed() {
		e = l.c.closedErr()
	}
	l.inMu.Lock()
	in := l.inbound
	l.inbound = nil
	l.inDown = e
	l.inMu.Unlock()
	for _, r := range in {
		r.complete(comm.Status{}, e)
	}
}

// readLoop is the reader goroutine: it holds the role whenever no waiter
// does, and ends once the read side has failed.
func (l *link) readLoop() {
	defer l.wg.Done()
	idle := time.NewTimer(time.Hour)
	idle.Stop()
	defer idle.Stop()
	for {
		l.rmu.Lock()
		for l.rOwner != roleFree || l.rWant {
			if l.rDead {
				l.rmu.Unlock()
				return
			}
			l.rmu.Unlock()
			idle.Reset(idleCheck)
			select {
			case <-l.rWake:
			case <-idle.C:
			}
			idle.Stop()
			l.rmu.Lock()
		}
		if l.rDead {
			l.rmu.Unlock()
			return
		}
		l.rOwner = roleReader
		l.rmu.Unlock()
		for {
			if l.rWantFlag.Load() {
				break
			}
			yield, err := l.step(nil)
			if err == nil && yield && l.closing() {
				err = l.downErr
			}
			if err != nil {
				l.readFailed(err)
				l.rmu.Lock()
				l.handOverLocked()
				l.rmu.Unlock()
				return
			}
			if yield {
				// A kick for a waiter that has withdrawn: clear it.
				l.rmu.Lock()
				if !l.rWant {
					l.unkickLocked()
				}
				l.rmu.Unlock()
			}
		}
		l.rmu.Lock()
		l.handOverLocked()
		l.rmu.Unlock()
	}
}

// closing reports whether the link has failed.
func (l *link) closing() bool { return l.failed() != nil }

// waitDirect waits for the receive r from this link's peer by taking the
// read role and reading the socket itself. handled is false when the role
// was not to be had (another waiter holds it, or the read side has ended):
// the caller then waits as usual.
func (l *link) waitDirect(ctx context.Context, r *request) (handled bool) {
	l.rmu.Lock()
	if l.rDead || l.rClosed || l.rWant || l.rOwner == roleWaiter {
		l.rmu.Unlock()
		return false
	}
	var stop func() bool
	if l.rOwner == roleFree {
		l.rOwner = roleWaiter
		l.rwg.Add(1)
		stop = l.watchLocked(ctx)
		l.rmu.Unlock()
	} else {
		l.rWant = true
		l.rWantFlag.Store(true)
		l.kickLocked()
		l.rmu.Unlock()
		granted := true
		select {
		case <-l.rGrant:
		case <-r.done:
			granted = false
		case <-ctx.Done():
			granted = false
		}
		if !granted {
			if l.withdraw() {
				l.release()
			}
			return true
		}
		l.rmu.Lock()
		stop = l.watchLocked(ctx)
		l.rmu.Unlock()
	}
	// The role is ours.
	l.rTaken.Add(1)
	r.direct.Store(l)
	l.spin = l.raw != nil
	for !r.fin.Load() && ctx.Err() == nil && !l.closing() {
		yield, err := l.step(r)
		if err != nil {
			l.readFailed(err)
			break
		}
		if yield {
			l.unkickStale(ctx, r)
		}
	}
	l.spin = false
	r.direct.Store(nil)
	if stop != nil {
		stop()
	}
	l.release()
	return true
}

// watchLocked records that the holder of the role waits with ctx, and
// makes sure that ctx's end kicks it (context.AfterFunc). A registration
// costs a few microseconds between processes, so one is kept from wait to
// wait for a context that waits on this link twice in a row (a program
// that passes one context to many calls); another context replaces it.
// A context seen once is registered for this wait alone, and stop, which
// the caller runs when the wait is over, drops it: a kept registration
// fires when its context ends, in a goroutine of its own, and a context
// made per call (a timeout per operation) always ends (ADR 13). Contexts
// are told apart by their Done channel: two contexts with one channel end
// together. rmu is held.
func (l *link) watchLocked(ctx context.Context) (stop func() bool) {
	done := ctx.Done()
	l.holderDone = done
	if done == nil || done == l.watchDone {
		l.lastDone = done
		return nil
	}
	kick := func() {
		l.rmu.Lock()
		if l.rOwner == roleWaiter && l.holderDone == done {
			l.kickLocked()
		}
		l.rmu.Unlock()
	}
	if done == l.lastDone {
		l.unwatchLocked()
		l.watchDone, l.watchStop = done, context.AfterFunc(ctx, kick)
		return nil
	}
	l.lastDone = done
	return context.AfterFunc(ctx, kick)
}

// unwatchLocked drops the kept registration. rmu is held.
func (l *link) unwatchLocked() {
	if l.watchStop != nil {
		l.watchStop()
		l.watchDone, l.watchStop = nil, nil
	}
}

// unwatch drops whatever this rank keeps for the context whose Done is
// done, which is about to end (a collective's derived context), so that
// its end runs no callback.
func (c *Comm) unwatch(done <-chan struct{}) {
	for _, l := range c.links {
		if l == nil {
			continue
		}
		l.rmu.Lock()
		if l.watchDone == done {
			l.unwatchLocked()
		}
		if l.lastDone == done {
			l.lastDone = nil
		}
		l.rmu.Unlock()
	}
}

// unkickStale clears a kick that reached the waiter for r while r is
// pending, its context live and the link open: one meant for the waiter
// before it, whose request's completer found the role held after that
// waiter had left (complete checks the role after it marks the request
// done). Left set, the kick would fail every read of this waiter.
func (l *link) unkickStale(ctx context.Context, r *request) {
	l.rmu.Lock()
	// A completion, the context's end and closeRead each mark their cause
	// before they kick, under rmu: a kick still live here is stale.
	if !r.fin.Load() && ctx.Err() == nil && !l.rClosed {
		l.unkickLocked()
	}
	l.rmu.Unlock()
}

// withdraw takes back a waiter's request for the role. It returns false
// when the request was withdrawn before the grant, true when the role was
// granted meanwhile (the caller then holds it and must release it).
func (l *link) withdraw() (granted bool) {
	l.rmu.Lock()
	defer l.rmu.Unlock()
	if l.rWant {
		l.rWant = false
		l.rWantFlag.Store(false)
		return false
	}
	<-l.rGrant
	return true
}

// release frees the role held by a waiter. The reader goroutine is woken
// only when a goroutine is blocked waiting without reading, or the link is
// going down; otherwise it finds the role free at its next check.
func (l *link) release() {
	l.rmu.Lock()
	l.holderDone = nil
	l.handOverLocked()
	free := l.rOwner == roleFree
	wake := free && (l.rClosed || l.c.parked.Load() > 0)
	l.rmu.Unlock()
	l.rwg.Done()
	if wake {
		select {
		case l.rWake <- struct{}{}:
		default:
		}
	}
}

// closeRead stops waiters from taking the role and wakes the reader
// goroutine to finish the read side: called once the link has failed and
// its connection is closed.
func (l *link) closeRead() {
	l.rmu.Lock()
	l.rClosed = true
	l.unwatchLocked() // no wait comes any more: let go of the context
	l.kickLocked()
	l.rmu.Unlock()
	select {
	case l.rWake <- struct{}{}:
	default:
	}
}
