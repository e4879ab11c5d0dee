package conformance

import (
	"context"
	"fmt"
	"math"
	"slices"
	"sync"

	"github.com/xpu-go/xpu/comm"
	"github.com/xpu-go/xpu/internal/collalg"
)

// The "algorithms" cases run each collective whose shared algorithm
// depends on the size — Bcast, Reduce, Allreduce, Allgather, and the rings'
// chunking, which ReduceScatter shows too — at the sizes of
// collalg.Counts: on both sides of every threshold of package comm, as
// package comm itself chooses, so that a threshold that moves moves these
// sizes, and every algorithm and path runs (the coll cases run every
// collective at small sizes over 1 to MaxRanks ranks). They run over two
// ranks, a power of two (4) and another count (3), with a root other than
// rank 0; Reduce and Allreduce run a count of more than 3 MiB that the
// group size does not divide as well (bigUneven). One reduction (Sum) and
// one element type per collective keep the bytes moved to a few MiB per
// rank.

// algGroupSizes are the group sizes of the algorithm cases: two (where
// Bcast keeps its tree), an odd count and a power of two.
var algGroupSizes = []int{2, 3, 4}

// algNs returns the group sizes of the algorithm cases within maxRanks.
func algNs(maxRanks int) []int {
	var ns []int
	for _, n := range algGroupSizes {
		if n <= maxRanks {
			ns = append(ns, n)
		}
	}
	if len(ns) == 0 {
		ns = []int{maxRanks}
	}
	return ns
}

// algElem is the element size of collective c in the algorithm cases:
// float64 for the reductions, int32 for the others.
func algElem(c collalg.Coll) int {
	switch c {
	case collalg.Reduce, collalg.Allreduce, collalg.ReduceScatter:
		return 8
	}
	return 4
}

// algColls returns the collectives whose shared algorithm takes more than
// one path over the group sizes of the algorithm cases.
func algColls() []collalg.Coll {
	var out []collalg.Coll
	for _, c := range collalg.Colls {
		paths := map[collalg.Path]bool{}
		for _, n := range algGroupSizes {
			for _, k := range collalg.Counts(c, algElem(c), n) {
				paths[collalg.Choose(c, k, algElem(c), n)] = true
			}
		}
		if len(paths) > 1 {
			out = append(out, c)
		}
	}
	return out
}

// algCases returns the cases of the "algorithms" section.
func algCases(maxRanks int) []rankCase {
	var cases []rankCase
	for _, c := range algColls() {
		cases = append(cases, rankCase{name: c.String(), ns: algNs(maxRanks), body: algBody(c), stall: ruleCollective})
	}
	return cases
}

// algRoot is the root of the rooted collectives in the algorithm cases:
// the last rank, so that the trees are rotated.
func algRoot(n int) int { return n - 1 }

// algBody runs collective c at every count of collalg.Counts over the
// case's ranks and checks each result.
func algBody(c collalg.Coll) func(ctx context.Context, me, n int, cm comm.Comm) error {
	return func(ctx context.Context, me, n int, cm comm.Comm) error {
		elem := algElem(c)
		counts := collalg.Counts(c, elem, n)
		if c == collalg.Reduce || c == collalg.Allreduce {
			counts = append(counts, bigUneven(n, elem))
		}
		slices.Reverse(counts) // the largest first: the new paths fail first
		for _, count := range counts {
			if err := algRun(ctx, c, me, n, count, cm); err != nil {
				return fmt.Errorf("%s: %w", algWhat(c, n, count), err)
			}
		}
		return nil
	}
}

// bigUneven is a count of elements of elem bytes well past the last
// threshold of every reduction (3 MiB and a little), which n does not
// divide: the ring's blocks are uneven and its last piece short, where an
// implementation that splits large vectors slips.
func bigUneven(n, elem int) int {
	count := 3<<20/elem + 1
	for count%n == 0 {
		count++
	}
	return count
}

// algCall names the call of collective c in the algorithm cases.
func algCall(c collalg.Coll, n int) string {
	switch c {
	case collalg.Bcast, collalg.Scatter:
		return fmt.Sprintf("%s from root %d", collName(c), algRoot(n))
	case collalg.Reduce, collalg.Gather:
		return fmt.Sprintf("%s to root %d", collName(c), algRoot(n))
	}
	return collName(c)
}

