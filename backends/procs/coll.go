package procs

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"

	"github.com/xpu-go/xpu/comm"
	"github.com/xpu-go/xpu/flight"
	"github.com/xpu-go/xpu/internal/nodecoll"
	"github.com/xpu-go/xpu/memspace"
	"github.com/xpu-go/xpu/xerr"
)

// Native collectives.
//
// Every method of comm.Collectives runs inside collective(), which numbers
// the collectives of this rank (all ranks call them in the same order) and
// makes a lost peer end the collective on every rank: a rank whose
// collective fails with ErrPeerLost (or that starts one while a peer is
// lost) sends an abort naming the collective's number to every peer it
// still reaches, and each rank passes it on once; a rank running that
// collective, or a later one, fails it with ErrPeerLost. The shared
// algorithms of package comm alone would leave a survivor that waits on
// another survivor waiting until its context ends.
//
// Allreduce of more than ringMin bytes runs a pipelined ring whose
// receives fold the incoming chunk straight into the result as it is read
// from the socket; a smaller one runs recursive doubling, folding the same
// way, as a light collective (coll_small.go); the other collectives run
// the shared algorithms over this rank's point-to-point calls.

// ringMin is the largest allreduce, in bytes, that takes recursive
// doubling rather than the ring. Up to the default eager limit each of its
// log2(p) steps is one write each way, and it beats the ring's 2(p-1)
// steps on loopback (64 KiB: 0.77 of the ring's time on 2 and 4 ranks);
// above, each step needs a rendezvous round trip and the ring wins (128
// KiB: the ring takes 0.8 of recursive doubling's time).
var ringMin = 64 << 10

// ringChunk is the size of the pieces the ring pipelines.
var ringChunk = 1 << 20

// ringWindow is how many chunk receives the ring keeps posted.
var ringWindow = 8

// tagRing is the reserved tag of the ring's messages: above the range of
// the shared algorithms, below comm.MaxReservedTag.
const tagRing = comm.MaxReservedTag - 64

type collState struct {
	mu        sync.Mutex
	seq       atomic.Uint64 // collectives started
	abortFrom uint64        // the earliest aborted collective; 0: none
	abortErr  error
	// abortAt is abortFrom, for the light runs' lock-free check: they
	// look at it when they begin and as they wait (collState.abortOf).
	abortAt atomic.Uint64
	running []*collRun
	small   atomic.Pointer[smallColl] // allreduceSmall's state, between calls
}

func (s *collState) closeAll() {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, run := range s.running {
		run.abort(nil)
	}
}

// collRun is a collective in progress, as abortColl ends it: by canceling
// the context it runs under (cancel), or, for a light collective that
// derives no context (the small allreduce: a derived context and a
// context callback per wait cost as much as the rest of its bookkeeping),
// by recording the abort (err) and canceling the request it waits for
// (cur). A light collective publishes cur before it
// checks err, and abort sets err before it loads cur: one of them sees the
// other.
type collRun struct {
	seq    uint64
	cancel context.CancelCauseFunc
	err    atomic.Pointer[error]
	cur    atomic.Pointer[request]
}

// abort ends the run with cause (nil: the communicator is closing).
func (run *collRun) abort(cause error) {
	if run.cancel != nil {
		run.cancel(cause)
		return
	}
	if cause == nil {
		cause = comm.ErrClosed
	}
	run.err.CompareAndSwap(nil, &cause)
	if q := run.cur.Load(); q != nil {
		_ = q.Cancel()
	}
}

// aborted returns the abort recorded for a light run, or nil.
func (run *collRun) aborted() error {
	if e := run.err.Load(); e != nil {
		return *e
	}
	return nil
}

// wait waits for q, a request of the light run, and checks that a
// receive brought want bytes (want < 0: a send).
func (run *collRun) wait(ctx context.Context, q *request, want int) error {
	run.cur.Swap(q) // then the abort is looked at: a fence (ADR 28)
	if err := run.aborted(); err != nil {
		run.cur.Store(nil)
		return err
	}
	st, err := q.Wait(ctx)
	run.cur.Store(nil)
	if err != nil {
		if aerr := run.aborted(); aerr != nil {
			return aerr
		}
		return err
	}
	return checkCount(st, want)
}

// checkCount checks that a receive of a collective brought want bytes
// (want < 0: a send, nothing to check). A shorter message means the ranks
// disagree about sizes.
func checkCount(st comm.Status, want int) error {
	if want >= 0 && st.Count != want {
		return xerr.Detail(comm.ErrInvalidArgument, "received %d bytes from rank %d where %d were expected (do all ranks pass the same sizes?)",
			st.Count, st.Source, want)
	}
	return nil
}

