package comm

import (
	"context"
	"errors"
	"fmt"
	"math/bits"
	"sync"
	"unsafe"

	"github.com/xpu-go/xpu/memspace"
)

// Reserved tags of the shared algorithms: one range per collective kind
// (and one tag per phase of a kind), all above MaxTag, so AnyTag receives
// never match them and two kinds never match each other's messages.
const (
	tagBase = MaxTag + 1

	kindBarrier       = 1
	kindBcast         = 2
	kindReduce        = 3
	kindAllreduce     = 4
	kindGather        = 5
	kindScatter       = 6
	kindAllgather     = 7
	kindAlltoall      = 8
	kindReduceScatter = 9
)

// collTag returns the reserved tag of phase ph of collective kind k.
func collTag(k, ph int) int { return tagBase + k<<4 + ph }

// inflight tracks the requests a collective has started, so that every one
// has completed or been canceled and settled before the collective
// returns: no request may reference the caller's buffers (or the scratch
// memory) afterwards. It also owns the collective's scratch memory.
type inflight struct {
	c       Comm
	reqs    []Request
	scratch [][]uint64
}

// run runs the algorithm fn of collective name and settles its requests.
// On success, requests fn left outstanding (trailing sends) are waited for;
// on failure every outstanding request is canceled and settled. The error
// matches the cause: ctx.Err() on cancellation, ErrPeerLost, ….
func run(ctx context.Context, c Comm, name string, fn func(f *inflight) error) error {
	f := &inflight{c: c}
	err := fn(f)
	if err == nil {
		err = f.waitAll(ctx)
	}
	if err != nil {
		f.abort()
	}
	f.release()
	if err != nil {
		return fmt.Errorf("comm: %s: %w", name, err)
	}
	return nil
}

// track records r, pruning completed requests now and then so that long
// collectives keep a short list.
func (f *inflight) track(r Request) {
	if len(f.reqs) >= 64 && len(f.reqs)&(len(f.reqs)-1) == 0 {
		live := f.reqs[:0]
		for _, q := range f.reqs {
			if _, done, err := q.Test(); !done || err != nil {
				live = append(live, q)
			}
		}
		clear(f.reqs[len(live):])
		f.reqs = live
	}
	f.reqs = append(f.reqs, r)
}

// send starts sending b to dest.
func (f *inflight) send(b memspace.Block, dest, tag int) (Request, error) {
	return f.started(f.c.Isend(b, dest, tag))
}

// recv starts receiving into b from source.
func (f *inflight) recv(b memspace.Block, source, tag int) (Request, error) {
	return f.started(f.c.Irecv(b, source, tag))
}

// started tracks r, a request just started, and returns it; it returns
// err, and no request, when the start failed.
func (f *inflight) started(r Request, err error) (Request, error) {
	if err != nil {
		return nil, err
	}
	f.track(r)
	return r, nil
}

// wait waits for a send, or for a receive of exactly want bytes (want < 0
// for a send). A shorter message means the ranks disagree about sizes.
func (f *inflight) wait(ctx context.Context, r Request, want int) error {
	st, err := r.Wait(ctx)
	if err != nil {
		return err
	}
	if want >= 0 && st.Count != want {
		return fmt.Errorf("received %d bytes from rank %d where %d were expected (do all ranks pass the same sizes?): %w",
			st.Count, st.Source, want, ErrInvalidArgument)
	}
	return nil
}

// waitAll waits for every tracked request.
func (f *inflight) waitAll(ctx context.Context) error {
	for i, r := range f.reqs {
		if _, err := r.Wait(ctx); err != nil {
			return err
		}
		f.reqs[i] = nil
	}
	f.reqs = f.reqs[:0]
	return nil
}

// abort cancels every outstanding request and waits for each to settle
// (see cancelRest). When one did not settle in time, its backend may still
// read or write the scratch memory: it is then left to the garbage
// collector (the request's block keeps it alive) rather than recycled.
func (f *inflight) abort() {
	if !cancelRest(f.reqs) {
		f.scratch = nil
	}
	f.reqs = nil
}

// alloc returns n bytes of scratch memory (8-byte aligned, so aligned for
// every DType) as a block and its host view. It lives until the collective
// has settled.
func (f *inflight) alloc(n int) (memspace.Block, []byte) {
	w := getWords((n + 7) / 8)
	f.scratch = append(f.scratch, w)
	buf, err := memspace.FromSlice(w)
	if err != nil { // uint64 is a valid element type
		panic("comm: internal error: " + err.Error())
	}
	b := sub(buf.Block(), 0, n)
	if n == 0 {
		return b, nil
	}
	return b, unsafe.Slice((*byte)(unsafe.Pointer(unsafe.SliceData(w))), n)
}

func (f *inflight) release() {
	for _, w := range f.scratch {
		putWords(w)
	}
	f.scratch = nil
}

// Scratch pools by power-of-two size class, up to 1<<maxPooledClass words.
const maxPooledClass = 21 // 16 MiB

var wordPools [maxPooledClass + 1]sync.Pool

func sizeClass(n int) int {
	if n <= 1 {
		return 0
	}
	return bits.Len(uint(n - 1))
}

func getWords(n int) []uint64 {
	cl := sizeClass(n)
	if cl > maxPooledClass {
		return make([]uint64, n)
	}
	if p, ok := wordPools[cl].Get().(*[]uint64); ok {
		return (*p)[:n]
	}
	return make([]uint64, n, 1<<cl)
}

func putWords(w []uint64) {
	c := cap(w)
	if c == 0 || c&(c-1) != 0 || sizeClass(c) > maxPooledClass {
		return
	}
	w = w[:c]
	wordPools[sizeClass(c)].Put(&w)
}

// sub returns the sub-block [off, off+n) of b; the offsets are computed by
// the algorithms and always in range.
func sub(b memspace.Block, off, n int) memspace.Block {
	s, err := b.Slice(off, n)
	if err != nil {
		panic("comm: internal error: " + err.Error())
	}
	return s
}

// emptyBlock is the zero-length host block of the zero-byte messages.
var emptyBlock = func() memspace.Block {
	b, _ := memspace.FromSlice[byte](nil)
	return b.Block()
}()

// copyBlock copies src to dst (host blocks of equal length).
func copyBlock(dst, src memspace.Block) error {
	if sameBlock(dst, src) || dst.Len() == 0 {
		return nil
	}
	d, err := hostBytes(dst)
	if err != nil {
		return err
	}
	s, err := hostBytes(src)
	if err != nil {
		return err
	}
	copy(d, s)
	return nil
}

// partition splits n bytes of elements of size unit into p blocks whose
// element counts differ by at most one, and returns the p+1 byte offsets.
func partition(n, p, unit int) []int {
	count := n / unit
	q, rem := count/p, count%p
	offs := make([]int, p+1)
	for i := range p {
		c := q
		if i < rem {
			c++
		}
		offs[i+1] = offs[i] + c*unit
	}
	return offs
}

// uniform returns the p+1 offsets of p blocks of m bytes each.
func uniform(m, p int) []int {
	offs := make([]int, p+1)
	for i := range offs {
		offs[i] = i * m
	}
	return offs
}

func mod(a, p int) int { return ((a % p) + p) % p }

// isFallback reports whether a native method declined the operation.
func isFallback(err error) bool { return err != nil && errors.Is(err, ErrFallback) }
