// Package sweep is the engine of xpu bench sweep; tooling, not shipped by
// the library. It measures communicators and transfer paths over a range
// of message sizes, as the OSU Micro-Benchmarks and nccl-tests do, and
// keeps the figures as data that can be compared, printed and plotted.
//
// A sweep is SPMD code: every rank of a communicator calls RunRank with
// the same Plan, and rank 0 reports one Point per operation and size
// measured. The same ranks run in one process (a Backend.Group) or one per
// process (under `xpu run`); the Open MPI reference (ref/sweep_mpi_ref.c)
// runs the same algorithm under mpirun and reports its points in the same
// line format (FormatLine, ParseLine), so our figures and the reference's
// are measured alike, in the same run.
//
// Every sample checks the result of the operations it timed, as nccl-tests
// does with -c 1: receive buffers are poisoned before a sample and compared
// with what the operation must produce after it; a point whose check fails
// is kept, marked Invalid, and never passed off as a figure.
//
// A Document is one run: the machine, the command line, the series
// measured and every point with its samples. Read and Write keep it as
// JSON; Compare tells changes from noise between two documents with the
// Mann-Whitney U test of golang.org/x/perf/benchmath; WriteBenchfmt writes
// the points in the `go test -bench` format benchstat reads; Plot draws
// them with gonum.org/v1/plot.
package sweep
