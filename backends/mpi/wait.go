//go:build mpi

package mpi

import (
	"context"
	"math/bits"
	"runtime"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"
)

// backoff paces a loop that polls MPI: a few tight iterations (a message
// often lands within microseconds), then yielding to other goroutines, then
// sleeping ever longer, up to maxSleep, so that a long wait costs little
// CPU and every iteration still looks at the context.
type backoff struct {
	n     int
	sleep time.Duration
}

const (
	spinTight = 32
	spinYield = 2048
	maxSleep  = 500 * time.Microsecond
)

func (b *backoff) pause() {
	match()
	b.n++
	switch {
	case b.n < spinTight:
	case b.n < spinYield:
		runtime.Gosched()
	default:
		if b.n&63 == 0 {
			progressOrphans()
		}
		if b.sleep == 0 {
			b.sleep = 5 * time.Microsecond
		} else if b.sleep < maxSleep {
			b.sleep *= 2
		}
		time.Sleep(b.sleep)
	}
}

// scratch is Go memory for a copy of a message or collective buffer, 8-byte
// aligned (so aligned for every element type MPI reduces).
type scratch struct {
	w []uint64
	n int
}

func (s *scratch) bytes() []byte {
	if s.n == 0 {
		return nil
	}
	return unsafe.Slice((*byte)(unsafe.Pointer(unsafe.SliceData(s.w))), s.n)
}

func (s *scratch) ptr() unsafe.Pointer {
	if s.n == 0 {
		return nil
	}
	return unsafe.Pointer(unsafe.SliceData(s.w))
}

// Scratch is pooled by power-of-two size class up to 1<<maxPoolClass words
// (64 MiB); larger copies are left to the garbage collector.
const maxPoolClass = 23

var scratchPools [maxPoolClass + 1]sync.Pool

func wordClass(words int) int {
	if words <= 1 {
		return 0
	}
	return bits.Len(uint(words - 1))
}

func getScratch(n int) *scratch {
	words := (n + 7) / 8
	cl := wordClass(words)
	if cl <= maxPoolClass {
		if s, ok := scratchPools[cl].Get().(*scratch); ok {
			s.w, s.n = s.w[:words], n
			return s
		}
		return &scratch{w: make([]uint64, words, 1<<cl), n: n}
	}
	return &scratch{w: make([]uint64, words), n: n}
}

func putScratch(s *scratch) {
	if cl := wordClass(cap(s.w)); cl <= maxPoolClass && cap(s.w) == 1<<cl {
		scratchPools[cl].Put(s)
	}
}

// orphan is MPI work this package started on its own memory (the copy of
// a Send, the copies of a collective) or that leads to more work (the
// barrier before a Split or Dup). Its starter waits for it; when the starter's context ends first the orphan
// is adopted and completes in the background (MPI can cancel neither a
// collective nor, in Open MPI, a send), polled by later waits, Close and
// finalisation. then, when set, runs once it has completed.
type orphan struct {
	op      string
	hs      []request // MPI requests, completed from the front
	scratch []*scratch
	pinner  runtime.Pinner
	k       *coord // the collective order then keeps, or nil
	then    func(ok bool)
	rc      int
}

// pin pins the scratch memory MPI is handed.
func (o *orphan) pin() {
	for _, s := range o.scratch {
		if p := s.ptr(); p != nil {
			o.pinner.Pin(p)
		}
	}
}

// poll tests the requests once and reports whether all have completed, the
// first error code, and whether MPI canceled them.
func (o *orphan) poll() (done bool, rc int, canceled bool) {
	alive.RLock()
	defer alive.RUnlock()
	if finalized.Load() {
		return false, 0, false
	}
	for len(o.hs) > 0 {
		lock()
		next, ok, st, code := cTest(o.hs[0])
		unlock()
		o.hs[0] = next
		if !ok {
			return false, o.rc, false
		}
		o.hs = o.hs[1:]
		canceled = canceled || st.cancelled
		if o.rc == 0 {
			o.rc = code
		}
	}
	return true, o.rc, canceled
}

