package cpu

import (
	"context"
	"errors"
	"math/bits"
	"runtime"
	"runtime/debug"
	"sync"
	"sync/atomic"
	"time"

	"github.com/xpu-go/xpu/executor"
	"github.com/xpu-go/xpu/xerr"
)

// Compile-time checks of the capabilities the executor offers.
var (
	_ executor.Executor = (*Executor)(nil)
	_ executor.Parallel = (*Executor)(nil)
	_ executor.Streamer = (*Executor)(nil)
)

// MaxWorkers is the most workers an Executor runs; NewExecutor clamps to it.
const MaxWorkers = 4096

// How long an idle goroutine spins before it parks. Spinning turns the
// wake-up of a helper into a cache-line transfer (tens of nanoseconds)
// instead of a scheduler wake-up (microseconds); parking after the budget
// keeps an idle executor from burning CPU.
const (
	helperSpin = 50 * time.Microsecond
	callerSpin = 20 * time.Microsecond
	// Execute waits this long for a helper to take its function before it
	// runs the function on the calling goroutine.
	executeHandoff = 50 * time.Microsecond
)

// maxSlots is how many loops can be shared with the helpers at once; a loop
// started while every slot is taken runs on its calling goroutine alone.
const maxSlots = 64

// Executor is a persistent pool of worker goroutines that runs data-parallel
// loops, functions and streams on the host.
//
// A loop (ParallelFor, ParallelRange, executor.Reduce) is split into chunks
// that the calling goroutine and the pool's helpers claim one at a time
// from an atomic counter, so a slow chunk does not hold up the others and
// the caller is never idle while its loop has work. Because the caller takes
// part in its own loop, a loop started inside another loop's body always
// completes, at worst on that caller alone, and concurrent callers share
// the helpers. Idle helpers spin briefly, then park.
//
// An Executor is safe for concurrent use. Close stops the helpers and
// closes the streams still open.
type Executor struct {
	workers int
	p       *pool
	closed  atomic.Bool
	helpers sync.WaitGroup

	mu      sync.Mutex
	streams map[*Stream]struct{}
}

// pool is the state the helpers share with the callers.
type pool struct {
	mask     atomic.Uint64 // bit i set: slots[i] holds (or is about to hold) a loop
	slots    [maxSlots]atomic.Pointer[job]
	sleepers atomic.Int32 // helpers parked (or about to park) on wake
	closing  atomic.Bool
	wake     chan struct{}
	quit     chan struct{}
	nhelpers int
}

// NewExecutor starts an executor that runs up to workers chunks of a loop
// at once: the calling goroutine and workers-1 helper goroutines. workers
// <= 0 means runtime.GOMAXPROCS(0); values above MaxWorkers are clamped.
func NewExecutor(workers int) *Executor {
	if workers <= 0 {
		workers = runtime.GOMAXPROCS(0)
	}
	workers = min(workers, MaxWorkers)
	p := &pool{
		wake:     make(chan struct{}, workers),
		quit:     make(chan struct{}),
		nhelpers: workers - 1,
	}
	e := &Executor{workers: workers, p: p, streams: map[*Stream]struct{}{}}
	e.helpers.Add(p.nhelpers)
	for range p.nhelpers {
		go e.runHelper()
	}
	return e
}

// errGoexit is the value of the PanicError of a loop whose body called
// runtime.Goexit (t.FailNow, say, from a helper goroutine).
var errGoexit = errors.New("runtime.Goexit called by user code")

// runHelper runs a helper until the pool closes. A helper whose goroutine
// is ended by runtime.Goexit in user code is replaced.
func (e *Executor) runHelper() {
	normal := false
	defer func() {
		if !normal && !e.p.closing.Load() {
			e.helpers.Add(1)
			go e.runHelper()
		}
		e.helpers.Done()
	}()
	e.p.helper()
	normal = true
}

// Name returns "cpu".
func (e *Executor) Name() string { return Name }

