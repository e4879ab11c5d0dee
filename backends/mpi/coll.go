//go:build mpi

package mpi

import (
	"context"
	"math"
	"math/bits"
	"sync/atomic"
	"unsafe"

	"github.com/xpu-go/xpu/comm"
	"github.com/xpu-go/xpu/impl"
	"github.com/xpu-go/xpu/memspace"
	"github.com/xpu-go/xpu/xerr"
)

// The native collectives. Each has two paths:
//
//   - direct, when ctx can never end and MPI calls need no serialising: the
//     blocking MPI call on the caller's buffers (MPI_Allreduce, …);
//   - watched, otherwise: the nonblocking call (MPI_Iallreduce, …) polled
//     with ctx. When ctx can end, MPI works on private copies of the
//     buffers, because MPI cannot cancel a collective: on ctx done the
//     collective is left to complete in the background, on its copies, as
//     the other ranks join it, and ctx.Err() is returned. The collective
//     still counts as called — do not call it again.
//
// Blocks the host cannot access, and counts MPI's int cannot hold, are
// declined with comm.ErrFallback (the shared algorithms then say what they
// can do). The generic functions of package comm have validated sizes,
// roots and in-place forms before any method here is called.

// dtypeCodes maps an element type to the C side's code (-1: none).
var dtypeCodes = [...]int8{
	comm.InvalidDType: -1,
	comm.Int8:         dtInt8, comm.Int16: dtInt16, comm.Int32: dtInt32, comm.Int64: dtInt64,
	comm.Uint8: dtUint8, comm.Uint16: dtUint16, comm.Uint32: dtUint32, comm.Uint64: dtUint64,
	comm.Float32: dtFloat32, comm.Float64: dtFloat64,
	comm.Complex64: dtComplex64, comm.Complex128: dtComplex128,
}

// opCodes maps a reduction to the C side's code (0: none).
var opCodes = [...]int8{comm.Sum: opSum, comm.Prod: opProd, comm.Min: opMin, comm.Max: opMax}

// usable reports whether MPI can take blocks a and b: host-accessible, and
// counts (in units of unit bytes) that fit MPI's int.
func usable(unit int, a, b memspace.Block) bool {
	return fits(unit, a.HostPointer(), a.Len()) && fits(unit, b.HostPointer(), b.Len())
}

// fits is usable of one block, given its host pointer and length. The
// direct paths read a block's fields once and pass them on: a Block
// handed to a helper, even an inlined one, is copied through memory, and
// the copy costs more than the checks.
func fits(unit int, p unsafe.Pointer, n int) bool {
	return (n == 0 || p != nil) && (n <= math.MaxInt32 || n/unit <= math.MaxInt32)
}

func same(a, b memspace.Block) bool {
	return a.Addr() == b.Addr() && a.Len() == b.Len() && a.Space() == b.Space()
}

// count is the number of elements of dt in n bytes (element sizes are
// powers of two).
func count(n int, dt comm.DType) int { return n >> bits.TrailingZeros(uint(dt.Size())) }

// slot returns block i of whole in blocks of n bytes, or the zero Block.
func slot(whole memspace.Block, i, n int) memspace.Block {
	s, err := whole.Slice(i*n, n)
	if err != nil {
		return memspace.Block{}
	}
	return s
}

// reduction validates and maps a reduction's type and op.
func reduction(name string, dt comm.DType, op comm.Op) (int, int, error) {
	if int(dt) < len(dtypeCodes) && int(op) < len(opCodes) {
		d, o := dtypeCodes[dt], opCodes[op]
		if d >= 0 && o > 0 && !((op == comm.Min || op == comm.Max) && dt.IsComplex()) {
			return int(d), int(o), nil
		}
	}
	return 0, 0, reductionErr(name, dt, op)
}

// reducing is directColl then reduction, which every reduction calls
// first: whether the direct path may run, and the C side's codes of dt and
// op.
func reducing(ctx context.Context, name string, dt comm.DType, op comm.Op) (direct bool, d, o int, err error) {
	if direct, err = directColl(ctx, name); err != nil {
		return false, 0, 0, err
	}
	d, o, err = reduction(name, dt, op)
	return direct, d, o, err
}

//go:noinline
func reductionErr(name string, dt comm.DType, op comm.Op) error {
	if err := op.Check(dt); err != nil {
		return xerr.Op(Name, name, err)
	}
	return xerr.Errorf(Name, name, comm.ErrInvalidArgument, "no MPI type for %v %v", op, dt)
}