// plain is a view of a Comm with point-to-point calls only, so that the
// shared algorithms of package comm run over it instead of calling back
// into the native collectives.
type plain struct{ c *Comm }

func (v plain) Rank() int { return v.c.rank }
func (v plain) Size() int { return v.c.size }
func (v plain) Isend(b memspace.Block, dest, tag int) (comm.Request, error) {
	return v.c.Isend(b, dest, tag)
}
func (v plain) Irecv(b memspace.Block, src, tag int) (comm.Request, error) {
	return v.c.Irecv(b, src, tag)
}
func (v plain) Close() error { return nil }

// FlightRecorder is the communicator's (comm.Recording): the collective
// run over the view is part of the one the user called, already recorded.
func (v plain) FlightRecorder() *flight.Recorder { return v.c.rec }

// collective runs body as collective name with the abort protocol above,
// under a context derived from ctx that an abort cancels.
func (c *Comm) collective(ctx context.Context, name string, body func(ctx context.Context) error) error {
	cctx, cancel := context.WithCancelCause(ctx)
	defer func() {
		c.unwatch(cctx.Done())
		cancel(nil)
	}()
	run := &collRun{cancel: cancel}
	return c.runColl(ctx, name, run, func() error { return body(cctx) }, func() error { return context.Cause(cctx) })
}

// runColl numbers the collective, runs body as run unless the group is
// already broken, and turns a failure caused by a lost peer into an abort
// of this and every later collective. cause reports the abort that ended
// the run, if any.
func (c *Comm) runColl(ctx context.Context, name string, run *collRun, body func() error, cause func() error) error {
	if err := c.collBegin(name, run); err != nil {
		return err
	}
	return c.collEnd(ctx, name, run, body(), cause)
}

// collBegin numbers the collective run and registers it for aborts, or
// returns why it may not run: the group is broken (an earlier collective
// was aborted, or a peer is lost) or this rank is closed. Every call
// takes a number, run or not, so that the ranks number alike. A
// collective that begins must end with collEnd.
func (c *Comm) collBegin(name string, run *collRun) error {
	s := &c.coll
	closed, anyLost := c.shut.Load(), c.anyLost.Load()
	s.mu.Lock()
	seq := s.seq.Add(1)
	if s.abortFrom != 0 && seq >= s.abortFrom {
		err := s.abortErr
		s.mu.Unlock()
		return xerr.Op(Name, name, err)
	}
	if !closed && !anyLost {
		run.seq = seq
		s.running = append(s.running, run)
		s.mu.Unlock()
		return nil
	}
	s.mu.Unlock()
	return c.collRefused(name, seq, closed)
}

// collRefused is the error of collective seq, which may not run: this
// rank is closed, or a peer is lost, which aborts seq and every later
// collective.
func (c *Comm) collRefused(name string, seq uint64, closed bool) error {
	if closed {
		return xerr.Errorf(Name, name, comm.ErrClosed, "rank %d", c.rank)
	}
	var lost error
	c.mu.Lock()
	for _, e := range c.lost {
		if e != nil {
			lost = e
			break
		}
	}
	c.mu.Unlock()
	c.abortColl(seq, c.rank, lost)
	return xerr.Op(Name, name, fmt.Errorf("a rank of the group is lost: %w", detailOf(lost)))
}

// lightBegin is collBegin for the run of the node's collectives, without
// the lock and without registering: it takes the collective's number with
// an atomic add, a full fence, then looks at abortAt and at whether this
// rank is closed or has lost a peer, and refuses to run if so. An abort
// (abortColl stores abortAt) or a Close (shut) that lands later is seen by
// the run's waits, which look at them every few polls and before each
// sleep (nodeHost.Aborted): a collective that needs no wait completes, as
// one that ended just before the abort. A collective that begins must end
// as nodeHost.End ends it.
func (c *Comm) lightBegin(name string) (seq uint64, err error) {
	s := &c.coll
	seq = s.seq.Add(1) // then abortAt is looked at: a fence
	if err := s.abortOf(seq); err != nil {
		return seq, xerr.Op(Name, name, err)
	}
	if closed, anyLost := c.shut.Load(), c.anyLost.Load(); closed || anyLost {
		return seq, c.collRefused(name, seq, closed)
	}
	return seq, nil
}

