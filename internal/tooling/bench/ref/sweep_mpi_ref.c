// sweep_mpi_ref: the Open MPI reference of the benchmark sweeps (package
// internal/tooling/bench/sweep). Every rank runs the sweep's protocol — the same
// points, buffers, bodies, checks, calibration and samples as the Go side
// (internal/tooling/bench/sweep/rank.go), directly against MPI — so that the
// communicators' figures and Open MPI's are measured alike, in the same run.
//
//   mpicc -O3 -o sweep_mpi_ref sweep_mpi_ref.c
//   mpirun --allow-run-as-root --oversubscribe --mca pml ob1
//          --mca btl self,vader -np 2 ./sweep_mpi_ref -sizes 8,1024,1048576
//   (one command line; or --mca btl self,tcp --mca btl_tcp_if_include lo;
//   any -np: the point-to-point operations, as OSU's, run with exactly 2
//   ranks)
//
// Options (as -name value or -name=value):
//   -ops L        comma-separated operations among latency, bw, bibw,
//                 barrier, bcast, reduce, allreduce, allgather, alltoall,
//                 measured in that order whatever the order of L (all)
//   -sizes L      comma-separated sizes in bytes, strictly increasing, at
//                 most 1 GiB each (required)
//   -count C      samples per point (5)
//   -sample-ms T  target duration of one sample, in milliseconds (20)
//   -deadline D   unix time in nanoseconds after which the sweep stops;
//                 0 for none (0)
//   -o FILE       file the lines are appended to (standard output)
// A bad option gets a one-line message on standard error and exit status 2.
//
// Rank 0 writes one line per point measured, flushed at once, then a last
// line saying whether the sweep ran to its end or was stopped by -deadline:
//
//   point <op> <size> <ranks> <iters> <ok|invalid> <ns> ... <ns>
//   end <complete|budget>
//
// <ns> are the count samples, each the time of one operation in
// nanoseconds (%.7g): the slowest rank's time over iters operations, per
// half round trip for latency, per message of the window for bw and bibw.
// "invalid" says that some rank found a wrong result after some sample:
// receive buffers are poisoned (0xFF bytes) before each sample and
// compared with the results expected after it.
//
// The protocol (sweep.RunRank follows it too):
//
// Points: for each operation selected, in the order above, for each size
// it applies to: latency, bw and bibw run with exactly 2 ranks (as OSU's
// osu_latency, osu_bw and osu_bibw; no point at another rank count);
// reduce and allreduce need a multiple of 8 bytes
// (float64 elements); barrier has one point, size 0; the others any size
// above 0. The seed of a point is its index among the points measured.
//
// Buffers, allocated page aligned and written once per point, send
// buffers filled once and expected results computed once; pattern(seed)
// is byte i = (uint8)(i*131 + seed*7 + (i>>12)); rank r of n, root 0,
// window W = min(64, max(4, 128 MiB / s)):
//   latency    r0 sends pattern(seed) (tag 1), r1 receives and sends it
//              back; both check their receive buffer; per op: half a
//              round trip.
//   bw         r0: W Isend of pattern(seed+j) (tag 2), Waitall, a 4-byte
//              ack from r1 (tag 3); r1: W Irecv, Waitall, the ack; r1
//              checks; per op: one message.
//   bibw       r0 and r1: W Irecv, then W Isend of pattern(seed+j+64*r)
//              (tag 2) to the peer, Waitall; both check; per op: one
//              message.
//   barrier    MPI_Barrier; no check.
//   bcast      s bytes from rank 0 (which holds pattern(seed)); the others
//              check.
//   reduce,    s/8 doubles, send[i] = (r+1)*b(i), b(i) = (i+seed) % 1021,
//   allreduce  MPI_SUM out of place; the result b(i)*n*(n+1)/2 is checked
//              on rank 0 (reduce) or every rank (allreduce).
//   allgather  pattern(seed+r) from every rank; block j must be
//              pattern(seed+j).
//   alltoall   block j of rank r's send buffer is pattern(seed+r*n+j);
//              block j received must be pattern(seed+j*n+r).
//
// A sample of iters operations: poison (0xFF) the receive buffers this
// rank checks, barrier, time the iterations (monotonic clock), check,
// then MPI_Allreduce(MAX) of {time ns, deadline passed (rank 0, realtime
// clock), check failed}, so that every rank decides alike. A point: one
// warm-up sample of 1 operation, then up to 20 calibration samples
// starting at iters 1 (stop when a sample takes at least T/2 or iters
// reaches 1<<20, else iters = min(1<<20, max(2*iters,
// ceil(iters*T/max(t, 1))))), both discarded; then count samples. A
// sample that finds the deadline passed ends the sweep and drops its
// point ("end budget"). The sweep's first point is measured twice and
// reported the second time: a job's first moments belong to no point.
//
// Built without MPI (plain gcc, as the generic refs rule does), it prints
// a note on standard error and no line.

