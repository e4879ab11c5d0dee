package conformance_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/xpu-go/xpu/comm"
	"github.com/xpu-go/xpu/conformance"
	"github.com/xpu-go/xpu/flight"
	"github.com/xpu-go/xpu/impl"
	"github.com/xpu-go/xpu/memspace"
	"github.com/xpu-go/xpu/transfer"
)

// TestSuiteCatchesBrokenComms runs each TestBrokenComm… test in a child
// process and checks that the communicator cases it is written for fail,
// naming the case and the rule the communicator broke.
func TestSuiteCatchesBrokenComms(t *testing.T) {
	// The children mostly wait for the suite's bounds to pass: this test
	// runs beside the other parallel tests.
	t.Parallel()
	runChildren(t, []childCase{
		// Large collective messages to one rank swapped in pairs: only the
		// sizes past the thresholds, where the rings send blocks in
		// several chunks or one message exceeds 128 KiB, catch it.
		{test: "TestBrokenCommLargeSwap/^comm$/^(coll|algorithms)$", want: []string{
			"--- FAIL: TestBrokenCommLargeSwap/comm/algorithms/bcast/n=3",
			"--- FAIL: TestBrokenCommLargeSwap/comm/algorithms/reduce/n=2",
			"--- FAIL: TestBrokenCommLargeSwap/comm/algorithms/allreduce/n=2",
			"--- FAIL: TestBrokenCommLargeSwap/comm/algorithms/allgather/n=2",
			"--- FAIL: TestBrokenCommLargeSwap/comm/algorithms/reduce-scatter/n=2",
			"comm.Reduce to root 1 of 131072 float64 over 2 ranks (where the shared algorithms run ring reduce-scatter then gather, blocks in several chunks)",
		}, absent: []string{"--- FAIL: TestBrokenCommLargeSwap/comm/coll/"}},
		// Collective traffic carried as user traffic, out of the reach of
		// the transport's revocation: a survivor that never exchanges
		// messages with the lost rank waits, and the failure says why.
		{test: "TestBrokenCommUnrevoked/^comm$/^coll$/^peer-lost$/^n=3$", want: []string{
			"--- FAIL: TestBrokenCommUnrevoked/comm/coll/peer-lost/n=3",
			"rank 0: Allreduce after rank 2 closed: error",
			"Rank 0 never exchanges messages with rank 2 here (the shared Allreduce: only with ranks [1])",
			"every rank's pending and later collective operations must fail with ErrPeerLost (revocation",
			"see docs/backend-guide.md#",
		}},
		// Flight records of calls left posted after they returned.
		{test: "TestBrokenFlightNeverEnded/^comm$/^flight$", want: []string{
			"--- FAIL: TestBrokenFlightNeverEnded/comm/flight/record/n=2",
			"rank 0: no Send(peer 1, tag 5, 16 bytes) done in its flight record",
			"rank 0: Recv(peer 1, tag 5) is still posted in its flight record after the call returned",
		}},
		// Refusals returned without the backend's name.
		{test: "TestBrokenCommBareRefusals/^comm$/^p2p$/^invalid$", want: []string{
			"--- FAIL: TestBrokenCommBareRefusals/comm/p2p/invalid/n=2",
			`Isend to rank -1 of 2: error "rank -1 outside [0, 2): invalid argument" does not name the backend that refused`,
			`Irecv with tag -2: error "tag -2 outside [0, 2147483647]: invalid argument" does not name the backend`,
		}},
		// Blocking calls and Wait that ignore their context, one child per
		// case so that they run side by side.
		{test: "TestBrokenCommDeaf/^comm$/^context$/^send$", name: "TestBrokenCommDeaf/send", want: []string{
			"--- FAIL: TestBrokenCommDeaf/comm/context/send/n=2",
			"comm.Send with a context already done (1048581 bytes to rank 1, which has not posted its receive) had not returned 2s after its context ended",
			"a blocking call must return an error matching ctx.Err() promptly once its context is done",
		}},
		{test: "TestBrokenCommDeaf/^comm$/^context$/^recv$", name: "TestBrokenCommDeaf/recv", want: []string{
			"--- FAIL: TestBrokenCommDeaf/comm/context/recv/n=2",
			"comm.Recv with a context already done (from rank 1, which sends nothing yet) had not returned 2s after its context ended",
		}},
		{test: "TestBrokenCommDeaf/^comm$/^context$/^wait$", name: "TestBrokenCommDeaf/wait", want: []string{
			"--- FAIL: TestBrokenCommDeaf/comm/context/wait/n=2",
			"Wait with a context already done (of a receive from rank 1, which sends nothing yet) had not returned 2s",
		}},
		{test: "TestBrokenCommDeaf/^comm$/^context$/^collectives$", name: "TestBrokenCommDeaf/collectives", want: []string{
			"--- FAIL: TestBrokenCommDeaf/comm/context/collectives/n=3",
			"comm.Barrier whose context ends while it waits (on rank 0 of 3; rank 2 never calls it) had not returned 2s after its context ended",
		}},
		// A Recv that returns ctx.Err() but leaves its receive posted.
		{test: "TestBrokenCommAbandonedRecv/^comm$/^context$/^recv$", want: []string{
			"--- FAIL: TestBrokenCommAbandonedRecv/comm/context/recv/n=2",
			"did not come to the next Recv within 2s: the abandoned receive took it",
			"a Recv that returns ctx.Err() must withdraw its receive",
		}},
		// Reductions whose last, uneven piece is wrong above 1.5 MiB when
		// the group size does not divide the count.
		{test: "TestBrokenCommUnevenTail/^comm$/^algorithms$/^(reduce|allreduce)$/^n=3$", want: []string{
			"--- FAIL: TestBrokenCommUnevenTail/comm/algorithms/reduce/n=3",
			"--- FAIL: TestBrokenCommUnevenTail/comm/algorithms/allreduce/n=3",
			"393217 float64",
		}},
		// A Put that lands one byte past the offset it was given.
		{test: "TestBrokenOneSidedShifted/^comm$/^onesided$/^put-get$", want: []string{
			"--- FAIL: TestBrokenOneSidedShifted/comm/onesided/put-get/n=2",
			"region after rank 0's Put of 1 bytes at offset 3",
			"Put must write its bytes, and only them, at the offset it names",
			"see docs/backend-guide.md#comm-one-sided",
		}},
		// Regions of device memory exposed as a host copy made once: the
		// Puts land in the copy and never reach the device.
		{test: "TestBrokenRegionsMirrored/^comm$/^onesided$/^regions$/^n=2$", want: []string{
			"--- FAIL: TestBrokenRegionsMirrored/comm/onesided/regions/n=2",
			"a region in space fake-device (round 0): rank ",
			"'s region of space fake-device after the Puts of rank ",
			"Put must write its bytes, and only them, at the offset it names",
		}},
		// Puts that start only when waited for, so a notification sent
		// after them overtakes them.
		{test: "TestBrokenNotifyLazyPut/^comm$/^onesided$/^notify$", want: []string{
			"--- FAIL: TestBrokenNotifyLazyPut/comm/onesided/notify/n=2",
			"part 0 of rank 0's Puts, read on receipt of the notification rank 0 sent after them",
			"a notification is received after every Put and Get its sender started",
			"see docs/backend-guide.md#comm-one-sided",
		}},
		// Flush(AnySource) that waits for nothing.
		{test: "TestBrokenFlushAny/^comm$/^onesided$/^flush-then-send$", want: []string{
			"--- FAIL: TestBrokenFlushAny/comm/onesided/flush-then-send/n=2",
			"after Flush(AnySource) returned: done false",
			"after Flush(ctx, rank) returns, every Put this rank started to rank is in place",
		}},
		// Test that never reports a successful request done.
		{test: "TestBrokenCommLazyTest/^comm$/^requests$/^test$", want: []string{
			"--- FAIL: TestBrokenCommLazyTest/comm/requests/test/n=2",
			"Test of a receive of 40 bytes never reported it done within 5s, though rank 1 took part",
			"Test must report a request that has completed as done, with its Status",
		}},
		// Wait that reports a request's outcome once only.
		{test: "TestBrokenCommForgetful/^comm$/^requests$", want: []string{
			"--- FAIL: TestBrokenCommForgetful/comm/requests/wait-all/n=2",
			"WaitAll(completed, truncated, canceled): <nil>, want the error of the first request that failed",
			"--- FAIL: TestBrokenCommForgetful/comm/requests/await/n=2",
			"Await, with a context already done, of a receive that completed",
			"must report the same outcome every time",
		}},
		// Wildcard receives that take their place in the matching order
		// only once they are waited for.
		{test: "TestBrokenCommLateWildcard/^comm$/^p2p$/^any-(source|tag)-order$", want: []string{
			"--- FAIL: TestBrokenCommLateWildcard/comm/p2p/any-source-order/n=2",
			"Irecv(AnySource, 500) was posted before Irecv(1, 500)",
			"--- FAIL: TestBrokenCommLateWildcard/comm/p2p/any-tag-order/n=2",
			"Irecv(1, AnyTag) was posted before Irecv(1, 500)",
			"but the second-posted receive took the first message",
		}},
	}, hung) // and the watchdog ends none of their cases
}