// abortOf returns the abort of collective seq (one aborted at or before
// it), or nil: a load while there is none.
func (s *collState) abortOf(seq uint64) error {
	if at := s.abortAt.Load(); at == 0 || seq < at {
		return nil
	}
	s.mu.Lock() // abortColl sets abortErr under it
	defer s.mu.Unlock()
	return s.abortErr
}

// collEnd ends the collective run, which collBegin began and which ended
// with err: it unregisters it and makes a failure caused by a lost peer
// an abort of this and every later collective. cause reports the abort
// that ended the run, if any.
func (c *Comm) collEnd(ctx context.Context, name string, run *collRun, err error, cause func() error) error {
	s := &c.coll
	s.mu.Lock()
	for i, x := range s.running {
		if x == run {
			last := len(s.running) - 1
			s.running[i] = s.running[last]
			s.running[last] = nil
			s.running = s.running[:last]
			break
		}
	}
	s.mu.Unlock()
	if err == nil {
		return nil
	}
	return c.collFailed(ctx, name, run.seq, err, cause)
}

// collFailed is what collective seq, which failed with err, returns: a
// failure caused by a lost peer aborts it and every later collective.
// cause reports the abort that ended the run, if any.
func (c *Comm) collFailed(ctx context.Context, name string, seq uint64, err error, cause func() error) error {
	if why := cause(); ctx.Err() == nil && why != nil && errors.Is(why, comm.ErrPeerLost) {
		err = why
	}
	if errors.Is(err, comm.ErrPeerLost) {
		c.abortColl(seq, c.rank, err)
	}
	if c.isClosed() && !errors.Is(err, comm.ErrClosed) {
		return xerr.Errorf(Name, name, comm.ErrClosed, "rank %d closed during the collective: %w", c.rank, detailOf(err))
	}
	return xerr.Op(Name, name, detailOf(err))
}

// abortColl records that collective seq (and every later one) is aborted,
// as rank by found (by == c.rank) or told, cancels those running, and
// passes the news on to every peer the first time.
func (c *Comm) abortColl(seq uint64, by int, cause error) {
	if seq == 0 {
		return
	}
	s := &c.coll
	s.mu.Lock()
	if s.abortFrom != 0 && s.abortFrom <= seq {
		s.mu.Unlock()
		return
	}
	s.abortFrom = seq
	s.abortAt.Store(seq) // the light run's begin and waits look at it (abortOf); abortErr is set under mu
	if by == c.rank {
		s.abortErr = fmt.Errorf("rank %d: collective #%d aborted: %w", c.rank, seq, detailOf(cause))
	} else {
		s.abortErr = xerr.Detail(comm.ErrPeerLost, "rank %d: collective #%d aborted by rank %d, which lost a peer", c.rank, seq, by)
	}
	for _, run := range s.running {
		if run.seq >= seq {
			run.abort(s.abortErr)
		}
	}
	s.mu.Unlock()
	c.mu.Lock()
	links := append([]*link(nil), c.links...)
	c.mu.Unlock()
	for _, l := range links {
		if l != nil && l.peer != by && l.failed() == nil {
			_ = l.w.sendCtl(frame{typ: frameAbort, a: seq}, false)
		}
	}
}

// hostBlock reports whether b is empty or host-accessible; hostBlocks,
// whether both are (not variadic: a slice of blocks costs a small
// collective more than its checks).
func hostBlock(b memspace.Block) bool { return b.Len() == 0 || b.HostAccessible() }

func hostBlocks(a, b memspace.Block) bool {
	// Blocks with a host mapping answer inline: a Block handed to a call
	// is spilled and copied through memory, which stalls a small
	// collective for longer than the rest of its checks.
	return a.HostPointer() != nil && b.HostPointer() != nil || bothHost(a, b)
}

func bothHost(a, b memspace.Block) bool { return hostBlock(a) && hostBlock(b) }

// oneNode returns the node collectives when every rank of the job shares
// this node's region (Reduce, Allgather and Alltoall run there only then),
// nil otherwise, or the error of setting them up for op.
func (c *Comm) oneNode(ctx context.Context, op string) (*nodecoll.Node, error) {
	n, err := c.nodeColls(ctx, op)
	if err != nil || n == nil || n.SpansNodes() {
		return nil, err
	}
	return n, nil
}

