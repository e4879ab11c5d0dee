//go:build mpi

package mpi

import (
	"context"
	"math"
	"runtime"
	"sync"
	"sync/atomic"
	"unsafe"

	"github.com/xpu-go/xpu/comm"
	"github.com/xpu-go/xpu/impl"
	"github.com/xpu-go/xpu/memspace"
	"github.com/xpu-go/xpu/xerr"
)

// One-sided communication (comm.OneSided) and notifications
// (comm.Notifier) over MPI-3 RMA, passive target (ADR 35).
//
// Every Comm has one dynamic window (MPI_Win_create_dynamic, made with
// the Comm and locked for every rank with MPI_Win_lock_all once). Expose
// attaches a block to it (MPI_Win_attach) and Region.Close detaches it.
// A key carries the rank, the block's address (MPI_Get_address), its
// length, and in Key the region's number (low 32 bits) and a check of
// every field (high 32 bits) keyed by a secret the ranks drew together
// when the Comm was made: a key altered in any field is refused at the
// origin, before MPI sees it. Put and Get are MPI_Rput and MPI_Rget; a
// Put's request completes once MPI_Win_flush to its rank has returned
// after it (an MPI_Rput request completes when the origin's buffer is
// free, not when the bytes are at the target). Transfers to this rank
// are copies, checked against the open regions.
//
// Notifications travel on a communicator of their own (the one the
// window is made over), tag 0, so they never meet the user's messages
// or the collectives'.

// oneState is a Comm's one-sided state.
type oneState struct {
	mu      sync.Mutex
	seq     uint32               // the last region number given
	regions map[uint32]*region   // the open regions, by number
	gone    bool                 // the window is freed: nothing is attached any more
	ops     map[*oneReq]struct{} // transfers to other ranks not yet completed

	// started numbers the Puts to other ranks; flushed[r] is the number
	// of the last Put known complete at rank r (a flush to r began after
	// it started).
	started atomic.Uint64
	flushed []atomic.Uint64
}

func (s *oneState) init(size int) {
	s.regions = map[uint32]*region{}
	s.ops = map[*oneReq]struct{}{}
	s.flushed = make([]atomic.Uint64, size)
}

// raise records that every Put numbered up to seq has completed at rank.
func (s *oneState) raise(rank int, seq uint64) {
	f := &s.flushed[rank]
	for {
		v := f.Load()
		if v >= seq || f.CompareAndSwap(v, seq) {
			return
		}
	}
}

// mix is a 64-bit finaliser (splitmix64's): every input bit changes about
// half the output bits.
func mix(x uint64) uint64 {
	x ^= x >> 30
	x *= 0xbf58476d1ce4e5b9
	x ^= x >> 27
	x *= 0x94d049bb133111eb
	return x ^ x>>31
}

// keyCheck is the check a key of region num of rank, at addr and n bytes
// long, carries in the high half of its Key. It is keyed by the secret
// the ranks share, so a key no rank made (or altered in any field) fails
// it but for a chance of 2^-32. It guards against mistakes, not against
// an adversary: the ranks of a job can write each other's memory anyway.
func (c *Comm) keyCheck(rank int, addr uint64, n int, num uint32) uint32 {
	h := mix(c.secret[0] ^ uint64(rank))
	h = mix(h ^ addr)
	h = mix(h ^ uint64(n))
	h = mix(h ^ uint64(num) ^ c.secret[1])
	return uint32(h >> 32)
}

// region is a block of this rank attached to the window: a comm.Region.
type region struct {
	c    *Comm
	blk  memspace.Block
	p    unsafe.Pointer
	n    int
	key  comm.RemoteKey
	pin  runtime.Pinner
	busy sync.WaitGroup // copies of this rank's own transfers under way
	once sync.Once
	err  error
}

var _ comm.Region = (*region)(nil)

// Block is the exposed block.
func (g *region) Block() memspace.Block { return g.blk }

// Key names the region to the other ranks.
func (g *region) Key() comm.RemoteKey { return g.key }