func TestBrokenCommLargeSwap(t *testing.T) {
	onlyInChild(t)
	conformance.TestComm(t, wrappedGroup(func(c comm.Comm) comm.Comm {
		return newSwapComm(c, func(b memspace.Block, tag int) bool { return tag > comm.MaxTag && b.Len() >= 128<<10 })
	}), conformance.MaxRanks(4))
}

func TestBrokenCommUnrevoked(t *testing.T) {
	onlyInChild(t)
	conformance.TestComm(t, wrappedGroup(func(c comm.Comm) comm.Comm { return unrevokedComm{c} }))
}

func TestBrokenCommDeaf(t *testing.T) {
	onlyInChild(t)
	conformance.TestComm(t, wrappedGroup(func(c comm.Comm) comm.Comm {
		return deafComm{reqWrapper{Comm: c, wrap: func(r comm.Request) comm.Request { return deafRequest{r} }}}
	}))
}

func TestBrokenCommAbandonedRecv(t *testing.T) {
	onlyInChild(t)
	conformance.TestComm(t, wrappedGroup(func(c comm.Comm) comm.Comm { return abandoningRecv{c} }))
}

func TestBrokenCommLazyTest(t *testing.T) {
	onlyInChild(t)
	conformance.TestComm(t, wrappedGroup(wrapRequests(func(r comm.Request) comm.Request {
		return &lazyTestRequest{Request: r}
	})))
}

