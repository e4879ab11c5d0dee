package collalg

import "slices"

// Coll is a collective operation of package comm.
type Coll uint8

// The collectives.
const (
	Barrier Coll = iota + 1
	Bcast
	Reduce
	Allreduce
	Gather
	Scatter
	Allgather
	Alltoall
	ReduceScatter
)

// Colls lists every collective, in the order of the package documentation
// of comm.
var Colls = []Coll{Barrier, Bcast, Reduce, Allreduce, Gather, Scatter, Allgather, Alltoall, ReduceScatter}

var collNames = [...]string{"", "barrier", "bcast", "reduce", "allreduce", "gather", "scatter", "allgather", "alltoall", "reduce-scatter"}

// String returns the collective's name as the conformance suite spells it
// in case names: "bcast", "reduce-scatter".
func (c Coll) String() string {
	if int(c) < len(collNames) && c != 0 {
		return collNames[c]
	}
	return "unknown"
}

// Alg is one of the shared algorithms.
type Alg uint8

// The shared algorithms.
const (
	Dissemination Alg = iota + 1
	BcastBinomial
	BcastScatterAllgather
	ReduceBinomial
	ReduceRingGather
	AllreduceRecursiveDoubling
	AllreduceRing
	GatherLinear
	ScatterLinear
	AllgatherBruck
	AllgatherRing
	AlltoallPairwise
	ReduceScatterRing
)

var algs = [...]struct {
	coll Coll
	name string
	ring bool
}{
	Dissemination:              {Barrier, "dissemination", false},
	BcastBinomial:              {Bcast, "binomial tree", false},
	BcastScatterAllgather:      {Bcast, "scatter then ring allgather", true},
	ReduceBinomial:             {Reduce, "binomial tree", false},
	ReduceRingGather:           {Reduce, "ring reduce-scatter then gather", true},
	AllreduceRecursiveDoubling: {Allreduce, "recursive doubling", false},
	AllreduceRing:              {Allreduce, "ring reduce-scatter then ring allgather", true},
	GatherLinear:               {Gather, "linear", false},
	ScatterLinear:              {Scatter, "linear", false},
	AllgatherBruck:             {Allgather, "Bruck", false},
	AllgatherRing:              {Allgather, "ring", true},
	AlltoallPairwise:           {Alltoall, "pairwise exchange", false},
	ReduceScatterRing:          {ReduceScatter, "ring", true},
}

// known reports whether a is one of the shared algorithms.
func (a Alg) known() bool { return a != 0 && int(a) < len(algs) }

// String names the algorithm: "binomial tree".
func (a Alg) String() string {
	if !a.known() {
		return "unknown"
	}
	return algs[a].name
}

// Coll returns the collective a runs.
func (a Alg) Coll() Coll {
	if !a.known() {
		return 0
	}
	return algs[a].coll
}

// Ring reports whether a moves its vector around a ring in chunks of
// Chunk bytes.
func (a Alg) Ring() bool { return a.known() && algs[a].ring }

// Algs returns the algorithms Choose may pick for c.
func Algs(c Coll) []Alg {
	var out []Alg
	for a := Alg(1); int(a) < len(algs); a++ {
		if algs[a].coll == c {
			out = append(out, a)
		}
	}
	return out
}

// The size thresholds, in bytes, at which the algorithms switch. They were
// chosen with the benchmarks of package comm on the in-process backend
// (BenchmarkAllreduceAlgorithms); ring algorithms gain more over networks,
// where links work in parallel.
const (
	// AllreduceRingMin: Allreduce uses the ring from this vector size,
	// recursive doubling below it.
	AllreduceRingMin = 32 << 10
	// ReduceRingMin: Reduce uses a ring reduce-scatter then a gather to the
	// root from this vector size, a binomial tree below it.
	ReduceRingMin = 1 << 20
	// BcastScatterMin: Bcast scatters then runs a ring allgather (van de
	// Geijn) from this buffer size, over more than two ranks; a binomial
	// tree below it.
	BcastScatterMin = 512 << 10
	// AllgatherRingMin: Allgather uses the ring from this size of the
	// gathered result, Bruck's algorithm below it.
	AllgatherRingMin = 64 << 10
	// RingChunk is the size of the pieces the ring algorithms pipeline: a
	// block of the vector larger than Chunk(element size) travels in
	// several messages of one tag, several receives posted at once.
	RingChunk = 256 << 10
	// RingWindow is how many chunk receives the ring reduce-scatter keeps
	// posted (the ring allgather keeps twice as many).
	RingWindow = 4
)

