package conformance

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"sync"
	"time"
	"unsafe"

	"github.com/xpu-go/xpu/comm"
	"github.com/xpu-go/xpu/internal/doubling"
	"github.com/xpu-go/xpu/memspace"
)

// celsius is a named element type: reductions must see through the name.
type celsius float64

// barrierTag is the first user tag of the barrier case: round k uses
// barrierTag+k.
const barrierTag = 60

// barrierHold is how long the late rank of a barrier round holds back
// before it enters the Barrier, so that a rank let out early has time to
// say so. A correct Barrier passes however long it is; a broken one is
// caught more surely the longer it is.
const barrierHold = 20 * time.Millisecond

// collBarrier checks that no rank leaves a Barrier before every rank has
// entered it, with messages only, so that it holds across processes. In
// each round one rank is late: it posts a receive from every other rank,
// holds back, and only then enters the Barrier; the others enter at once
// and, once they leave, send the late rank an empty message. A message
// that arrives before the late rank entered came from a rank that left the
// Barrier early. Every rank is late in turn.
func collBarrier(ctx context.Context, me, n int, cm comm.Comm) error {
	rounds := max(4, n)
	for k := range rounds {
		late, tag := k%n, barrierTag+k
		if me != late {
			if err := comm.Barrier(ctx, cm); err != nil {
				return fmt.Errorf("Barrier #%d: %w", k, err)
			}
			if err := signal(ctx, cm, late, tag); err != nil {
				return fmt.Errorf("telling rank %d that this rank left Barrier #%d: %w", late, k, err)
			}
			continue
		}
		reqs := make([]comm.Request, n)
		for r := range n {
			if r == me {
				continue
			}
			req, err := cm.Irecv(blk(nil), r, tag)
			if err != nil {
				return fmt.Errorf("Irecv from %d: %w", r, err)
			}
			reqs[r] = req
		}
		if n > 1 {
			hold := time.NewTimer(barrierHold)
			select {
			case <-ctx.Done():
				hold.Stop()
				return ctx.Err()
			case <-hold.C:
			}
		}
		for r, req := range reqs {
			if req == nil {
				continue
			}
			if _, done, err := req.Test(); done {
				if err != nil {
					return fmt.Errorf("the receive from %d, before Barrier #%d: %w", r, k, err)
				}
				return fmt.Errorf("rank %d left Barrier #%d before rank %d had entered it: %v", r, k, me, ruleBarrier)
			}
		}
		if err := comm.Barrier(ctx, cm); err != nil {
			return fmt.Errorf("Barrier #%d: %w", k, err)
		}
		for r, req := range reqs {
			if req == nil {
				continue
			}
			if _, err := req.Wait(ctx); err != nil {
				return fmt.Errorf("the message rank %d sends once it left Barrier #%d: %w", r, k, err)
			}
		}
	}
	return nil
}

// roots returns the roots a rooted collective is tried with.
func roots(n int) []int {
	rs := []int{0, n - 1, n / 2}
	slices.Sort(rs)
	return slices.Compact(rs)
}

// elems returns count int32 elements that name seed and the index.
func elems(seed, count int) []int32 {
	e := make([]int32, count)
	for i := range e {
		e[i] = int32(seed*1_000_003 + i + 1)
	}
	return e
}

// view returns the buffer viewing s; a nil s gives a nil buffer.
func view[T any](s []T) *memspace.Buffer[T] {
	if s == nil {
		return nil
	}
	b, err := memspace.FromSlice(s)
	if err != nil {
		panic(err) // the suite's element types are all valid
	}
	return b
}

// asBytes views the memory of s.
func asBytes[T any](s []T) []byte {
	var zero T
	return unsafe.Slice((*byte)(unsafe.Pointer(unsafe.SliceData(s))), len(s)*int(unsafe.Sizeof(zero)))
}

// firstDiff describes the first element where got differs from want.
func firstDiff[T comparable](what string, want, got []T) error {
	if len(want) != len(got) {
		return fmt.Errorf("%s: %d elements, want %d", what, len(got), len(want))
	}
	if bytes.Equal(asBytes(want), asBytes(got)) {
		return nil // the common case, in one comparison
	}
	for i := range want {
		if want[i] != got[i] {
			return fmt.Errorf("%s: element %d of %d is %v, want %v", what, i, len(want), got[i], want[i])
		}
	}
	return nil
}

