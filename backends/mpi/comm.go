//go:build mpi

package mpi

import (
	"context"
	"fmt"
	"math"
	"runtime"
	"runtime/metrics"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"

	"github.com/xpu-go/xpu/comm"
	"github.com/xpu-go/xpu/flight"
	"github.com/xpu-go/xpu/impl"
	"github.com/xpu-go/xpu/memspace"
	"github.com/xpu-go/xpu/xerr"
)

// Comm is one rank of an MPI communicator: this process's rank of
// MPI_COMM_WORLD (Open), or of a communicator made by Split or Dup. It
// implements comm.Comm, comm.Blocking, comm.Collectives, comm.OneSided and
// comm.Notifier, and is safe for concurrent use by many goroutines.
//
// A Comm holds several MPI communicators over the same group: one carries
// the user's tags, the others the reserved tags of package comm's
// algorithms (tag - comm.MaxTag - 1 on the wire, spread over as many
// communicators as MPI_TAG_UB requires: one for Open MPI, four for MPICH),
// so a comm.AnyTag receive (MPI_ANY_TAG) can never match collective
// traffic.
type Comm struct {
	// rec is the flight recorder (nil when off), closed by Close.
	rec    *flight.Recorder
	main   handle
	res    []handle // carry the reserved tags, tagUB+1 tags each
	note   handle   // carries notifications (Notify), and the window is over it
	win    window   // the dynamic window of one-sided transfers, when winOK
	winOK  bool
	winErr error // why there is no window (several ranks, and MPI made none)
	secret [2]uint64
	rank   int
	size   int
	tagUB  int // largest tag MPI carries (MPI_TAG_UB)
	userUB int // largest user tag: min(tagUB, comm.MaxTag)

	// state counts operations in progress (its low 40 bits) plus one
	// reference held from creation to Close, carries closedBit, freedBit
	// and collBit (the lock of coll), and above them counts the operations
	// ended (wrapping), to pace yields (see pace). The MPI communicators
	// are freed when the count in progress drops to zero once closed.
	state atomic.Int64

	yielded atomic.Int64 // when pace last looked: nanoseconds since epoch

	coll coord // orders the collectives this process issues on main

	pmu     sync.Mutex
	pending map[*req]struct{} // nonblocking requests not yet completed

	one oneState // exposed regions and one-sided transfers under way

	freeErr error // error of freeing the MPI communicators
	freed   chan struct{}
}

var (
	_ comm.Comm        = (*Comm)(nil)
	_ comm.Blocking    = (*Comm)(nil)
	_ comm.Collectives = (*Comm)(nil)
	_ comm.Recording   = (*Comm)(nil)
	_ comm.OneSided    = (*Comm)(nil)
	_ comm.Notifier    = (*Comm)(nil)
)

// The bits of Comm.state; collBit (coll.go) is bit 40.
const (
	liveMask  = int64(1)<<43 - 1 // the count in progress and the flags
	freedBit  = int64(1) << 41
	closedBit = int64(1) << 42
	endedUnit = int64(1) << 43 // one operation ended

	// paceCalls is how many operations end between two looks at the clock
	// (a power of 2), paceGap the least time between yields (see pace).
	paceCalls = 64
	paceMask  = (paceCalls - 1) * endedUnit
	paceGap   = 5 * time.Millisecond
)

// epoch is the origin of Comm.yielded.
var epoch = time.Now()

// Open initialises MPI (the first time, asking for o.ThreadLevel) and
// returns this process's rank of MPI_COMM_WORLD, as a duplicate so that
// its traffic never meets other users of MPI_COMM_WORLD in the process.
//
// Open is collective: every process of the job calls it (as many times).
// It honours ctx while waiting for MPI and for the other processes. Close
// the Comm when done: closing the process's last communicator finalises
// MPI, after which Open fails with an error matching xpu.ErrUnavailable —
// MPI cannot be initialised twice in a process.
func Open(ctx context.Context, o Options) (*Comm, error) {
	if ctx == nil {
		return nil, xerr.Errorf(Name, "open", comm.ErrInvalidArgument, "nil context")
	}
	level, err := o.level()
	if err != nil {
		return nil, err
	}
	if err := initMPI(ctx, level); err != nil {
		return nil, err
	}
	return construct(ctx, "open", &worldCoord, cWorld(), nil, func() (set, error) {
		return dupSet(cWorld())
	})
}

