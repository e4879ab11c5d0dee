package comm

// Hooks for the tests of package comm_test: they force each algorithm and
// shrink the ring's chunks so that small vectors exercise every path.

// The shared algorithms, by name, with the signature of their kind.
var (
	AllreduceRecursiveDoubling = allreduceRecursiveDoubling
	AllreduceRing              = allreduceRing
	ReduceBinomial             = reduceBinomial
	ReduceRingGather           = reduceRingGather
	BcastBinomial              = bcastBinomial
	BcastScatterAllgather      = bcastScatterAllgather
	AllgatherBruck             = allgatherBruck
	AllgatherRing              = allgatherRing
)

// SetRingChunk sets the ring's chunk size in bytes and returns a function
// that restores it. Tests that call it must not run in parallel.
func SetRingChunk(n int) (restore func()) {
	old := ringChunk
	ringChunk = n
	return func() { ringChunk = old }
}

// Thresholds returns the sizes at which the algorithms switch, by name.
func Thresholds() map[string]int {
	return map[string]int{
		"allreduce-ring": allreduceRingMin,
		"reduce-ring":    reduceRingMin,
		"bcast-scatter":  bcastScatterMin,
		"allgather-ring": allgatherRingMin,
	}
}

// CollTag returns the reserved tag of phase ph of collective kind k.
var CollTag = collTag