func collBcast(ctx context.Context, me, n int, cm comm.Comm) error {
	for _, count := range []int{1, 7, 1001, 80003} { // 320 KB (the algorithms cases cross the thresholds)
		rs := roots(n)
		if count == 7 {
			rs = rs[:0]
			for r := range n {
				rs = append(rs, r)
			}
		}
		for _, root := range rs {
			buf := elems(100+me, count)
			if me == root {
				buf = elems(root, count)
			}
			if err := comm.Bcast(ctx, cm, view(buf), root); err != nil {
				return fmt.Errorf("Bcast of %d from %d: %w", count, root, err)
			}
			if err := firstDiff(fmt.Sprintf("Bcast of %d from %d", count, root), elems(root, count), buf); err != nil {
				return err
			}
		}
	}
	// A struct element type.
	root := n - 1
	v := make([]vec4, 33)
	if me == root {
		for i := range v {
			v[i] = vec4{float32(i), 2, 3, float32(-i)}
		}
	}
	if err := comm.Bcast(ctx, cm, view(v), root); err != nil {
		return fmt.Errorf("Bcast[vec4]: %w", err)
	}
	for i := range v {
		if want := (vec4{float32(i), 2, 3, float32(-i)}); v[i] != want {
			return fmt.Errorf("Bcast[vec4] from %d: element %d is %v, want %v", root, i, v[i], want)
		}
	}
	return nil
}

func collGather(ctx context.Context, me, n int, cm comm.Comm) error {
	for _, k := range []int{1, 3, 1001} {
		for _, root := range roots(n) {
			send := elems(me, k)
			var recv []int32
			if me == root {
				recv = elems(999, n*k)
			}
			if err := comm.Gather(ctx, cm, view(send), view(recv), root); err != nil {
				return fmt.Errorf("Gather of %d to %d: %w", k, root, err)
			}
			if err := firstDiff("Gather's send buffer", elems(me, k), send); err != nil {
				return err
			}
			if me == root {
				var want []int32
				for r := range n {
					want = append(want, elems(r, k)...)
				}
				if err := firstDiff(fmt.Sprintf("Gather of %d to %d", k, root), want, recv); err != nil {
					return err
				}
			}
		}
	}
	return nil
}

func collScatter(ctx context.Context, me, n int, cm comm.Comm) error {
	for _, k := range []int{1, 3, 1001} {
		for _, root := range roots(n) {
			var send []int32
			if me == root {
				for r := range n {
					send = append(send, elems(100+r, k)...)
				}
			}
			recv := elems(999, k)
			if err := comm.Scatter(ctx, cm, view(send), view(recv), root); err != nil {
				return fmt.Errorf("Scatter of %d from %d: %w", k, root, err)
			}
			if err := firstDiff(fmt.Sprintf("Scatter of %d from %d", k, root), elems(100+me, k), recv); err != nil {
				return err
			}
		}
	}
	return nil
}

func collAllgather(ctx context.Context, me, n int, cm comm.Comm) error {
	for _, k := range []int{1, 3, 1001, 20003} {
		send := elems(me, k)
		recv := elems(999, n*k)
		if err := comm.Allgather(ctx, cm, view(send), view(recv)); err != nil {
			return fmt.Errorf("Allgather of %d: %w", k, err)
		}
		var want []int32
		for r := range n {
			want = append(want, elems(r, k)...)
		}
		if err := firstDiff(fmt.Sprintf("Allgather of %d", k), want, recv); err != nil {
			return err
		}
	}
	return nil
}

func collAlltoall(ctx context.Context, me, n int, cm comm.Comm) error {
	for _, k := range []int{1, 3, 257} {
		var send, want []int32
		for j := range n {
			send = append(send, elems(me*16+j, k)...)
			want = append(want, elems(j*16+me, k)...)
		}
		recv := elems(999, n*k)
		if err := comm.Alltoall(ctx, cm, view(send), view(recv)); err != nil {
			return fmt.Errorf("Alltoall of %d per rank: %w", k, err)
		}
		if err := firstDiff(fmt.Sprintf("Alltoall of %d per rank", k), want, recv); err != nil {
			return err
		}
	}
	return nil
}

// Reductions. Values are small integers, so that sums and products are
// exact in every type and the result does not depend on the order the
// backend combines them in; the reference is a sequential fold over the
// ranks in the element type's own arithmetic (wrapping for integers),
// computed once per (type, op, ranks, range) and shared by the ranks.

var (
	signedVals = [4]int{-2, -1, 1, 2}
	imagVals   = [4]int{-1, 1, 2, 0}
)

// gen makes the contributions of the ranks for element type T: element i
// of rank r is tbl[re(r, i)][im(r, i)].
type gen[T comm.Number] struct {
	tbl [4][4]T
	key [4]int // order of the real parts, for Min and Max
}