// worldCoord orders the collectives Open issues on MPI_COMM_WORLD.
var (
	worldCoord = coord{word: &worldLock}
	worldLock  atomic.Int64
)

// made counts the communicators the process made, to label their flight
// records.
var made atomic.Int64

// newComm wraps the MPI objects of s and counts them as live.
func newComm(s set) (*Comm, error) {
	if err := acquireLib(); err != nil {
		return nil, err
	}
	lock()
	c := &Comm{main: s.main, res: s.res, note: s.note, win: s.win, winOK: s.winOK, winErr: s.winErr, secret: s.secret,
		rank: cRank(s.main), size: cSize(s.main), tagUB: cTagUB(s.main)}
	unlock()
	c.one.init(c.size)
	c.userUB = min(c.tagUB, comm.MaxTag)
	c.coll.word = &c.state
	c.pending = map[*req]struct{}{}
	c.freed = make(chan struct{})
	c.state.Store(1)
	label := "world"
	if n := made.Add(1); n > 1 {
		label = fmt.Sprintf("comm %d", n) // a split or a dup
	}
	c.rec = flight.New(flight.SizeFromEnv(), flight.Context{Rank: c.rank, Size: c.size, Backend: Name, Comm: label})
	return c, nil
}

// Rank returns this process's rank in the communicator.
func (c *Comm) Rank() int { return c.rank }

// Size returns the number of ranks.
func (c *Comm) Size() int { return c.size }

// TagUB returns the largest tag this MPI carries (the MPI_TAG_UB attribute;
// at least 32767). User tags above it, though at most comm.MaxTag, are
// refused with comm.ErrInvalidArgument.
func (c *Comm) TagUB() int { return min(c.tagUB, comm.MaxTag) }

// enter counts a new operation; it fails once the communicator is closed.
// (enter stays small enough to be inlined: it runs before every call.)
func (c *Comm) enter() bool {
	if c.state.Add(1)&(closedBit|freedBit) != 0 {
		c.exitSlow()
		return false
	}
	return true
}

// enterAny counts an operation that finishes earlier work (an abandoned
// collective's continuation); it fails only once the communicators are
// freed.
func (c *Comm) enterAny() bool {
	if v := c.state.Add(1); v&freedBit != 0 {
		c.exit()
		return false
	}
	return true
}

// exit ends an operation; the last one after Close frees the communicator.
// Every paceCalls-th looks whether to yield (pace).
func (c *Comm) exit() {
	if v := c.state.Add(endedUnit - 1); wantsMore(v) {
		c.exited(v)
	}
}

// wantsMore reports whether the state v left by an operation's end asks
// for exited: the last operation after Close, or a paceCalls-th end.
func wantsMore(v int64) bool { return v&paceMask == 0 || v&liveMask == closedBit }

// exited finishes exit, exitColl or exitSlow when the state after it, v,
// asks for more: freeing the communicators, or a look at the clock.
//
//go:noinline
func (c *Comm) exited(v int64) {
	if v&liveMask == closedBit {
		c.freeOnce()
	} else {
		c.pace()
	}
}

//go:noinline
func (c *Comm) exitSlow() { c.exit() }

