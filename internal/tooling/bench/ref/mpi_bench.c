/*
 * mpi_bench: the C reference for backends/mpi (internal/tooling/mpibench). It runs
 * the same operations, timed the same way, directly against MPI, and prints
 * the same lines "<name> <median> <unit>" on rank 0, so that the Go
 * figures can be divided by these within one machine and one launcher.
 * mpi/pingpong-probe/... is the ping-pong with each receive preceded by a
 * matched probe (MPI_Mprobe, MPI_Mrecv), as the Go backend receives.
 *
 * Build with the MPI compiler wrapper of the MPI the Go side links with:
 *
 *     mpicc -O3 -o mpi_bench internal/tooling/bench/ref/mpi_bench.c   (Open MPI)
 *     mpicc.mpich -O3 -o mpi_bench internal/tooling/bench/ref/mpi_bench.c
 *
 * and run as every rank of a job: mpirun -np 2 ./mpi_bench [options]
 *
 * Options (the Go command's names):
 *     -reps N       repetitions per measurement; the median is printed (11)
 *     -min MS       least duration of one repetition, in milliseconds (50)
 *     -threads L    single (MPI_Init, the plain C program) or multiple
 *                   (MPI_Init_thread with MPI_THREAD_MULTIPLE, the level the
 *                   Go backend asks for) (single)
 *     -only S       run only the measurements whose name contains S
 *
 * A repetition starts with a barrier, runs a calibrated number of
 * iterations (rank 0's calibration, broadcast), and takes the slowest
 * rank's time; the ping-pong reports half a round trip.
 *
 * Compiled by a plain C compiler that finds no mpi.h (a loop over every
 * reference with gcc), it builds a program that says so and fails.
 */
#if defined(__has_include)
#if !__has_include(<mpi.h>)
#define MPI_BENCH_NO_MPI 1
#endif
#endif

#ifdef MPI_BENCH_NO_MPI
#include <stdio.h>
int main(void) {
	fprintf(stderr, "mpi_bench: compiled without mpi.h: build it with mpicc\n");
	return 1;
}
#else
#include <mpi.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static int reps = 11;
static double min_s = 0.050;
static const char *only = "";
static int rank, size;

