package sweep

// Metric is what an operation's chart shows.
type Metric int

const (
	// MetricTime: the time of one operation (lower is better).
	MetricTime Metric = iota
	// MetricBandwidth: bytes moved per second (higher is better).
	MetricBandwidth
)

// Op describes one operation a sweep measures: how its size is defined,
// what its figure is and, for the collectives, nccl-tests' algorithm and
// bus bandwidths.
type Op struct {
	// Name is the operation's name in points, tables and plots, after the
	// OSU benchmark it mirrors ("latency" is osu_latency).
	Name string
	// Doc says what one operation is and what its size counts, in one line.
	Doc string
	// P2P operations run between two ranks, as OSU's do: a sweep has
	// their points at 2 ranks only.
	P2P bool
	// Reduction operations reduce float64 elements: their sizes are
	// multiples of 8 bytes.
	Reduction bool
	// NoSize operations (barrier) have one point per rank count, size 0.
	NoSize bool
	// Transfer operations copy between memory spaces in one process
	// (Ranks is 1).
	Transfer bool
	// Metric is the figure the operation is judged by.
	Metric Metric
	// Moves is how many times the size one operation moves, for the
	// operations whose Metric is MetricBandwidth (bibw moves it both
	// ways: 2).
	Moves int64
	// AlgBytes is nccl-tests' size of the operation, the bytes its
	// algorithm bandwidth is counted in, for the collectives that move
	// data; nil for the others.
	AlgBytes func(size int64, ranks int) int64
	// BusFactor turns the algorithm bandwidth into nccl-tests' bus
	// bandwidth, the figure comparable with the hardware's peak.
	BusFactor func(ranks int) float64
}

// bytesMoved returns the bytes one operation of size moves, for a
// MetricBandwidth operation.
func (o Op) bytesMoved(size int64) int64 { return o.Moves * size }

// Ops are the operations of a sweep, in the order a sweep measures them.
var Ops = []Op{
	{Name: "latency", P2P: true, Metric: MetricTime,
		Doc: "half a round trip of a message between ranks 0 and 1 (osu_latency)"},
	{Name: "bw", P2P: true, Metric: MetricBandwidth, Moves: 1,
		Doc: "a window of nonblocking sends from rank 0 to rank 1, then an acknowledgement; per message (osu_bw)"},
	{Name: "bibw", P2P: true, Metric: MetricBandwidth, Moves: 2,
		Doc: "windows of nonblocking sends both ways between ranks 0 and 1 at once; per message each way (osu_bibw)"},
	{Name: "barrier", NoSize: true, Metric: MetricTime,
		Doc: "a barrier of every rank (osu_barrier)"},
	{Name: "bcast", Metric: MetricTime, AlgBytes: sizeBytes, BusFactor: one,
		Doc: "a broadcast of size bytes from rank 0 (osu_bcast)"},
	{Name: "reduce", Reduction: true, Metric: MetricTime, AlgBytes: sizeBytes, BusFactor: one,
		Doc: "a sum of size bytes of float64 to rank 0 (osu_reduce)"},
	{Name: "allreduce", Reduction: true, Metric: MetricTime, AlgBytes: sizeBytes, BusFactor: allreduceFactor,
		Doc: "a sum of size bytes of float64 onto every rank (osu_allreduce)"},
	{Name: "allgather", Metric: MetricTime, AlgBytes: ranksBytes, BusFactor: peersFactor,
		Doc: "every rank's size bytes gathered onto every rank (osu_allgather)"},
	{Name: "alltoall", Metric: MetricTime, AlgBytes: ranksBytes, BusFactor: peersFactor,
		Doc: "size bytes from every rank to every rank (osu_alltoall)"},
	{Name: "copy", Transfer: true, Metric: MetricBandwidth, Moves: 1,
		Doc: "a copy of size bytes from one memory space to another"},
}

func sizeBytes(size int64, _ int) int64      { return size }
func ranksBytes(size int64, ranks int) int64 { return size * int64(ranks) }
func one(int) float64                        { return 1 }

// allreduceFactor is nccl-tests' 2(n-1)/n: each rank sends and receives
// (n-1)/n of the data twice.
func allreduceFactor(n int) float64 { return 2 * float64(n-1) / float64(n) }

// peersFactor is nccl-tests' (n-1)/n for allgather and alltoall.
func peersFactor(n int) float64 { return float64(n-1) / float64(n) }

// LookupOp returns the operation named name.
func LookupOp(name string) (Op, bool) {
	for _, o := range Ops {
		if o.Name == name {
			return o, true
		}
	}
	return Op{}, false
}

// Applies reports whether the operation has a point at size: reductions
// need whole float64 elements, NoSize operations only size 0, the others
// a positive size.
func (o Op) Applies(size int64) bool {
	switch {
	case o.NoSize:
		return size == 0
	case size <= 0:
		return false
	case o.Reduction:
		return size%8 == 0
	}
	return true
}