// await polls until the requests complete or ctx ends; err is ctx.Err()
// in the latter case.
func (o *orphan) await(ctx context.Context) (done bool, rc int, canceled bool, err error) {
	ch := ctx.Done()
	var b backoff
	for {
		if done, rc, canceled = o.poll(); done {
			return true, rc, canceled, nil
		}
		if ch != nil {
			select {
			case <-ch:
				if done, rc, canceled = o.poll(); done {
					return true, rc, canceled, nil
				}
				return false, 0, false, ctx.Err()
			default:
			}
		}
		b.pause()
	}
}

// cancel asks MPI to cancel the requests (point-to-point only).
func (o *orphan) cancel() {
	alive.RLock()
	defer alive.RUnlock()
	if finalized.Load() {
		return
	}
	for _, h := range o.hs {
		lock()
		cCancel(h)
		unlock()
	}
}

// release unpins and recycles the scratch memory; MPI is done with it.
func (o *orphan) release() {
	o.pinner.Unpin()
	for _, s := range o.scratch {
		putScratch(s)
	}
	o.scratch = nil
}

// The adopted orphans, in adoption order.
var orphans struct {
	mu   sync.Mutex
	list []*orphan
	n    atomic.Int64
}

// later holds orphans adopted by adoptAny, which progressLocked moves to
// the orphans' list.
var later struct {
	mu   sync.Mutex
	list []*orphan
}

// adoptAny hands o to the background, as adopt does, from anywhere: also
// from a continuation (orphan.then), which runs with the orphans' lock
// held.
func adoptAny(o *orphan) {
	later.mu.Lock()
	later.list = append(later.list, o)
	later.mu.Unlock()
	orphans.n.Add(1)
}

// abandoned keeps alive the memory of requests MPI was finalised with
// (pinned Go memory MPI may still have pointed to).
var abandoned struct {
	mu   sync.Mutex
	reqs []*req
}

func abandon(r *req) {
	abandoned.mu.Lock()
	abandoned.reqs = append(abandoned.reqs, r)
	abandoned.mu.Unlock()
}

// adopt hands o to the background.
func adopt(o *orphan) {
	orphans.mu.Lock()
	orphans.list = append(orphans.list, o)
	orphans.n.Add(1)
	orphans.mu.Unlock()
}

// progressOrphans polls the adopted orphans once, unless another goroutine
// is at it, and finishes those that completed. Continuations run in
// adoption order per coord.
func progressOrphans() {
	if orphans.n.Load() == 0 || !orphans.mu.TryLock() {
		return
	}
	progressLocked()
	orphans.mu.Unlock()
}

func progressLocked() {
	later.mu.Lock()
	orphans.list = append(orphans.list, later.list...)
	clear(later.list)
	later.list = later.list[:0]
	later.mu.Unlock()
	var blocked map[*coord]bool
	live := orphans.list[:0]
	for _, o := range orphans.list {
		if o.then != nil && blocked[o.k] {
			live = append(live, o)
			continue
		}
		done, rc, _ := o.poll()
		if !done {
			if o.then != nil {
				if blocked == nil {
					blocked = map[*coord]bool{}
				}
				blocked[o.k] = true
			}
			live = append(live, o)
			continue
		}
		o.release()
		if o.then != nil {
			o.then(rc == 0)
		}
		orphans.n.Add(-1)
	}
	clear(orphans.list[len(live):])
	orphans.list = live
}

// sweepOrphans polls the orphans until none is left or d has passed.
func sweepOrphans(d time.Duration) {
	deadline := time.Now().Add(d)
	var b backoff
	for orphans.n.Load() > 0 && time.Now().Before(deadline) {
		orphans.mu.Lock()
		progressLocked()
		orphans.mu.Unlock()
		b.pause()
	}
}