func TestBrokenCommForgetful(t *testing.T) {
	onlyInChild(t)
	conformance.TestComm(t, wrappedGroup(wrapRequests(func(r comm.Request) comm.Request {
		return &forgetfulRequest{Request: r}
	})))
}

func TestBrokenCommBareRefusals(t *testing.T) {
	onlyInChild(t)
	conformance.TestComm(t, wrappedGroup(func(c comm.Comm) comm.Comm { return bareRefusals{c} }))
}

// bareRefusals checks the rank and tag of Isend and Irecv with impl's
// checks and returns their errors as they are, without its name: the
// xerr.Op a backend author forgets.
type bareRefusals struct{ comm.Comm }

func (c bareRefusals) Isend(buf memspace.Block, dest, tag int) (comm.Request, error) {
	if err := impl.CheckRank(dest, c.Size(), false); err != nil {
		return nil, err
	}
	if err := impl.CheckWireTag(tag, false); err != nil {
		return nil, err
	}
	return c.Comm.Isend(buf, dest, tag)
}

func (c bareRefusals) Irecv(buf memspace.Block, source, tag int) (comm.Request, error) {
	if err := impl.CheckRank(source, c.Size(), true); err != nil {
		return nil, err
	}
	if err := impl.CheckWireTag(tag, true); err != nil {
		return nil, err
	}
	return c.Comm.Irecv(buf, source, tag)
}

func TestBrokenFlightNeverEnded(t *testing.T) {
	onlyInChild(t)
	conformance.TestComm(t, wrappedGroup(func(c comm.Comm) comm.Comm {
		r := flight.New(64, flight.Context{Rank: c.Rank(), Size: c.Size()})
		t.Cleanup(r.Close)
		return neverEnded{Comm: c, rec: r}
	}))
}

// neverEnded records its Isend and Irecv (comm.Recording) and never ends
// their entries.
type neverEnded struct {
	comm.Comm
	rec *flight.Recorder
}

func (c neverEnded) FlightRecorder() *flight.Recorder { return c.rec }

func (c neverEnded) Isend(buf memspace.Block, dest, tag int) (comm.Request, error) {
	if tag <= comm.MaxTag {
		c.rec.Post(flight.OpSend, dest, tag, int64(buf.Len()))
	}
	return c.Comm.Isend(buf, dest, tag)
}

func (c neverEnded) Irecv(buf memspace.Block, source, tag int) (comm.Request, error) {
	if tag <= comm.MaxTag {
		c.rec.Post(flight.OpRecv, source, tag, int64(buf.Len()))
	}
	return c.Comm.Irecv(buf, source, tag)
}

