// cpu_ref: the C reference figures the CPU backend's benchmarks are
// compared with (package internal/tooling/bench, Case.Ref).
//
//   gcc -O3 -march=native -fopenmp -o cpu_ref cpu_ref.c && ./cpu_ref
//
// Each figure is measured several times; the median is printed as one line
//
//   <name> <median> <unit>
//
// omp.parallel_for.empty  an OpenMP `parallel for` region over 2 iterations
//                         on 2 threads with an empty body (ns/op)
// omp.for.fnptr           an OpenMP `parallel for` over 16M iterations on 2
//                         threads, each calling an empty function through a
//                         pointer the compiler cannot see through (ns/iter)
// omp.triad               STREAM triad a[i] = b[i] + s*c[i] over three
//                         arrays of 128 MiB on 2 threads, counting 3*128 MiB
//                         per pass as STREAM does (GB/s, 1e9 bytes/s)
// memcpy.<size>           single-threaded memcpy of 64KiB, 1MiB, 16MiB and
//                         256MiB between two page-aligned blocks, counting
//                         the bytes copied (GB/s)
//
// The blocks of memcpy are page-aligned, as the cpu space's blocks of
// these sizes are (mappings of their own), so that both sides copy between
// blocks the same distance apart modulo the page. With two malloc'ed
// blocks that distance is whatever the heap makes it, and on CPUs where
// glibc copies with rep movsb (AMD Zen 4 among them) a destination 1 to
// 15 bytes past the source modulo 4096 copies 64 KiB about 16 times
// slower (3.4 GB/s against 56 on a 2-core AMD EPYC VM): a reference of
// 1.95 GB/s was read that way, and the ratios against it meant nothing.
// The last copy of each size is checked.
//
// Set OMP_NUM_THREADS only to change the thread count of the triad and the
// loop (default 2, the figures the Go benchmarks use).

#define _GNU_SOURCE
#include <omp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define RUNS 7

static double now(void) {
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static int cmp(const void *a, const void *b) {
	double x = *(const double *)a, y = *(const double *)b;
	return (x > y) - (x < y);
}

static double median(double *v, int n) {
	qsort(v, n, sizeof *v, cmp);
	return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

// The empty body called through a pointer; noinline and the volatile
// pointer keep the compiler from inlining or removing the calls.
__attribute__((noinline)) static void body(long i) { __asm__ volatile("" : : "r"(i) : "memory"); }
static void (*volatile body_ptr)(long) = body;

static int threads(void) {
	const char *s = getenv("OMP_NUM_THREADS");
	int n = s ? atoi(s) : 2;
	return n > 0 ? n : 2;
}

static void empty_region(int nt) {
	double v[RUNS];
	const int reps = 20000;
	for (int r = 0; r < RUNS; r++) {
		double t0 = now();
		for (int k = 0; k < reps; k++) {
#pragma omp parallel for num_threads(nt) schedule(static)
			for (int i = 0; i < nt; i++) {
				__asm__ volatile("" : : : "memory");
			}
		}
		v[r] = (now() - t0) / reps * 1e9;
	}
	printf("omp.parallel_for.empty %.1f ns/op\n", median(v, RUNS));
}

static void fnptr_loop(int nt) {
	double v[RUNS];
	const long n = 16L << 20;
	for (int r = 0; r < RUNS; r++) {
		void (*f)(long) = body_ptr;
		double t0 = now();
#pragma omp parallel for num_threads(nt) schedule(static)
		for (long i = 0; i < n; i++) {
			f(i);
		}
		v[r] = (now() - t0) / (double)n * 1e9;
	}
	printf("omp.for.fnptr %.3f ns/iter\n", median(v, RUNS));
}

static void triad(int nt) {
	const long n = (128L << 20) / sizeof(double);
	double *a = malloc(n * sizeof *a), *b = malloc(n * sizeof *b), *c = malloc(n * sizeof *c);
	if (!a || !b || !c) {
		fprintf(stderr, "cpu_ref: out of memory\n");
		exit(1);
	}
#pragma omp parallel for num_threads(nt) schedule(static)
	for (long i = 0; i < n; i++) {
		a[i] = 0;
		b[i] = 1;
		c[i] = 2;
	}
	double v[RUNS];
	const double s = 3;
	for (int r = 0; r < RUNS; r++) {
		double t0 = now();
#pragma omp parallel for num_threads(nt) schedule(static)
		for (long i = 0; i < n; i++) {
			a[i] = b[i] + s * c[i];
		}
		v[r] = 3.0 * n * sizeof(double) / (now() - t0) / 1e9;
	}
	if (a[n / 2] != 7) {
		fprintf(stderr, "cpu_ref: triad computed %g\n", a[n / 2]);
		exit(1);
	}
	printf("omp.triad %.2f GB/s\n", median(v, RUNS));
	free(a);
	free(b);
	free(c);
}

static void copy(size_t size, const char *name) {
	// Sizes here are multiples of the page.
	char *src = aligned_alloc(4096, size), *dst = aligned_alloc(4096, size);
	if (!src || !dst) {
		fprintf(stderr, "cpu_ref: out of memory\n");
		exit(1);
	}
	memset(src, 1, size);
	memset(dst, 2, size);
	// Enough repetitions for about 0.1 s per measurement.
	long reps = (long)(2e9 / (double)size);
	if (reps < 2) {
		reps = 2;
	}
	double v[RUNS];
	for (int r = 0; r < RUNS; r++) {
		double t0 = now();
		for (long k = 0; k < reps; k++) {
			memcpy(dst, src, size);
			__asm__ volatile("" : : "r"(dst) : "memory");
		}
		v[r] = (double)size * reps / (now() - t0) / 1e9;
	}
	if (memcmp(dst, src, size) != 0) {
		fprintf(stderr, "cpu_ref: memcpy of %s did not copy\n", name);
		exit(1);
	}
	printf("memcpy.%s %.2f GB/s\n", name, median(v, RUNS));
	free(src);
	free(dst);
}

int main(void) {
	int nt = threads();
	empty_region(nt);
	fnptr_loop(nt);
	triad(nt);
	copy(64 << 10, "64KiB");
	copy(1 << 20, "1MiB");
	copy(16 << 20, "16MiB");
	copy(256 << 20, "256MiB");
	return 0;
}