static double now(void) {
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

typedef void (*body_fn)(long iters, void *arg);

/* slowest returns the largest d over the ranks. */
static double slowest(double d) {
	double m;
	MPI_Allreduce(&d, &m, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
	return m;
}

static int cmp_double(const void *a, const void *b) {
	double x = *(const double *)a, y = *(const double *)b;
	return (x > y) - (x < y);
}

static void size_name(char *out, size_t cap, long n) {
	if (n >= (1L << 20) && n % (1L << 20) == 0)
		snprintf(out, cap, "%ldMiB", n >> 20);
	else if (n >= (1L << 10) && n % (1L << 10) == 0)
		snprintf(out, cap, "%ldKiB", n >> 10);
	else
		snprintf(out, cap, "%ldB", n);
}

static void measure(const char *op, long n, body_fn f, void *arg) {
	char sz[32], name[128];
	size_name(sz, sizeof sz, n);
	snprintf(name, sizeof name, "mpi/%s/%s", op, sz);
	if (only[0] && !strstr(name, only))
		return;
	long iters = 1;
	for (;;) {
		MPI_Barrier(MPI_COMM_WORLD);
		double t0 = now();
		f(iters, arg);
		double d = slowest(now() - t0);
		if (d >= min_s / 4 || iters >= (1L << 24)) {
			double k = (double)iters * min_s / (d > 1e-9 ? d : 1e-9);
			iters = k < 1 ? 1 : (long)k;
			break;
		}
		iters *= 4;
	}
	int64_t cnt = iters;
	MPI_Bcast(&cnt, 1, MPI_INT64_T, 0, MPI_COMM_WORLD);
	iters = (long)cnt;
	double *times = malloc(sizeof(double) * (size_t)reps);
	for (int r = 0; r < reps; r++) {
		MPI_Barrier(MPI_COMM_WORLD);
		double t0 = now();
		f(iters, arg);
		double d = slowest(now() - t0);
		double per = d * 1e9 / (double)iters;
		if (strncmp(op, "pingpong", 8) == 0)
			per /= 2;
		times[r] = per;
	}
	qsort(times, (size_t)reps, sizeof(double), cmp_double);
	if (rank == 0)
		printf("%s %.3f us\n", name, times[reps / 2] / 1e3);
	fflush(stdout);
	free(times);
}

struct bufs {
	long n;
	void *a, *b;
};

static void pingpong(long iters, void *arg) {
	struct bufs *x = arg;
	int n = (int)x->n;
	if (rank == 0) {
		for (long i = 0; i < iters; i++) {
			MPI_Send(x->a, n, MPI_BYTE, 1, 1, MPI_COMM_WORLD);
			MPI_Recv(x->a, n, MPI_BYTE, 1, 1, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
		}
	} else if (rank == 1) {
		for (long i = 0; i < iters; i++) {
			MPI_Recv(x->a, n, MPI_BYTE, 0, 1, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
			MPI_Send(x->a, n, MPI_BYTE, 0, 1, MPI_COMM_WORLD);
		}
	}
}

/* pingpong_probe is pingpong with every receive preceded by a matched
 * probe (MPI_Mprobe, then MPI_Mrecv), as the Go backend receives: the C
 * figure of the same safety against truncation overruns. */
static void pingpong_probe(long iters, void *arg) {
	struct bufs *x = arg;
	int n = (int)x->n, peer = rank == 0 ? 1 : 0;
	MPI_Message m;
	if (rank > 1)
		return;
	for (long i = 0; i < iters; i++) {
		if (rank == 0)
			MPI_Send(x->a, n, MPI_BYTE, peer, 1, MPI_COMM_WORLD);
		MPI_Mprobe(peer, 1, MPI_COMM_WORLD, &m, MPI_STATUS_IGNORE);
		MPI_Mrecv(x->a, n, MPI_BYTE, &m, MPI_STATUS_IGNORE);
		if (rank == 1)
			MPI_Send(x->a, n, MPI_BYTE, peer, 1, MPI_COMM_WORLD);
	}
}

static void allreduce(long iters, void *arg) {
	struct bufs *x = arg;
	for (long i = 0; i < iters; i++)
		MPI_Allreduce(x->a, x->b, (int)(x->n / 8), MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
}

static void bcast(long iters, void *arg) {
	struct bufs *x = arg;
	for (long i = 0; i < iters; i++)
		MPI_Bcast(x->a, (int)x->n, MPI_BYTE, 0, MPI_COMM_WORLD);
}

static void alltoall(long iters, void *arg) {
	struct bufs *x = arg;
	for (long i = 0; i < iters; i++)
		MPI_Alltoall(x->a, (int)x->n, MPI_BYTE, x->b, (int)x->n, MPI_BYTE, MPI_COMM_WORLD);
}

/* zeroed returns n zeroed bytes aligned to a page, as the Go side's large
 * allocations are (reductions run faster on aligned data). */
static void *zeroed(long n) {
	void *p = NULL;
	if (posix_memalign(&p, 4096, (size_t)(n > 0 ? n : 1)) != 0)
		return NULL;
	memset(p, 0, (size_t)n);
	return p;
}

static void run(const char *op, long n, long bytes, body_fn f) {
	struct bufs x = {n, zeroed(bytes), zeroed(bytes)};
	if (!x.a || !x.b) {
		fprintf(stderr, "mpi_bench: out of memory\n");
		MPI_Abort(MPI_COMM_WORLD, 1);
	}
	measure(op, n, f, &x);
	free(x.a);
	free(x.b);
}

int main(int argc, char **argv) {
	int multiple = 0;
	for (int i = 1; i + 1 < argc; i += 2) {
		if (!strcmp(argv[i], "-reps"))
			reps = atoi(argv[i + 1]);
		else if (!strcmp(argv[i], "-min"))
			min_s = atof(argv[i + 1]) / 1e3;
		else if (!strcmp(argv[i], "-threads"))
			multiple = !strcmp(argv[i + 1], "multiple");
		else if (!strcmp(argv[i], "-only"))
			only = argv[i + 1];
	}
	if (reps < 1)
		reps = 1;
	if (multiple) {
		int provided;
		MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
	} else {
		MPI_Init(&argc, &argv);
	}
	MPI_Comm_rank(MPI_COMM_WORLD, &rank);
	MPI_Comm_size(MPI_COMM_WORLD, &size);
	const long KiB = 1L << 10, MiB = 1L << 20;
	if (size >= 2) {
		run("pingpong", 8, 8, pingpong);
		run("pingpong", 4 * MiB, 4 * MiB, pingpong);
		run("pingpong-probe", 8, 8, pingpong_probe);
		run("pingpong-probe", 4 * MiB, 4 * MiB, pingpong_probe);
	}
	long ar[] = {8, 64 * KiB, 64 * MiB};
	for (int i = 0; i < 3; i++)
		run("allreduce", ar[i], ar[i], allreduce);
	long bc[] = {8, 64 * KiB, 4 * MiB};
	for (int i = 0; i < 3; i++)
		run("bcast", bc[i], bc[i], bcast);
	long aa[] = {8, 64 * KiB};
	for (int i = 0; i < 2; i++)
		run("alltoall", aa[i], aa[i] * size, alltoall);
	MPI_Finalize();
	return 0;
}
#endif /* MPI_BENCH_NO_MPI */