func TestBrokenOneSidedShifted(t *testing.T) {
	onlyInChild(t)
	conformance.TestComm(t, wrappedGroup(func(c comm.Comm) comm.Comm { return shiftedPut{c.(comm.OneSided)} }))
}

// shiftedPut's Put writes one byte past the offset it is given, where the
// region has room.
type shiftedPut struct{ comm.OneSided }

func (c shiftedPut) Put(src memspace.Block, dst comm.RemoteKey, off int) (comm.Request, error) {
	if off+1+src.Len() <= dst.Len {
		off++
	}
	return c.OneSided.Put(src, dst, off)
}

func TestBrokenRegionsMirrored(t *testing.T) {
	onlyInChild(t)
	conformance.TestComm(t, wrappedGroup(func(c comm.Comm) comm.Comm { return mirroredExpose{c.(comm.OneSided)} }),
		conformance.RegionSpaces(newFakeDevice()))
}

// mirroredExpose exposes memory the host cannot touch as a host copy of
// it, made once: transfers reach the copy, never the memory.
type mirroredExpose struct{ comm.OneSided }

func (c mirroredExpose) Expose(buf memspace.Block) (comm.Region, error) {
	if buf.HostAccessible() {
		return c.OneSided.Expose(buf)
	}
	h, err := memspace.FromSlice(make([]byte, buf.Len()))
	if err != nil {
		return nil, err
	}
	if err := transfer.CopyBlock(context.Background(), h.Block(), buf); err != nil {
		return nil, err
	}
	return c.OneSided.Expose(h.Block())
}

func TestBrokenNotifyLazyPut(t *testing.T) {
	onlyInChild(t)
	conformance.TestComm(t, wrappedGroup(func(c comm.Comm) comm.Comm { return lazyPut{c.(comm.Notifier)} }))
}

// lazyPut's Puts start when their request is first waited for or tested.
type lazyPut struct{ comm.Notifier }

func (c lazyPut) Put(src memspace.Block, dst comm.RemoteKey, off int) (comm.Request, error) {
	return &lazyRequest{start: func() (comm.Request, error) { return c.Notifier.Put(src, dst, off) }}, nil
}

// lazyRequest starts its operation on the first Wait or Test.
type lazyRequest struct {
	once  sync.Once
	start func() (comm.Request, error)
	r     comm.Request
	err   error
}

func (r *lazyRequest) begin() {
	r.once.Do(func() { r.r, r.err = r.start() })
}

func (r *lazyRequest) Wait(ctx context.Context) (comm.Status, error) {
	if r.begin(); r.err != nil {
		return comm.Status{}, r.err
	}
	return r.r.Wait(ctx)
}

func (r *lazyRequest) Test() (comm.Status, bool, error) {
	if r.begin(); r.err != nil {
		return comm.Status{}, true, r.err
	}
	return r.r.Test()
}

func (r *lazyRequest) Cancel() error { return nil }

func TestBrokenFlushAny(t *testing.T) {
	onlyInChild(t)
	conformance.TestComm(t, wrappedGroup(func(c comm.Comm) comm.Comm { return &flushAny{OneSided: c.(comm.OneSided)} }))
}

// flushAny's transfers start a while after they are asked for, and its
// Flush waits for them for one rank but not for comm.AnySource.
type flushAny struct {
	comm.OneSided
	pending sync.WaitGroup
}

func (c *flushAny) later(start func() (comm.Request, error)) comm.Request {
	r := &delayedRequest{done: make(chan struct{})}
	c.pending.Add(1)
	go func() {
		defer c.pending.Done()
		defer close(r.done)
		time.Sleep(50 * time.Millisecond)
		q, err := start()
		if err == nil {
			r.st, err = q.Wait(context.Background())
		}
		r.err = err
	}()
	return r
}

func (c *flushAny) Put(src memspace.Block, dst comm.RemoteKey, off int) (comm.Request, error) {
	return c.later(func() (comm.Request, error) { return c.OneSided.Put(src, dst, off) }), nil
}

func (c *flushAny) Get(dst memspace.Block, src comm.RemoteKey, off int) (comm.Request, error) {
	return c.later(func() (comm.Request, error) { return c.OneSided.Get(dst, src, off) }), nil
}

func (c *flushAny) Flush(ctx context.Context, rank int) error {
	if rank == comm.AnySource {
		return nil
	}
	c.pending.Wait()
	return c.OneSided.Flush(ctx, rank)
}

