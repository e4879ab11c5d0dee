/*
 * fakecuda kernels: C equivalents of the built-in kernels (xpu_fill_*,
 * xpu_scale_*, xpu_axpy_*, xpu_add_*, xpu_sum_*, xpu_min_*, xpu_max_*)
 * and of the test kernels, selected by entry name at launch.
 *
 * A kernel first maps every range it touches (fc_kmap), which checks that
 * the range lies within one live allocation the launching context may
 * access; a bad range is an illegal address and the kernel does nothing.
 */
#include "fakecuda.h"

#include <math.h>
#include <stdint.h>
#include <string.h>
#include <time.h>

int fc_kmap(fc_kexec *k, uint64_t addr, uint64_t bytes, void **rw)
{
	*rw = NULL;
	if (bytes == 0)
		return 0;
	fc_range r;
	fc_lock();
	int ok = addr <= UINTPTR_MAX - bytes && fc_lookup((uintptr_t)addr, (size_t)bytes, &r);
	if (ok && (r.kind == R_DEV || r.kind == R_IPC) && r.dev != k->dev && !k->ctx->peer[r.dev])
		ok = 0; /* another device's memory without peer access */
	if (ok && r.kind == R_IPC && fc_ipc_stale(r.obj))
		ok = 0; /* another process's allocation, freed by its owner */
	if (!ok || k->nheld == (int)(sizeof k->held / sizeof k->held[0])) {
		fc_unlock();
		k->fault = CUDA_ERROR_ILLEGAL_ADDRESS;
		return -1;
	}
	fc_hold(&r);
	k->heldkind[k->nheld] = r.kind;
	k->held[k->nheld] = r.obj;
	k->nheld++;
	fc_unlock();
	*rw = r.rw;
	return 0;
}

static void add_ns(struct timespec *t, uint64_t ns)
{
	uint64_t s = ns / 1000000000u;
	t->tv_sec += (time_t)s;
	t->tv_nsec += (long)(ns - s * 1000000000u);
	if (t->tv_nsec >= 1000000000L) {
		t->tv_sec++;
		t->tv_nsec -= 1000000000L;
	}
}

static int before(const struct timespec *a, const struct timespec *b)
{
	return a->tv_sec < b->tv_sec || (a->tv_sec == b->tv_sec && a->tv_nsec < b->tv_nsec);
}

void fc_ksleep(fc_kexec *k, uint64_t ns)
{
	struct timespec deadline, now;
	fc_now(&deadline);
	add_ns(&deadline, ns);
	fc_lock();
	for (;;) {
		fc_now(&now);
		if (!before(&now, &deadline) || fc_ctx_state(k->ctx, k->ctxgen))
			break;
		pthread_cond_timedwait(&G.cv, &G.mu, &deadline);
	}
	fc_unlock();
}

/* Runs a kernel operation (in a stream worker or, for the legacy stream,
 * in the caller). Returns its fault, 0 if none. */
CUresult fc_run_kernel(fc_op *op, fc_ctx *c, unsigned gen)
{
	fc_kexec k;
	memset(&k, 0, sizeof k);
	k.ctx = c;
	k.ctxgen = gen;
	k.dev = c->dev;
	k.args = op->args;
	memcpy(k.grid, op->grid, sizeof k.grid);
	memcpy(k.block, op->block, sizeof k.block);
	k.shmem = op->shmem;
	fc_lock();
	fc_device *dv = &G.dev[c->dev];
	CUresult inj = CUDA_SUCCESS;
	if (dv->inj_illegal > 0) {
		dv->inj_illegal--;
		inj = CUDA_ERROR_ILLEGAL_ADDRESS;
	} else if (dv->inj_launch > 0) {
		dv->inj_launch--;
		inj = CUDA_ERROR_LAUNCH_FAILED;
	}
	fc_unlock();
	if (inj)
		return inj;
	int rc = op->kd->fn(&k);
	fc_lock();
	for (int i = 0; i < k.nheld; i++)
		fc_release(k.heldkind[i], k.held[i]);
	if (!rc) {
		G.n_launches++;
		dv->n_launches++;
	}
	fc_unlock();
	if (rc)
		return k.fault ? k.fault : CUDA_ERROR_LAUNCH_FAILED;
	return CUDA_SUCCESS;
}

