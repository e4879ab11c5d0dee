/*
 * overrun: does the MPI library write a truncated message past the end of
 * the receive buffer? The reproducer behind the probe that precedes every
 * receive of package mpi (doc.go, "Receives"); TestTruncationOverrun
 * builds it with the MPI compiler wrapper and runs it on two ranks.
 *
 * Rank 0 sends messages of LEN bytes (0xab) to rank 1, which posts a plain
 * MPI_Recv of N bytes into a buffer followed by a zeroed guard of 1 MiB,
 * and prints, per pair of arguments LEN N:
 *
 *     case LEN N truncate=T past=P
 *
 * T is 1 when the receive failed with the class MPI_ERR_TRUNCATE, P the
 * number of bytes written past the buffer (the last nonzero guard byte).
 * A first line "library ..." names the MPI library.
 *
 * Open MPI 4.1.4 (ob1), measured: a message sent eagerly (up to the
 * transport's eager limit less a header: 4 KiB over shared memory, 64 KiB
 * over TCP) is cut to N bytes; a longer one goes by rendezvous, and is
 * written whole, P = LEN - N, whatever N is (10 bytes, 4 KiB, 60000, LEN -
 * 1), over shared memory with CMA single copy (RGET) and over TCP; with
 * btl_vader_single_copy_mechanism none nothing is written past. So the
 * receiver cannot know from its own buffer whether a receive is safe: only
 * the message's length (a probe) tells. MPICH 4.0 (ch4:ucx) writes
 * nothing past.
 */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { GUARD = 1 << 20 };

int main(int argc, char **argv) {
	int rank, size;
	MPI_Init(&argc, &argv);
	MPI_Comm_rank(MPI_COMM_WORLD, &rank);
	MPI_Comm_size(MPI_COMM_WORLD, &size);
	MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
	if (size != 2) {
		if (rank == 0) fprintf(stderr, "overrun: run on 2 ranks\n");
		MPI_Finalize();
		return 2;
	}
	if (rank == 1) {
		char v[MPI_MAX_LIBRARY_VERSION_STRING];
		int n = 0;
		MPI_Get_library_version(v, &n);
		v[strcspn(v, "\n")] = 0;
		printf("library %s\n", v);
		fflush(stdout);
	}
	for (int a = 1; a + 1 < argc; a += 2) {
		long len = atol(argv[a]), n = atol(argv[a + 1]);
		if (rank == 0) {
			char *s = malloc(len > 0 ? len : 1);
			memset(s, 0xab, len);
			MPI_Send(s, (int)len, MPI_BYTE, 1, 7, MPI_COMM_WORLD);
			free(s);
		} else {
			unsigned char *r = calloc(n + GUARD, 1);
			int rc = MPI_Recv(r, (int)n, MPI_BYTE, 0, 7, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
			int class = MPI_SUCCESS;
			MPI_Error_class(rc, &class);
			long past = 0;
			for (long i = n; i < n + GUARD; i++)
				if (r[i]) past = i - n + 1;
			printf("case %ld %ld truncate=%d past=%ld\n", len, n, class == MPI_ERR_TRUNCATE, past);
			fflush(stdout);
			free(r);
		}
		MPI_Barrier(MPI_COMM_WORLD);
	}
	MPI_Finalize();
	return 0;
}