// algWhat describes one call of the algorithm cases: count as collalg
// counts it (per rank for Gather, Scatter, Allgather and ReduceScatter,
// per pair for Alltoall).
func algWhat(c collalg.Coll, n, count int) string {
	typ := "int32"
	if algElem(c) == 8 {
		typ = "float64"
	}
	per := ""
	switch c {
	case collalg.Gather, collalg.Scatter, collalg.Allgather, collalg.ReduceScatter:
		per = " per rank"
	case collalg.Alltoall:
		per = " per pair"
	}
	what := fmt.Sprintf("%s of %d %s%s over %d ranks", algCall(c, n), count, typ, per, n)
	if n > 1 {
		what += fmt.Sprintf(" (where the shared algorithms run %v)", collalg.Choose(c, count, algElem(c), n))
	}
	return what
}

// The data of the algorithm cases are windows of two long patterns built
// once and shared read-only, so that the vectors of a few MiB cost a copy
// each rather than a loop per element (slow under the race detector):
// every int32 of algInts differs from its neighbours, and the float64s of
// algFloats are small integers, so that sums are exact in any order.
var algData struct {
	mu     sync.Mutex
	ints   []int32
	floats []float64
	sums   map[[2]int][]float64 // (ranks, count) -> the sum of the ranks' windows
	poison map[int][]float64    // count -> NaNs
}

// algInts returns the first count int32 of the pattern (read-only).
func algInts(count int) []int32 {
	algData.mu.Lock()
	defer algData.mu.Unlock()
	if len(algData.ints) < count {
		p := make([]int32, max(count, 2*len(algData.ints)))
		for i := range p {
			p[i] = int32(uint32(i+1) * 2654435761 >> 1) // distinct, and never 0
		}
		algData.ints = p
	}
	return algData.ints[:count:count]
}

// algFloats returns the first count float64 of the pattern (read-only).
func algFloats(count int) []float64 {
	algData.mu.Lock()
	defer algData.mu.Unlock()
	return algFloatsLocked(count)
}

func algFloatsLocked(count int) []float64 {
	if len(algData.floats) < count {
		p := make([]float64, max(count, 2*len(algData.floats)))
		for i := range p {
			p[i] = float64(signedVals[(i*7+i/5)%4])
		}
		algData.floats = p
	}
	return algData.floats[:count:count]
}

// algSum returns the element-wise sum over ranks r < n of the windows
// algFloats[r*count : (r+1)*count] (read-only).
func algSum(n, count int) []float64 {
	algData.mu.Lock()
	defer algData.mu.Unlock()
	k := [2]int{n, count}
	if s, ok := algData.sums[k]; ok {
		return s
	}
	f := algFloatsLocked(n * count)
	sum := make([]float64, count)
	for r := range n {
		for i, v := range f[r*count : (r+1)*count] {
			sum[i] += v
		}
	}
	if algData.sums == nil {
		algData.sums = map[[2]int][]float64{}
	}
	algData.sums[k] = sum
	return sum
}

// algPoison returns count NaNs, for receive buffers: no result is NaN, so
// an element left unwritten is seen (read-only).
func algPoison(count int) []float64 {
	algData.mu.Lock()
	defer algData.mu.Unlock()
	if p, ok := algData.poison[count]; ok {
		return p
	}
	p := make([]float64, count)
	for i := range p {
		p[i] = math.NaN()
	}
	if algData.poison == nil {
		algData.poison = map[int][]float64{}
	}
	algData.poison[count] = p
	return p
}

// window returns part i of s cut in parts of count elements.
func window[T any](s []T, i, count int) []T { return s[i*count : (i+1)*count] }

// algRun runs collective c once with count elements (as collalg.Choose
// counts them) and checks the result on this rank.
func algRun(ctx context.Context, c collalg.Coll, me, n, count int, cm comm.Comm) error {
	root := algRoot(n)
	switch c {
	case collalg.Barrier:
		return comm.Barrier(ctx, cm)
	case collalg.Bcast:
		return algBcast(ctx, me, count, root, cm)
	case collalg.Reduce:
		return algReduce(ctx, me, n, count, root, cm)
	case collalg.Allreduce:
		return algAllreduce(ctx, me, n, count, cm)
	case collalg.Gather, collalg.Allgather:
		return algGather(ctx, c, me, n, count, root, cm)
	case collalg.Scatter:
		return algScatter(ctx, me, n, count, root, cm)
	case collalg.Alltoall:
		return algAlltoall(ctx, me, n, count, cm)
	case collalg.ReduceScatter:
		return algReduceScatter(ctx, me, n, count, cm)
	}
	return fmt.Errorf("conformance: no algorithm case for %v", c)
}