func re(r, i int) int { return (r*7 + i*3 + 1) % 4 }
func im(r, i int) int { return (r*5 + i) % 4 }

func newGen[T comm.Number]() *gen[T] {
	g := &gen[T]{}
	for a := range 4 {
		for b := range 4 {
			v := reflect.ValueOf(&g.tbl[a][b]).Elem()
			switch v.Kind() {
			case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
				v.SetInt(int64(signedVals[a]))
				g.key[a] = signedVals[a]
			case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr:
				v.SetUint(uint64(a + 1))
				g.key[a] = a + 1
			case reflect.Float32, reflect.Float64:
				v.SetFloat(float64(signedVals[a]))
				g.key[a] = signedVals[a]
			case reflect.Complex64, reflect.Complex128:
				v.SetComplex(complex(float64(signedVals[a]), float64(imagVals[b])))
			}
		}
	}
	return g
}

func (g *gen[T]) val(r, i int) T { return g.tbl[re(r, i)][im(r, i)] }

// vals returns rank r's contribution of count elements.
func (g *gen[T]) vals(r, count int) []T {
	s := make([]T, count)
	for i := range s {
		s[i] = g.val(r, i)
	}
	return s
}

type refKey struct {
	t            reflect.Type
	op           comm.Op
	n, lo, count int
}

var refs sync.Map // refKey -> func() any (a sync.OnceValue)

// reference returns the fold over ranks 0..n-1 of elements [lo, lo+count).
// The caller must not modify it.
func (g *gen[T]) reference(op comm.Op, n, lo, count int) []T {
	k := refKey{reflect.TypeFor[T](), op, n, lo, count}
	f, _ := refs.LoadOrStore(k, sync.OnceValue(func() any { return g.fold(op, n, lo, count) }))
	return f.(func() any)().([]T)
}

func (g *gen[T]) fold(op comm.Op, n, lo, count int) []T {
	out := make([]T, count)
	for i := range out {
		e := lo + i
		switch op {
		case comm.Sum, comm.Prod:
			acc := g.val(0, e)
			for r := 1; r < n; r++ {
				if op == comm.Sum {
					acc += g.val(r, e)
				} else {
					acc *= g.val(r, e)
				}
			}
			out[i] = acc
		default: // Min, Max: the value of the rank with the extreme key
			best := 0
			for r := 1; r < n; r++ {
				kr, kb := g.key[re(r, e)], g.key[re(best, e)]
				if (op == comm.Min && kr < kb) || (op == comm.Max && kr > kb) {
					best = r
				}
			}
			out[i] = g.val(best, e)
		}
	}
	return out
}

// opsFor returns the reductions T supports: no Min or Max on complex.
func opsFor[T comm.Number]() []comm.Op {
	if comm.DTypeOf[T]().IsComplex() {
		return []comm.Op{comm.Sum, comm.Prod}
	}
	return []comm.Op{comm.Sum, comm.Prod, comm.Min, comm.Max}
}

func typeName[T any]() string { return reflect.TypeFor[T]().String() }

// reduction runs one typed reduction check on every rank.
type reduction func(ctx context.Context, me, n int, cm comm.Comm) error

// forTypes runs f's instance for each element type the reductions are
// checked with: signed, unsigned (wrapping), floating point, a named type
// and complex.
func forTypes(ctx context.Context, me, n int, cm comm.Comm, fs ...reduction) error {
	for _, f := range fs {
		if err := f(ctx, me, n, cm); err != nil {
			return err
		}
	}
	return nil
}

// perOpCount makes the reduction that calls check, with one generator of
// T, for each of ops (every op T supports when none) and each of counts,
// and returns its first error.
func perOpCount[T comm.Number](counts []int, ops []comm.Op, check func(ctx context.Context, me, n int, cm comm.Comm, g *gen[T], op comm.Op, count int) error) reduction {
	if len(ops) == 0 {
		ops = opsFor[T]()
	}
	return func(ctx context.Context, me, n int, cm comm.Comm) error {
		g := newGen[T]()
		for _, op := range ops {
			for _, count := range counts {
				if err := check(ctx, me, n, cm, g, op, count); err != nil {
					return err
				}
			}
		}
		return nil
	}
}

func collAllreduce(ctx context.Context, me, n int, cm comm.Comm) error {
	counts := []int{1, 7, max(n-1, 1), 1001}
	return forTypes(ctx, me, n, cm,
		allreduceT[int32](counts), allreduceT[uint8](counts), allreduceT[float32](counts),
		allreduceT[float64](counts), allreduceT[float64]([]int{40003}, comm.Sum, comm.Max), // 320 KB: the ring
		allreduceT[celsius](counts), allreduceT[complex128](counts), allreduceT[complex64]([]int{3}))
}