// pace yields the processor (runtime.Gosched) when paceGap has passed
// since the communicator last looked and no other goroutine is waiting for
// a processor. A goroutine that only calls MPI, each call a short cgo
// call, never passes through the scheduler; after 10 ms the runtime's
// monitor thread (sysmon) takes its processor away in the middle of a
// call to preempt it, wakes other threads, and polls every 20 µs for a
// millisecond or more, on the cores the ranks spin on: 8-byte operations
// took 30-70% longer, nearly twice as long at GOMAXPROCS=1. Yielding
// first keeps the runtime quiet. When goroutines are waiting (runnable)
// it does not yield: they would take the processor for their time slice,
// and the communication would wait for them.
func (c *Comm) pace() {
	now := int64(time.Since(epoch))
	if last := c.yielded.Load(); now-last < int64(paceGap) || !c.yielded.CompareAndSwap(last, now) {
		return
	}
	if othersWaiting() {
		return
	}
	runtime.Gosched()
}

// othersWaiting reports whether goroutines are waiting for a processor
// (about 100 ns; true when the runtime does not tell).
func othersWaiting() bool {
	s := [1]metrics.Sample{{Name: "/sched/goroutines/runnable:goroutines"}}
	metrics.Read(s[:])
	return s[0].Value.Kind() != metrics.KindUint64 || s[0].Value.Uint64() != 0
}

// freeOnce frees the communicator unless another goroutine got there
// first; it is called when the state reads closed with no operation left.
func (c *Comm) freeOnce() {
	for {
		v := c.state.Load()
		if v&liveMask != closedBit {
			return // freed already, or an operation came in (it will end)
		}
		if c.state.CompareAndSwap(v, v|freedBit) {
			c.free()
			return
		}
	}
}

// free releases the MPI communicators and the window; it runs once.
func (c *Comm) free() {
	err := c.freeWindow()
	lock()
	rc := freeSet(set{main: c.main, res: c.res, note: c.note})
	unlock()
	if err == nil {
		err = mpiError("close", rc)
	}
	if lerr := releaseLib(); err == nil {
		err = lerr
	}
	c.freeErr = err
	close(c.freed)
}

// Close leaves the communicator. Later operations fail with
// comm.ErrClosed. Pending receives are canceled and their Wait returns
// comm.ErrClosed (a receive that a message matched before the cancel took
// hold completes normally); a pending send MPI cannot cancel (Open MPI
// never cancels sends) completes when its receiver takes it. The MPI
// communicators are freed once no call of this Comm is in progress;
// a blocking call with a context that is never done (the direct
// MPI_Send/MPI_Recv path) cannot be interrupted and delays the freeing
// until it returns. Freeing also frees the Comm's window (one-sided
// communication), which is collective: the call that frees waits until
// every rank has closed the Comm. Closing the process's last communicator
// finalises MPI, which waits for every process of the job to finalise too.
//
// Peers are not told: MPI has no way to report a departed rank to them
// (see the package documentation). Close is idempotent and returns the
// error of freeing the communicators when it happened during the call.
func (c *Comm) Close() error {
	if c == nil {
		return nil
	}
	for {
		v := c.state.Load()
		if v&closedBit != 0 {
			return nil
		}
		if c.state.CompareAndSwap(v, v|closedBit) {
			break
		}
	}
	c.pmu.Lock()
	reqs := make([]*req, 0, len(c.pending))
	for r := range c.pending {
		reqs = append(reqs, r)
	}
	c.pmu.Unlock()
	for _, r := range reqs {
		r.closeCancel()
	}
	progressOrphans()
	c.rec.Close()
	c.exit() // the reference held since creation
	select {
	case <-c.freed:
		return c.freeErr
	default:
		return nil
	}
}

// FlightRecorder returns the communicator's flight recorder
// (comm.Recording), nil when XPU_FLIGHT_SIZE turned it off. The requests
// and blocking calls of user tags are recorded; those of the collective
// algorithms (reserved tags) are part of their collective's entry.
func (c *Comm) FlightRecorder() *flight.Recorder { return c.rec }