func check(ctx context.Context, name string) error {
	if ctx == nil {
		return nilCtx(name)
	}
	if err := ctx.Err(); err != nil {
		return xerr.Op(Name, name, err)
	}
	return nil
}

//go:noinline
func nilCtx(name string) error {
	return xerr.Errorf(Name, name, comm.ErrInvalidArgument, "nil context")
}

// directColl reports whether a collective may run as the blocking MPI
// call (see direct) and otherwise checks ctx: a context that can never end
// (ctx.Done() == nil) is never done either.
func directColl(ctx context.Context, name string) (bool, error) {
	if ctx == nil {
		return false, nilCtx(name)
	}
	if ctx.Done() == nil {
		return !serial && recvq.n.Load() == 0, nil
	}
	if err := ctx.Err(); err != nil {
		return false, xerr.Op(Name, name, err)
	}
	return false, nil
}

// enterColl starts a direct collective: the communicator is counted busy
// and its collective order held, with one atomic operation on c.state
// (collBit is the order's lock: see coord); exitColl ends both with
// another.
func (c *Comm) enterColl(name string) error {
	if v := c.state.Load(); v&(closedBit|freedBit|collBit) == 0 && c.state.CompareAndSwap(v, v+1+collBit) {
		if c.coll.deferred.Load() == 0 {
			return nil
		}
		return c.drainHeld(name)
	}
	return c.enterCollSlow(name)
}

// enterCollSlow is enterColl when the communicator is closed, another
// operation changed its state in the meantime, or the order is held.
func (c *Comm) enterCollSlow(name string) error {
	if !c.enter() {
		return errClosed(name)
	}
	_ = c.coll.lock(context.Background()) // a context that never ends: it cannot fail
	return c.drainHeld(name)
}

// drainHeld finishes the abandoned constructions on c before a direct
// collective, with the order held.
func (c *Comm) drainHeld(name string) error {
	if err := c.coll.drain(context.Background()); err != nil {
		c.exitColl()
		return xerr.Op(Name, name, err)
	}
	return nil
}

func (c *Comm) exitColl() {
	if v := c.state.Add(endedUnit - 1 - collBit); wantsMore(v) {
		c.exited(v)
	}
}

// coord orders the collectives this process issues on one MPI
// communicator: they are issued holding its lock, after the communicator
// constructions abandoned on it (deferred) have been finished, because the
// other ranks take part in those first. The lock is collBit of word: the
// state word of the Comm (so that enterColl counts the operation and takes
// the lock at once), or a word of its own (MPI_COMM_WORLD, for Open).
// Whoever holds it on a Comm's word also counts as an operation of that
// Comm, so releasing it never leaves the Comm to be freed.
type coord struct {
	word     *atomic.Int64
	deferred atomic.Int64
}

// collBit is the lock bit of a coord's word (bit 40 of Comm.state: see
// liveMask).
const collBit = int64(1) << 40

// tryLock takes the lock if it is free.
func (k *coord) tryLock() bool {
	for {
		v := k.word.Load()
		if v&collBit != 0 {
			return false
		}
		if k.word.CompareAndSwap(v, v|collBit) {
			return true
		}
	}
}

// unlock releases the lock.
func (k *coord) unlock() { k.word.Add(-collBit) }

// lock takes the lock, honouring ctx. The lock is held only while a
// collective is issued, or runs on the direct path, so waiting for it
// polls (backoff).
func (k *coord) lock(ctx context.Context) error {
	if k.tryLock() {
		return nil
	}
	return poll(ctx, k.tryLock)
}

// drain finishes the abandoned constructions (with the lock held),
// honouring ctx.
func (k *coord) drain(ctx context.Context) error {
	if k.deferred.Load() == 0 {
		return nil
	}
	return poll(ctx, func() bool {
		orphans.mu.Lock()
		progressLocked()
		orphans.mu.Unlock()
		return k.deferred.Load() == 0
	})
}

// poll calls done until it reports true, pausing (backoff) between calls,
// and returns ctx.Err() if ctx is done first.
func poll(ctx context.Context, done func() bool) error {
	ch := ctx.Done()
	var b backoff
	for {
		if done() {
			return nil
		}
		if ch != nil {
			select {
			case <-ch:
				return ctx.Err()
			default:
			}
		}
		b.pause()
	}
}

