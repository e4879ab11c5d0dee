// cuda_ref: the C reference figures the cuda backend's benchmarks are
// compared with (package internal/tooling/bench, cuda.go, Case.Ref): the same
// driver calls in a tight loop, with no Go in between.
//
//   gcc -O2 -o cuda_ref cuda_ref.c -ldl && ./cuda_ref
//
// It needs no CUDA header or library to build: it loads the driver with
// dlopen at run time, from $XPU_CUDA_LIBRARY if set (the fake driver of
// the tests, say), else libcuda.so.1, and declares the few entry points it
// calls itself. Where no driver loads, or it offers no usable device, it
// prints nothing, says why on stderr and exits 0, so that `make refs` and
// `xpu bench --ref` work on machines without a GPU. A driver call that
// fails once measuring has begun is an error (exit 1).
//
// Each figure is measured several times on device 0; the median is printed
// as one line
//
//   <name> <median> <unit>
//
// cu.copy.h2d.pinned.64M    cuMemcpy of 64 MiB from pinned host memory
//                           (cuMemHostAlloc, portable and device-mapped) to
//                           device memory: the call the backend makes for
//                           that pair of kinds (GB/s, 1e9 bytes/s)
// cu.copy.d2h.pinned.64M    the same from device to pinned memory (GB/s)
// cu.copy.h2d.pageable.64M  cuMemcpyHtoD_v2 of 64 MiB from malloc'd memory,
//                           touched beforehand (GB/s)
// cu.alloc_free.1M          cuMemAlloc_v2 and cuMemFree_v2 of 1 MiB (ns/op)
// cu.launch.empty           cuLaunchKernel of an empty kernel, one block of
//                           one thread, on a non-blocking stream,
//                           cuStreamSynchronize every 1024 launches (ns/op)
// cu.event.record_query     cuEventRecord on an idle non-blocking stream
//                           then cuEventQuery, cuStreamSynchronize every
//                           1024 records (ns/op)
// cu.goal.1us               not a measurement: the goal of
//                           cuda.pool.alloc_free, 1 µs, printed so that
//                           xpu bench shows that case's verdict (ns/op)
//
// The empty kernel is xpu_test_empty, the PTX below (its text in
// backends/cuda/internal/kernels/testkernels.ptx); a PTX file given as the
// first argument replaces it.

#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define RUNS 7
#define SYNC_EVERY 1024
#define COPY_SIZE (64UL << 20)
#define ALLOC_SIZE (1UL << 20)

typedef int CUresult;
typedef int CUdevice;
typedef unsigned long long CUdeviceptr;
typedef void *CUcontext;
typedef void *CUstream;
typedef void *CUevent;
typedef void *CUmodule;
typedef void *CUfunction;

enum {
	CUDA_SUCCESS = 0,
	CUDA_ERROR_NOT_READY = 600,
	CU_STREAM_NON_BLOCKING = 1,
	CU_EVENT_BLOCKING_SYNC = 1,
	CU_MEMHOSTALLOC_PORTABLE = 1,
	CU_MEMHOSTALLOC_DEVICEMAP = 2,
};