// Barrier returns once every rank has called it.
func (c *Comm) Barrier(ctx context.Context) error {
	if c.size == 1 {
		return comm.ErrFallback
	}
	n, err := c.nodeColls(ctx, "barrier")
	if err != nil {
		return err
	}
	if n != nil {
		return n.Barrier(ctx)
	}
	return c.collective(ctx, "barrier", func(ctx context.Context) error { return comm.Barrier(ctx, plain{c}) })
}

// Bcast copies buf on root to every rank.
func (c *Comm) Bcast(ctx context.Context, buf memspace.Block, root int) error {
	if c.size == 1 || !hostBlock(buf) {
		return comm.ErrFallback
	}
	n, err := c.nodeColls(ctx, "bcast")
	if err != nil {
		return err
	}
	if n != nil {
		return n.Bcast(ctx, buf, root)
	}
	return c.collective(ctx, "bcast", func(ctx context.Context) error { return comm.BcastBlock(ctx, plain{c}, buf, root) })
}

// The typed collectives of package comm reach a one-node job's region
// with bytes (comm.HostCollectives); any other job declines, and they come
// through Collectives instead.
var _ comm.HostCollectives = (*Comm)(nil)

// BcastBytes is Bcast of host bytes, in a one-node job's region.
func (c *Comm) BcastBytes(ctx context.Context, buf []byte, root int) error {
	n, err := c.hostNode(ctx, "bcast")
	if n == nil {
		return err
	}
	return n.BcastBytes(ctx, buf, root)
}

// AllreduceBytes is Allreduce of host bytes, in a one-node job's region.
func (c *Comm) AllreduceBytes(ctx context.Context, send, recv []byte, dt comm.DType, op comm.Op) error {
	n, err := c.hostNode(ctx, "allreduce")
	if n == nil {
		return err
	}
	return n.AllreduceBytes(ctx, send, recv, dt, op)
}

// hostNode returns the node collectives of a one-node job of more than
// one rank, or nil and the error of setting them up for op, or nil and
// comm.ErrFallback.
func (c *Comm) hostNode(ctx context.Context, op string) (*nodecoll.Node, error) {
	if c.nodeReady.Load() && c.oneNodeColl != nil {
		return c.oneNodeColl, nil
	}
	if c.size == 1 {
		return nil, comm.ErrFallback
	}
	n, err := c.oneNode(ctx, op)
	if n == nil && err == nil {
		err = comm.ErrFallback
	}
	return n, err
}

// Reduce reduces send over every rank into recv on root.
func (c *Comm) Reduce(ctx context.Context, send, recv memspace.Block, dt comm.DType, op comm.Op, root int) error {
	if c.size == 1 || !hostBlocks(send, recv) {
		return comm.ErrFallback
	}
	if n, err := c.oneNode(ctx, "reduce"); n != nil {
		return n.Reduce(ctx, send, recv, dt, op, root)
	} else if err != nil {
		return err
	}
	return c.collective(ctx, "reduce", func(ctx context.Context) error {
		return comm.ReduceBlock(ctx, plain{c}, send, recv, dt, op, root)
	})
}

// Allreduce reduces send over every rank into recv on every rank: the
// pipelined ring above ringMin bytes, recursive doubling up to it.
func (c *Comm) Allreduce(ctx context.Context, send, recv memspace.Block, dt comm.DType, op comm.Op) error {
	if c.size == 1 || !hostBlocks(send, recv) {
		return comm.ErrFallback
	}
	n, err := c.nodeColls(ctx, "allreduce")
	if err != nil {
		return err
	}
	if n != nil {
		return n.Allreduce(ctx, send, recv, dt, op)
	}
	if send.Len() <= ringMin || send.Len()/dt.Size() < c.size {
		sc := c.coll.getSmall()
		err := c.runColl(ctx, "allreduce", &sc.run, func() error {
			return c.allreduceSmall(ctx, sc, send, recv, dt, op)
		}, sc.run.aborted)
		c.coll.putSmall(sc)
		return err
	}
	return c.collective(ctx, "allreduce", func(ctx context.Context) error {
		return c.ringAllreduce(ctx, send, recv, dt, op)
	})
}

// Gather concatenates send of every rank into recv on root.
func (c *Comm) Gather(ctx context.Context, send, recv memspace.Block, root int) error {
	if c.size == 1 || !hostBlocks(send, recv) {
		return comm.ErrFallback
	}
	return c.collective(ctx, "gather", func(ctx context.Context) error { return comm.GatherBlock(ctx, plain{c}, send, recv, root) })
}