/* ---- argument access ---- */

static uint64_t arg_u64(fc_kexec *k, int i) { return k->args[i]; }

#define ARG(k, i, T, out) memcpy(&(out), &(k)->args[i], sizeof(T))

/* n elements of size sz, without overflow; nonzero (a fault) if not */
static int kmapn(fc_kexec *k, uint64_t addr, uint64_t n, size_t sz, void **rw)
{
	if (n > UINT64_MAX / sz) {
		k->fault = CUDA_ERROR_ILLEGAL_ADDRESS;
		return -1;
	}
	return fc_kmap(k, addr, n * sz, rw);
}

/* ---- arithmetic per type: integers wrap (two's complement) ---- */

#define I_ADD(T, U, a, b) ((T)((U)(a) + (U)(b)))
#define I_MUL(T, U, a, b) ((T)((U)(a) * (U)(b)))
#define I_FMA(T, U, a, x, y) ((T)((U)(a) * (U)(x) + (U)(y)))
#define I_MIN(a, b) ((b) < (a) ? (b) : (a))
#define I_MAX(a, b) ((b) > (a) ? (b) : (a))

/* floats: each operation rounded on its own, no fused multiply-add (the
 * PTX is compiled with -ffp-contract=off, and so is the fake) */
#define F_ADD(T, U, a, b) ((T)((a) + (b)))
#define F_MUL(T, U, a, b) ((T)((a) * (b)))
#define F_FMA(T, U, a, x, y) ((T)((T)((a) * (x)) + (y)))

#define DEFINE_ELEMENTWISE(SFX, T, U, ADD, MUL, FMA)                                       \
	static int k_fill_##SFX(fc_kexec *k)                                               \
	{                                                                                  \
		T v, *p;                                                                   \
		ARG(k, 1, T, v);                                                           \
		uint64_t n = arg_u64(k, 2);                                                \
		if (kmapn(k, arg_u64(k, 0), n, sizeof(T), (void **)&p))                    \
			return -1;                                                         \
		for (uint64_t i = 0; i < n; i++)                                           \
			p[i] = v;                                                          \
		return 0;                                                                  \
	}                                                                                  \
	static int k_scale_##SFX(fc_kexec *k)                                              \
	{                                                                                  \
		T a, *p;                                                                   \
		ARG(k, 1, T, a);                                                           \
		uint64_t n = arg_u64(k, 2);                                                \
		if (kmapn(k, arg_u64(k, 0), n, sizeof(T), (void **)&p))                    \
			return -1;                                                         \
		for (uint64_t i = 0; i < n; i++)                                           \
			p[i] = MUL(T, U, a, p[i]);                                         \
		return 0;                                                                  \
	}                                                                                  \
	static int k_axpy_##SFX(fc_kexec *k)                                               \
	{                                                                                  \
		T a, *y, *x;                                                               \
		ARG(k, 2, T, a);                                                           \
		uint64_t n = arg_u64(k, 3);                                                \
		if (kmapn(k, arg_u64(k, 0), n, sizeof(T), (void **)&y) ||                  \
		    kmapn(k, arg_u64(k, 1), n, sizeof(T), (void **)&x))                    \
			return -1;                                                         \
		for (uint64_t i = 0; i < n; i++)                                           \
			y[i] = FMA(T, U, a, x[i], y[i]);                                   \
		return 0;                                                                  \
	}                                                                                  \
	static int k_add_##SFX(fc_kexec *k)                                                \
	{                                                                                  \
		T *z, *x, *y;                                                              \
		uint64_t n = arg_u64(k, 3);                                                \
		if (kmapn(k, arg_u64(k, 0), n, sizeof(T), (void **)&z) ||                  \
		    kmapn(k, arg_u64(k, 1), n, sizeof(T), (void **)&x) ||                  \
		    kmapn(k, arg_u64(k, 2), n, sizeof(T), (void **)&y))                    \
			return -1;                                                         \
		for (uint64_t i = 0; i < n; i++)                                           \
			z[i] = ADD(T, U, x[i], y[i]);                                      \
		return 0;                                                                  \
	}

