package procs

import (
	"context"
	"errors"
	"net"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/xpu-go/xpu/comm"
	"github.com/xpu-go/xpu/internal/order"
	"github.com/xpu-go/xpu/internal/p2p"
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
// idleCheck: nothing the peer sends goes unread longer than that. A
// blocking Recv over shared memory takes the free role for its lane
// (lane.go: tryTake) and gives it back with one store (releaseLane).
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

// readRole is a link's read role: who holds it, who asked for it, and how
// the holder is interrupted. mu guards want, kicked, dead, closed and
// the contexts of waits (holderDone, lastDone, watchDone, watchStop);
// taken is the holders' (countTake). wantFlag mirrors want and atBoundary says that the holder
// waits for a frame header: both are read without mu, by the holder and by
// a goroutine that completes a waiter's request. grant and wake need no
// lock; conn, parked and idle are set before the link starts, released
// (on mu) when it is made.
//
// Whether a waiter holds the role is owner's business alone (roleWaiter):
// a waiter's turn costs the lock once to take the role and once to give it
// back, with no count beside them, on the path of every message a waiter
// reads itself (ADR 28); the lane's, one compare-and-swap to take it and
// one exchange to give it back (tryTake, releaseLane; ADR 52). Close
// waits for the holder through released.
type readRole struct {
	conn   net.Conn      // a read deadline in the past on it is a kick
	parked *atomic.Int32 // Comm.parked: goroutines blocked in Wait without reading
	ending *atomic.Bool  // Comm.shut: the rank is closing, and its links must read the goodbyes
	idle   time.Duration // idleCheck, or a test's

	mu     sync.Mutex
	want   bool // a waiter asked for the role
	kicked bool // a kick is set
	dead   bool // the read side has ended
	closed bool // the read side must end: the link failed
	// The contexts of waits (watchLocked): Done of the holder's context,
	// of the last wait's, and of the context whose registration is kept,
	// with the function that drops it.
	holderDone, lastDone, watchDone <-chan struct{}
	watchStop                       func() bool

	// owner is roleFree, roleReader or roleWaiter. It changes under mu,
	// except where the lane takes the role (tryTake: a compare-and-swap
	// from roleFree) and gives it back (releaseLane): atomic, and every
	// change from roleFree is a compare-and-swap.
	owner      atomic.Int32
	shut       atomic.Bool // mirrors closed, for the lane
	ended      atomic.Bool // mirrors dead, for the lane
	wantFlag   atomic.Bool
	atBoundary atomic.Bool
	grant      chan struct{} // the role, handed to the waiter that asked
	wake       chan struct{} // wakes the reader goroutine
	released   sync.Cond     // on mu: a waiter gave the role back after close
	// taken counts the times a waiter took the role. Only a holder of the
	// role adds to it, so it needs no lock and no read-modify-write:
	// holders follow one another through owner.
	taken uint64
}

// countTake counts a take of the role by a waiter, which holds it.
func (ro *readRole) countTake() { order.Release(&ro.taken, atomic.LoadUint64(&ro.taken)+1) }

// kickLocked interrupts the holder's blocked read; mu is held.
func (ro *readRole) kickLocked() {
	if !ro.kicked {
		ro.kicked = true
		_ = ro.conn.SetReadDeadline(time.Unix(1, 0))
	}
}

// unkickLocked clears the read deadline of a kick; mu is held.
func (ro *readRole) unkickLocked() {
	if ro.kicked {
		ro.kicked = false
		_ = ro.conn.SetReadDeadline(time.Time{})
	}
}

// unkick clears a kick.
func (ro *readRole) unkick() {
	ro.mu.Lock()
	ro.unkickLocked()
	ro.mu.Unlock()
}

// kickWaiter interrupts the holder's read if the holder is a waiter: for
// the goroutine that completes the request it waits for.
func (ro *readRole) kickWaiter() {
	ro.mu.Lock()
	if ro.owner.Load() == roleWaiter {
		ro.kickLocked()
	}
	ro.mu.Unlock()
}

// handOverLocked frees the role, or gives it to the waiter that asked for
// it. mu is held.
func (ro *readRole) handOverLocked() {
	ro.unkickLocked()
	if ro.want && !ro.dead && !ro.closed {
		ro.want = false
		ro.wantFlag.Store(false)
		ro.owner.Store(roleWaiter)
		ro.grant <- struct{}{}
		return
	}
	ro.owner.Store(roleFree)
}

// handOver is handOverLocked for the reader goroutine, which holds no
// lock.
func (ro *readRole) handOver() {
	ro.mu.Lock()
	ro.handOverLocked()
	ro.mu.Unlock()
}

// wakeReader asks the reader goroutine to take the role if it is free:
// for a goroutine about to block on something this link must read.
func (ro *readRole) wakeReader() {
	ro.mu.Lock()
	free := ro.owner.Load() == roleFree
	ro.mu.Unlock()
	if free {
		ro.wakeUp()
	}
}

// wakeUp wakes the reader goroutine.
func (ro *readRole) wakeUp() {
	select {
	case ro.wake <- struct{}{}:
	default:
	}
}

// isKicked reports whether err is a read deadline's: a kick.
func isKicked(err error) bool { return errors.Is(err, os.ErrDeadlineExceeded) }

// takeForReader waits until the role is free and no waiter has asked for
// it, and takes it for the reader goroutine; false once the read side has
// ended. While others hold the role it looks every idleCheck (on idle, a
// stopped timer) and whenever woken.
func (ro *readRole) takeForReader(idle *time.Timer) bool {
	ro.mu.Lock()
	for ro.want || !ro.owner.CompareAndSwap(roleFree, roleReader) {
		if ro.dead {
			ro.mu.Unlock()
			return false
		}
		ro.mu.Unlock()
		idle.Reset(ro.idle)
		select {
		case <-ro.wake:
		case <-idle.C:
		}
		idle.Stop()
		ro.mu.Lock()
	}
	if ro.dead {
		ro.owner.Store(roleFree)
		ro.mu.Unlock()
		return false
	}
	ro.mu.Unlock()
	return true
}

// unkickWithdrawn clears a kick that reached the reader goroutine for a
// waiter that has withdrawn its request for the role.
func (ro *readRole) unkickWithdrawn() {
	ro.mu.Lock()
	if !ro.want {
		ro.unkickLocked()
	}
	ro.mu.Unlock()
}

// end marks the read side ended; false when it already was.
func (ro *readRole) end() bool {
	ro.mu.Lock()
	defer ro.mu.Unlock()
	if ro.dead {
		return false
	}
	ro.dead = true
	ro.ended.Store(true)
	return true
}

// takeForWaiter takes the role for a goroutine that waits with ctx for the
// request r: at once when the role is free, else by
// asking the holder to yield. held reports that the caller holds the role,
// which it gives back with release after it runs stop, if not nil (see
// watchLocked). Else handled is false when the role is not to be had
// (another waiter holds it or asked for it, or the read side has ended),
// and true when the request completed or ctx ended while it asked.
func (ro *readRole) takeForWaiter(ctx context.Context, r *p2p.Done) (held, handled bool, stop func() bool) {
	ro.mu.Lock()
	if ro.dead || ro.closed || ro.want {
		ro.mu.Unlock()
		return false, false, nil
	}
	// owner is loaded once: the lane changes it without the lock, from
	// roleFree to roleWaiter and back; only roleReader stays while mu is
	// held.
	switch ro.owner.Load() {
	case roleWaiter:
		ro.mu.Unlock()
		return false, false, nil
	case roleFree:
		if !ro.owner.CompareAndSwap(roleFree, roleWaiter) {
			// The lane took it meanwhile (tryTake): a waiter holds it.
			ro.mu.Unlock()
			return false, false, nil
		}
		ro.countTake()
		stop = ro.watchLocked(ctx)
		ro.mu.Unlock()
		return true, true, stop
	}
	ro.want = true
	ro.wantFlag.Store(true)
	ro.kickLocked()
	ro.mu.Unlock()
	granted := true
	select {
	case <-ro.grant:
	case <-r.Chan():
		granted = false
	case <-ctx.Done():
		granted = false
	}
	if !granted {
		if ro.withdraw() {
			ro.release()
		}
		return false, true, nil
	}
	ro.mu.Lock()
	ro.countTake()
	stop = ro.watchLocked(ctx)
	ro.mu.Unlock()
	return true, true, stop
}

// tryTake takes the role, when it is free, for a waiter that polls the
// link itself and never blocks in a read (the lane, lane.go): no kick is
// registered for its context, which it watches itself. false when the role
// is not to be had at once. It takes no lock, and one locked instruction
// (ADR 52):
//
//   - Every change of owner from roleFree is a compare-and-swap, so only
//     one of those who race for a free role gets it.
//   - Nobody asked for a free role: want is set only while the reader
//     goroutine holds it, and cleared in the same critical section that
//     hands it over, so owner is never roleFree while want is set.
//   - The swap is a full fence, and then shut and ended are looked at:
//     close and end store them before they look at owner (awaitHolder), so
//     a lane that takes the role after Close has seen it free sees shut
//     and gives it back before it touches the link.
func (ro *readRole) tryTake() bool {
	if !ro.owner.CompareAndSwap(roleFree, roleWaiter) {
		return false
	}
	if ro.shut.Load() || ro.ended.Load() {
		ro.releaseLane()
		return false
	}
	ro.countTake()
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
// together. mu is held.
func (ro *readRole) watchLocked(ctx context.Context) (stop func() bool) {
	done := ctx.Done()
	ro.holderDone = done
	if done == nil || done == ro.watchDone {
		ro.lastDone = done
		return nil
	}
	kick := func() {
		ro.mu.Lock()
		if ro.owner.Load() == roleWaiter && ro.holderDone == done {
			ro.kickLocked()
		}
		ro.mu.Unlock()
	}
	if done == ro.lastDone {
		ro.unwatchLocked()
		ro.watchDone, ro.watchStop = done, context.AfterFunc(ctx, kick)
		return nil
	}
	ro.lastDone = done
	return context.AfterFunc(ctx, kick)
}

// unwatchLocked drops the kept registration. mu is held.
func (ro *readRole) unwatchLocked() {
	if ro.watchStop != nil {
		ro.watchStop()
		ro.watchDone, ro.watchStop = nil, nil
	}
}

// forget drops what the role keeps for the context whose Done is done.
func (ro *readRole) forget(done <-chan struct{}) {
	ro.mu.Lock()
	if ro.watchDone == done {
		ro.unwatchLocked()
	}
	if ro.lastDone == done {
		ro.lastDone = nil
	}
	ro.mu.Unlock()
}

// unwatch drops whatever this rank keeps for the context whose Done is
// done, which is about to end (a collective's derived context), so that
// its end runs no callback.
func (c *Comm) unwatch(done <-chan struct{}) {
	for _, l := range c.links {
		if l != nil {
			l.role.forget(done)
		}
	}
}

// unkickStale clears a kick that reached the waiter for r while r is
// pending, its context live and the link open: one meant for the waiter
// before it, whose request's completer found the role held after that
// waiter had left (complete checks the role after it marks the request
// done). Left set, the kick would fail every read of this waiter.
func (ro *readRole) unkickStale(ctx context.Context, r *p2p.Done) {
	ro.mu.Lock()
	// A completion, the context's end and close each mark their cause
	// before they kick, under mu: a kick still live here is stale.
	if !r.Finishing() && ctx.Err() == nil && !ro.closed {
		ro.unkickLocked()
	}
	ro.mu.Unlock()
}

// withdraw takes back a waiter's request for the role. It returns false
// when the request was withdrawn before the grant, true when the role was
// granted meanwhile (the caller then holds it and must release it).
func (ro *readRole) withdraw() (granted bool) {
	ro.mu.Lock()
	defer ro.mu.Unlock()
	if ro.want {
		ro.want = false
		ro.wantFlag.Store(false)
		return false
	}
	<-ro.grant
	return true
}

// release frees the role held by a waiter. The reader goroutine is woken
// only when a goroutine is blocked waiting without reading, or the link or
// the rank is going down (the peer's goodbye must be read); otherwise it
// finds the role free at its next check.
func (ro *readRole) release() {
	ro.mu.Lock()
	ro.holderDone = nil
	ro.handOverLocked()
	ro.releasedLocked()
}

// releasedLocked tells those who need it that a waiter gave the role back:
// Close, waiting for the holder (awaitHolder), once the role is closed;
// the reader goroutine, when the role is free and a goroutine blocks
// without reading or the link or the rank is going down. mu is held on
// entry and released.
func (ro *readRole) releasedLocked() {
	if ro.closed {
		ro.released.Broadcast()
	}
	wake := ro.owner.Load() == roleFree && (ro.closed || ro.parked.Load() > 0 || ro.ending.Load())
	ro.mu.Unlock()
	if wake {
		ro.wakeUp()
	}
}

// releaseLane gives back the role the lane took (tryTake) without the
// lock when nobody needs to hear of it: the owner is a waiter, so nobody
// asked for the role meanwhile (takeForWaiter asks only the reader
// goroutine; a waiter that finds a waiter holding it waits without
// reading, counted in parked), and the role's holder is the one that
// changes owner away from roleWaiter. The store of owner comes before the
// loads of shut and parked, and Comm.Close sets shut (close) before it
// looks at owner (awaitHolder), a parked waiter counts itself before it
// looks at owner (wakeReader): a full fence on each side, so one of the
// two sees the other, and the lane then takes the lock to wake them.
func (ro *readRole) releaseLane() {
	ro.owner.Store(roleFree)
	if !ro.shut.Load() && ro.parked.Load() == 0 && !ro.ending.Load() {
		return
	}
	ro.mu.Lock()
	ro.releasedLocked()
}

// awaitHolder waits until no waiter holds the role: once the role is
// closed, no waiter takes it again (Comm.Close, before it unmaps what the
// holder reads).
func (ro *readRole) awaitHolder() {
	ro.mu.Lock()
	for ro.owner.Load() == roleWaiter {
		ro.released.Wait()
	}
	ro.mu.Unlock()
}

// directReads is how many times a waiter took the role.
func (ro *readRole) directReads() int64 { return int64(atomic.LoadUint64(&ro.taken)) }

// close stops waiters from taking the role and wakes the reader goroutine
// to finish the read side: called once the link has failed and its
// connection is closed.
func (ro *readRole) close() {
	ro.mu.Lock()
	ro.closed = true
	ro.shut.Store(true)
	ro.unwatchLocked() // no wait comes any more: let go of the context
	ro.kickLocked()
	ro.mu.Unlock()
	ro.wakeUp()
}

// readFailed ends the read side on err (the holder of the role saw it):
// the link fails, and the rendezvous receives it was streaming fail too.
// Only the first call has an effect.
func (l *link) readFailed(err error) {
	l.fail(err)
	if !l.role.end() {
		return
	}
	e := l.downErr
	if l.c.isClosed() {
		e = l.c.closedErr()
	}
	for _, r := range l.rd.shut(e) {
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
	for l.role.takeForReader(idle) {
		for !l.role.wantFlag.Load() {
			yield, err := l.step(nil)
			if err == nil && yield && l.closing() {
				err = l.downErr
			}
			if err != nil {
				l.readFailed(err)
				l.role.handOver()
				return
			}
			if yield {
				// A kick for a waiter that has withdrawn: clear it.
				l.role.unkickWithdrawn()
			}
		}
		l.role.handOver()
	}
}

// waitDirect waits for the receive r from this link's peer by taking the
// read role and reading the socket itself. handled is false when the role
// was not to be had (another waiter holds it, or the read side has ended):
// the caller then waits as usual.
func (l *link) waitDirect(ctx context.Context, r *request) (handled bool) {
	return l.readFor(ctx, &r.Done, &r.direct)
}

// readFor holds the read role of l for a goroutine that waits with ctx for
// d, and reads the link until d completes (see waitDirect); direct, when
// not nil, tells a goroutine that completes d elsewhere which link to
// kick.
func (l *link) readFor(ctx context.Context, d *p2p.Done, direct *atomic.Pointer[link]) (handled bool) {
	held, handled, stop := l.role.takeForWaiter(ctx, d)
	if !held {
		return handled
	}
	if direct != nil {
		direct.Swap(l) // then d's completion is looked at: a fence (ADR 28)
	}
	l.rd.spin = l.rd.raw != nil
	for !d.Finishing() && ctx.Err() == nil && !l.closing() {
		yield, err := l.step(d)
		if err != nil {
			l.readFailed(err)
			break
		}
		if yield {
			l.role.unkickStale(ctx, d)
		}
	}
	l.rd.spin = false
	if direct != nil && !d.IsDone() {
		// Once complete is done with d it looks at direct no more.
		direct.Store(nil)
	}
	if stop != nil {
		stop()
	}
	l.role.release()
	return true
}