// flightPostIf records a point-to-point call of a user tag as posted,
// when record is set.
func (c *Comm) flightPostIf(record bool, op flight.Op, peer, tag, n int) flight.Ticket {
	if !record || tag > comm.MaxTag || c.rec == nil {
		return flight.Ticket{}
	}
	return c.rec.Post(op, peer, tag, int64(n))
}

// direct reports whether a call may block inside MPI: when ctx can never
// end, MPI calls need no serialising, and no receive waits to be matched
// (only polling loops match them: see Irecv).
func direct(ctx context.Context) bool { return ctx.Done() == nil && !serial && recvq.n.Load() == 0 }

// route returns the MPI communicator and wire tag of a tag: user tags on
// main, reserved tags shifted down by comm.MaxTag+1 and spread over res,
// MPI_TAG_UB+1 tags each. AnyTag stays on main.
func (c *Comm) route(op string, tag int) (handle, int, error) {
	if tag == comm.AnyTag {
		return c.main, cAnyTag, nil
	}
	if tag <= comm.MaxTag {
		if tag > c.tagUB {
			return c.main, 0, xerr.Errorf(Name, op, comm.ErrInvalidArgument, "tag %d above the largest this MPI carries (MPI_TAG_UB %d)", tag, c.tagUB)
		}
		return c.main, tag, nil
	}
	wire, span := tag-comm.MaxTag-1, c.tagUB+1
	if i := wire / span; i < len(c.res) {
		return c.res[i], wire % span, nil
	}
	return c.main, 0, xerr.Errorf(Name, op, comm.ErrInvalidArgument, "reserved tag %d beyond the %d this MPI carries (MPI_TAG_UB %d)", tag, len(c.res)*span, c.tagUB)
}

// userTag maps a tag received on h back to the user's view.
func (c *Comm) userTag(h handle, wire int) int {
	if h == c.main || wire < 0 {
		return wire
	}
	for i, r := range c.res {
		if r == h {
			return comm.MaxTag + 1 + i*(c.tagUB+1) + wire
		}
	}
	return wire
}

// hostArgs returns the host pointer and length of buf for MPI.
func hostArgs(op string, buf memspace.Block) (unsafe.Pointer, int, error) {
	n := buf.Len()
	if n == 0 {
		return nil, 0, nil
	}
	p := buf.HostPointer()
	if p == nil {
		return nil, 0, xerr.Errorf(Name, op, comm.ErrNotSupported, "block %v is not host-accessible (this backend passes host memory to MPI)", buf)
	}
	if n > math.MaxInt32 {
		return nil, 0, xerr.Errorf(Name, op, comm.ErrNotSupported, "message of %d bytes exceeds MPI's int count (2 GiB - 1)", n)
	}
	return p, n, nil
}

// p2pArgs validates a point-to-point call and returns its MPI arguments.
func (c *Comm) p2pArgs(op string, buf memspace.Block, peer, tag int, recv bool) (unsafe.Pointer, int, handle, int, error) {
	var h handle
	if err := impl.CheckWireTag(tag, recv); err != nil {
		return nil, 0, h, 0, xerr.Op(Name, op, err)
	}
	if err := impl.CheckRank(peer, c.size, recv); err != nil {
		return nil, 0, h, 0, xerr.Op(Name, op, err)
	}
	if peer == comm.AnySource {
		peer = cAnySource
	}
	p, n, err := hostArgs(op, buf)
	if err != nil {
		return nil, 0, h, 0, err
	}
	h, wire, err := c.route(op, tag)
	if err != nil {
		return nil, 0, h, 0, err
	}
	return p, n, h, wire, nil
}

// Isend starts sending buf to rank dest with tag (MPI_Isend). Go memory
// is pinned until the request completes.
func (c *Comm) Isend(buf memspace.Block, dest, tag int) (comm.Request, error) {
	return c.isend(buf, dest, tag, true)
}