// Close withdraws the region: this rank's own transfers into or out of it
// are over when it returns, and the memory is detached from the window
// (MPI_Win_detach). Other ranks' transfers must be over (flushed) before:
// MPI cannot refuse one that arrives afterwards, and it is erroneous in
// MPI (see the package documentation). Close is idempotent; after the
// Comm is freed the window is gone and Close only forgets the region.
func (g *region) Close() error {
	g.once.Do(func() { g.err = g.c.withdraw(g) })
	return g.err
}

// withdraw takes g out of the table, waits for this rank's copies, and
// detaches it.
func (c *Comm) withdraw(g *region) error {
	num := uint32(g.key.Key)
	if !c.enterAny() {
		// Freed: freeing the window detached every region.
		g.busy.Wait()
		g.pin.Unpin()
		return nil
	}
	defer c.exit()
	c.one.mu.Lock()
	attached := c.one.regions[num] == g && !c.one.gone && c.winOK
	delete(c.one.regions, num)
	c.one.mu.Unlock()
	g.busy.Wait()
	var rc int
	if attached {
		lock()
		rc = cDetach(c.win, g.p)
		unlock()
	}
	g.pin.Unpin()
	return mpiError("detach", rc)
}

// oneBlock returns the host address and length of b for op.
func oneBlock(op string, b memspace.Block) (unsafe.Pointer, int, error) {
	n := b.Len()
	if n == 0 {
		return nil, 0, nil
	}
	p := b.HostPointer()
	if p == nil {
		_, err := b.Bytes()
		return nil, 0, xerr.Errorf(Name, op, comm.ErrNotSupported, "block %v: this backend passes host memory to MPI: %w", b, err)
	}
	if n > math.MaxInt32 {
		return nil, 0, xerr.Errorf(Name, op, comm.ErrNotSupported, "a transfer of %d bytes exceeds MPI's int count (2 GiB - 1)", n)
	}
	return p, n, nil
}

// Expose attaches buf, host memory and not empty, to the window
// (MPI_Win_attach), making it reachable by the other ranks' Put and Get
// until the Region is closed. The memory must not overlap a region open
// on this Comm (MPI does not attach memory twice): that fails with
// comm.ErrInvalidArgument. Go memory is pinned while exposed.
func (c *Comm) Expose(buf memspace.Block) (comm.Region, error) {
	const op = "expose"
	if buf.Len() == 0 {
		return nil, xerr.Errorf(Name, op, comm.ErrInvalidArgument, "rank %d: an empty buffer", c.rank)
	}
	p, n, err := oneBlock(op, buf)
	if err != nil {
		return nil, err
	}
	if !c.enter() {
		return nil, errClosed(op)
	}
	defer c.exit()
	g := &region{c: c, blk: buf, p: p, n: n}
	g.pin.Pin(p)
	c.one.mu.Lock()
	defer c.one.mu.Unlock()
	lo, hi := uintptr(p), uintptr(p)+uintptr(n)
	for _, o := range c.one.regions {
		if olo := uintptr(o.p); lo < olo+uintptr(o.n) && olo < hi {
			g.pin.Unpin()
			return nil, xerr.Errorf(Name, op, comm.ErrInvalidArgument, "rank %d: %d bytes at %#x overlap the open region %v (MPI attaches memory once)", c.rank, n, lo, o.key)
		}
	}
	addr := uint64(uintptr(p))
	if c.winOK {
		var rc int
		lock()
		addr, rc = cAttach(c.win, p, n)
		unlock()
		if rc != 0 {
			g.pin.Unpin()
			return nil, mpiError(op, rc)
		}
	}
	num := c.one.seq + 1
	for num == 0 || c.one.regions[num] != nil {
		num++
	}
	c.one.seq = num
	g.key = comm.RemoteKey{Rank: c.rank, Addr: addr, Len: n, Key: uint64(c.keyCheck(c.rank, addr, n, num))<<32 | uint64(num)}
	c.one.regions[num] = g
	return g, nil
}