// Scatter hands part i of send on root to rank i.
func (c *Comm) Scatter(ctx context.Context, send, recv memspace.Block, root int) error {
	if c.size == 1 || !hostBlocks(send, recv) {
		return comm.ErrFallback
	}
	return c.collective(ctx, "scatter", func(ctx context.Context) error { return comm.ScatterBlock(ctx, plain{c}, send, recv, root) })
}

// Allgather concatenates send of every rank into recv on every rank.
func (c *Comm) Allgather(ctx context.Context, send, recv memspace.Block) error {
	if c.size == 1 || !hostBlocks(send, recv) {
		return comm.ErrFallback
	}
	if n, err := c.oneNode(ctx, "allgather"); n != nil {
		return n.Allgather(ctx, send, recv)
	} else if err != nil {
		return err
	}
	return c.collective(ctx, "allgather", func(ctx context.Context) error { return comm.AllgatherBlock(ctx, plain{c}, send, recv) })
}

// Alltoall sends part j of send to rank j.
func (c *Comm) Alltoall(ctx context.Context, send, recv memspace.Block) error {
	if c.size == 1 || !hostBlocks(send, recv) {
		return comm.ErrFallback
	}
	if n, err := c.oneNode(ctx, "alltoall"); n != nil {
		return n.Alltoall(ctx, send, recv)
	} else if err != nil {
		return err
	}
	return c.collective(ctx, "alltoall", func(ctx context.Context) error { return comm.AlltoallBlock(ctx, plain{c}, send, recv) })
}

// ReduceScatter reduces send over every rank and leaves block i in recv on
// rank i.
func (c *Comm) ReduceScatter(ctx context.Context, send, recv memspace.Block, dt comm.DType, op comm.Op) error {
	if c.size == 1 || !hostBlocks(send, recv) {
		return comm.ErrFallback
	}
	return c.collective(ctx, "reduce-scatter", func(ctx context.Context) error {
		return comm.ReduceScatterBlock(ctx, plain{c}, send, recv, dt, op)
	})
}

// ringUnit is one chunk a rank receives in the ring: bytes [off, off+n) of
// the vector, folded into the result (reduce-scatter) or copied
// (allgather), and forwarded to the right neighbour or not.
type ringUnit struct {
	off, n  int
	fold    bool
	forward bool
}

// ringAllreduce is the pipelined ring: a reduce-scatter, in which the
// partial sum of block r-s-1 arrives from the left in step s and is folded
// with this rank's contribution as it is read from the socket, then sent
// on; then an allgather of the complete blocks. Both travel in chunks of
// ringChunk with ringWindow receives posted ahead, so every link carries
// data in both directions all the time. Each rank sends and receives
// 2(p-1)/p of the vector, against log2(p) times the vector for recursive
// doubling; every block is reduced on one rank and copied to the others,
// so every rank ends with the bitwise-same result.
func (c *Comm) ringAllreduce(ctx context.Context, send, recv memspace.Block, dt comm.DType, op comm.Op) error {
	sendB, err := hostBytes(send)
	if err != nil {
		return err
	}
	recvB, err := hostBytes(recv)
	if err != nil {
		return err
	}
	g := &ring{c: c, ctx: ctx, send: send, recv: recv, sendB: sendB, recvB: recvB, dt: dt, op: op,
		right: (c.rank + 1) % c.size, left: (c.rank + c.size - 1) % c.size, sendAt: map[int]*request{}}
	defer func() { settle(g.live) }()
	g.plan()
	// Step 0 of the reduce-scatter: this rank's own block, as it is.
	src := sendB
	if send.Addr() == recv.Addr() && send.Space() == recv.Space() {
		src = recvB
	}
	for off := g.offs[c.rank]; off < g.offs[c.rank+1]; off += g.chunk {
		if err := g.isend(off, min(g.chunk, g.offs[c.rank+1]-off), src); err != nil {
			return err
		}
	}
	if err := g.postUpTo(-1); err != nil {
		return err
	}
	for k, u := range g.units {
		if err := g.wait(g.recvs[k], u.n); err != nil {
			return err
		}
		g.recvs[k] = nil
		if u.forward {
			if err := g.isend(u.off, u.n, recvB); err != nil {
				return err
			}
		}
		if err := g.postUpTo(k); err != nil {
			return err
		}
		if len(g.live) >= 256 {
			g.live = pruneDone(g.live)
		}
	}
	for _, q := range g.live {
		if err := g.wait(q, -1); err != nil {
			return err
		}
	}
	g.live = nil
	return nil
}