// blocking runs a collective's blocking call, the one MPI call of the
// job at a time (enterColl), and returns its error.
func (c *Comm) blocking(name string, call func() int) error {
	if err := c.enterColl(name); err != nil {
		return err
	}
	rc := call()
	c.exitColl()
	return mpiError(name, rc)
}

// cbuf is a buffer of a collective: MPI reads it (in) and/or writes it
// (out).
// bufs are the buffers of a collective that reads send and writes recv:
// recv alone, read and written, when the call is in place.
func bufs(send, recv memspace.Block, inplace bool) (s, r cbuf) {
	if inplace {
		return cbuf{}, cbuf{b: recv, in: true, out: true}
	}
	return cbuf{b: send, in: true}, cbuf{b: recv, out: true}
}

type cbuf struct {
	b       memspace.Block
	in, out bool
}

// watched runs a nonblocking collective polled with ctx (see the top of
// the file). start issues it on pointers to s and r, or to their copies.
func (c *Comm) watched(ctx context.Context, name string, s, r cbuf, start func(sp, rp unsafe.Pointer) (request, int)) error {
	copies := ctx.Done() != nil
	o := &orphan{op: name}
	sp, rp := s.b.HostPointer(), r.b.HostPointer()
	var rs *scratch
	if copies {
		if n := s.b.Len(); n > 0 {
			ss := getScratch(n)
			src, _ := s.b.Bytes()
			copy(ss.bytes(), src)
			sp = ss.ptr()
			o.scratch = append(o.scratch, ss)
		}
		if n := r.b.Len(); n > 0 {
			rs = getScratch(n)
			if r.in {
				src, _ := r.b.Bytes()
				copy(rs.bytes(), src)
			}
			rp = rs.ptr()
			o.scratch = append(o.scratch, rs)
		}
		o.pin()
	} else {
		if sp != nil {
			o.pinner.Pin(sp)
		}
		if rp != nil {
			o.pinner.Pin(rp)
		}
	}
	if !c.enter() {
		o.release()
		return errClosed(name)
	}
	defer c.exit()
	if err := c.coll.lock(ctx); err != nil {
		o.release()
		return xerr.Op(Name, name, err)
	}
	if err := c.coll.drain(ctx); err != nil {
		c.coll.unlock()
		o.release()
		return xerr.Op(Name, name, err)
	}
	lock()
	mr, rc := start(sp, rp)
	unlock()
	c.coll.unlock()
	if rc != 0 {
		o.release()
		return mpiError(name, rc)
	}
	o.hs = []request{mr}
	done, rc, _, err := o.await(ctx)
	if !done {
		// Only a context that can end gets here, so MPI works on copies.
		adopt(o)
		return xerr.Op(Name, name, err)
	}
	if rc == 0 && rs != nil && r.out {
		dst, _ := r.b.Bytes()
		copy(dst, rs.bytes())
	}
	o.release()
	return mpiError(name, rc)
}

// Each collective below validates what MPI needs, then takes the direct
// path in a few comparisons, before anything of the watched path (its
// closure, its buffers) is built.

// Barrier returns once every rank has called it (MPI_Barrier, or
// MPI_Ibarrier watched with ctx).
func (c *Comm) Barrier(ctx context.Context) error {
	const name = "barrier"
	direct, err := directColl(ctx, name)
	if err != nil {
		return err
	}
	if direct {
		return c.blocking(name, func() int { return cBarrier(c.main) })
	}
	return c.watched(ctx, name, cbuf{}, cbuf{}, func(_, _ unsafe.Pointer) (request, int) {
		return cIbarrier(c.main)
	})
}

// Bcast copies buf of rank root into buf of every rank (MPI_Bcast).
func (c *Comm) Bcast(ctx context.Context, buf memspace.Block, root int) error {
	const name = "bcast"
	direct, err := directColl(ctx, name)
	if err != nil {
		return err
	}
	if uint(root) >= uint(c.size) {
		return rootErr(name, root, c.size)
	}
	p, n := buf.HostPointer(), buf.Len()
	if !fits(1, p, n) {
		return comm.ErrFallback
	}
	if direct {
		return c.blocking(name, func() int { return cBcast(p, n, root, c.main) })
	}
	return c.bcastWatched(ctx, buf, root)
}

func (c *Comm) bcastWatched(ctx context.Context, buf memspace.Block, root int) error {
	n, isRoot := buf.Len(), c.rank == root
	return c.watched(ctx, "bcast", cbuf{}, cbuf{b: buf, in: isRoot, out: !isRoot}, func(_, rp unsafe.Pointer) (request, int) {
		return cIbcast(rp, n, root, c.main)
	})
}