// isend is Isend; record says whether it is recorded (not when it is part
// of a Send, which is).
func (c *Comm) isend(buf memspace.Block, dest, tag int, record bool) (comm.Request, error) {
	p, n, h, wire, err := c.p2pArgs("isend", buf, dest, tag, false)
	if err != nil {
		return nil, err
	}
	if !c.enter() {
		return nil, errClosed("isend")
	}
	defer c.exit()
	r := c.newReq(buf, true, dest, tag, n, h, c.flightPostIf(record, flight.OpSend, dest, tag, n))
	lock()
	mr, rc := cIsend(p, n, dest, wire, h)
	unlock()
	return c.started(r, mr, rc)
}

// Irecv starts receiving into buf from source (or comm.AnySource) with tag
// (or comm.AnyTag). Go memory is pinned until the request completes.
//
// The receive is matched by a probe (MPI_Improbe, then MPI_Imrecv), not
// posted with MPI_Irecv: a message longer than buf is then received into
// memory of its own length and its first len(buf) bytes copied, because
// Open MPI 4.1 writes a truncated rendezvous message past the end of the
// buffer. Receives not yet matched wait in a queue of the communicator, in
// the order they were started, and are matched in that order whenever a
// request of the communicator is tested; so MPI's matching rules hold
// (non-overtaking, the earliest receive a message fits).
func (c *Comm) Irecv(buf memspace.Block, source, tag int) (comm.Request, error) {
	return c.irecv(buf, source, tag, true)
}

// irecv is Irecv; record says whether it is recorded (not when it is part
// of a Recv, which is).
func (c *Comm) irecv(buf memspace.Block, source, tag int, record bool) (comm.Request, error) {
	_, n, h, wire, err := c.p2pArgs("irecv", buf, source, tag, true)
	if err != nil {
		return nil, err
	}
	src := source
	if src == comm.AnySource {
		src = cAnySource
	}
	if !c.enter() {
		return nil, errClosed("irecv")
	}
	defer c.exit()
	r := c.newReq(buf, false, source, tag, n, h, c.flightPostIf(record, flight.OpRecv, source, tag, n))
	r.wsrc, r.wire = src, wire
	c.pmu.Lock()
	c.pending[r] = struct{}{}
	c.pmu.Unlock()
	recvq.mu.Lock()
	recvq.list = append(recvq.list, r)
	recvq.n.Add(1)
	recvq.mu.Unlock()
	match()
	return r, nil
}

// Send sends buf to dest with tag and returns when the buffer may be
// reused. With a context that can never end (context.Background) it is
// one MPI_Send. Otherwise the message is copied first and sent with
// MPI_Isend while ctx is watched: on ctx done the send is canceled where
// MPI can (Open MPI never cancels a send, nor MPICH over UCX), and ctx.Err() is
// returned; a send MPI could not cancel stays in flight from the copy and
// may still be delivered.
func (c *Comm) Send(ctx context.Context, buf memspace.Block, dest, tag int) error {
	t := c.flightPostIf(true, flight.OpSend, dest, tag, buf.Len())
	err := c.sendAny(ctx, buf, dest, tag)
	t.Finish(err)
	return err
}

// sendAny is Send, unrecorded.
func (c *Comm) sendAny(ctx context.Context, buf memspace.Block, dest, tag int) error {
	// The fast path, one cgo call: a context that cannot end, a user tag,
	// a rank, host memory.
	if ctx != nil && !serial && uint(dest) < uint(c.size) && uint(tag) <= uint(c.userUB) && recvq.n.Load() == 0 &&
		ctx.Done() == nil && !(quirks.selfBlocking && dest == c.rank) {
		if p, n := buf.HostPointer(), buf.Len(); (p != nil || n == 0) && n <= math.MaxInt32 && c.enter() {
			rc := cSend(p, n, dest, tag, c.main)
			c.exit()
			if rc != 0 {
				return mpiError("send", rc)
			}
			return nil
		}
	}
	return c.send(ctx, buf, dest, tag)
}