// ring is the state of one ringAllreduce.
type ring struct {
	c            *Comm
	ctx          context.Context
	send, recv   memspace.Block
	sendB, recvB []byte
	dt           comm.DType
	op           comm.Op
	right, left  int
	offs         []int      // the blocks' bounds, p+1 of them
	chunk        int        // bytes of a unit
	units        []ringUnit // what this rank receives, in order
	prev         []int      // by unit: the earlier unit at the same offset, or -1
	recvs        []*request // by unit: its receive, once posted
	next         int        // the next unit whose receive is to be posted
	live         []*request // every request started, for the cleanup
	sendAt       map[int]*request
}

// plan cuts the vector into p blocks and the blocks into units: the p-1
// steps of the reduce-scatter (folded and forwarded), then the p-1 steps
// of the allgather (forwarded but in the last).
func (g *ring) plan() {
	p, r, es := g.c.size, g.c.rank, g.dt.Size()
	g.offs = make([]int, p+1)
	elems := g.send.Len() / es
	for i := range p + 1 {
		g.offs[i] = (elems * i / p) * es
	}
	g.chunk = max(es, ringChunk/es*es)
	mod := func(a int) int { return ((a % p) + p) % p }
	addBlock := func(b int, fold, forward bool) {
		for off := g.offs[b]; off < g.offs[b+1]; off += g.chunk {
			g.units = append(g.units, ringUnit{off: off, n: min(g.chunk, g.offs[b+1]-off), fold: fold, forward: forward})
		}
	}
	for s := range p - 1 {
		addBlock(mod(r-s-1), true, true)
	}
	for s := range p - 1 {
		addBlock(mod(r-s), false, s < p-2)
	}
	g.recvs = make([]*request, len(g.units))
	g.prev = make([]int, len(g.units))
	at := map[int]int{}
	for k, u := range g.units {
		g.prev[k] = -1
		if j, ok := at[u.off]; ok {
			g.prev[k] = j
		}
		at[u.off] = k
	}
}

// wait waits for q, which must carry want bytes (-1: any).
func (g *ring) wait(q *request, want int) error {
	st, err := q.Wait(g.ctx)
	if err != nil {
		return err
	}
	return checkCount(st, want)
}

// isend sends from[off:off+k] to the right. sendAt holds a send reading
// recv at an offset, which must be done before a receive writes there.
func (g *ring) isend(off, k int, from []byte) error {
	q, err := g.c.isend(from[off:off+k], g.right, tagRing)
	if err != nil {
		return err
	}
	g.live = append(g.live, q)
	if &from[0] == &g.recvB[0] {
		g.sendAt[off] = q
	}
	return nil
}

// post posts the receive of unit k, folding what arrives where the unit
// says so, once the send reading its bytes is done.
func (g *ring) post(k int) error {
	u := g.units[k]
	if q := g.sendAt[u.off]; q != nil {
		if err := g.wait(q, -1); err != nil {
			return err
		}
		delete(g.sendAt, u.off)
	}
	q := &request{c: g.c, kind: kindRecv, peer: g.left, tag: tagRing, buf: g.recvB[u.off : u.off+u.n]}
	if u.fold {
		dst, err1 := g.recv.Slice(u.off, u.n)
		own, err2 := g.send.Slice(u.off, u.n)
		if err := cmp.Or(err1, err2); err != nil {
			return err
		}
		q.red = &reduction{dst: dst, own: own, dt: g.dt, op: g.op}
	}
	q, err := g.c.irecv(q)
	if err != nil {
		return err
	}
	g.live = append(g.live, q)
	g.recvs[k] = q
	return nil
}

// postUpTo posts receives up to ringWindow units past unit done, in
// order, but never over a chunk that an earlier unit has yet to forward:
// its data could not arrive before that send (it must go round the ring
// first), but the send would read memory that the receive writes with
// nothing in this process to order the two.
func (g *ring) postUpTo(done int) error {
	for ; g.next < len(g.units) && g.next <= done+ringWindow; g.next++ {
		if j := g.prev[g.next]; j > done && g.units[j].forward {
			break
		}
		if err := g.post(g.next); err != nil {
			return err
		}
	}
	return nil
}

// pruneDone drops completed requests that succeeded.
func pruneDone(rs []*request) []*request {
	out := rs[:0]
	for _, q := range rs {
		if _, done, err := q.Test(); !done || err != nil {
			out = append(out, q)
		}
	}
	clear(rs[len(out):])
	return out
}
