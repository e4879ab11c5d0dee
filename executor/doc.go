// Package executor defines where work runs: an Executor runs a function;
// Parallel runs data-parallel loops (ParallelFor, ParallelRange, Reduce);
// Streams are ordered asynchronous queues and Events mark points in them,
// the ordering model of CUDA, done for every backend so code written
// against streams runs everywhere.
//
// Every blocking call takes a context. A panic in user code comes back as
// an error matching ErrPanic, never a crash of the process; cancellation
// stops the scheduling of new work. Capabilities (Streamer, TimedEvent) are
// separate interfaces found with As through wrappers.
package executor