/* Block partials: thread t of block b folds i = b*B + t + k*G*B into an
 * accumulator starting at the identity; the block then combines its B
 * accumulators in a halving tree (acc[t] = op(acc[t], acc[t+s]) for
 * s = B/2, B/4, ..., 1) and out[b] is acc[0]. */
#define DEFINE_REDUCE(NAME, SFX, T, IDENT, OP)                                             \
	static int k_##NAME##_##SFX(fc_kexec *k)                                           \
	{                                                                                  \
		T *out, *in;                                                               \
		T acc[1024];                                                               \
		uint64_t n = arg_u64(k, 2);                                                \
		uint64_t G = k->grid[0], B = k->block[0];                                  \
		if (B < 32 || B > 1024 || (B & (B - 1)) || k->shmem < B * sizeof(T)) {     \
			/* reads and writes past its shared memory */                      \
			k->fault = CUDA_ERROR_ILLEGAL_ADDRESS;                             \
			return -1;                                                         \
		}                                                                          \
		if (kmapn(k, arg_u64(k, 0), G, sizeof(T), (void **)&out) ||               \
		    kmapn(k, arg_u64(k, 1), n, sizeof(T), (void **)&in))                   \
			return -1;                                                         \
		const T ident = IDENT;                                                     \
		for (uint64_t b = 0; b < G; b++) {                                         \
			uint64_t base = b * B;                                             \
			if (base >= n) {                                                   \
				out[b] = ident;                                            \
				continue;                                                  \
			}                                                                  \
			for (uint64_t t = 0; t < B; t++) {                                 \
				T a = ident;                                               \
				for (uint64_t i = base + t; i < n; i += G * B)             \
					a = OP(a, in[i]);                                  \
				acc[t] = a;                                                \
			}                                                                  \
			for (uint64_t s = B / 2; s > 0; s >>= 1)                           \
				for (uint64_t t = 0; t < s; t++)                           \
					acc[t] = OP(acc[t], acc[t + s]);                   \
			out[b] = acc[0];                                                   \
		}                                                                          \
		return 0;                                                                  \
	}

#define SUM_I32(a, b) I_ADD(int32_t, uint32_t, a, b)
#define SUM_I64(a, b) I_ADD(int64_t, uint64_t, a, b)
#define SUM_U32(a, b) ((uint32_t)((a) + (b)))
#define SUM_U64(a, b) ((uint64_t)((a) + (b)))
#define SUM_F32(a, b) ((float)((a) + (b)))
#define SUM_F64(a, b) ((double)((a) + (b)))

DEFINE_ELEMENTWISE(i32, int32_t, uint32_t, I_ADD, I_MUL, I_FMA)
DEFINE_ELEMENTWISE(i64, int64_t, uint64_t, I_ADD, I_MUL, I_FMA)
DEFINE_ELEMENTWISE(u32, uint32_t, uint32_t, I_ADD, I_MUL, I_FMA)
DEFINE_ELEMENTWISE(u64, uint64_t, uint64_t, I_ADD, I_MUL, I_FMA)
DEFINE_ELEMENTWISE(f32, float, float, F_ADD, F_MUL, F_FMA)
DEFINE_ELEMENTWISE(f64, double, double, F_ADD, F_MUL, F_FMA)