// The entry points, by the names the backend resolves
// (backends/cuda/internal/cu/cu.go).
static struct {
	CUresult (*cuInit)(unsigned);
	CUresult (*cuDeviceGet)(CUdevice *, int);
	CUresult (*cuDevicePrimaryCtxRetain)(CUcontext *, CUdevice);
	CUresult (*cuDevicePrimaryCtxRelease_v2)(CUdevice);
	CUresult (*cuCtxSetCurrent)(CUcontext);
	CUresult (*cuMemAlloc_v2)(CUdeviceptr *, size_t);
	CUresult (*cuMemFree_v2)(CUdeviceptr);
	CUresult (*cuMemHostAlloc)(void **, size_t, unsigned);
	CUresult (*cuMemFreeHost)(void *);
	CUresult (*cuMemcpy)(CUdeviceptr, CUdeviceptr, size_t);
	CUresult (*cuMemcpyHtoD_v2)(CUdeviceptr, const void *, size_t);
	CUresult (*cuStreamCreate)(CUstream *, unsigned);
	CUresult (*cuStreamDestroy_v2)(CUstream);
	CUresult (*cuStreamSynchronize)(CUstream);
	CUresult (*cuEventCreate)(CUevent *, unsigned);
	CUresult (*cuEventDestroy_v2)(CUevent);
	CUresult (*cuEventRecord)(CUevent, CUstream);
	CUresult (*cuEventQuery)(CUevent);
	CUresult (*cuModuleLoadDataEx)(CUmodule *, const void *, unsigned, int *, void **);
	CUresult (*cuModuleUnload)(CUmodule);
	CUresult (*cuModuleGetFunction)(CUfunction *, CUmodule, const char *);
	CUresult (*cuLaunchKernel)(CUfunction, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned,
				   unsigned, CUstream, void **, void **);
	CUresult (*cuGetErrorName)(CUresult, const char **);
} cu;

#define SYM(name) {#name, (void **)&cu.name}
static const struct {
	const char *name;
	void **fn;
} syms[] = {
	SYM(cuInit), SYM(cuDeviceGet), SYM(cuDevicePrimaryCtxRetain), SYM(cuDevicePrimaryCtxRelease_v2),
	SYM(cuCtxSetCurrent), SYM(cuMemAlloc_v2), SYM(cuMemFree_v2), SYM(cuMemHostAlloc), SYM(cuMemFreeHost),
	SYM(cuMemcpy), SYM(cuMemcpyHtoD_v2), SYM(cuStreamCreate), SYM(cuStreamDestroy_v2),
	SYM(cuStreamSynchronize), SYM(cuEventCreate), SYM(cuEventDestroy_v2), SYM(cuEventRecord),
	SYM(cuEventQuery), SYM(cuModuleLoadDataEx), SYM(cuModuleUnload), SYM(cuModuleGetFunction),
	SYM(cuLaunchKernel), SYM(cuGetErrorName),
};

static const char empty_ptx[] = ".version 6.0\n"
				".target sm_70\n"
				".address_size 64\n"
				"\n"
				".visible .entry xpu_test_empty()\n"
				"{\n"
				"\tret;\n"
				"}\n";

static const char *errname(CUresult r) {
	const char *s = NULL;
	if (cu.cuGetErrorName && cu.cuGetErrorName(r, &s) == CUDA_SUCCESS && s)
		return s;
	return "unknown error";
}

// unavailable: no driver, or no device to use: nothing to measure.
static void unavailable(const char *what, CUresult r) {
	fprintf(stderr, "cuda_ref: no figures: %s: %s (%d)\n", what, errname(r), r);
	exit(0);
}

// check: a call that fails once measuring has begun is an error.
static void check(CUresult r, const char *what) {
	if (r != CUDA_SUCCESS) {
		fprintf(stderr, "cuda_ref: %s: %s (%d)\n", what, errname(r), r);
		exit(1);
	}
}

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

// An operation measured: run(state, reps) does reps of it.
typedef void (*op_fn)(void *state, long reps);

// seconds_per_op doubles reps (from at least `unit`, in multiples of it)
// until a batch takes 50 ms or more, then returns the median time per
// operation of RUNS such batches.
static double seconds_per_op(op_fn run, void *state, long unit) {
	long reps = unit;
	for (;;) {
		double t0 = now();
		run(state, reps);
		if (now() - t0 >= 0.05 || reps >= (1L << 40))
			break;
		reps *= 2;
	}
	double v[RUNS];
	for (int r = 0; r < RUNS; r++) {
		double t0 = now();
		run(state, reps);
		v[r] = (now() - t0) / (double)reps;
	}
	return median(v, RUNS);
}

struct copy {
	CUdeviceptr dst, src; // cuMemcpy
	CUdeviceptr dev;      // cuMemcpyHtoD
	const void *host;
};

