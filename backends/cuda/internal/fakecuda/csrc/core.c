/*
 * fakecuda core: initialization, devices, primary contexts, peer access,
 * error names, and the test controls (fakecuda_inject/reset/stats).
 */
#include "fakecuda.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

fc_global G = {.mu = PTHREAD_MUTEX_INITIALIZER};
__thread fc_ctx *fc_tls_ctx;
__thread int fc_tls_worker;

__attribute__((constructor)) static void fc_construct(void)
{
	pthread_condattr_t a;
	pthread_condattr_init(&a);
	pthread_condattr_setclock(&a, CLOCK_MONOTONIC);
	pthread_cond_init(&G.cv, &a);
	pthread_condattr_destroy(&a);
}

void fc_lock(void) { pthread_mutex_lock(&G.mu); }
void fc_unlock(void) { pthread_mutex_unlock(&G.mu); }
void fc_wake_all(void) { pthread_cond_broadcast(&G.cv); }
void fc_wait(void) { pthread_cond_wait(&G.cv, &G.mu); }

void fc_now(struct timespec *ts) { clock_gettime(CLOCK_MONOTONIC, ts); }

/* Checks common to every entry point but cuInit, cuDriverGetVersion and
 * the error-name functions. */
CUresult fc_enter(void)
{
	if (!__atomic_load_n(&G.inited, __ATOMIC_ACQUIRE))
		return CUDA_ERROR_NOT_INITIALIZED;
	if (fc_tls_worker)
		return CUDA_ERROR_NOT_PERMITTED;
	return CUDA_SUCCESS;
}

int fc_valid_ctx(fc_ctx *c)
{
	for (int i = 0; i < G.ndev; i++)
		if (c == &G.dev[i].ctx)
			return 1;
	return 0;
}

/* The state of context c as seen by an object created in its generation
 * gen. Called with G.mu held. */
CUresult fc_ctx_state(fc_ctx *c, unsigned gen)
{
	if (c->gen != gen || c->refcount == 0)
		return CUDA_ERROR_CONTEXT_IS_DESTROYED;
	if (G.dev[c->dev].lost)
		return CUDA_ERROR_DEVICE_UNAVAILABLE;
	return c->sticky;
}

/* The calling thread's current context, checked. G.mu held. */
CUresult fc_cur_ctx(fc_ctx **out)
{
	fc_ctx *c = fc_tls_ctx;
	if (!c)
		return CUDA_ERROR_INVALID_CONTEXT;
	CUresult r = fc_ctx_state(c, c->gen);
	if (r)
		return r;
	*out = c;
	return CUDA_SUCCESS;
}

/* The start of most entry points: fc_enter, then G.mu and the current
 * context (fc_cur_ctx) in *c. On success G.mu is held; on failure it is
 * not. */
CUresult fc_enter_ctx(fc_ctx **c)
{
	CUresult r = fc_enter();
	if (r)
		return r;
	fc_lock();
	r = fc_cur_ctx(c);
	if (r)
		fc_unlock();
	return r;
}

void fc_set_sticky(fc_ctx *c, unsigned gen, CUresult code)
{
	if (c->gen == gen && c->refcount > 0 && !c->sticky) {
		c->sticky = code;
		fc_wake_all();
	}
}

/* ---- initialization ---- */

static int env_ll(const char *name, long long def, long long *out)
{
	const char *s = getenv(name);
	if (!s || !*s) {
		*out = def;
		return 0;
	}
	char *end;
	errno = 0;
	long long v = strtoll(s, &end, 10);
	if (errno || *end || v < 0) {
		fprintf(stderr, "fakecuda: %s=%s is not a non-negative integer\n", name, s);
		return -1;
	}
	*out = v;
	return 0;
}

static int env_flag(const char *name)
{
	const char *s = getenv(name);
	return s && *s && strcmp(s, "0") != 0;
}

