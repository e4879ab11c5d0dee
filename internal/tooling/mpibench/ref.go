//go:build mpi

package main

// The C reference, in process: the same loops as
// internal/tooling/bench/ref/mpi_bench.c, written against MPI_COMM_WORLD and run
// inside one cgo call each, on the same buffers, in the same job, between
// the Go repetitions — so that the ratio compares the two in the same
// placement and the same state of the machine.

/*
#include <mpi.h>

static void ref_pingpong(void *buf, int n, long iters, int rank) {
	for (long i = 0; i < iters; i++) {
		if (rank == 0) {
			MPI_Send(buf, n, MPI_BYTE, 1, 1, MPI_COMM_WORLD);
			MPI_Recv(buf, n, MPI_BYTE, 1, 1, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
		} else if (rank == 1) {
			MPI_Recv(buf, n, MPI_BYTE, 0, 1, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
			MPI_Send(buf, n, MPI_BYTE, 0, 1, MPI_COMM_WORLD);
		}
	}
}

// ref_pingpong_probe receives as the Go backend does: a matched probe
// (MPI_Mprobe), then MPI_Mrecv.
static void ref_pingpong_probe(void *buf, int n, long iters, int rank) {
	MPI_Message m;
	if (rank > 1) return;
	int peer = rank == 0 ? 1 : 0;
	for (long i = 0; i < iters; i++) {
		if (rank == 0) MPI_Send(buf, n, MPI_BYTE, peer, 1, MPI_COMM_WORLD);
		MPI_Mprobe(peer, 1, MPI_COMM_WORLD, &m, MPI_STATUS_IGNORE);
		MPI_Mrecv(buf, n, MPI_BYTE, &m, MPI_STATUS_IGNORE);
		if (rank == 1) MPI_Send(buf, n, MPI_BYTE, peer, 1, MPI_COMM_WORLD);
	}
}

static void ref_allreduce(void *s, void *r, int count, long iters) {
	for (long i = 0; i < iters; i++)
		MPI_Allreduce(s, r, count, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
}

static void ref_bcast(void *b, int n, long iters) {
	for (long i = 0; i < iters; i++)
		MPI_Bcast(b, n, MPI_BYTE, 0, MPI_COMM_WORLD);
}

static void ref_alltoall(void *s, void *r, int n, long iters) {
	for (long i = 0; i < iters; i++)
		MPI_Alltoall(s, n, MPI_BYTE, r, n, MPI_BYTE, MPI_COMM_WORLD);
}
*/
import "C"

import "unsafe"

func refPingpong(buf unsafe.Pointer, n, iters, rank int) {
	C.ref_pingpong(buf, C.int(n), C.long(iters), C.int(rank))
}

func refPingpongProbe(buf unsafe.Pointer, n, iters, rank int) {
	C.ref_pingpong_probe(buf, C.int(n), C.long(iters), C.int(rank))
}

func refAllreduce(s, r unsafe.Pointer, count, iters int) {
	C.ref_allreduce(s, r, C.int(count), C.long(iters))
}

func refBcast(b unsafe.Pointer, n, iters int) { C.ref_bcast(b, C.int(n), C.long(iters)) }

func refAlltoall(s, r unsafe.Pointer, n, iters int) {
	C.ref_alltoall(s, r, C.int(n), C.long(iters))
}