// send is Send's general path.
func (c *Comm) send(ctx context.Context, buf memspace.Block, dest, tag int) error {
	if ctx == nil {
		return xerr.Errorf(Name, "send", comm.ErrInvalidArgument, "nil context")
	}
	p, n, h, wire, err := c.p2pArgs("send", buf, dest, tag, false)
	if err != nil {
		return err
	}
	if direct(ctx) && !(quirks.selfBlocking && dest == c.rank) {
		if !c.enter() {
			return errClosed("send")
		}
		rc := cSend(p, n, dest, wire, h)
		c.exit()
		if rc != 0 {
			return mpiError("send", rc)
		}
		return nil
	}
	if err := ctx.Err(); err != nil {
		return xerr.Op(Name, "send", err)
	}
	if ctx.Done() == nil {
		// Nothing can end the wait: no copy is needed.
		r, err := c.isend(buf, dest, tag, false)
		if err != nil {
			return err
		}
		_, err = r.Wait(ctx)
		return err
	}
	return c.sendCopy(ctx, p, n, dest, tag, wire, h)
}

// Recv receives into buf from source (or comm.AnySource) with tag (or
// comm.AnyTag). With a context that can never end it is MPI_Mprobe and
// MPI_Mrecv, in one cgo call; otherwise a receive request (Irecv) watched
// with ctx and withdrawn on ctx done if no message has matched it. A
// message longer than buf fails with an error matching comm.ErrTruncated,
// its first len(buf) bytes delivered (Status.Count).
func (c *Comm) Recv(ctx context.Context, buf memspace.Block, source, tag int) (comm.Status, error) {
	t := c.flightPostIf(true, flight.OpRecv, source, tag, buf.Len())
	st, err := c.recvAny(ctx, buf, source, tag)
	t.Finish(err)
	return st, err
}

// recvAny is Recv, unrecorded.
func (c *Comm) recvAny(ctx context.Context, buf memspace.Block, source, tag int) (comm.Status, error) {
	// The fast path, one cgo call: a context that cannot end, a user tag
	// or AnyTag, a rank, host memory.
	if ctx != nil && !serial && (uint(source) < uint(c.size) || source == comm.AnySource) && uint(tag+1) <= uint(c.userUB+1) &&
		recvq.n.Load() == 0 && ctx.Done() == nil && !(quirks.selfBlocking && (source == c.rank || source == comm.AnySource)) {
		if p, n := buf.HostPointer(), buf.Len(); (p != nil || n == 0) && n <= math.MaxInt32 && c.enter() {
			src := source
			if src == comm.AnySource {
				src = cAnySource
			}
			st, err := c.blockingRecv(p, n, src, tag, c.main) // MPI_ANY_TAG is -1, as comm.AnyTag
			c.exit()
			return st, err
		}
	}
	return c.recv(ctx, buf, source, tag)
}

// recv is Recv's general path.
func (c *Comm) recv(ctx context.Context, buf memspace.Block, source, tag int) (comm.Status, error) {
	if ctx == nil {
		return comm.Status{}, xerr.Errorf(Name, "recv", comm.ErrInvalidArgument, "nil context")
	}
	p, n, h, wire, err := c.p2pArgs("recv", buf, source, tag, true)
	if err != nil {
		return comm.Status{}, err
	}
	src := source
	if src == comm.AnySource {
		src = cAnySource
	}
	// Blocking inside MPI is allowed (and no receive waits to be matched).
	if direct(ctx) && !(quirks.selfBlocking && (source == c.rank || source == comm.AnySource)) {
		if !c.enter() {
			return comm.Status{}, errClosed("recv")
		}
		st, err := c.blockingRecv(p, n, src, wire, h)
		c.exit()
		return st, err
	}
	if err := ctx.Err(); err != nil {
		return comm.Status{}, xerr.Op(Name, "recv", err)
	}
	cr, err := c.irecv(buf, source, tag, false)
	if err != nil {
		return comm.Status{}, err
	}
	r := cr.(*req)
	st, err := r.wait(ctx, false)
	if err == nil || ctx.Err() == nil {
		return st, err
	}
	// ctx ended: cancel, and report what happened first.
	_ = r.Cancel()
	st, werr := r.wait(context.Background(), false)
	if werr == nil {
		return st, nil // a message matched before the cancel took hold
	}
	if r.wasCanceled() {
		return comm.Status{}, xerr.Op(Name, "recv", ctx.Err())
	}
	return st, werr
}