// MaxParallelism returns the number of workers, the calling goroutine
// included.
func (e *Executor) MaxParallelism() int { return e.workers }

// SuggestedGrain returns the grain that splits n into about four chunks
// per worker: enough for dynamic claiming to balance uneven chunks, few
// enough that claiming costs nothing next to the work.
func (e *Executor) SuggestedGrain(n int) int {
	if n <= 0 {
		return 1
	}
	parts := 4 * e.workers
	return max(1, n/parts+min(1, n%parts))
}

// ParallelFor calls body(i) for every i in [0, n), in chunks of
// SuggestedGrain(n) indices, on the caller and the helpers. It returns an
// error matching executor.ErrPanic if body panics, ctx.Err() if ctx is done
// before every chunk has started, executor.ErrInvalidArgument for n < 0 and
// executor.ErrClosed after Close.
func (e *Executor) ParallelFor(ctx context.Context, n int, body func(i int)) error {
	if body == nil {
		return xerr.Errorf(Name, "parallel-for", executor.ErrInvalidArgument, "nil body")
	}
	return e.loop(ctx, "parallel-for", n, 0, nil, body)
}

// ParallelRange calls body(lo, hi) once for every chunk [k*grain,
// min((k+1)*grain, n)) of [0, n); grain <= 0 means SuggestedGrain(n). Errors
// are those of ParallelFor.
func (e *Executor) ParallelRange(ctx context.Context, n, grain int, body func(lo, hi int)) error {
	if body == nil {
		return xerr.Errorf(Name, "parallel-range", executor.ErrInvalidArgument, "nil body")
	}
	return e.loop(ctx, "parallel-range", n, grain, body, nil)
}