static void copy_unified(void *p, long reps) {
	struct copy *c = p;
	for (long i = 0; i < reps; i++)
		check(cu.cuMemcpy(c->dst, c->src, COPY_SIZE), "cuMemcpy");
}

static void copy_htod(void *p, long reps) {
	struct copy *c = p;
	for (long i = 0; i < reps; i++)
		check(cu.cuMemcpyHtoD_v2(c->dev, c->host, COPY_SIZE), "cuMemcpyHtoD_v2");
}

static void copies(void) {
	CUdeviceptr dev;
	void *pinned;
	check(cu.cuMemAlloc_v2(&dev, COPY_SIZE), "cuMemAlloc_v2");
	check(cu.cuMemHostAlloc(&pinned, COPY_SIZE, CU_MEMHOSTALLOC_PORTABLE | CU_MEMHOSTALLOC_DEVICEMAP),
	      "cuMemHostAlloc");
	memset(pinned, 1, COPY_SIZE);
	char *pageable = malloc(COPY_SIZE);
	if (!pageable) {
		fprintf(stderr, "cuda_ref: out of memory\n");
		exit(1);
	}
	memset(pageable, 2, COPY_SIZE);

	struct copy h2d = {.dst = dev, .src = (CUdeviceptr)(uintptr_t)pinned};
	copy_unified(&h2d, 1);
	printf("cu.copy.h2d.pinned.64M %.2f GB/s\n", COPY_SIZE / seconds_per_op(copy_unified, &h2d, 1) / 1e9);
	struct copy d2h = {.dst = (CUdeviceptr)(uintptr_t)pinned, .src = dev};
	printf("cu.copy.d2h.pinned.64M %.2f GB/s\n", COPY_SIZE / seconds_per_op(copy_unified, &d2h, 1) / 1e9);
	struct copy pg = {.dev = dev, .host = pageable};
	copy_htod(&pg, 1);
	printf("cu.copy.h2d.pageable.64M %.2f GB/s\n", COPY_SIZE / seconds_per_op(copy_htod, &pg, 1) / 1e9);
	fflush(stdout);

	free(pageable);
	check(cu.cuMemFreeHost(pinned), "cuMemFreeHost");
	check(cu.cuMemFree_v2(dev), "cuMemFree_v2");
}

static void alloc_free(void *p, long reps) {
	(void)p;
	for (long i = 0; i < reps; i++) {
		CUdeviceptr d;
		check(cu.cuMemAlloc_v2(&d, ALLOC_SIZE), "cuMemAlloc_v2");
		check(cu.cuMemFree_v2(d), "cuMemFree_v2");
	}
}

struct launch {
	CUfunction f;
	CUstream s;
	CUevent e;
};

static void launch_empty(void *p, long reps) {
	struct launch *l = p;
	for (long i = 1; i <= reps; i++) {
		check(cu.cuLaunchKernel(l->f, 1, 1, 1, 1, 1, 1, 0, l->s, NULL, NULL), "cuLaunchKernel");
		if (i % SYNC_EVERY == 0)
			check(cu.cuStreamSynchronize(l->s), "cuStreamSynchronize");
	}
}

static void record_query(void *p, long reps) {
	struct launch *l = p;
	for (long i = 1; i <= reps; i++) {
		check(cu.cuEventRecord(l->e, l->s), "cuEventRecord");
		CUresult r = cu.cuEventQuery(l->e);
		if (r != CUDA_ERROR_NOT_READY)
			check(r, "cuEventQuery");
		if (i % SYNC_EVERY == 0)
			check(cu.cuStreamSynchronize(l->s), "cuStreamSynchronize");
	}
}

// read_file returns the NUL-terminated contents of path.
static char *read_file(const char *path) {
	FILE *f = fopen(path, "rb");
	if (!f) {
		perror(path);
		exit(1);
	}
	size_t cap = 1 << 16, n = 0;
	char *buf = malloc(cap + 1);
	size_t k;
	while (buf && (k = fread(buf + n, 1, cap - n, f)) > 0) {
		n += k;
		if (n == cap)
			buf = realloc(buf, (cap *= 2) + 1);
	}
	fclose(f);
	if (!buf) {
		fprintf(stderr, "cuda_ref: out of memory\n");
		exit(1);
	}
	buf[n] = 0;
	return buf;
}