static int map_device(int i, size_t size)
{
	fc_device *d = &G.dev[i];
	char name[32];
	snprintf(name, sizeof name, "fakecuda-dev%d", i);
	int fd = memfd_create(name, MFD_CLOEXEC);
	if (fd < 0)
		return -1;
	if (ftruncate(fd, (off_t)size) != 0) {
		close(fd);
		return -1;
	}
	void *none = mmap(NULL, size, PROT_NONE, MAP_SHARED | MAP_NORESERVE, fd, 0);
	if (none == MAP_FAILED) {
		close(fd);
		return -1;
	}
	void *rw = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_NORESERVE, fd, 0);
	if (rw == MAP_FAILED) {
		munmap(none, size);
		close(fd);
		return -1;
	}
	fc_block *b = calloc(1, sizeof *b);
	if (!b) {
		munmap(none, size);
		munmap(rw, size);
		close(fd);
		return -1;
	}
	b->off = 0;
	b->size = size;
	d->fd = fd;
	d->dbase = (uintptr_t)none;
	d->rw = rw;
	d->size = size;
	d->blocks = b;
	d->ctx.dev = i;
	return 0;
}

API CUresult cuInit(unsigned flags)
{
	if (fc_tls_worker)
		return CUDA_ERROR_NOT_PERMITTED;
	if (flags != 0)
		return CUDA_ERROR_INVALID_VALUE;
	fc_lock();
	if (G.inited) {
		fc_unlock();
		return CUDA_SUCCESS;
	}
	if (env_flag("FAKECUDA_NO_DEVICE")) {
		fc_unlock();
		return CUDA_ERROR_NO_DEVICE;
	}
	long long ndev, mem, ver;
	if (env_ll("FAKECUDA_DEVICES", 2, &ndev) || env_ll("FAKECUDA_MEMORY", 1LL << 30, &mem) ||
	    env_ll("FAKECUDA_DRIVER_VERSION", 12040, &ver)) {
		fc_unlock();
		return CUDA_ERROR_INVALID_VALUE;
	}
	if (ndev == 0) {
		fc_unlock();
		return CUDA_ERROR_NO_DEVICE;
	}
	if (ndev > FC_MAXDEV) {
		fprintf(stderr, "fakecuda: FAKECUDA_DEVICES=%lld: at most %d\n", ndev, FC_MAXDEV);
		fc_unlock();
		return CUDA_ERROR_INVALID_VALUE;
	}
	long page = sysconf(_SC_PAGESIZE);
	if (mem < page)
		mem = page;
	mem = (mem + page - 1) / page * page;
	for (int i = 0; i < ndev; i++) {
		if (map_device(i, (size_t)mem) != 0) {
			fprintf(stderr, "fakecuda: mapping %lld bytes for device %d: %s\n", mem, i,
				strerror(errno));
			for (int j = 0; j < i; j++) {
				munmap((void *)G.dev[j].dbase, G.dev[j].size);
				munmap(G.dev[j].rw, G.dev[j].size);
				close(G.dev[j].fd);
				free(G.dev[j].blocks);
				G.dev[j].blocks = NULL;
			}
			fc_unlock();
			return CUDA_ERROR_OUT_OF_MEMORY;
		}
	}
	G.ndev = (int)ndev;
	G.memsize = (size_t)mem;
	G.driver_version = (int)ver;
	G.no_peer = env_flag("FAKECUDA_NO_PEER");
	__atomic_store_n(&G.inited, 1, __ATOMIC_RELEASE);
	fc_unlock();
	return CUDA_SUCCESS;
}

/* Works before cuInit, as the real driver's does. */
API CUresult cuDriverGetVersion(int *v)
{
	if (!v)
		return CUDA_ERROR_INVALID_VALUE;
	fc_lock();
	long long ver = G.driver_version;
	if (!G.inited && env_ll("FAKECUDA_DRIVER_VERSION", 12040, &ver))
		ver = 12040;
	fc_unlock();
	*v = (int)ver;
	return CUDA_SUCCESS;
}

/* ---- devices ---- */

/* Checks a device ordinal for the device-query functions. G.mu held. */
static CUresult dev_check(CUdevice d)
{
	if (d < 0 || d >= G.ndev)
		return CUDA_ERROR_INVALID_DEVICE;
	if (G.dev[d].lost)
		return CUDA_ERROR_DEVICE_UNAVAILABLE;
	return CUDA_SUCCESS;
}

#define DEV_ENTER(d)                      \
	CUresult r_ = fc_enter();         \
	if (r_)                           \
		return r_;                \
	fc_lock();                        \
	r_ = dev_check(d);                \
	if (r_) {                         \
		fc_unlock();              \
		return r_;                \
	}

