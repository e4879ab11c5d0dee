package comm

// SetStageChunk sets the size of the pieces in which Allreduce, Reduce and
// Bcast stage buffers the host cannot touch, and returns a function that
// restores it. Tests that call it must not run in parallel.
func SetStageChunk(n int) (restore func()) {
	old := stageChunk
	stageChunk = n
	return func() { stageChunk = old }
}