// oneReq is a Put or Get: a comm.Request. mu guards the fields below it
// and every MPI call on mr.
type oneReq struct {
	c    *Comm
	put  bool
	peer int
	n    int
	seq  uint64 // a Put's number (oneState.started)
	pin  runtime.Pinner

	mu    sync.Mutex
	mr    request
	local bool // MPI completed the request: the origin's buffer is done with
	rc    int  // its error code
	done  bool
	err   error
}

var _ comm.Request = (*oneReq)(nil)

// Put writes src into the region dst names, off bytes into it
// (MPI_Rput). The request completes once the bytes are in the target's
// memory: its Wait (or Test) flushes to dst.Rank (MPI_Win_flush) once MPI
// has the origin's buffer done with, unless a Flush covered it.
func (c *Comm) Put(src memspace.Block, dst comm.RemoteKey, off int) (comm.Request, error) {
	return c.transfer("put", true, src, dst, off)
}

// Get reads the region src names, from off bytes into it, into dst
// (MPI_Rget). The request completes once the bytes are in dst.
func (c *Comm) Get(dst memspace.Block, src comm.RemoteKey, off int) (comm.Request, error) {
	return c.transfer("get", false, dst, src, off)
}

// transfer checks and starts a Put or Get.
func (c *Comm) transfer(op string, put bool, local memspace.Block, key comm.RemoteKey, off int) (comm.Request, error) {
	p, n, err := oneBlock(op, local)
	if err != nil {
		return nil, err
	}
	if err := impl.CheckRank(key.Rank, c.size, false); err != nil {
		return nil, xerr.Op(Name, op, err)
	}
	if off < 0 || key.Len < 0 || off > key.Len || n > key.Len-off {
		return nil, xerr.Errorf(Name, op, comm.ErrInvalidArgument, "rank %d: %d bytes at offset %d of %v", c.rank, n, off, key)
	}
	if uint32(key.Key>>32) != c.keyCheck(key.Rank, key.Addr, key.Len, uint32(key.Key)) {
		return nil, xerr.Errorf(Name, op, comm.ErrInvalidArgument, "rank %d: %v is no key rank %d made on this communicator (its check fails)", c.rank, key, key.Rank)
	}
	if !c.enter() {
		return nil, errClosed(op)
	}
	defer c.exit()
	if key.Rank == c.rank {
		if err := c.copySelf(op, put, p, n, key, off); err != nil {
			return nil, err
		}
		return &oneReq{c: c, done: true, peer: key.Rank, n: n}, nil
	}
	if !c.winOK {
		return nil, xerr.Errorf(Name, op, comm.ErrNotSupported, "rank %d: this MPI made no window over the communicator, so no transfer reaches another rank: %w", c.rank, c.winErr)
	}
	r := &oneReq{c: c, put: put, peer: key.Rank, n: n}
	if n == 0 {
		r.done = true
		return r, nil
	}
	r.pin.Pin(p)
	lock()
	mr, rc := cRMA(put, p, n, key.Rank, key.Addr, uint64(off), c.win)
	unlock()
	if rc != 0 {
		r.pin.Unpin()
		return nil, mpiError(op, rc)
	}
	r.mr = mr
	if put {
		r.seq = c.one.started.Add(1)
	}
	c.one.mu.Lock()
	c.one.ops[r] = struct{}{}
	c.one.mu.Unlock()
	return r, nil
}

// copySelf makes a transfer to this rank: a copy, checked against the
// open regions (a key of a closed region is refused).
func (c *Comm) copySelf(op string, put bool, p unsafe.Pointer, n int, key comm.RemoteKey, off int) error {
	c.one.mu.Lock()
	g := c.one.regions[uint32(key.Key)]
	if g == nil || g.key != key {
		c.one.mu.Unlock()
		return xerr.Errorf(Name, op, comm.ErrInvalidArgument, "rank %d: %v names no open region of this rank", c.rank, key)
	}
	g.busy.Add(1)
	c.one.mu.Unlock()
	defer g.busy.Done()
	if n == 0 {
		return nil
	}
	mine := unsafe.Slice((*byte)(p), n)
	theirs := unsafe.Slice((*byte)(g.p), g.n)[off : off+n]
	if put {
		copy(theirs, mine)
	} else {
		copy(mine, theirs)
	}
	return nil
}