#define _POSIX_C_SOURCE 200809L

#if defined(__has_include)
#if __has_include(<mpi.h>)
#define HAVE_MPI 1
#endif
#endif

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#ifndef HAVE_MPI
int main(void) {
	fprintf(stderr, "sweep_mpi_ref: built without <mpi.h>; build with mpicc and run under mpirun\n");
	return 0;
}
#else
#include <mpi.h>
#include <errno.h>
#include <stdint.h>
#include <time.h>

#define MAX_ITERS (1L << 20)     // most operations in one sample
#define CALIBRATION_ROUNDS 20    // most calibration samples of a point
#define MAX_WINDOW 64            // most messages in flight (bw, bibw)
#define WINDOW_BYTES (128L << 20) // bytes in flight the window aims at
#define MAX_SIZE (1LL << 30)     // largest size (the Go side's MaxSize)
#define MAX_COUNT 1000000        // most samples per point
#define PAGE 4096

// The operations, in the order a sweep measures them.
enum { LATENCY, BW, BIBW, BARRIER, BCAST, REDUCE, ALLREDUCE, ALLGATHER, ALLTOALL, NOPS };
static const char *const op_names[NOPS] = {
	"latency", "bw", "bibw", "barrier", "bcast", "reduce", "allreduce", "allgather", "alltoall",
};

static int rank, nranks;

// The command line.
static int selected[NOPS];
static long long *sizes;
static int nsizes;
static int count = 5;
static double sample_ns = 20e6;
static long long deadline; // unix ns, 0 for none
static const char *out_path;
static FILE *out;