//go:noinline
func rootErr(name string, root, size int) error {
	return xerr.Op(Name, name, impl.CheckRank(root, size, false))
}

// Reduce reduces send over every rank with op into recv on rank root
// (MPI_Reduce; MPI_IN_PLACE when send is recv at the root).
func (c *Comm) Reduce(ctx context.Context, send, recv memspace.Block, dt comm.DType, op comm.Op, root int) error {
	const name = "reduce"
	direct, d, o, err := reducing(ctx, name, dt, op)
	if err != nil {
		return err
	}
	if uint(root) >= uint(c.size) {
		return rootErr(name, root, c.size)
	}
	isRoot := c.rank == root
	if !isRoot {
		recv = memspace.Block{}
	}
	if !usable(dt.Size(), send, recv) {
		return comm.ErrFallback
	}
	n := count(send.Len(), dt)
	inplace := isRoot && same(send, recv)
	if inplace && quirks.reduceInPlace {
		// Reduce from a copy of the input instead of MPI_IN_PLACE.
		s := getScratch(send.Len())
		defer putScratch(s)
		src, _ := send.Bytes()
		copy(s.bytes(), src)
		send, inplace = memspace.NewBlock(memspace.GoHeap, memspace.Addr(uintptr(s.ptr())), s.n, s.ptr()), false
	}
	if direct {
		return c.blocking(name, func() int { return cReduce(send.HostPointer(), recv.HostPointer(), n, d, o, root, inplace, c.main) })
	}
	s, r := bufs(send, recv, inplace)
	return c.watched(ctx, name, s, r, func(sp, rp unsafe.Pointer) (request, int) {
		return cIreduce(sp, rp, n, d, o, root, inplace, c.main)
	})
}

// Allreduce reduces send over every rank with op into recv on every rank
// (MPI_Allreduce; MPI_IN_PLACE when send is recv).
func (c *Comm) Allreduce(ctx context.Context, send, recv memspace.Block, dt comm.DType, op comm.Op) error {
	const name = "allreduce"
	direct, d, o, err := reducing(ctx, name, dt, op)
	if err != nil {
		return err
	}
	sp, sn, rp, rn, sz := send.HostPointer(), send.Len(), recv.HostPointer(), recv.Len(), dt.Size()
	if !fits(sz, sp, sn) || !fits(sz, rp, rn) {
		return comm.ErrFallback
	}
	n := count(sn, dt)
	inplace := send.Addr() == recv.Addr() && sn == rn && send.Space() == recv.Space()
	if direct {
		return c.blocking(name, func() int { return cAllreduce(sp, rp, n, d, o, inplace, c.main) })
	}
	return c.allreduceWatched(ctx, send, recv, n, d, o, inplace)
}

func (c *Comm) allreduceWatched(ctx context.Context, send, recv memspace.Block, n, d, o int, inplace bool) error {
	s, r := bufs(send, recv, inplace)
	return c.watched(ctx, "allreduce", s, r, func(sp, rp unsafe.Pointer) (request, int) {
		return cIallreduce(sp, rp, n, d, o, inplace, c.main)
	})
}

// Gather concatenates send of every rank into recv on rank root
// (MPI_Gather; MPI_IN_PLACE when send is the root's slot of recv).
func (c *Comm) Gather(ctx context.Context, send, recv memspace.Block, root int) error {
	const name = "gather"
	direct, m, inplace, err := c.rooted(ctx, name, root, send, &recv)
	if err != nil {
		return err
	}
	if direct {
		return c.blocking(name, func() int { return cGather(send.HostPointer(), recv.HostPointer(), m, root, inplace, c.main) })
	}
	s, r := bufs(send, recv, inplace)
	return c.watched(ctx, name, s, r, func(sp, rp unsafe.Pointer) (request, int) {
		return cIgather(sp, rp, m, root, inplace, c.main)
	})
}