// Test reports without blocking on the network whether the transfer has
// completed: it tests the MPI request once and, for a Put whose buffer
// MPI is done with, flushes to its rank (MPI_Win_flush, which waits for
// the target's acknowledgement) unless a Flush did.
func (r *oneReq) Test() (comm.Status, bool, error) {
	entered := r.c.enterAny()
	r.mu.Lock()
	if entered && !r.done {
		r.testLocked(true)
	}
	done, err := r.done, r.err
	r.mu.Unlock()
	if entered {
		r.c.exit()
	}
	if !done {
		return comm.Status{}, false, nil
	}
	if err != nil {
		return comm.Status{}, true, err
	}
	return comm.Status{Source: r.peer, Count: r.n}, true, nil
}

// testLocked advances the transfer, with r.mu held and the Comm entered.
func (r *oneReq) testLocked(flush bool) {
	c := r.c
	if !r.local {
		lock()
		next, done, rc := cTestRMA(r.mr)
		unlock()
		r.mr = next
		if !done {
			return
		}
		r.local, r.rc = true, rc
	}
	if r.rc == 0 && r.put && c.one.flushed[r.peer].Load() < r.seq {
		if !flush {
			return
		}
		if err := c.flushTo(r.peer); err != nil {
			r.finish(err)
			return
		}
	}
	r.finish(mpiError(r.op(), r.rc))
}

func (r *oneReq) op() string {
	if r.put {
		return "put"
	}
	return "get"
}

// finish records the outcome and forgets the transfer (r.mu held).
func (r *oneReq) finish(err error) {
	r.done, r.err = true, err
	r.pin.Unpin()
	r.c.one.mu.Lock()
	delete(r.c.one.ops, r)
	r.c.one.mu.Unlock()
}

// Wait waits for the transfer to complete, polling it as Test does with
// a short spin and then a growing backoff; on ctx done it returns
// ctx.Err() and the transfer goes on (wait again, or Flush). With a
// context that never ends (and calls not serialised) it flushes to the
// rank at once, inside MPI (waitDirect).
func (r *oneReq) Wait(ctx context.Context) (comm.Status, error) {
	if ctx == nil {
		return comm.Status{}, xerr.Errorf(Name, "wait", comm.ErrInvalidArgument, "nil context")
	}
	if direct(ctx) {
		r.waitDirect()
	}
	done := ctx.Done()
	var b backoff
	for {
		if st, ok, err := r.Test(); ok {
			return st, err
		}
		if done != nil {
			select {
			case <-done:
				if st, ok, err := r.Test(); ok {
					return st, err
				}
				return comm.Status{}, xerr.Op(Name, "wait", ctx.Err())
			default:
			}
		}
		b.pause()
	}
}

// waitDirect completes the transfer inside MPI (MPI_Win_flush to its
// rank), where nothing needs the waiting goroutine to poll: a context
// that never ends, calls not serialised, no receive waiting to be
// matched. MPI then makes progress all along, which a target that needs
// the origin's help (MPICH moves transfers into attached memory as
// messages) wants for large transfers.
func (r *oneReq) waitDirect() {
	if !r.c.enterAny() {
		return
	}
	r.mu.Lock()
	if !r.done {
		if err := r.c.flushTo(r.peer); err != nil {
			r.finish(err)
		} else {
			r.testLocked(false)
		}
	}
	r.mu.Unlock()
	r.c.exit()
}

// Cancel does nothing: MPI cannot take back a transfer once started.
func (r *oneReq) Cancel() error { return nil }

// flushTo completes at rank (every rank: a negative one) every transfer
// this rank started to it (MPI_Win_flush, MPI_Win_flush_all), with the
// Comm entered.
func (c *Comm) flushTo(rank int) error {
	seq := c.one.started.Load()
	lock()
	rc := cFlush(rank, c.win)
	unlock()
	if rc != 0 {
		return mpiError("flush", rc)
	}
	if rank >= 0 {
		c.one.raise(rank, seq)
		return nil
	}
	for i := range c.one.flushed {
		c.one.raise(i, seq)
	}
	return nil
}