// delayedRequest completes when its goroutine closes done.
type delayedRequest struct {
	done chan struct{}
	st   comm.Status
	err  error
}

func (r *delayedRequest) Wait(ctx context.Context) (comm.Status, error) {
	select {
	case <-r.done:
		return r.st, r.err
	case <-ctx.Done():
		return comm.Status{}, ctx.Err()
	}
}

func (r *delayedRequest) Test() (comm.Status, bool, error) {
	select {
	case <-r.done:
		return r.st, true, r.err
	default:
		return comm.Status{}, false, nil
	}
}

func (r *delayedRequest) Cancel() error { return nil }

func TestBrokenCommLateWildcard(t *testing.T) {
	onlyInChild(t)
	conformance.TestComm(t, wrappedGroup(func(c comm.Comm) comm.Comm { return lateWildcard{c} }))
}

// deafComm's requests wait, and its Send and Recv (comm.Blocking) block,
// until the operation completes, whatever their context says. Its requests
// are deafRequests; it has no Unwrap.
type deafComm struct{ reqWrapper }

var _ comm.Blocking = deafComm{}

func (c deafComm) Send(_ context.Context, buf memspace.Block, dest, tag int) error {
	r, err := c.Isend(buf, dest, tag)
	if err != nil {
		return err
	}
	_, err = r.Wait(context.Background())
	return err
}

func (c deafComm) Recv(_ context.Context, buf memspace.Block, source, tag int) (comm.Status, error) {
	r, err := c.Irecv(buf, source, tag)
	if err != nil {
		return comm.Status{}, err
	}
	return r.Wait(context.Background())
}

type deafRequest struct{ comm.Request }

func (r deafRequest) Wait(context.Context) (comm.Status, error) {
	return r.Request.Wait(context.Background())
}

// abandoningRecv is a communicator whose Recv (comm.Blocking) returns
// ctx.Err() when its context ends but leaves its receive posted, so the
// next message matching it is lost to the caller.
type abandoningRecv struct{ comm.Comm }

var _ comm.Blocking = abandoningRecv{}

func (c abandoningRecv) Send(ctx context.Context, buf memspace.Block, dest, tag int) error {
	r, err := c.Isend(buf, dest, tag)
	if err != nil {
		return err
	}
	_, err = comm.Await(ctx, r)
	return err
}

func (c abandoningRecv) Recv(ctx context.Context, buf memspace.Block, source, tag int) (comm.Status, error) {
	r, err := c.Irecv(buf, source, tag)
	if err != nil {
		return comm.Status{}, err
	}
	return r.Wait(ctx) // no Cancel when ctx ends
}

// lazyTestRequest reports from Test only failures: a request that
// completed successfully says "not done" until Wait has been called.
type lazyTestRequest struct {
	comm.Request
	mu     sync.Mutex
	waited bool
}

func (r *lazyTestRequest) Wait(ctx context.Context) (comm.Status, error) {
	st, err := r.Request.Wait(ctx)
	if err == nil {
		r.mu.Lock()
		r.waited = true
		r.mu.Unlock()
	}
	return st, err
}

func (r *lazyTestRequest) Test() (comm.Status, bool, error) {
	st, done, err := r.Request.Test()
	r.mu.Lock()
	defer r.mu.Unlock()
	if done && err == nil && !r.waited {
		return comm.Status{}, false, nil
	}
	return st, done, err
}

// forgetfulRequest reports its outcome to the first Wait only; a later
// Wait returns an empty status and no error.
type forgetfulRequest struct {
	comm.Request
	mu       sync.Mutex
	reported bool
}