// blockingRecv receives into the n bytes at p inside MPI. It probes first
// (MPI_Mprobe, then MPI_Mrecv, in one cgo call) and receives a longer
// message into memory of its length, whose first n bytes it delivers:
// Open MPI 4.1 writes a truncated rendezvous message past the end of the
// buffer, and MPICH over UCX delivers none of it.
func (c *Comm) blockingRecv(p unsafe.Pointer, n, src, wire int, h handle) (comm.Status, error) {
	st, fits, length, m, rc := cPrecv(p, n, src, wire, h)
	cs := comm.Status{Source: st.source, Tag: c.userTag(h, st.tag), Count: min(st.count, n)}
	if rc != 0 {
		return cs, mpiError("recv", rc)
	}
	if fits {
		return cs, nil
	}
	err := c.recvLonger(p, n, length, st.source, m, &cs)
	return cs, err
}

// recvLonger receives a matched message of length bytes, longer than the
// n bytes at p (or longer than an int: length < 0), into memory of its own
// and delivers its first n bytes.
func (c *Comm) recvLonger(p unsafe.Pointer, n, length, src int, m message, cs *comm.Status) error {
	if length < 0 {
		return xerr.Errorf(Name, "recv", comm.ErrNotSupported, "a message from rank %d longer than 2 GiB - 1 bytes", src)
	}
	s := getScratch(length)
	defer putScratch(s)
	st, rc := cMrecv(s.ptr(), length, m)
	if rc != 0 {
		return mpiError("recv", rc)
	}
	if n > 0 {
		copy(unsafe.Slice((*byte)(p), n), s.bytes())
	}
	cs.Count = n
	return truncated(st.source, length, n)
}

// truncated is the error of a message of length bytes from rank src
// received into n.
func truncated(src, length, n int) error {
	return xerr.Errorf(Name, "recv", comm.ErrTruncated, "a %d-byte message from rank %d into a %d-byte buffer", length, src, n)
}

// sendCopy sends a private copy of the n bytes at p, watching ctx.
func (c *Comm) sendCopy(ctx context.Context, p unsafe.Pointer, n, dest, tag, wire int, h handle) error {
	if !c.enter() {
		return errClosed("send")
	}
	s := getScratch(n)
	if n > 0 {
		copy(s.bytes(), unsafe.Slice((*byte)(p), n))
	}
	o := &orphan{op: "send", scratch: []*scratch{s}}
	o.pin()
	lock()
	mr, rc := cIsend(s.ptr(), n, dest, wire, h)
	unlock()
	c.exit()
	if rc != 0 {
		o.release()
		return mpiError("send", rc)
	}
	o.hs = []request{mr}
	done, rc, canceled, err := o.await(ctx)
	if done {
		o.release()
		if canceled {
			return xerr.Op(Name, "send", ctx.Err())
		}
		return mpiError("send", rc)
	}
	// ctx ended with the send still pending: cancel it where MPI can, and
	// leave it to complete (or be canceled) from its copy.
	o.cancel()
	if done, rc, canceled := o.poll(); done {
		o.release()
		if canceled {
			return xerr.Op(Name, "send", err)
		}
		if rc == 0 {
			return nil // it completed before the cancel took hold
		}
		return mpiError("send", rc)
	}
	adopt(o)
	return xerr.Op(Name, "send", err)
}