// Flush waits until every Put and Get this rank started to rank
// (comm.AnySource: to every rank) has completed there: it waits for MPI
// to be done with their buffers, honouring ctx, and then flushes
// (MPI_Win_flush, or MPI_Win_flush_all), which waits inside MPI for the
// targets' acknowledgements. With a context that never ends (and calls
// not serialised) it flushes at once, inside MPI. It returns the first
// error of those transfers.
func (c *Comm) Flush(ctx context.Context, rank int) error {
	const op = "flush"
	if ctx == nil {
		return xerr.Errorf(Name, op, comm.ErrInvalidArgument, "nil context")
	}
	if err := impl.CheckRank(rank, c.size, true); err != nil {
		return xerr.Op(Name, op, err)
	}
	if !c.enter() {
		return errClosed(op)
	}
	defer c.exit()
	if err := ctx.Err(); err != nil {
		return xerr.Op(Name, op, err)
	}
	c.one.mu.Lock()
	ops := make([]*oneReq, 0, len(c.one.ops))
	for r := range c.one.ops {
		if rank == comm.AnySource || r.peer == rank {
			ops = append(ops, r)
		}
	}
	c.one.mu.Unlock()
	// Their buffers first, watching ctx, unless nothing needs watching
	// (see waitDirect).
	done := ctx.Done()
	var b backoff
	for _, r := range ops {
		for !direct(ctx) && !r.localDone() {
			if done != nil {
				select {
				case <-done:
					return xerr.Op(Name, op, ctx.Err())
				default:
				}
			}
			b.pause()
		}
	}
	if len(ops) > 0 {
		target := rank
		if rank == comm.AnySource {
			target = -1
		}
		if err := c.flushTo(target); err != nil {
			return err
		}
	}
	var first error
	for _, r := range ops {
		r.mu.Lock()
		if !r.done {
			r.testLocked(false)
		}
		if first == nil && r.done {
			first = r.err
		}
		r.mu.Unlock()
	}
	return first
}

// localDone tests r once and reports whether MPI is done with its
// buffer, with the Comm entered.
func (r *oneReq) localDone() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	if !r.done && !r.local {
		r.testLocked(false)
	}
	return r.done || r.local
}

// Notify flushes to rank (Flush, honouring ctx), then sends msg on the
// notification communicator from a copy: it returns once the message is
// on its way (MPI_Isend started; a message MPI does not send at once
// completes in the background). rank receives it after the bytes of every
// transfer this rank started to it before the call are in place.
func (c *Comm) Notify(ctx context.Context, rank int, msg []byte) error {
	const op = "notify"
	if ctx == nil {
		return xerr.Errorf(Name, op, comm.ErrInvalidArgument, "nil context")
	}
	if len(msg) > comm.MaxNotification {
		return xerr.Errorf(Name, op, comm.ErrInvalidArgument, "a notification of %d bytes, more than %d", len(msg), comm.MaxNotification)
	}
	if err := impl.CheckRank(rank, c.size, false); err != nil {
		return xerr.Op(Name, op, err)
	}
	if err := c.Flush(ctx, rank); err != nil {
		return err
	}
	if !c.enter() {
		return errClosed(op)
	}
	s := getScratch(len(msg))
	copy(s.bytes(), msg)
	o := &orphan{op: op, scratch: []*scratch{s}}
	o.pin()
	lock()
	mr, rc := cIsend(s.ptr(), len(msg), rank, 0, c.note)
	unlock()
	c.exit()
	if rc != 0 {
		o.release()
		return mpiError(op, rc)
	}
	o.hs = []request{mr}
	if done, rc, _ := o.poll(); done {
		o.release()
		return mpiError(op, rc)
	}
	adopt(o)
	return nil
}