func (r *forgetfulRequest) Wait(ctx context.Context) (comm.Status, error) {
	st, err := r.Request.Wait(ctx)
	if ctx.Err() != nil && err != nil {
		return st, err // still pending: nothing reported yet
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.reported {
		return comm.Status{}, nil
	}
	r.reported = true
	return st, err
}

// lateWildcard posts a receive from AnySource or with AnyTag to the
// communicator underneath only when it is first waited for, tested or
// canceled, so that a receive posted after it may take its message.
type lateWildcard struct{ comm.Comm }

// Unwrap returns the communicator underneath.
func (c lateWildcard) Unwrap() comm.Comm { return c.Comm }

func (c lateWildcard) Irecv(buf memspace.Block, source, tag int) (comm.Request, error) {
	if source != comm.AnySource && tag != comm.AnyTag {
		return c.Comm.Irecv(buf, source, tag)
	}
	return &lateRequest{post: func() (comm.Request, error) { return c.Comm.Irecv(buf, source, tag) }}, nil
}

type lateRequest struct {
	post func() (comm.Request, error)
	once sync.Once
	r    comm.Request
	err  error
}

func (l *lateRequest) get() (comm.Request, error) {
	l.once.Do(func() { l.r, l.err = l.post() })
	return l.r, l.err
}

func (l *lateRequest) Wait(ctx context.Context) (comm.Status, error) {
	r, err := l.get()
	if err != nil {
		return comm.Status{}, err
	}
	return r.Wait(ctx)
}

func (l *lateRequest) Test() (comm.Status, bool, error) {
	r, err := l.get()
	if err != nil {
		return comm.Status{}, true, err
	}
	return r.Test()
}

func (l *lateRequest) Cancel() error {
	r, err := l.get()
	if err != nil {
		return nil
	}
	return r.Cancel()
}

// unrevokedComm carries the reserved tags of the collectives as user tags
// of the communicator underneath, which then never revokes them: a
// collective that meets a lost peer fails only on the ranks that exchange
// messages with it.
type unrevokedComm struct{ comm.Comm }

// userTag maps a reserved tag into the upper half of the user tags.
func userTag(tag int) int {
	if tag > comm.MaxTag {
		return tag - comm.MaxTag - 1 + comm.MaxTag/2
	}
	return tag
}

func (c unrevokedComm) Isend(buf memspace.Block, dest, tag int) (comm.Request, error) {
	return c.Comm.Isend(buf, dest, userTag(tag))
}

func (c unrevokedComm) Irecv(buf memspace.Block, source, tag int) (comm.Request, error) {
	return c.Comm.Irecv(buf, source, userTag(tag))
}

func TestBrokenCommUnevenTail(t *testing.T) {
	onlyInChild(t)
	conformance.TestComm(t, wrappedGroup(func(c comm.Comm) comm.Comm { return unevenTail{c} }), conformance.MaxRanks(3))
}

// unevenTail's Reduce and Allreduce get the last element wrong when the
// vector is larger than 1.5 MiB and the group size does not divide its
// length: the slip of a ring whose last block is short. Its other
// collectives are the shared algorithms'.
type unevenTail struct{ comm.Comm }

// wrongTail reports whether unevenTail slips on a vector of n bytes of dt.
func (c unevenTail) wrongTail(n int, dt comm.DType) bool {
	return n > 3<<19 && (n/dt.Size())%c.Size() != 0
}

func (c unevenTail) Reduce(ctx context.Context, send, recv memspace.Block, dt comm.DType, op comm.Op, root int) error {
	if !c.wrongTail(send.Len(), dt) {
		return comm.ErrFallback
	}
	if err := comm.ReduceBlock(ctx, c.Comm, send, recv, dt, op, root); err != nil || c.Rank() != root {
		return err
	}
	return spoilLast(recv)
}

func (c unevenTail) Allreduce(ctx context.Context, send, recv memspace.Block, dt comm.DType, op comm.Op) error {
	if !c.wrongTail(send.Len(), dt) {
		return comm.ErrFallback
	}
	if err := comm.AllreduceBlock(ctx, c.Comm, send, recv, dt, op); err != nil {
		return err
	}
	return spoilLast(recv)
}

// spoilLast changes the last byte of b.
func spoilLast(b memspace.Block) error {
	v, err := b.Bytes()
	if err != nil {
		return err
	}
	v[len(v)-1] ^= 0x40
	return nil
}

func (unevenTail) Barrier(context.Context) error                    { return comm.ErrFallback }
func (unevenTail) Bcast(context.Context, memspace.Block, int) error { return comm.ErrFallback }
func (unevenTail) Gather(context.Context, memspace.Block, memspace.Block, int) error {
	return comm.ErrFallback
}
func (unevenTail) Scatter(context.Context, memspace.Block, memspace.Block, int) error {
	return comm.ErrFallback
}
func (unevenTail) Allgather(context.Context, memspace.Block, memspace.Block) error {
	return comm.ErrFallback
}
func (unevenTail) Alltoall(context.Context, memspace.Block, memspace.Block) error {
	return comm.ErrFallback
}
func (unevenTail) ReduceScatter(context.Context, memspace.Block, memspace.Block, comm.DType, comm.Op) error {
	return comm.ErrFallback
}