// rooted checks what Gather and Scatter check before their MPI call: ctx
// (see directColl), root, and that MPI can take the blocks. part is this
// rank's block, whole the concatenation on root (recv of Gather, send of
// Scatter), which it sets to the zero Block on the other ranks. It returns
// part's length and whether part is root's own slot of whole
// (MPI_IN_PLACE), or comm.ErrFallback for blocks MPI cannot take.
func (c *Comm) rooted(ctx context.Context, name string, root int, part memspace.Block, whole *memspace.Block) (direct bool, m int, inplace bool, err error) {
	direct, err = directColl(ctx, name)
	if err != nil {
		return false, 0, false, err
	}
	if uint(root) >= uint(c.size) {
		return false, 0, false, rootErr(name, root, c.size)
	}
	isRoot := c.rank == root
	if !isRoot {
		*whole = memspace.Block{}
	}
	if !usable(1, part, *whole) {
		return false, 0, false, comm.ErrFallback
	}
	m = part.Len()
	if isRoot {
		inplace = same(part, slot(*whole, root, m))
	}
	return direct, m, inplace, nil
}

// Scatter hands part i of send on rank root to rank i in recv
// (MPI_Scatter; MPI_IN_PLACE when recv is the root's slot of send).
func (c *Comm) Scatter(ctx context.Context, send, recv memspace.Block, root int) error {
	const name = "scatter"
	direct, m, inplace, err := c.rooted(ctx, name, root, recv, &send)
	if err != nil {
		return err
	}
	if direct {
		return c.blocking(name, func() int { return cScatter(send.HostPointer(), recv.HostPointer(), m, root, inplace, c.main) })
	}
	s, r := cbuf{b: send, in: true}, cbuf{b: recv, out: true}
	if inplace {
		r = cbuf{}
	}
	return c.watched(ctx, name, s, r, func(sp, rp unsafe.Pointer) (request, int) {
		return cIscatter(sp, rp, m, root, inplace, c.main)
	})
}

// Allgather concatenates send of every rank into recv on every rank
// (MPI_Allgather; MPI_IN_PLACE when send is this rank's slot of recv).
func (c *Comm) Allgather(ctx context.Context, send, recv memspace.Block) error {
	const name = "allgather"
	direct, err := directColl(ctx, name)
	if err != nil {
		return err
	}
	if !usable(1, send, recv) {
		return comm.ErrFallback
	}
	m := send.Len()
	inplace := same(send, slot(recv, c.rank, m))
	if direct {
		return c.blocking(name, func() int { return cAllgather(send.HostPointer(), recv.HostPointer(), m, inplace, c.main) })
	}
	s, r := bufs(send, recv, inplace)
	return c.watched(ctx, name, s, r, func(sp, rp unsafe.Pointer) (request, int) {
		return cIallgather(sp, rp, m, inplace, c.main)
	})
}

// Alltoall sends part j of send to rank j, which stores it as part i of
// recv, i being this rank (MPI_Alltoall).
func (c *Comm) Alltoall(ctx context.Context, send, recv memspace.Block) error {
	const name = "alltoall"
	direct, err := directColl(ctx, name)
	if err != nil {
		return err
	}
	sp, sn, rp, rn := send.HostPointer(), send.Len(), recv.HostPointer(), recv.Len()
	if !fits(c.size, sp, sn) || !fits(c.size, rp, rn) {
		return comm.ErrFallback
	}
	m := sn / c.size
	if direct {
		return c.blocking(name, func() int { return cAlltoall(sp, rp, m, c.main) })
	}
	return c.alltoallWatched(ctx, send, recv, m)
}

func (c *Comm) alltoallWatched(ctx context.Context, send, recv memspace.Block, m int) error {
	return c.watched(ctx, "alltoall", cbuf{b: send, in: true}, cbuf{b: recv, out: true}, func(sp, rp unsafe.Pointer) (request, int) {
		return cIalltoall(sp, rp, m, c.main)
	})
}

// ReduceScatter reduces send (Size() blocks of recv's length) over every
// rank with op and leaves block i of the result in recv on rank i
// (MPI_Reduce_scatter_block).
func (c *Comm) ReduceScatter(ctx context.Context, send, recv memspace.Block, dt comm.DType, op comm.Op) error {
	const name = "reduce-scatter"
	direct, d, o, err := reducing(ctx, name, dt, op)
	if err != nil {
		return err
	}
	if !usable(dt.Size()*c.size, send, recv) {
		return comm.ErrFallback
	}
	n := count(recv.Len(), dt)
	if direct {
		return c.blocking(name, func() int { return cReduceScatter(send.HostPointer(), recv.HostPointer(), n, d, o, c.main) })
	}
	return c.watched(ctx, name, cbuf{b: send, in: true}, cbuf{b: recv, out: true}, func(sp, rp unsafe.Pointer) (request, int) {
		return cIreduceScatter(sp, rp, n, d, o, c.main)
	})
}