// Chunk returns the ring's chunk size for elements of unit bytes: RingChunk
// rounded down to whole elements, at least one.
func Chunk(unit int) int { return chunkOf(RingChunk, unit) }

func chunkOf(chunk, unit int) int { return max(unit, chunk/unit*unit) }

// Path is how the shared algorithms run one call: the algorithm, and for
// a ring algorithm whether a block of the vector travels in more than one
// chunk.
type Path struct {
	Alg     Alg
	Chunked bool
}

// String describes the path: "ring, in chunks".
func (p Path) String() string {
	switch {
	case !p.Alg.Ring():
		return p.Alg.String()
	case p.Chunked:
		return p.Alg.String() + ", blocks in several chunks"
	default:
		return p.Alg.String() + ", one chunk per block"
	}
}

// Choose returns the path the shared algorithm of c takes over p ranks
// (p > 1) for count elements of elem bytes. count is what the caller of
// the collective passes: the vector of Bcast, Reduce and Allreduce; each
// rank's part of Gather, Scatter, Allgather and ReduceScatter (the result
// of one rank); each pair's part of Alltoall. Barrier ignores it.
func Choose(c Coll, count, elem, p int) Path {
	n := count * elem
	switch c {
	case Barrier:
		return Path{Alg: Dissemination}
	case Bcast:
		if n >= BcastScatterMin && n >= p && p > 2 {
			return Path{BcastScatterAllgather, maxBlock(n, p, 1) > Chunk(1)}
		}
		return Path{Alg: BcastBinomial}
	case Reduce:
		if n >= ReduceRingMin && count >= p {
			return Path{ReduceRingGather, maxBlock(n, p, elem) > Chunk(elem)}
		}
		return Path{Alg: ReduceBinomial}
	case Allreduce:
		if n >= AllreduceRingMin && count >= p {
			return Path{AllreduceRing, maxBlock(n, p, elem) > Chunk(elem)}
		}
		return Path{Alg: AllreduceRecursiveDoubling}
	case Gather:
		return Path{Alg: GatherLinear}
	case Scatter:
		return Path{Alg: ScatterLinear}
	case Allgather:
		if p*n >= AllgatherRingMin {
			return Path{AllgatherRing, n > Chunk(1)}
		}
		return Path{Alg: AllgatherBruck}
	case Alltoall:
		return Path{Alg: AlltoallPairwise}
	case ReduceScatter:
		return Path{ReduceScatterRing, n > Chunk(elem)}
	}
	return Path{}
}

// maxBlock is the largest block, in bytes, of n bytes of elements of unit
// bytes split over p ranks as evenly as whole elements allow.
func maxBlock(n, p, unit int) int {
	count := n / unit
	return (count + p - 1) / p * unit
}

// Counts returns, in increasing order, the element counts that take c over
// p ranks down each of its paths on both sides of every size at which
// Choose changes its answer: for each such size, the largest count below
// it and the smallest at or above it; and a small count. A collective
// with one path gets the small count alone. The sizes are found by search
// over Choose, which must leave a path at one size only, as each threshold
// compares a size that grows with count (TestCountsStraddleEveryChange
// checks it).
func Counts(c Coll, elem, p int) []int {
	if c == Barrier {
		return nil
	}
	counts := []int{3}
	prev := Choose(c, 1, elem, p)
	// Walk the points where the path changes: each is found by doubling
	// then bisecting, since every threshold compares a size that grows
	// with count. The search stops past the last threshold.
	limit := max(ReduceRingMin, BcastScatterMin, AllreduceRingMin, AllgatherRingMin, p*RingChunk)*2/elem + p
	lo := 1
	for lo < limit {
		hi := lo + 1
		for hi < limit && Choose(c, hi, elem, p) == prev {
			hi = min(limit, lo+2*(hi-lo))
		}
		if Choose(c, hi, elem, p) == prev {
			break
		}
		// prev holds at lo, not at hi: bisect for the first count that
		// differs.
		for hi-lo > 1 {
			mid := lo + (hi-lo)/2
			if Choose(c, mid, elem, p) == prev {
				lo = mid
			} else {
				hi = mid
			}
		}
		counts = append(counts, lo, hi)
		prev = Choose(c, hi, elem, p)
		lo = hi
	}
	slices.Sort(counts)
	return slices.Compact(counts)
}
