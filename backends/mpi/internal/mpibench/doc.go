// Command mpibench measures the MPI backend's point-to-point and
// collective operations, run as every rank of an MPI job:
//
//	go build -tags mpi -o mpibench ./backends/mpi/internal/mpibench
//	mpirun -np 2 ./mpibench
//
// Rank 0 prints one line per measurement, "<name> <median> <unit>", the
// same lines as the C reference internal/bench/ref/mpi_bench.c prints for
// the same operations written against the same MPI, so that the two can be
// compared within one machine and launch. Each figure is the median over
// -reps repetitions of a loop timed to last at least -min; latencies are
// per operation (half a round trip for the ping-pong), the slowest rank's
// for collectives.
//
// Built without the mpi tag the command only says so.
package main