API CUresult cuDeviceGetCount(int *n)
{
	CUresult r = fc_enter();
	if (r)
		return r;
	if (!n)
		return CUDA_ERROR_INVALID_VALUE;
	*n = G.ndev;
	return CUDA_SUCCESS;
}

API CUresult cuDeviceGet(CUdevice *d, int ordinal)
{
	CUresult r = fc_enter();
	if (r)
		return r;
	if (!d)
		return CUDA_ERROR_INVALID_VALUE;
	fc_lock();
	r = dev_check(ordinal);
	fc_unlock();
	if (r)
		return r;
	*d = ordinal;
	return CUDA_SUCCESS;
}

static void copy_str(char *dst, int len, const char *src)
{
	size_t n = strlen(src);
	if (n > (size_t)len - 1)
		n = (size_t)len - 1;
	memcpy(dst, src, n);
	dst[n] = 0;
}

API CUresult cuDeviceGetName(char *name, int len, CUdevice d)
{
	DEV_ENTER(d);
	fc_unlock();
	if (!name || len <= 0)
		return CUDA_ERROR_INVALID_VALUE;
	char buf[64];
	snprintf(buf, sizeof buf, "Fake CUDA Device %d", d);
	copy_str(name, len, buf);
	return CUDA_SUCCESS;
}

static int pci_bus(int d) { return 0x18 + 8 * d; }

API CUresult cuDeviceGetUuid_v2(CUuuid *uuid, CUdevice d)
{
	DEV_ENTER(d);
	fc_unlock();
	if (!uuid)
		return CUDA_ERROR_INVALID_VALUE;
	static const char prefix[12] = {'f', 'a', 'k', 'e', 'c', 'u', 'd', 'a', 0x4f, 0x2a, 0x91, 0x07};
	memcpy(uuid->bytes, prefix, 12);
	uuid->bytes[12] = 0;
	uuid->bytes[13] = 0;
	uuid->bytes[14] = (char)(d >> 8);
	uuid->bytes[15] = (char)(d & 0xff);
	return CUDA_SUCCESS;
}

API CUresult cuDeviceTotalMem_v2(size_t *bytes, CUdevice d)
{
	DEV_ENTER(d);
	fc_unlock();
	if (!bytes)
		return CUDA_ERROR_INVALID_VALUE;
	*bytes = G.memsize;
	return CUDA_SUCCESS;
}

API CUresult cuDeviceGetAttribute(int *v, int attrib, CUdevice d)
{
	DEV_ENTER(d);
	fc_unlock();
	if (!v)
		return CUDA_ERROR_INVALID_VALUE;
	int x;
	switch (attrib) {
	case 1: x = 1024; break;         /* MAX_THREADS_PER_BLOCK */
	case 2: x = 1024; break;         /* MAX_BLOCK_DIM_X */
	case 3: x = 1024; break;         /* MAX_BLOCK_DIM_Y */
	case 4: x = 64; break;           /* MAX_BLOCK_DIM_Z */
	case 5: x = 2147483647; break;   /* MAX_GRID_DIM_X */
	case 6: x = 65535; break;        /* MAX_GRID_DIM_Y */
	case 7: x = 65535; break;        /* MAX_GRID_DIM_Z */
	case 8: x = 49152; break;        /* MAX_SHARED_MEMORY_PER_BLOCK */
	case 10: x = 32; break;          /* WARP_SIZE */
	case 16: x = 132; break;         /* MULTIPROCESSOR_COUNT */
	case 19: x = 1; break;           /* CAN_MAP_HOST_MEMORY */
	case 20: x = 0; break;           /* COMPUTE_MODE: default */
	case 31: x = 1; break;           /* CONCURRENT_KERNELS */
	case 33: x = pci_bus(d); break;  /* PCI_BUS_ID */
	case 34: x = 0; break;           /* PCI_DEVICE_ID */
	case 41: x = 1; break;           /* UNIFIED_ADDRESSING */
	case 50: x = 0; break;           /* PCI_DOMAIN_ID */
	case 75: x = 9; break;           /* COMPUTE_CAPABILITY_MAJOR */
	case 76: x = 0; break;           /* COMPUTE_CAPABILITY_MINOR */
	case 83: x = 1; break;           /* MANAGED_MEMORY */
	case 89: x = 1; break;           /* CONCURRENT_MANAGED_ACCESS */
	default: return CUDA_ERROR_INVALID_VALUE;
	}
	*v = x;
	return CUDA_SUCCESS;
}

