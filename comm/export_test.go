package comm

import "github.com/xpu-go/xpu/internal/collalg"

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

// Thresholds returns the sizes at which the algorithms switch, by name
// (the constants of package collalg).
func Thresholds() map[string]int {
	return map[string]int{
		"allreduce-ring": collalg.AllreduceRingMin,
		"reduce-ring":    collalg.ReduceRingMin,
		"bcast-scatter":  collalg.BcastScatterMin,
		"allgather-ring": collalg.AllgatherRingMin,
	}
}

// ChunkFor is the ring's chunk for elements of unit bytes, as the ring
// algorithms compute it from the chunk size SetRingChunk sets.
var ChunkFor = chunkFor

// CollTag returns the reserved tag of phase ph of collective kind k.
var CollTag = collTag