DEFINE_REDUCE(sum, i32, int32_t, 0, SUM_I32)
DEFINE_REDUCE(sum, i64, int64_t, 0, SUM_I64)
DEFINE_REDUCE(sum, u32, uint32_t, 0, SUM_U32)
DEFINE_REDUCE(sum, u64, uint64_t, 0, SUM_U64)
DEFINE_REDUCE(sum, f32, float, 0.0f, SUM_F32)
DEFINE_REDUCE(sum, f64, double, 0.0, SUM_F64)

DEFINE_REDUCE(min, i32, int32_t, INT32_MAX, I_MIN)
DEFINE_REDUCE(min, i64, int64_t, INT64_MAX, I_MIN)
DEFINE_REDUCE(min, u32, uint32_t, UINT32_MAX, I_MIN)
DEFINE_REDUCE(min, u64, uint64_t, UINT64_MAX, I_MIN)
DEFINE_REDUCE(min, f32, float, INFINITY, fminf)
DEFINE_REDUCE(min, f64, double, (double)INFINITY, fmin)

DEFINE_REDUCE(max, i32, int32_t, INT32_MIN, I_MAX)
DEFINE_REDUCE(max, i64, int64_t, INT64_MIN, I_MAX)
DEFINE_REDUCE(max, u32, uint32_t, 0, I_MAX)
DEFINE_REDUCE(max, u64, uint64_t, 0, I_MAX)
DEFINE_REDUCE(max, f32, float, -INFINITY, fmaxf)
DEFINE_REDUCE(max, f64, double, -(double)INFINITY, fmax)

/* ---- test kernels ---- */

static int k_test_empty(fc_kexec *k)
{
	(void)k;
	return 0;
}

static int k_test_iota_u32(fc_kexec *k)
{
	uint32_t *p;
	uint64_t n = arg_u64(k, 1);
	if (kmapn(k, arg_u64(k, 0), n, sizeof(uint32_t), (void **)&p))
		return -1;
	for (uint64_t i = 0; i < n; i++)
		p[i] = (uint32_t)i;
	return 0;
}

static int k_test_sleep(fc_kexec *k)
{
	fc_ksleep(k, arg_u64(k, 0));
	return 0;
}

static int k_test_store(fc_kexec *k)
{
	uint64_t *p;
	if (fc_kmap(k, arg_u64(k, 0), sizeof(uint64_t), (void **)&p))
		return -1;
	uint64_t v = arg_u64(k, 1);
	memcpy(p, &v, sizeof v);
	return 0;
}

/* ---- the table ---- */

#define KT(SFX, T)                                                                         \
	{"xpu_fill_" #SFX, 3, {8, sizeof(T), 8}, k_fill_##SFX},                            \
	{"xpu_scale_" #SFX, 3, {8, sizeof(T), 8}, k_scale_##SFX},                      \
	{"xpu_axpy_" #SFX, 4, {8, 8, sizeof(T), 8}, k_axpy_##SFX},                     \
	{"xpu_add_" #SFX, 4, {8, 8, 8, 8}, k_add_##SFX},                               \
	{"xpu_sum_" #SFX, 3, {8, 8, 8}, k_sum_##SFX},                                  \
	{"xpu_min_" #SFX, 3, {8, 8, 8}, k_min_##SFX},                                  \
	{"xpu_max_" #SFX, 3, {8, 8, 8}, k_max_##SFX}

static const fc_kdef ktab[] = {
	KT(i32, int32_t),
	KT(i64, int64_t),
	KT(u32, uint32_t),
	KT(u64, uint64_t),
	KT(f32, float),
	KT(f64, double),
	{"xpu_test_empty", 0, {0}, k_test_empty},
	{"xpu_test_iota_u32", 2, {8, 8}, k_test_iota_u32},
	{"xpu_test_sleep", 1, {8}, k_test_sleep},
	{"xpu_test_store", 2, {8, 8}, k_test_store},
};

const fc_kdef *fc_kernel_lookup(const char *name)
{
	for (size_t i = 0; i < sizeof ktab / sizeof ktab[0]; i++)
		if (strcmp(ktab[i].name, name) == 0)
			return &ktab[i];
	return NULL;
}