API CUresult cuDeviceGetPCIBusId(char *id, int len, CUdevice d)
{
	DEV_ENTER(d);
	fc_unlock();
	if (!id || len <= 0)
		return CUDA_ERROR_INVALID_VALUE;
	char buf[32];
	snprintf(buf, sizeof buf, "0000:%02x:00.0", pci_bus(d));
	copy_str(id, len, buf);
	return CUDA_SUCCESS;
}

API CUresult cuDeviceCanAccessPeer(int *can, CUdevice d, CUdevice peer)
{
	DEV_ENTER(d);
	r_ = dev_check(peer);
	fc_unlock();
	if (r_)
		return r_;
	if (!can)
		return CUDA_ERROR_INVALID_VALUE;
	*can = (d != peer && !G.no_peer) ? 1 : 0;
	return CUDA_SUCCESS;
}

/* ---- primary contexts ---- */

API CUresult cuDevicePrimaryCtxRetain(CUcontext *ctx, CUdevice d)
{
	DEV_ENTER(d);
	if (!ctx) {
		fc_unlock();
		return CUDA_ERROR_INVALID_VALUE;
	}
	G.dev[d].ctx.refcount++;
	*ctx = &G.dev[d].ctx;
	fc_unlock();
	return CUDA_SUCCESS;
}

/* Resets a primary context whose last reference was released: the sticky
 * error and peer mappings go, and every object still alive in it is
 * destroyed and counted as leaked. */
static void ctx_reset(fc_ctx *c)
{
	unsigned old = c->gen;
	c->gen++;
	c->sticky = 0;
	memset(c->peer, 0, sizeof c->peer);
	for (int i = 0; i < G.ndev; i++)
		G.dev[i].ctx.peer[c->dev] = 0;
	fc_wake_all();
	/* Each of these drops and retakes G.mu as needed. */
	fc_destroy_ctx_streams(c, old);
	fc_destroy_ctx_modules(c, old);
	fc_destroy_ctx_memory(c, old);
	fc_destroy_ctx_ipc(c, old);
	/* Events after streams: queued records hold references. */
	for (fc_event **pp = &G.events; *pp;) {
		fc_event *e = *pp;
		if (e->ctx == c && e->ctxgen == old) {
			*pp = e->next;
			e->dead = 1;
			G.n_events--;
			G.n_leaked++;
			fc_event_unref(e);
		} else {
			pp = &e->next;
		}
	}
	fc_wake_all();
}

/* Performs the release even on a lost device (so references never get
 * stuck), but reports the loss. */
API CUresult cuDevicePrimaryCtxRelease_v2(CUdevice d)
{
	CUresult r = fc_enter();
	if (r)
		return r;
	fc_lock();
	if (d < 0 || d >= G.ndev) {
		fc_unlock();
		return CUDA_ERROR_INVALID_DEVICE;
	}
	fc_ctx *c = &G.dev[d].ctx;
	if (c->refcount == 0) {
		fc_unlock();
		return CUDA_ERROR_INVALID_CONTEXT;
	}
	if (--c->refcount == 0)
		ctx_reset(c);
	r = G.dev[d].lost ? CUDA_ERROR_DEVICE_UNAVAILABLE : CUDA_SUCCESS;
	fc_unlock();
	return r;
}

API CUresult cuCtxSetCurrent(CUcontext ctx)
{
	CUresult r = fc_enter();
	if (r)
		return r;
	if (ctx && !fc_valid_ctx(ctx))
		return CUDA_ERROR_INVALID_CONTEXT;
	fc_tls_ctx = ctx;
	return CUDA_SUCCESS;
}

API CUresult cuCtxGetCurrent(CUcontext *ctx)
{
	CUresult r = fc_enter();
	if (r)
		return r;
	if (!ctx)
		return CUDA_ERROR_INVALID_VALUE;
	*ctx = fc_tls_ctx;
	return CUDA_SUCCESS;
}