// WaitNotification returns the oldest notification received and not yet
// returned, probing the notification communicator (MPI_Improbe) with a
// short spin and then a growing backoff until one comes or ctx ends; with
// a context that has ended it probes once. After Close it fails with
// comm.ErrClosed.
func (c *Comm) WaitNotification(ctx context.Context) (comm.Notification, error) {
	const op = "wait-notification"
	if ctx == nil {
		return comm.Notification{}, xerr.Errorf(Name, op, comm.ErrInvalidArgument, "nil context")
	}
	if !c.enter() {
		return comm.Notification{}, errClosed(op)
	}
	defer c.exit()
	done := ctx.Done()
	var b backoff
	for {
		lock()
		pr, rc := cImprobe(cAnySource, 0, c.note)
		unlock()
		if rc != 0 {
			return comm.Notification{}, mpiError(op, rc)
		}
		if pr.found {
			return c.takeNotification(pr)
		}
		if c.state.Load()&closedBit != 0 {
			return comm.Notification{}, errClosed(op)
		}
		if done != nil {
			select {
			case <-done:
				return comm.Notification{}, xerr.Op(Name, op, ctx.Err())
			default:
			}
		}
		b.pause()
	}
}

// takeNotification receives the notification a probe matched.
func (c *Comm) takeNotification(pr probed) (comm.Notification, error) {
	const op = "wait-notification"
	if pr.len < 0 || pr.len > comm.MaxNotification {
		// No Notify sends it; take it out of the way all the same.
		pr.len = max(pr.len, 0)
	}
	s := getScratch(pr.len)
	o := &orphan{op: op, scratch: []*scratch{s}}
	o.pin()
	lock()
	mr, rc := cImrecv(s.ptr(), pr.len, pr.msg)
	unlock()
	if rc != 0 {
		o.release()
		return comm.Notification{}, mpiError(op, rc)
	}
	o.hs = []request{mr}
	// A matched message arrives without this rank's help but MPI's.
	_, rc, _, _ = o.await(context.Background())
	msg := append([]byte{}, s.bytes()...)
	o.release()
	if rc != 0 {
		return comm.Notification{}, mpiError(op, rc)
	}
	// The transfers the sender flushed before notifying are in place:
	// make them visible to this process's loads (MPI_Win_sync).
	lock()
	cWinSync(c.win)
	unlock()
	return comm.Notification{Source: pr.st.source, Msg: msg}, nil
}

// freeWindow completes this rank's transfers, meets the other ranks
// (every rank frees the window when it frees its Comm), and frees the
// window with the regions still attached detached first. It runs once,
// from free.
func (c *Comm) freeWindow() error {
	if !c.winOK {
		return nil
	}
	c.one.mu.Lock()
	c.one.gone = true
	ops := make([]*oneReq, 0, len(c.one.ops))
	for r := range c.one.ops {
		ops = append(ops, r)
	}
	regions := make([]*region, 0, len(c.one.regions))
	for _, g := range c.one.regions {
		regions = append(regions, g)
	}
	c.one.mu.Unlock()
	// This rank's transfers end before the barrier, so that no rank
	// detaches memory another still writes.
	lock()
	rc := cFlush(-1, c.win)
	unlock()
	for _, r := range ops {
		r.mu.Lock()
		if !r.done && r.local {
			r.finish(mpiError(r.op(), r.rc)) // flushed above
		}
		for !r.done {
			lock()
			next, done, trc := cTestRMA(r.mr)
			unlock()
			r.mr = next
			if done {
				r.finish(mpiError(r.op(), trc))
			}
		}
		r.mu.Unlock()
	}
	lock()
	mr, brc := cIbarrier(c.note)
	unlock()
	if brc != 0 {
		return mpiError("close", brc)
	}
	o := &orphan{op: "close", hs: []request{mr}}
	o.await(context.Background())
	for _, g := range regions {
		g.busy.Wait()
		lock()
		cDetach(c.win, g.p)
		unlock()
	}
	lock()
	if frc := cWinFree(c.win); rc == 0 {
		rc = frc
	}
	unlock()
	return mpiError("close", rc)
}