// allreduceT checks Allreduce of T with ops (every op T supports when none).
func allreduceT[T comm.Number](counts []int, ops ...comm.Op) reduction {
	return perOpCount(counts, ops, func(ctx context.Context, me, n int, cm comm.Comm, g *gen[T], op comm.Op, count int) error {
		what := fmt.Sprintf("Allreduce[%s] %v of %d", typeName[T](), op, count)
		send := g.vals(me, count)
		recv := g.vals(me+50, count)
		if err := comm.Allreduce(ctx, cm, view(send), view(recv), op); err != nil {
			return fmt.Errorf("%s: %w", what, err)
		}
		want := g.reference(op, n, 0, count)
		if err := firstDiff(what, want, recv); err != nil {
			return err
		}
		if err := firstDiff(what+": the send buffer", g.vals(me, count), send); err != nil {
			return err
		}
		inplace := g.vals(me, count)
		b := view(inplace)
		if err := comm.Allreduce(ctx, cm, b, b, op); err != nil {
			return fmt.Errorf("%s in place: %w", what, err)
		}
		return firstDiff(what+" in place", want, inplace)
	})
}

func collReduce(ctx context.Context, me, n int, cm comm.Comm) error {
	counts := []int{1, 7, 1001}
	return forTypes(ctx, me, n, cm,
		reduceT[int32](counts), reduceT[uint8]([]int{5}),
		reduceT[float64](counts), reduceT[float64]([]int{40003}, comm.Sum), // 320 KB (the algorithms cases cross the thresholds)
		reduceT[celsius]([]int{9}), reduceT[complex128](counts))
}

// reduceT checks Reduce of T with ops (every op T supports when none).
func reduceT[T comm.Number](counts []int, ops ...comm.Op) reduction {
	return perOpCount(counts, ops, func(ctx context.Context, me, n int, cm comm.Comm, g *gen[T], op comm.Op, count int) error {
		for _, root := range roots(n) {
			what := fmt.Sprintf("Reduce[%s] %v of %d to %d", typeName[T](), op, count, root)
			want := g.reference(op, n, 0, count)
			send := g.vals(me, count)
			var recv []T
			if me == root {
				recv = g.vals(me+50, count)
			}
			if err := comm.Reduce(ctx, cm, view(send), view(recv), op, root); err != nil {
				return fmt.Errorf("%s: %w", what, err)
			}
			if err := firstDiff(what+": the send buffer", g.vals(me, count), send); err != nil {
				return err
			}
			if me == root {
				if err := firstDiff(what, want, recv); err != nil {
					return err
				}
			}
			// In place at the root.
			inplace := g.vals(me, count)
			b := view(inplace)
			rb := b
			if me != root {
				rb = nil
			}
			if err := comm.Reduce(ctx, cm, b, rb, op, root); err != nil {
				return fmt.Errorf("%s in place: %w", what, err)
			}
			if me != root {
				want = g.vals(me, count)
			}
			if err := firstDiff(what+" in place", want, inplace); err != nil {
				return err
			}
		}
		return nil
	})
}

func collReduceScatter(ctx context.Context, me, n int, cm comm.Comm) error {
	counts := []int{1, 3, 101}
	return forTypes(ctx, me, n, cm,
		reduceScatterT[int32](counts), reduceScatterT[uint8]([]int{3}), reduceScatterT[float32](counts),
		reduceScatterT[celsius]([]int{5}), reduceScatterT[complex128](counts))
}

func reduceScatterT[T comm.Number](counts []int) reduction {
	return perOpCount(counts, nil, func(ctx context.Context, me, n int, cm comm.Comm, g *gen[T], op comm.Op, k int) error {
		what := fmt.Sprintf("ReduceScatter[%s] %v of %d per rank", typeName[T](), op, k)
		send := g.vals(me, n*k)
		recv := g.vals(me+50, k)
		if err := comm.ReduceScatter(ctx, cm, view(send), view(recv), op); err != nil {
			return fmt.Errorf("%s: %w", what, err)
		}
		return firstDiff(what, g.reference(op, n, me*k, k), recv)
	})
}

