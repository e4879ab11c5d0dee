// Command mpibench is a benchmark program; tooling, not shipped by the
// library. It measures the MPI backend's point-to-point and
// collective operations against the same operations written in C, run as
// every rank of an MPI job:
//
//	go build -tags mpi -o mpibench ./internal/tooling/mpibench
//	mpirun --bind-to none -np 2 ./mpibench
//
// For each operation rank 0 prints three lines: "<name> <median> us" for the
// Go API (the name as the standalone C reference
// internal/tooling/bench/ref/mpi_bench.c prints it), "ref/<name> <median> us" for
// the C loop run in the same job on the same buffers, alternating with the
// Go repetitions, and "ratio/<name> <median> x", the median of the
// repetitions' Go/C ratios. The ping-pong has a second C loop,
// "ref-probe/<name>" and "ratio-probe/<name>": each receive preceded by a
// matched probe (MPI_Mprobe, MPI_Mrecv), as the backend receives to be
// safe from Open MPI's truncation overrun. Each figure is the median over -reps
// repetitions of a loop calibrated to last -min, each after an untimed
// run of -warm of its iterations (Go and C alike); latencies are per
// operation (half a round trip for the ping-pong), the slowest rank's for
// collectives. -ctx deadline measures the watched path (nonblocking calls
// polled with a context); -threads serialized the serialised thread level.
//
// Built without the mpi tag the command only says so.
package main