static int64_t mono_ns(void) {
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static int64_t unix_ns(void) {
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

// region returns n bytes aligned to a page, written once (zeroed) so that
// no page is first touched while timing; it aborts the job when memory
// runs out.
static unsigned char *region(size_t n) {
	void *p = NULL;
	int err = posix_memalign(&p, PAGE, n > 0 ? n : 1);
	if (err != 0 || p == NULL) {
		fprintf(stderr, "sweep_mpi_ref: rank %d: cannot allocate %zu bytes: %s\n", rank, n, strerror(err));
		MPI_Abort(MPI_COMM_WORLD, 1);
	}
	memset(p, 0, n);
	return p;
}

// pattern writes the sweep's pattern of seed into buf[0:n]:
// buf[i] = (uint8)(i*131 + seed*7 + (i>>12)), a page at a time (i>>12 is
// the page's number).
static void pattern(unsigned char *buf, size_t n, uint64_t seed) {
	for (size_t lo = 0, page = 0; lo < n; lo += PAGE, page++) {
		size_t len = n - lo < PAGE ? n - lo : PAGE;
		unsigned char base = (unsigned char)((uint64_t)lo * 131 + seed * 7 + page);
		unsigned char *p = buf + lo;
		for (size_t k = 0; k < len; k++)
			p[k] = (unsigned char)(base + k * 131);
	}
}

// window is W(s) = min(64, max(4, 128 MiB / s)).
static int window(size_t s) {
	long w = WINDOW_BYTES / (long)s;
	if (w < 4)
		w = 4;
	if (w > MAX_WINDOW)
		w = MAX_WINDOW;
	return (int)w;
}

// point holds one point's buffers on this rank: send[0:nsend] of slen
// bytes each; recv[0:nrecv] of rlen bytes each and, where this rank checks
// them (checks), want[0:nrecv], the results they must hold after a sample.
struct point {
	int op;
	size_t s; // size in bytes
	int w;    // messages per iteration and direction (bw, bibw); 1 otherwise
	int nsend, nrecv;
	size_t slen, rlen;
	unsigned char *send[MAX_WINDOW], *recv[MAX_WINDOW], *want[MAX_WINDOW];
	int checks;
};

static unsigned char *add_send(struct point *p, uint64_t seed) {
	unsigned char *b = region(p->slen);
	pattern(b, p->slen, seed);
	p->send[p->nsend++] = b;
	return b;
}

// add_recv adds a receive buffer; its expected result is filled by the
// caller when the rank checks it.
static unsigned char *add_recv(struct point *p) {
	int j = p->nrecv++;
	p->recv[j] = region(p->rlen);
	if (p->checks)
		p->want[j] = region(p->rlen);
	return p->want[j];
}

// setup allocates and fills the buffers of op at size s with seed, rank
// rank of nranks, root 0 (the spec's "Buffers and bodies").
static void setup(struct point *p, int op, size_t s, uint64_t seed) {
	memset(p, 0, sizeof *p);
	p->op = op;
	p->s = s;
	p->w = 1;
	uint64_t r = (uint64_t)rank, n = (uint64_t)nranks;
	switch (op) {
	case LATENCY:
		p->slen = p->rlen = s;
		if (rank == 0)
			add_send(p, seed);
		if (rank <= 1) {
			p->checks = 1;
			pattern(add_recv(p), s, seed);
		}
		break;
	case BW:
		p->w = window(s);
		p->slen = p->rlen = s;
		for (int j = 0; j < p->w; j++) {
			if (rank == 0)
				add_send(p, seed + (uint64_t)j);
			if (rank == 1) {
				p->checks = 1;
				pattern(add_recv(p), s, seed + (uint64_t)j);
			}
		}
		break;
	case BIBW:
		p->w = window(s);
		p->slen = p->rlen = s;
		if (rank <= 1) {
			uint64_t peer = 1 - r;
			p->checks = 1;
			for (int j = 0; j < p->w; j++) {
				add_send(p, seed + (uint64_t)j + 64 * r);
				pattern(add_recv(p), s, seed + (uint64_t)j + 64 * peer);
			}
		}
		break;
	case BARRIER:
		break;
	case BCAST:
		// The root's buffer is its send buffer (never poisoned), the
		// others' their receive buffer.
		p->slen = p->rlen = s;
		if (rank == 0) {
			add_send(p, seed);
		} else {
			p->checks = 1;
			pattern(add_recv(p), s, seed);
		}
		break;
	case REDUCE:
	case ALLREDUCE: {
		size_t k = s / 8;
		double scale = (double)(n * (n + 1) / 2);
		p->slen = p->rlen = s;
		p->checks = op == ALLREDUCE || rank == 0;
		double *send = (double *)region(s);
		p->send[p->nsend++] = (unsigned char *)send;
		double *want = (double *)add_recv(p);
		for (size_t i = 0; i < k; i++) {
			double b = (double)((i + seed) % 1021);
			send[i] = (double)(r + 1) * b;
			if (want)
				want[i] = b * scale;
		}
		break;
	}
	case ALLGATHER:
		p->slen = s;
		p->rlen = (size_t)nranks * s;
		p->checks = 1;
		add_send(p, seed + r);
		{
			unsigned char *want = add_recv(p);
			for (uint64_t j = 0; j < n; j++)
				pattern(want + j * s, s, seed + j);
		}
		break;
	case ALLTOALL:
		p->slen = p->rlen = (size_t)nranks * s;
		p->checks = 1;
		{
			unsigned char *send = region(p->slen);
			p->send[p->nsend++] = send;
			unsigned char *want = add_recv(p);
			for (uint64_t j = 0; j < n; j++) {
				pattern(send + j * s, s, seed + r * n + j);
				pattern(want + j * s, s, seed + j * n + r);
			}
		}
		break;
	}
}

static void release(struct point *p) {
	for (int j = 0; j < p->nsend; j++)
		free(p->send[j]);
	for (int j = 0; j < p->nrecv; j++) {
		free(p->recv[j]);
		free(p->want[j]);
	}
}

// body runs iters operations of the point.
static void body(struct point *p, long iters) {
	MPI_Comm world = MPI_COMM_WORLD;
	MPI_Request req[2 * MAX_WINDOW];
	unsigned char ack[4] = {0};
	int c = (int)p->s, w = p->w, peer = 1 - rank;
	switch (p->op) {
	case LATENCY:
		if (rank == 0) {
			for (long i = 0; i < iters; i++) {
				MPI_Send(p->send[0], c, MPI_BYTE, 1, 1, world);
				MPI_Recv(p->recv[0], c, MPI_BYTE, 1, 1, world, MPI_STATUS_IGNORE);
			}
		} else if (rank == 1) {
			for (long i = 0; i < iters; i++) {
				MPI_Recv(p->recv[0], c, MPI_BYTE, 0, 1, world, MPI_STATUS_IGNORE);
				MPI_Send(p->recv[0], c, MPI_BYTE, 0, 1, world);
			}
		}
		break;
	case BW:
		if (rank == 0) {
			for (long i = 0; i < iters; i++) {
				for (int j = 0; j < w; j++)
					MPI_Isend(p->send[j], c, MPI_BYTE, 1, 2, world, &req[j]);
				MPI_Waitall(w, req, MPI_STATUSES_IGNORE);
				MPI_Recv(ack, 4, MPI_BYTE, 1, 3, world, MPI_STATUS_IGNORE);
			}
		} else if (rank == 1) {
			for (long i = 0; i < iters; i++) {
				for (int j = 0; j < w; j++)
					MPI_Irecv(p->recv[j], c, MPI_BYTE, 0, 2, world, &req[j]);
				MPI_Waitall(w, req, MPI_STATUSES_IGNORE);
				MPI_Send(ack, 4, MPI_BYTE, 0, 3, world);
			}
		}
		break;
	case BIBW:
		if (rank <= 1) {
			for (long i = 0; i < iters; i++) {
				for (int j = 0; j < w; j++)
					MPI_Irecv(p->recv[j], c, MPI_BYTE, peer, 2, world, &req[j]);
				for (int j = 0; j < w; j++)
					MPI_Isend(p->send[j], c, MPI_BYTE, peer, 2, world, &req[w + j]);
				MPI_Waitall(2 * w, req, MPI_STATUSES_IGNORE);
			}
		}
		break;
	case BARRIER:
		for (long i = 0; i < iters; i++)
			MPI_Barrier(world);
		break;
	case BCAST: {
		unsigned char *buf = rank == 0 ? p->send[0] : p->recv[0];
		for (long i = 0; i < iters; i++)
			MPI_Bcast(buf, c, MPI_BYTE, 0, world);
		break;
	}
	case REDUCE:
		for (long i = 0; i < iters; i++)
			MPI_Reduce(p->send[0], p->recv[0], c / 8, MPI_DOUBLE, MPI_SUM, 0, world);
		break;
	case ALLREDUCE:
		for (long i = 0; i < iters; i++)
			MPI_Allreduce(p->send[0], p->recv[0], c / 8, MPI_DOUBLE, MPI_SUM, world);
		break;
	case ALLGATHER:
		for (long i = 0; i < iters; i++)
			MPI_Allgather(p->send[0], c, MPI_BYTE, p->recv[0], c, MPI_BYTE, world);
		break;
	case ALLTOALL:
		for (long i = 0; i < iters; i++)
			MPI_Alltoall(p->send[0], c, MPI_BYTE, p->recv[0], c, MPI_BYTE, world);
		break;
	}
}

// sample runs one sample of iters operations and leaves in v what every
// rank then holds alike: the slowest rank's time (ns), whether rank 0
// found the deadline passed, whether some rank's check failed.
static void sample(struct point *p, long iters, double v[3]) {
	if (p->checks)
		for (int j = 0; j < p->nrecv; j++)
			memset(p->recv[j], 0xFF, p->rlen);
	MPI_Barrier(MPI_COMM_WORLD);
	int64_t t0 = mono_ns();
	body(p, iters);
	int64_t t1 = mono_ns();
	int bad = 0;
	if (p->checks)
		for (int j = 0; j < p->nrecv; j++)
			if (memcmp(p->recv[j], p->want[j], p->rlen) != 0)
				bad = 1;
	int stop = rank == 0 && deadline > 0 && unix_ns() > deadline;
	v[0] = (double)(t1 - t0);
	v[1] = stop;
	v[2] = bad;
	MPI_Allreduce(MPI_IN_PLACE, v, 3, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
}

// emit ends a line rank 0 has written: it flushes it, and aborts the job
// when it cannot be written.
static void emit(void) {
	if (fflush(out) != 0 || ferror(out)) {
		fprintf(stderr, "sweep_mpi_ref: writing %s: %s\n", out_path ? out_path : "standard output", strerror(errno));
		MPI_Abort(MPI_COMM_WORLD, 1);
	}
}

// next_iters is min(MaxIters, max(2*iters, ceil(iters*T/max(t, 1)))).
static long next_iters(long iters, double t) {
	double want = (double)iters * sample_ns / (t > 1 ? t : 1);
	long next = 2 * iters;
	if (want >= (double)MAX_ITERS) {
		next = MAX_ITERS;
	} else {
		long up = (long)want;
		if ((double)up < want)
			up++;
		if (up > next)
			next = up;
	}
	return next < MAX_ITERS ? next : MAX_ITERS;
}

// measure measures the point of op at size s with seed and, when report
// is set, has rank 0 write its line; it returns 1 when the deadline stopped the sweep (the
// point is then dropped), 0 otherwise.
static int measure(int op, size_t s, uint64_t seed, double *ns, int report) {
	struct point p;
	double v[3];
	int stopped = 1;
	setup(&p, op, s, seed);

	sample(&p, 1, v); // warm-up
	if (v[1] != 0)
		goto done;
	long iters = 1;
	for (int round = 0; round < CALIBRATION_ROUNDS; round++) {
		sample(&p, iters, v);
		if (v[1] != 0)
			goto done;
		if (v[0] >= sample_ns / 2 || iters >= MAX_ITERS)
			break;
		iters = next_iters(iters, v[0]);
	}
	double divisor = (double)iters;
	if (op == LATENCY)
		divisor = 2.0 * (double)iters;
	else if (op == BW || op == BIBW)
		divisor = (double)iters * p.w;
	int invalid = 0;
	for (int k = 0; k < count; k++) {
		sample(&p, iters, v);
		if (v[1] != 0)
			goto done;
		ns[k] = v[0] / divisor;
		invalid |= v[2] != 0;
	}
	stopped = 0;
	if (rank == 0 && report) {
		fprintf(out, "point %s %zu %d %ld %s", op_names[op], s, nranks, iters, invalid ? "invalid" : "ok");
		for (int k = 0; k < count; k++)
			fprintf(out, " %.7g", ns[k]);
		fputc('\n', out);
		emit();
	}
done:
	release(&p);
	return stopped;
}

// measure_point measures a point and has rank 0 report it; the first
// point of the sweep is measured twice, the first time discarded: a job's
// first moments (page faults, the transports settling) belong to no
// point.
static int measure_point(int op, size_t s, uint64_t seed, double *ns) {
	if (seed == 0 && measure(op, s, seed, ns, 0))
		return 1;
	return measure(op, s, seed, ns, 1);
}

// sweep measures every point in order and has rank 0 write the end line.
static void sweep(void) {
	double *ns = malloc(sizeof(double) * (size_t)count);
	if (ns == NULL) {
		fprintf(stderr, "sweep_mpi_ref: rank %d: out of memory\n", rank);
		MPI_Abort(MPI_COMM_WORLD, 1);
	}
	uint64_t seed = 0;
	int stopped = 0;
	for (int op = 0; op < NOPS && !stopped; op++) {
		if (!selected[op])
			continue;
		if ((op == LATENCY || op == BW || op == BIBW) && nranks != 2)
			continue;
		if (op == BARRIER) {
			stopped = measure_point(op, 0, seed++, ns);
			continue;
		}
		for (int i = 0; i < nsizes && !stopped; i++) {
			size_t s = (size_t)sizes[i];
			if (s == 0 || ((op == REDUCE || op == ALLREDUCE) && s % 8 != 0))
				continue;
			stopped = measure_point(op, s, seed++, ns);
		}
	}
	if (rank == 0) {
		fprintf(out, "end %s\n", stopped ? "budget" : "complete");
		emit();
	}
	free(ns);
}

// The command line's parsing. Each function returns NULL, or a message
// for a bad value, written into msg.

static char msg[512];

// digits reads the decimal number in s[0:len] (digits only) into *v.
static int digits(const char *s, size_t len, unsigned long long max, unsigned long long *v) {
	if (len == 0)
		return 0;
	unsigned long long x = 0;
	for (size_t i = 0; i < len; i++) {
		if (s[i] < '0' || s[i] > '9')
			return 0;
		unsigned d = (unsigned)(s[i] - '0');
		if (x > (max - d) / 10)
			return 0;
		x = x * 10 + d;
	}
	*v = x;
	return 1;
}

static const char *parse_ops(const char *list) {
	memset(selected, 0, sizeof selected);
	const char *f = list;
	for (;;) {
		const char *e = strchr(f, ',');
		size_t len = e ? (size_t)(e - f) : strlen(f);
		int op = 0;
		while (op < NOPS && !(strlen(op_names[op]) == len && strncmp(op_names[op], f, len) == 0))
			op++;
		if (op == NOPS) {
			snprintf(msg, sizeof msg, "-ops: unknown operation \"%.*s\" (want some of latency, bw, bibw, barrier, bcast, reduce, allreduce, allgather, alltoall)", (int)(len > 64 ? 64 : len), f);
			return msg;
		}
		selected[op] = 1;
		if (!e)
			return NULL;
		f = e + 1;
	}
}

static const char *parse_sizes(const char *list) {
	int cap = 1;
	for (const char *c = list; *c; c++)
		cap += *c == ',';
	free(sizes);
	sizes = malloc(sizeof(long long) * (size_t)cap);
	if (sizes == NULL)
		return "-sizes: out of memory";
	nsizes = 0;
	const char *f = list;
	for (;;) {
		const char *e = strchr(f, ',');
		size_t len = e ? (size_t)(e - f) : strlen(f);
		unsigned long long v;
		if (!digits(f, len, (unsigned long long)MAX_SIZE, &v)) {
			snprintf(msg, sizeof msg, "-sizes: \"%.*s\" is not a size in bytes from 0 to %lld", (int)(len > 64 ? 64 : len), f, MAX_SIZE);
			return msg;
		}
		if (nsizes > 0 && (long long)v <= sizes[nsizes - 1]) {
			snprintf(msg, sizeof msg, "-sizes: %llu after %lld: the sizes must increase", v, sizes[nsizes - 1]);
			return msg;
		}
		sizes[nsizes++] = (long long)v;
		if (!e)
			return NULL;
		f = e + 1;
	}
}

static const char *parse_flag(const char *name, const char *val) {
	unsigned long long v;
	if (strcmp(name, "ops") == 0)
		return parse_ops(val);
	if (strcmp(name, "sizes") == 0)
		return parse_sizes(val);
	if (strcmp(name, "count") == 0) {
		if (!digits(val, strlen(val), MAX_COUNT, &v) || v < 1) {
			snprintf(msg, sizeof msg, "-count: \"%.64s\" is not a number of samples from 1 to %d", val, MAX_COUNT);
			return msg;
		}
		count = (int)v;
		return NULL;
	}
	if (strcmp(name, "sample-ms") == 0) {
		char *end;
		double ms = 0;
		int ok = (val[0] >= '0' && val[0] <= '9') || val[0] == '.';
		if (ok) {
			ms = strtod(val, &end);
			ok = *end == '\0' && ms >= 0 && ms <= 3600e3;
		}
		if (!ok) {
			snprintf(msg, sizeof msg, "-sample-ms: \"%.64s\" is not a number of milliseconds from 0 to 3600000", val);
			return msg;
		}
		sample_ns = ms * 1e6;
		return NULL;
	}
	if (strcmp(name, "deadline") == 0) {
		if (!digits(val, strlen(val), INT64_MAX, &v)) {
			snprintf(msg, sizeof msg, "-deadline: \"%.64s\" is not a unix time in nanoseconds (0 for none)", val);
			return msg;
		}
		deadline = (long long)v;
		return NULL;
	}
	if (strcmp(name, "o") == 0) {
		if (val[0] == '\0')
			return "-o: empty file name";
		out_path = val;
		return NULL;
	}
	snprintf(msg, sizeof msg, "unknown option -%.64s (want -ops, -sizes, -count, -sample-ms, -deadline, -o)", name);
	return msg;
}

// parse reads the command line; it returns NULL, "" for -h, or a message.
static const char *parse(int argc, char **argv) {
	int have_sizes = 0;
	for (int op = 0; op < NOPS; op++)
		selected[op] = 1;
	for (int i = 1; i < argc; i++) {
		const char *a = argv[i];
		if (a[0] != '-' || a[1] == '\0') {
			snprintf(msg, sizeof msg, "unexpected argument \"%.64s\": every option is -name value", a);
			return msg;
		}
		a += a[1] == '-' ? 2 : 1;
		if (strcmp(a, "h") == 0 || strcmp(a, "help") == 0)
			return "";
		char name[32];
		const char *val;
		const char *eq = strchr(a, '=');
		size_t len = eq ? (size_t)(eq - a) : strlen(a);
		if (len == 0 || len >= sizeof name) {
			snprintf(msg, sizeof msg, "unknown option %.64s", argv[i]);
			return msg;
		}
		memcpy(name, a, len);
		name[len] = '\0';
		if (eq) {
			val = eq + 1;
		} else if (i + 1 < argc) {
			val = argv[++i];
		} else {
			snprintf(msg, sizeof msg, "option -%s needs a value", name);
			return msg;
		}
		const char *err = parse_flag(name, val);
		if (err)
			return err;
		have_sizes |= strcmp(name, "sizes") == 0;
	}
	if (!have_sizes)
		return "-sizes is required: the sizes in bytes, comma-separated, increasing";
	return NULL;
}

static const char usage[] =
	"usage: mpirun ... sweep_mpi_ref [-ops latency,bw,bibw,barrier,bcast,reduce,allreduce,allgather,alltoall]\n"
	"       -sizes BYTES,... [-count 5] [-sample-ms 20] [-deadline UNIX_NS] [-o FILE]\n";

int main(int argc, char **argv) {
	MPI_Init(&argc, &argv);
	MPI_Comm_rank(MPI_COMM_WORLD, &rank);
	MPI_Comm_size(MPI_COMM_WORLD, &nranks);

	// Every rank reads the same command line and takes the same decision;
	// rank 0 alone says why.
	const char *err = parse(argc, argv);
	if (err) {
		if (rank == 0) {
			if (err[0] == '\0')
				fputs(usage, stderr);
			else
				fprintf(stderr, "sweep_mpi_ref: %s\n", err);
		}
		MPI_Finalize();
		return err[0] == '\0' ? 0 : 2;
	}

	int opened = 1;
	if (rank == 0) {
		out = stdout;
		if (out_path) {
			out = fopen(out_path, "a");
			if (out == NULL) {
				fprintf(stderr, "sweep_mpi_ref: %s: %s\n", out_path, strerror(errno));
				opened = 0;
			}
		}
	}
	MPI_Bcast(&opened, 1, MPI_INT, 0, MPI_COMM_WORLD);
	if (!opened) {
		MPI_Finalize();
		return 1;
	}

	sweep();

	if (rank == 0 && out != stdout && fclose(out) != 0) {
		fprintf(stderr, "sweep_mpi_ref: %s: %s\n", out_path, strerror(errno));
		MPI_Abort(MPI_COMM_WORLD, 1);
	}
	free(sizes);
	MPI_Finalize();
	return 0;
}
#endif