// collInvalid makes every rank call the same invalid collective: each must
// refuse it with ErrInvalidArgument without waiting for the others.
func collInvalid(ctx context.Context, me, n int, cm comm.Comm) error {
	bad := func(what string, err error) error {
		if !errors.Is(err, comm.ErrInvalidArgument) {
			return fmt.Errorf("%s: error %v, want ErrInvalidArgument", what, err)
		}
		return nil
	}
	c128 := view(newGen[complex128]().vals(me, 4))
	c64 := view(newGen[complex64]().vals(me, 4*n))
	fg := newGen[float64]()
	f := view(fg.vals(me, 4))
	f3 := view(fg.vals(me, 3))
	errs := []error{
		bad("Allreduce[complex128] Min", comm.Allreduce(ctx, cm, c128, c128, comm.Min)),
		bad("Allreduce[complex128] Max", comm.Allreduce(ctx, cm, c128, c128, comm.Max)),
		bad("Reduce[complex128] Min", comm.Reduce(ctx, cm, c128, c128, comm.Min, 0)),
		bad("ReduceScatter[complex64] Max", comm.ReduceScatter(ctx, cm, c64, view(make([]complex64, 4)), comm.Max)),
		bad("Allreduce with Op(0)", comm.Allreduce(ctx, cm, f, f, comm.Op(0))),
		bad("Allreduce with Op(99)", comm.Allreduce(ctx, cm, f, f, comm.Op(99))),
		bad("Allreduce of 4 elements into 3", comm.Allreduce(ctx, cm, f, f3, comm.Sum)),
		bad("Bcast from rank -1", comm.Bcast(ctx, cm, f, -1)),
		bad(fmt.Sprintf("Bcast from rank %d of %d", n, n), comm.Bcast(ctx, cm, f, n)),
		bad(fmt.Sprintf("Reduce to rank %d of %d", n, n), comm.Reduce(ctx, cm, f, f, comm.Sum, n)),
		bad("Gather to rank -1", comm.Gather(ctx, cm, f, f, -1)),
		bad("Allgather into a buffer of the wrong length", comm.Allgather(ctx, cm, f, view(make([]float64, 4*n+1)))),
	}
	if n > 1 {
		errs = append(errs, bad(fmt.Sprintf("Alltoall of %d elements over %d ranks", n*4+1, n),
			comm.Alltoall(ctx, cm, view(make([]float64, n*4+1)), view(make([]float64, n*4+1)))))
	}
	if err := errors.Join(errs...); err != nil {
		return err
	}
	// The group still works.
	return commCollOnce(ctx, cm)
}

// collPeerLost closes the last rank and checks that the survivors'
// collectives fail with ErrPeerLost within a bound.
func collPeerLost(c *tcase, ranks []comm.Comm) {
	n := len(ranks)
	gone := n - 1
	if err := ranks[gone].Close(); err != nil {
		c.Logf("Close of rank %d: %v", gone, err)
	}
	var wg sync.WaitGroup
	errs := make([]error, n-1)
	for me := range n - 1 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ctx, cancel := context.WithTimeout(c.ctx, lostBound)
			defer cancel()
			cm := ranks[me]
			b := view(newGen[float64]().vals(me, 64))
			for _, op := range []struct {
				name string
				f    func() error
			}{
				{"Allreduce", func() error { return comm.Allreduce(ctx, cm, b, b, comm.Sum) }},
				{"Barrier", func() error { return comm.Barrier(ctx, cm) }},
			} {
				if err := op.f(); !errors.Is(err, comm.ErrPeerLost) {
					why := rulePeerLost
					where := ""
					if _, ok := comm.As[comm.Collectives](cm); !ok {
						if talks := sharedPeers(op.name, n, me); !slices.Contains(talks, gone) {
							why = ruleRevoke
							where = fmt.Sprintf(" Rank %d never exchanges messages with rank %d here (the shared %s: only with ranks %v):",
								me, gone, op.name, talks)
						}
					}
					errs[me] = fmt.Errorf("rank %d: %s after rank %d closed: error %v, want ErrPeerLost within %v.%s %v",
						me, op.name, gone, err, lostBound, where, why)
					return
				}
			}
		}()
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			c.Error(err)
		}
	}
}

// sharedPeers returns the ranks rank r exchanges messages with in the
// shared algorithm of collective name ("Allreduce" of a small vector:
// recursive doubling; "Barrier": dissemination) over p ranks.
func sharedPeers(name string, p, r int) []int {
	var peers []int
	add := func(q int) {
		if q >= 0 && q != r && !slices.Contains(peers, q) {
			peers = append(peers, q)
		}
	}
	switch name {
	case "Barrier":
		for k := 1; k < p; k <<= 1 {
			add((r + k) % p)
			add(((r-k)%p + p) % p)
		}
	case "Allreduce":
		d := doubling.New(p, r)
		add(d.HandsTo())
		add(d.FoldsFrom())
		for i := range d.Steps() {
			add(d.Partner(i))
		}
	}
	slices.Sort(peers)
	return peers
}