API CUresult cuCtxSynchronize(void)
{
	fc_ctx *c;
	CUresult r = fc_enter_ctx(&c);
	if (r)
		return r;
	unsigned gen = c->gen;
	for (;;) {
		r = fc_ctx_state(c, gen);
		if (r)
			break;
		int busy = 0;
		for (fc_stream *s = G.streams; s; s = s->next)
			if (s->ctx == c && s->ctxgen == gen && (s->head || s->running))
				busy = 1;
		if (!busy)
			break;
		fc_wait();
	}
	fc_unlock();
	return r;
}

API CUresult cuCtxEnablePeerAccess(CUcontext peer, unsigned flags)
{
	fc_ctx *c;
	CUresult r = fc_enter_ctx(&c);
	if (r)
		return r;
	if (flags != 0) {
		r = CUDA_ERROR_INVALID_VALUE;
		goto out;
	}
	if (!peer || !fc_valid_ctx(peer) || peer->refcount == 0) {
		r = CUDA_ERROR_INVALID_CONTEXT;
		goto out;
	}
	if (G.dev[peer->dev].lost) {
		r = CUDA_ERROR_DEVICE_UNAVAILABLE;
		goto out;
	}
	if (peer->dev == c->dev || G.no_peer) {
		r = CUDA_ERROR_PEER_ACCESS_UNSUPPORTED;
		goto out;
	}
	if (c->peer[peer->dev]) {
		r = CUDA_ERROR_PEER_ACCESS_ALREADY_ENABLED;
		goto out;
	}
	c->peer[peer->dev] = 1;
out:
	fc_unlock();
	return r;
}

/* ---- error names ---- */

static const struct {
	CUresult code;
	const char *name, *text;
} errtab[] = {
	{0, "CUDA_SUCCESS", "no error"},
	{1, "CUDA_ERROR_INVALID_VALUE", "invalid argument"},
	{2, "CUDA_ERROR_OUT_OF_MEMORY", "out of memory"},
	{3, "CUDA_ERROR_NOT_INITIALIZED", "initialization error"},
	{4, "CUDA_ERROR_DEINITIALIZED", "driver shutting down"},
	{34, "CUDA_ERROR_STUB_LIBRARY", "CUDA driver is a stub library"},
	{35, "CUDA_ERROR_INSUFFICIENT_DRIVER", "CUDA driver version is insufficient for CUDA runtime version"},
	{46, "CUDA_ERROR_DEVICE_UNAVAILABLE", "CUDA-capable device(s) is/are busy or unavailable"},
	{100, "CUDA_ERROR_NO_DEVICE", "no CUDA-capable device is detected"},
	{101, "CUDA_ERROR_INVALID_DEVICE", "invalid device ordinal"},
	{200, "CUDA_ERROR_INVALID_IMAGE", "device kernel image is invalid"},
	{201, "CUDA_ERROR_INVALID_CONTEXT", "invalid device context"},
	{214, "CUDA_ERROR_ECC_UNCORRECTABLE", "uncorrectable ECC error encountered"},
	{217, "CUDA_ERROR_PEER_ACCESS_UNSUPPORTED", "peer access is not supported between these two devices"},
	{218, "CUDA_ERROR_INVALID_PTX", "a PTX JIT compilation failed"},
	{400, "CUDA_ERROR_INVALID_HANDLE", "invalid resource handle"},
	{500, "CUDA_ERROR_NOT_FOUND", "named symbol not found"},
	{600, "CUDA_ERROR_NOT_READY", "device not ready"},
	{700, "CUDA_ERROR_ILLEGAL_ADDRESS", "an illegal memory access was encountered"},
	{701, "CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES", "too many resources requested for launch"},
	{704, "CUDA_ERROR_PEER_ACCESS_ALREADY_ENABLED", "peer access is already enabled"},
	{705, "CUDA_ERROR_PEER_ACCESS_NOT_ENABLED", "peer access has not been enabled"},
	{709, "CUDA_ERROR_CONTEXT_IS_DESTROYED", "context is destroyed"},
	{714, "CUDA_ERROR_HARDWARE_STACK_ERROR", "hardware stack error"},
	{715, "CUDA_ERROR_ILLEGAL_INSTRUCTION", "an illegal instruction was encountered"},
	{716, "CUDA_ERROR_MISALIGNED_ADDRESS", "misaligned address"},
	{718, "CUDA_ERROR_INVALID_PC", "invalid program counter"},
	{719, "CUDA_ERROR_LAUNCH_FAILED", "unspecified launch failure"},
	{800, "CUDA_ERROR_NOT_PERMITTED", "operation not permitted"},
	{801, "CUDA_ERROR_NOT_SUPPORTED", "operation not supported"},
	{999, "CUDA_ERROR_UNKNOWN", "unknown error"},
};