// The alg* functions below are algRun for one collective each.

func algBcast(ctx context.Context, me, count, root int, cm comm.Comm) error {
	// The root sends window 0; the others start from window 1.
	src := algInts(2 * count)
	buf := slices.Clone(window(src, 1, count))
	if me == root {
		buf = slices.Clone(window(src, 0, count))
	}
	if err := comm.Bcast(ctx, cm, view(buf), root); err != nil {
		return err
	}
	return firstDiff("the buffer", window(src, 0, count), buf)
}

func algReduce(ctx context.Context, me, n, count, root int, cm comm.Comm) error {
	send := slices.Clone(window(algFloats(n*count), me, count))
	var recv []float64
	if me == root {
		recv = slices.Clone(algPoison(count))
	}
	if err := comm.Reduce(ctx, cm, view(send), view(recv), comm.Sum, root); err != nil {
		return err
	}
	if me == root {
		return firstDiff("the result at the root", algSum(n, count), recv)
	}
	return nil
}

func algAllreduce(ctx context.Context, me, n, count int, cm comm.Comm) error {
	send := slices.Clone(window(algFloats(n*count), me, count))
	recv := slices.Clone(algPoison(count))
	if err := comm.Allreduce(ctx, cm, view(send), view(recv), comm.Sum); err != nil {
		return err
	}
	return firstDiff("the result", algSum(n, count), recv)
}

// algGather runs c, Gather or Allgather.
func algGather(ctx context.Context, c collalg.Coll, me, n, count, root int, cm comm.Comm) error {
	// Rank r sends window r; the result is the first n windows.
	src := algInts((n + 1) * count)
	send := slices.Clone(window(src, me, count))
	var recv []int32
	if me == root || c == collalg.Allgather {
		recv = slices.Clone(src[count : (n+1)*count]) // stale data, shifted
	}
	var err error
	if c == collalg.Gather {
		err = comm.Gather(ctx, cm, view(send), view(recv), root)
	} else {
		err = comm.Allgather(ctx, cm, view(send), view(recv))
	}
	if err != nil || recv == nil {
		return err
	}
	return firstDiff("the result", src[:n*count], recv)
}

func algScatter(ctx context.Context, me, n, count, root int, cm comm.Comm) error {
	// The root sends windows 0 to n-1; rank r gets window r.
	src := algInts((n + 1) * count)
	var send []int32
	if me == root {
		send = slices.Clone(src[:n*count])
	}
	recv := slices.Clone(window(src, n, count))
	if err := comm.Scatter(ctx, cm, view(send), view(recv), root); err != nil {
		return err
	}
	return firstDiff("this rank's part", window(src, me, count), recv)
}

func algAlltoall(ctx context.Context, me, n, count int, cm comm.Comm) error {
	// Rank r sends windows r*n to r*n+n-1; part j of rank r's result
	// is window j*n+r.
	src := algInts(n * n * count)
	send := slices.Clone(src[me*n*count : (me+1)*n*count])
	recv := slices.Clone(send)
	if err := comm.Alltoall(ctx, cm, view(send), view(recv)); err != nil {
		return err
	}
	want := make([]int32, 0, n*count)
	for j := range n {
		want = append(want, window(src, j*n+me, count)...)
	}
	return firstDiff("the result", want, recv)
}

func algReduceScatter(ctx context.Context, me, n, count int, cm comm.Comm) error {
	send := slices.Clone(window(algFloats(n*n*count), me, n*count))
	recv := slices.Clone(algPoison(count))
	if err := comm.ReduceScatter(ctx, cm, view(send), view(recv), comm.Sum); err != nil {
		return err
	}
	return firstDiff("this rank's part", window(algSum(n, n*count), me, count), recv)
}