static void kernels_and_events(const char *ptx) {
	struct launch l;
	CUmodule m;
	char log[8192] = "";
	int opts[2] = {5, 6}; // CU_JIT_ERROR_LOG_BUFFER, CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES
	void *vals[2] = {log, (void *)(uintptr_t)sizeof log};
	CUresult r = cu.cuModuleLoadDataEx(&m, ptx, 2, opts, vals);
	if (r != CUDA_SUCCESS) {
		fprintf(stderr, "cuda_ref: cuModuleLoadDataEx: %s (%d): %s\n", errname(r), r, log);
		exit(1);
	}
	check(cu.cuModuleGetFunction(&l.f, m, "xpu_test_empty"), "cuModuleGetFunction");
	check(cu.cuStreamCreate(&l.s, CU_STREAM_NON_BLOCKING), "cuStreamCreate");
	check(cu.cuEventCreate(&l.e, CU_EVENT_BLOCKING_SYNC), "cuEventCreate");
	// A batch outside the timing: the first launch loads the code.
	launch_empty(&l, SYNC_EVERY);
	printf("cu.launch.empty %.1f ns/op\n", seconds_per_op(launch_empty, &l, SYNC_EVERY) * 1e9);
	fflush(stdout);
	printf("cu.event.record_query %.1f ns/op\n", seconds_per_op(record_query, &l, SYNC_EVERY) * 1e9);
	fflush(stdout);
	check(cu.cuStreamSynchronize(l.s), "cuStreamSynchronize");
	check(cu.cuEventDestroy_v2(l.e), "cuEventDestroy_v2");
	check(cu.cuStreamDestroy_v2(l.s), "cuStreamDestroy_v2");
	check(cu.cuModuleUnload(m), "cuModuleUnload");
}

int main(int argc, char **argv) {
	const char *path = getenv("XPU_CUDA_LIBRARY");
	if (!path || !*path)
		path = "libcuda.so.1";
	void *h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
	if (!h) {
		fprintf(stderr, "cuda_ref: no figures: cannot load %s: %s\n", path, dlerror());
		return 0;
	}
	for (size_t i = 0; i < sizeof syms / sizeof syms[0]; i++) {
		*syms[i].fn = dlsym(h, syms[i].name);
		if (!*syms[i].fn) {
			fprintf(stderr, "cuda_ref: no figures: %s lacks %s: driver too old\n", path, syms[i].name);
			return 0;
		}
	}
	CUresult r;
	CUdevice dev;
	CUcontext ctx;
	if ((r = cu.cuInit(0)) != CUDA_SUCCESS)
		unavailable("cuInit", r);
	if ((r = cu.cuDeviceGet(&dev, 0)) != CUDA_SUCCESS)
		unavailable("cuDeviceGet(0)", r);
	if ((r = cu.cuDevicePrimaryCtxRetain(&ctx, dev)) != CUDA_SUCCESS)
		unavailable("cuDevicePrimaryCtxRetain", r);
	if ((r = cu.cuCtxSetCurrent(ctx)) != CUDA_SUCCESS)
		unavailable("cuCtxSetCurrent", r);

	const char *ptx = argc > 1 ? read_file(argv[1]) : empty_ptx;
	copies();
	alloc_free(NULL, 1);
	printf("cu.alloc_free.1M %.1f ns/op\n", seconds_per_op(alloc_free, NULL, 1) * 1e9);
	fflush(stdout);
	kernels_and_events(ptx);
	printf("cu.goal.1us 1000 ns/op\n");

	check(cu.cuCtxSetCurrent(NULL), "cuCtxSetCurrent");
	check(cu.cuDevicePrimaryCtxRelease_v2(dev), "cuDevicePrimaryCtxRelease_v2");
	return 0;
}