func (e *Executor) loop(ctx context.Context, op string, n, grain int, rangeBody func(lo, hi int), forBody func(i int)) error {
	if n < 0 {
		return xerr.Errorf(Name, op, executor.ErrInvalidArgument, "loop over %d indices", n)
	}
	if e.closed.Load() {
		return xerr.Op(Name, op, executor.ErrClosed)
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	if n == 0 {
		return nil
	}
	if grain <= 0 {
		grain = e.SuggestedGrain(n)
	}
	j := &job{
		nchunks:   int64((n-1)/grain) + 1,
		n:         n,
		grain:     grain,
		rangeBody: rangeBody,
		forBody:   forBody,
		ctxDone:   ctx.Done(),
	}
	slot := -1
	if j.nchunks > 1 && e.p.nhelpers > 0 {
		slot = e.p.publish(j)
		if slot >= 0 {
			e.p.wakeUp(int(min(j.nchunks-1, int64(e.p.nhelpers))))
		}
	}
	j.work()
	if slot >= 0 {
		e.p.unpublish(slot, j)
		j.wait()
	}
	return j.result(ctx)
}

// Execute runs fn on a helper and waits for it. When no helper takes fn
// within a few tens of microseconds (all are busy, or the executor has one
// worker), fn runs on the calling goroutine instead, so Execute never
// deadlocks, even when called from inside a loop body or another Execute.
// A panic in fn comes back as an error matching executor.ErrPanic; if ctx
// is done before fn starts, fn does not run and ctx.Err() is returned.
func (e *Executor) Execute(ctx context.Context, fn func(ctx context.Context) error) error {
	if fn == nil {
		return xerr.Errorf(Name, "execute", executor.ErrInvalidArgument, "nil function")
	}
	if e.closed.Load() {
		return xerr.Op(Name, "execute", executor.ErrClosed)
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	var err error
	j := &job{nchunks: 1, n: 1, grain: 1, ctxDone: ctx.Done(), rangeBody: func(int, int) {
		err = executor.Catch(func() error { return fn(ctx) })
	}}
	slot := -1
	if e.p.nhelpers > 0 {
		slot = e.p.publish(j)
	}
	if slot >= 0 {
		e.p.wakeUp(1)
		deadline := time.Now().Add(executeHandoff)
		for i := 1; j.next.Load() == 0; i++ {
			if i%64 == 0 {
				if time.Now().After(deadline) {
					break
				}
				runtime.Gosched()
			}
		}
	}
	j.work() // runs fn here only if no helper claimed it
	if slot >= 0 {
		e.p.unpublish(slot, j)
		j.wait()
	}
	if rerr := j.result(ctx); rerr != nil {
		return rerr
	}
	return err
}

// Close stops the helpers and closes the streams still open, waiting for
// their work. Loops running on other goroutines complete on their callers.
// After Close every method returns executor.ErrClosed, Close included.
func (e *Executor) Close() error {
	if !e.closed.CompareAndSwap(false, true) {
		return xerr.Op(Name, "close", executor.ErrClosed)
	}
	e.mu.Lock()
	streams := make([]*Stream, 0, len(e.streams))
	for s := range e.streams {
		streams = append(streams, s)
	}
	e.mu.Unlock()
	for _, s := range streams {
		_ = s.Close() // ErrClosed only if a racing Close got there first
	}
	e.p.closing.Store(true)
	close(e.p.quit)
	e.helpers.Wait()
	return nil
}

// job is one loop shared between its caller and the helpers.
type job struct {
	next atomic.Int64 // next chunk to claim
	done atomic.Int64 // chunks finished or skipped

	nchunks   int64
	n, grain  int
	rangeBody func(lo, hi int)
	forBody   func(i int)
	ctxDone   <-chan struct{}

	stopped  atomic.Bool // no new chunk may start
	canceled atomic.Bool // stopped because ctx was done
	panicErr atomic.Pointer[executor.PanicError]

	state  atomic.Int32 // jobRunning, jobParked (caller waits on wakeCh), jobFinished
	wakeCh chan struct{}
}

const (
	jobRunning = iota
	jobParked
	jobFinished
)

// work claims and runs chunks until none is left. It is called by the
// loop's caller and by every helper that finds the loop.
func (j *job) work() {
	normal := false
	defer func() {
		if normal {
			return
		}
		// A panic, or runtime.Goexit (recover returns nil only then, since
		// panic(nil) panics with a *runtime.PanicNilError): either way the
		// chunk ends, the loop stops and its caller hears of it.
		v := recover()
		if v == nil {
			v = errGoexit
		}
		// Stop the loop before taking the stack, which takes long enough
		// for the other workers to run many more chunks. The caller cannot
		// return before the finish below, so it still sees the error.
		j.stop()
		j.panicErr.CompareAndSwap(nil, &executor.PanicError{Value: v, Stack: debug.Stack()})
		j.finish(1) // the chunk that did not return
	}()
	grain, n := j.grain, j.n
	for {
		k := j.next.Add(1) - 1
		if k >= j.nchunks {
			normal = true
			return
		}
		if j.stopped.Load() {
			j.finish(1)
			continue
		}
		if j.ctxDone != nil {
			select {
			case <-j.ctxDone:
				j.canceled.Store(true)
				j.stop()
				j.finish(1)
				continue
			default:
			}
		}
		lo := int(k) * grain
		hi := lo + min(grain, n-lo) // no overflow for any grain
		if f := j.forBody; f != nil {
			for i := lo; i < hi; i++ {
				f(i)
			}
		} else {
			j.rangeBody(lo, hi)
		}
		j.finish(1)
	}
}

// stop keeps new chunks from starting: the unclaimed ones are claimed at
// once and counted as done.
func (j *job) stop() {
	j.stopped.Store(true)
	if old := j.next.Swap(j.nchunks); old < j.nchunks {
		j.finish(j.nchunks - old)
	}
}

// finish counts c chunks as done and wakes the caller after the last.
func (j *job) finish(c int64) {
	if j.done.Add(c) == j.nchunks {
		if j.state.Swap(jobFinished) == jobParked {
			j.wakeCh <- struct{}{}
		}
	}
}

// wait returns when every chunk is done: it spins for a while, since the
// last chunks usually end about when the caller's own do, then parks.
func (j *job) wait() {
	if j.done.Load() == j.nchunks {
		return
	}
	deadline := time.Now().Add(callerSpin)
	for i := 1; ; i++ {
		if j.done.Load() == j.nchunks {
			return
		}
		if i%128 == 0 {
			if time.Now().After(deadline) {
				break
			}
			if i%1024 == 0 {
				runtime.Gosched()
			}
		}
	}
	j.wakeCh = make(chan struct{}, 1)
	if j.state.CompareAndSwap(jobRunning, jobParked) {
		<-j.wakeCh
	}
}

// result is the loop's error: the first panic, else ctx.Err() if chunks
// were skipped for cancellation.
func (j *job) result(ctx context.Context) error {
	if pe := j.panicErr.Load(); pe != nil {
		return pe
	}
	if j.canceled.Load() {
		if err := ctx.Err(); err != nil {
			return err
		}
		return context.Canceled
	}
	return nil
}

// publish puts j in a free slot and returns its index, or -1 when every
// slot is taken.
func (p *pool) publish(j *job) int {
	for {
		m := p.mask.Load()
		if m == ^uint64(0) {
			return -1
		}
		i := bits.TrailingZeros64(^m)
		if p.mask.CompareAndSwap(m, m|1<<i) {
			p.slots[i].Store(j)
			return i
		}
	}
}

// unpublish frees slot i if it still holds j (a helper may have freed it).
func (p *pool) unpublish(i int, j *job) {
	if p.slots[i].CompareAndSwap(j, nil) {
		p.mask.And(^(uint64(1) << i))
	}
}

// find returns a published loop with chunks left, freeing the slots of
// loops that have none.
func (p *pool) find() *job {
	m := p.mask.Load()
	for m != 0 {
		i := bits.TrailingZeros64(m)
		m &= m - 1
		j := p.slots[i].Load()
		if j == nil {
			continue
		}
		if j.next.Load() < j.nchunks {
			return j
		}
		p.unpublish(i, j)
	}
	return nil
}

// wakeUp wakes up to n parked helpers.
func (p *pool) wakeUp(n int) {
	for n > 0 {
		v := p.sleepers.Load()
		if v <= 0 {
			return
		}
		if p.sleepers.CompareAndSwap(v, v-1) {
			p.wake <- struct{}{}
			n--
		}
	}
}

// helper is the loop of a helper goroutine.
func (p *pool) helper() {
	for !p.closing.Load() {
		if j := p.find(); j != nil {
			j.work()
			continue
		}
		if p.spin() {
			continue
		}
		if !p.park() {
			return
		}
	}
}

// spin waits for a published loop for up to helperSpin; it reports whether
// one may have appeared.
func (p *pool) spin() bool {
	deadline := time.Now().Add(helperSpin)
	for i := 1; ; i++ {
		if p.mask.Load() != 0 {
			return true
		}
		if i%128 == 0 {
			if p.closing.Load() || time.Now().After(deadline) {
				return false
			}
			if i%2048 == 0 {
				runtime.Gosched()
			}
		}
	}
}

// park blocks until a caller wakes the helper (true) or the pool closes
// (false).
func (p *pool) park() bool {
	p.sleepers.Add(1)
	if p.mask.Load() != 0 || p.closing.Load() {
		// Work appeared (or the pool is closing) after the spin: take this
		// helper off the sleepers unless a caller already counted it, in
		// which case its wake-up token is on the way and must be consumed.
		for {
			v := p.sleepers.Load()
			if v <= 0 {
				break
			}
			if p.sleepers.CompareAndSwap(v, v-1) {
				return !p.closing.Load()
			}
		}
	}
	select {
	case <-p.wake:
		return true
	case <-p.quit:
		return false
	}
}