/* Looks r up in errtab for cuGetErrorName (text 0) and cuGetErrorString
 * (text 1): its name or its description in *s, or NULL and an invalid
 * value for a code the table lacks. */
static CUresult err_lookup(CUresult r, const char **s, int text)
{
	if (!s)
		return CUDA_ERROR_INVALID_VALUE;
	for (size_t i = 0; i < sizeof errtab / sizeof errtab[0]; i++)
		if (errtab[i].code == r) {
			*s = text ? errtab[i].text : errtab[i].name;
			return CUDA_SUCCESS;
		}
	*s = NULL;
	return CUDA_ERROR_INVALID_VALUE;
}

API CUresult cuGetErrorName(CUresult r, const char **s) { return err_lookup(r, s, 0); }

API CUresult cuGetErrorString(CUresult r, const char **s) { return err_lookup(r, s, 1); }

/* ---- test controls ---- */

API void fakecuda_inject(int kind, int device, int count)
{
	if (device < 0 || device >= FC_MAXDEV)
		return;
	if (count <= 0)
		count = 1;
	fc_lock();
	fc_device *d = &G.dev[device];
	switch (kind) {
	case 1:
		d->inj_oom += count;
		break;
	case 2:
		d->inj_launch += count;
		break;
	case 3:
		d->inj_illegal += count;
		break;
	case 4:
		d->lost = 1;
		/* The device's context is gone for good: its work is dropped
		 * and every wait ends, reporting the loss. */
		fc_set_sticky(&d->ctx, d->ctx.gen, CUDA_ERROR_DEVICE_UNAVAILABLE);
		fc_wake_all();
		break;
	case 5:
		d->inj_copy += count;
		break;
	default:
		break;
	}
	fc_unlock();
}

API void fakecuda_reset(void)
{
	fc_lock();
	for (int i = 0; i < FC_MAXDEV; i++) {
		fc_device *d = &G.dev[i];
		d->inj_oom = d->inj_launch = d->inj_illegal = d->inj_copy = 0;
		d->lost = 0;
	}
	fc_wake_all();
	fc_unlock();
}

API void fakecuda_stats(long long *out, int n)
{
	if (!out || n <= 0)
		return;
	long long v[14];
	fc_lock();
	long long bytes = 0, refs = 0;
	for (int i = 0; i < G.ndev; i++) {
		bytes += (long long)G.dev[i].requested;
		refs += G.dev[i].ctx.refcount;
	}
	v[0] = G.n_devallocs;
	v[1] = bytes;
	v[2] = G.n_pinned;
	v[3] = G.n_managed;
	v[4] = G.n_streams;
	v[5] = G.n_events;
	v[6] = G.n_modules;
	v[7] = refs;
	v[8] = G.n_leaked;
	v[9] = G.n_launches;
	v[10] = G.n_async_copies;
	v[11] = G.n_ipc_maps;
	v[12] = G.n_ipc_opens;
	v[13] = G.n_ipc_exports;
	fc_unlock();
	for (int i = 0; i < n; i++)
		out[i] = i < 14 ? v[i] : 0;
}

/* One device's counters: live device allocations, their requested bytes,
 * primary-context references, kernels executed in its context. Zeros for
 * a device the fake does not have. */
API void fakecuda_device_stats(int device, long long *out, int n)
{
	if (!out || n <= 0)
		return;
	long long v[4] = {0, 0, 0, 0};
	fc_lock();
	if (device >= 0 && device < G.ndev) {
		fc_device *d = &G.dev[device];
		for (fc_block *b = d->blocks; b; b = b->next)
			if (b->used && !b->dying)
				v[0]++;
		v[1] = (long long)d->requested;
		v[2] = d->ctx.refcount;
		v[3] = d->n_launches;
	}
	fc_unlock();
	for (int i = 0; i < n; i++)
		out[i] = i < 4 ? v[i] : 0;
}
