/*
 * fakecuda memory: the device allocator (first fit over a memfd region
 * mapped twice: PROT_NONE for the addresses handed out, read-write for the
 * fake), pinned and managed host memory, address lookup, copies and
 * memsets.
 */
#include "fakecuda.h"

#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

/* Fresh device allocations up to this size are filled with a poison
 * pattern so that code reading memory it never wrote sees garbage. */
#define POISON_MAX (1u << 20)
#define POISON_BYTE 0xA5

/* ---- lookup ---- */

int fc_in_any_region(uintptr_t addr)
{
	for (int d = 0; d < G.ndev; d++)
		if (addr >= G.dev[d].dbase && addr - G.dev[d].dbase < G.dev[d].size)
			return 1;
	return fc_ipc_in_view(addr);
}

static int range_fits(uintptr_t start, size_t len, uintptr_t addr, size_t n)
{
	/* [addr, addr+n) inside [start, start+len), without overflow */
	if (addr < start)
		return 0;
	size_t off = addr - start;
	return off <= len && n <= len - off;
}

/* Finds the live allocation holding [addr, addr+n): a device allocation,
 * a pinned or managed one, or a mapping of another process's allocation
 * (an IPC handle opened here). Returns 1 when the whole range lies in one
 * of them. Otherwise 0, and r->in_region or r->kind tell whether addr
 * itself is device-region or inside a live allocation (then the range is
 * bad), or neither (ordinary host memory). G.mu held. */
int fc_lookup(uintptr_t addr, size_t n, fc_range *r)
{
	memset(r, 0, sizeof *r);
	for (int d = 0; d < G.ndev; d++) {
		fc_device *dv = &G.dev[d];
		if (addr < dv->dbase || addr - dv->dbase >= dv->size)
			continue;
		r->in_region = 1;
		r->dev = d;
		size_t off = addr - dv->dbase;
		for (fc_block *b = dv->blocks; b; b = b->next) {
			if (b->off > off)
				break;
			if (!b->used || b->dying || off >= b->off + b->req)
				continue;
			r->kind = R_DEV;
			r->obj = b;
			r->rw = dv->rw + off;
			return range_fits(dv->dbase + b->off, b->req, addr, n);
		}
		return 0;
	}
	int ok = fc_ipc_lookup(addr, n, r);
	if (ok || r->in_region)
		return ok;
	for (fc_hostalloc *h = G.hosts; h; h = h->next) {
		if (h->dying || addr < h->base || addr - h->base >= h->len)
			continue;
		r->kind = R_HOST;
		r->obj = h;
		r->rw = (char *)addr;
		return range_fits(h->base, h->len, addr, n);
	}
	return 0;
}

void fc_hold(fc_range *r)
{
	if (r->kind == R_DEV)
		((fc_block *)r->obj)->busy++;
	else if (r->kind == R_HOST)
		((fc_hostalloc *)r->obj)->busy++;
	else if (r->kind == R_IPC)
		((fc_ipcmap *)r->obj)->busy++;
}

void fc_release(int kind, void *obj)
{
	int left = 1;
	if (kind == R_DEV)
		left = --((fc_block *)obj)->busy;
	else if (kind == R_HOST)
		left = --((fc_hostalloc *)obj)->busy;
	else if (kind == R_IPC)
		left = --((fc_ipcmap *)obj)->busy;
	if (left == 0)
		fc_wake_all();
}

/* ---- device allocator ---- */

static CUresult dev_alloc(fc_ctx *c, size_t n, uintptr_t *out)
{
	fc_device *dv = &G.dev[c->dev];
	if (n > dv->size)
		return CUDA_ERROR_OUT_OF_MEMORY;
	size_t size = (n + FC_ALIGN - 1) / FC_ALIGN * FC_ALIGN;
	for (fc_block *b = dv->blocks; b; b = b->next) {
		if (b->used || b->size < size)
			continue;
		if (b->size > size) {
			fc_block *rest = calloc(1, sizeof *rest);
			if (!rest)
				return CUDA_ERROR_OUT_OF_MEMORY;
			rest->off = b->off + size;
			rest->size = b->size - size;
			rest->prev = b;
			rest->next = b->next;
			if (b->next)
				b->next->prev = rest;
			b->next = rest;
			b->size = size;
		}
		b->used = 1;
		b->req = n;
		b->ctx = c;
		b->ctxgen = c->gen;
		b->busy = 0;
		b->dying = 0;
		dv->reserved += size;
		dv->requested += n;
		G.n_devallocs++;
		if (n <= POISON_MAX)
			memset(dv->rw + b->off, POISON_BYTE, n);
		*out = dv->dbase + b->off;
		return CUDA_SUCCESS;
	}
	return CUDA_ERROR_OUT_OF_MEMORY;
}

/* Returns the pages wholly inside a free block to the system. */
static void punch(fc_device *dv, fc_block *b)
{
	size_t page = (size_t)sysconf(_SC_PAGESIZE);
	size_t lo = (b->off + page - 1) / page * page;
	size_t hi = (b->off + b->size) / page * page;
	if (hi > lo)
		(void)fallocate(dv->fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, (off_t)lo,
				(off_t)(hi - lo));
}

/* Folds the free block next into b, the block before it. */
static void absorb(fc_block *b, fc_block *next)
{
	b->size += next->size;
	b->next = next->next;
	if (next->next)
		next->next->prev = b;
	free(next);
}

/* Frees a used block, waiting until no operation executes on it. */
static void block_free(fc_device *dv, fc_block *b)
{
	b->dying = 1;
	while (b->busy)
		fc_wait();
	fc_ipc_unexport(b);
	dv->reserved -= b->size;
	dv->requested -= b->req;
	G.n_devallocs--;
	b->used = 0;
	b->dying = 0;
	b->req = 0;
	b->ctx = NULL;
	fc_block *n = b->next;
	if (n && !n->used)
		absorb(b, n);
	fc_block *p = b->prev;
	if (p && !p->used) {
		absorb(p, b);
		b = p;
	}
	punch(dv, b);
}

static void host_free(fc_hostalloc *h)
{
	h->dying = 1;
	while (h->busy)
		fc_wait();
	for (fc_hostalloc **pp = &G.hosts; *pp; pp = &(*pp)->next)
		if (*pp == h) {
			*pp = h->next;
			break;
		}
	if (h->kind == HOST_PINNED)
		G.n_pinned--;
	else
		G.n_managed--;
	munmap((void *)h->base, h->maplen);
	free(h);
}

static CUresult host_alloc(fc_ctx *c, size_t n, int kind, uintptr_t *out)
{
	size_t page = (size_t)sysconf(_SC_PAGESIZE);
	if (n > SIZE_MAX - page)
		return CUDA_ERROR_OUT_OF_MEMORY;
	size_t maplen = (n + page - 1) / page * page;
	fc_hostalloc *h = calloc(1, sizeof *h);
	if (!h)
		return CUDA_ERROR_OUT_OF_MEMORY;
	void *p = mmap(NULL, maplen, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (p == MAP_FAILED) {
		free(h);
		return CUDA_ERROR_OUT_OF_MEMORY;
	}
	h->base = (uintptr_t)p;
	h->len = n;
	h->maplen = maplen;
	h->kind = kind;
	h->ctx = c;
	h->ctxgen = c->gen;
	h->next = G.hosts;
	G.hosts = h;
	if (kind == HOST_PINNED)
		G.n_pinned++;
	else
		G.n_managed++;
	*out = h->base;
	return CUDA_SUCCESS;
}

/* Frees everything a reset context still owned, counting it as leaked.
 * G.mu held (dropped while waiting for busy allocations). */
void fc_destroy_ctx_memory(fc_ctx *c, unsigned gen)
{
	fc_device *dv = &G.dev[c->dev];
again:
	for (fc_block *b = dv->blocks; b; b = b->next)
		if (b->used && !b->dying && b->ctx == c && b->ctxgen == gen) {
			G.n_leaked++;
			block_free(dv, b);
			goto again;
		}
	for (fc_hostalloc *h = G.hosts; h; h = h->next)
		if (!h->dying && h->ctx == c && h->ctxgen == gen) {
			G.n_leaked++;
			host_free(h);
			goto again;
		}
}

/* ---- allocation entry points ---- */

static int take_oom(fc_ctx *c)
{
	fc_device *dv = &G.dev[c->dev];
	if (dv->inj_oom > 0) {
		dv->inj_oom--;
		return 1;
	}
	return 0;
}

/* What the allocating entry points share after fc_enter_ctx: an invalid
 * value when bad, else an injected out-of-memory, else n bytes of device
 * memory (kind 0) or host memory of kind, its address in *a. Called with
 * G.mu held; releases it. */
static CUresult alloc_unlock(fc_ctx *c, int bad, size_t n, int kind, uintptr_t *a)
{
	CUresult r;
	if (bad)
		r = CUDA_ERROR_INVALID_VALUE;
	else if (take_oom(c))
		r = CUDA_ERROR_OUT_OF_MEMORY;
	else if (kind == 0)
		r = dev_alloc(c, n, a);
	else
		r = host_alloc(c, n, kind, a);
	fc_unlock();
	return r;
}

API CUresult cuMemAlloc_v2(CUdeviceptr *p, size_t n)
{
	fc_ctx *c;
	CUresult r = fc_enter_ctx(&c);
	if (r)
		return r;
	uintptr_t a = 0;
	r = alloc_unlock(c, !p || n == 0, n, 0, &a);
	if (r == CUDA_SUCCESS)
		*p = a;
	return r;
}

/* The start of cuMemFree_v2 and cuMemFreeHost: fc_enter, G.mu, and the
 * current context, which must be there and not destroyed but may have
 * failed: its state goes in *state, for the free goes on and then
 * reports it. On success G.mu is held; on failure it is not. */
static CUresult free_enter(CUresult *state)
{
	CUresult r = fc_enter();
	if (r)
		return r;
	fc_lock();
	fc_ctx *c = fc_tls_ctx;
	if (!c) {
		fc_unlock();
		return CUDA_ERROR_INVALID_CONTEXT;
	}
	if (c->refcount == 0) {
		fc_unlock();
		return CUDA_ERROR_CONTEXT_IS_DESTROYED;
	}
	*state = fc_ctx_state(c, c->gen);
	return CUDA_SUCCESS;
}

/* Frees a device or managed allocation. On a failed context (sticky
 * error, lost device) the memory is still freed and the error returned. */
API CUresult cuMemFree_v2(CUdeviceptr p)
{
	CUresult state;
	CUresult r = free_enter(&state);
	if (r)
		return r;
	fc_range rg;
	fc_lookup((uintptr_t)p, 1, &rg);
	if (rg.kind == R_DEV && G.dev[rg.dev].dbase + ((fc_block *)rg.obj)->off == p) {
		block_free(&G.dev[rg.dev], rg.obj);
		r = state;
	} else if (rg.kind == R_HOST && ((fc_hostalloc *)rg.obj)->kind == HOST_MANAGED &&
		   ((fc_hostalloc *)rg.obj)->base == p) {
		host_free(rg.obj);
		r = state;
	} else {
		r = state ? state : CUDA_ERROR_INVALID_VALUE;
	}
	fc_unlock();
	return r;
}

API CUresult cuMemGetInfo_v2(size_t *freeb, size_t *total)
{
	fc_ctx *c;
	CUresult r = fc_enter_ctx(&c);
	if (r)
		return r;
	fc_device *dv = &G.dev[c->dev];
	size_t f = dv->size - dv->reserved, t = dv->size;
	fc_unlock();
	if (freeb)
		*freeb = f;
	if (total)
		*total = t;
	return CUDA_SUCCESS;
}

API CUresult cuMemHostAlloc(void **p, size_t n, unsigned flags)
{
	fc_ctx *c;
	CUresult r = fc_enter_ctx(&c);
	if (r)
		return r;
	uintptr_t a = 0;
	r = alloc_unlock(c, !p || n == 0 || (flags & ~7u), n, HOST_PINNED, &a);
	if (r == CUDA_SUCCESS)
		*p = (void *)a;
	return r;
}

API CUresult cuMemFreeHost(void *p)
{
	CUresult state;
	CUresult r = free_enter(&state);
	if (r)
		return r;
	fc_hostalloc *h;
	for (h = G.hosts; h; h = h->next)
		if (!h->dying && h->kind == HOST_PINNED && h->base == (uintptr_t)p)
			break;
	if (h) {
		host_free(h);
		r = state;
	} else {
		r = state ? state : CUDA_ERROR_INVALID_VALUE;
	}
	fc_unlock();
	return r;
}

API CUresult cuMemAllocManaged(CUdeviceptr *p, size_t n, unsigned flags)
{
	fc_ctx *c;
	CUresult r = fc_enter_ctx(&c);
	if (r)
		return r;
	uintptr_t a = 0;
	r = alloc_unlock(c, !p || n == 0 || (flags != 1 && flags != 2), n, HOST_MANAGED, &a);
	if (r == CUDA_SUCCESS)
		*p = a;
	return r;
}

API CUresult cuMemHostGetDevicePointer_v2(CUdeviceptr *d, void *p, unsigned flags)
{
	fc_ctx *c;
	CUresult r = fc_enter_ctx(&c);
	if (r)
		return r;
	(void)c;
	fc_range rg;
	fc_lookup((uintptr_t)p, 1, &rg);
	if (!d || flags != 0 || rg.kind != R_HOST || ((fc_hostalloc *)rg.obj)->kind != HOST_PINNED)
		r = CUDA_ERROR_INVALID_VALUE;
	fc_unlock();
	if (r == CUDA_SUCCESS)
		*d = (CUdeviceptr)(uintptr_t)p;
	return r;
}

/* ---- executing copies and memsets ---- */

/* Resolves one side of an operation for execution, holding the
 * allocation: 1, or 0 for a range in no live allocation, or -1 for a
 * mapping of another process's allocation that its owner has freed (a
 * stale IPC mapping: the operation faults, sticky). G.mu held. */
static int resolve(fc_ep *ep, size_t n, char **p, fc_range *r)
{
	if (ep->raw) {
		memset(r, 0, sizeof *r);
		*p = (char *)ep->addr;
		return 1;
	}
	if (!fc_lookup(ep->addr, n, r))
		return 0;
	if (r->kind == R_IPC && fc_ipc_stale(r->obj))
		return -1;
	fc_hold(r);
	*p = r->rw;
	return 1;
}

/* Takes an injected copy fault of c's device, if any: the copy faults,
 * sticky on its context, as a copy that faults on a real device does.
 * G.mu held. */
static CUresult take_copy_fault(fc_ctx *c, unsigned gen)
{
	fc_device *dv = &G.dev[c->dev];
	if (dv->inj_copy <= 0)
		return CUDA_SUCCESS;
	dv->inj_copy--;
	fc_set_sticky(c, gen, CUDA_ERROR_ILLEGAL_ADDRESS);
	return CUDA_ERROR_ILLEGAL_ADDRESS;
}

CUresult fc_exec_copy(fc_op *op, fc_ctx *c, unsigned gen)
{
	if (op->n == 0)
		return CUDA_SUCCESS;
	char *d, *s;
	fc_range rd, rs;
	fc_lock();
	CUresult inj = take_copy_fault(c, gen);
	if (inj) {
		fc_unlock();
		return inj;
	}
	int ok = resolve(&op->dst, op->n, &d, &rd);
	if (ok <= 0) {
		if (ok < 0)
			fc_set_sticky(c, gen, CUDA_ERROR_ILLEGAL_ADDRESS);
		fc_unlock();
		return CUDA_ERROR_ILLEGAL_ADDRESS;
	}
	ok = resolve(&op->src, op->n, &s, &rs);
	if (ok <= 0) {
		if (ok < 0)
			fc_set_sticky(c, gen, CUDA_ERROR_ILLEGAL_ADDRESS);
		fc_release(rd.kind, rd.obj);
		fc_unlock();
		return CUDA_ERROR_ILLEGAL_ADDRESS;
	}
	fc_unlock();
	memmove(d, s, op->n);
	fc_lock();
	fc_release(rd.kind, rd.obj);
	fc_release(rs.kind, rs.obj);
	fc_unlock();
	return CUDA_SUCCESS;
}

CUresult fc_exec_memset(fc_op *op, fc_ctx *c, unsigned gen)
{
	if (op->count == 0)
		return CUDA_SUCCESS;
	size_t bytes = op->count * (size_t)op->esz;
	char *d;
	fc_range rd;
	fc_lock();
	int ok = resolve(&op->dst, bytes, &d, &rd);
	if (ok <= 0) {
		if (ok < 0)
			fc_set_sticky(c, gen, CUDA_ERROR_ILLEGAL_ADDRESS);
		fc_unlock();
		return CUDA_ERROR_ILLEGAL_ADDRESS;
	}
	fc_unlock();
	switch (op->esz) {
	case 1:
		memset(d, (int)(op->val & 0xff), op->count);
		break;
	case 2: {
		uint16_t v = (uint16_t)op->val;
		for (size_t i = 0; i < op->count; i++)
			memcpy(d + 2 * i, &v, 2);
		break;
	}
	default: {
		uint32_t v = op->val;
		for (size_t i = 0; i < op->count; i++)
			memcpy(d + 4 * i, &v, 4);
		break;
	}
	}
	fc_lock();
	fc_release(rd.kind, rd.obj);
	fc_unlock();
	return CUDA_SUCCESS;
}

/* ---- validating the sides of a copy ---- */

enum {
	M_DEV,  /* a live allocation (device, pinned or managed) */
	M_HOST, /* host memory: pinned/managed, or pageable */
	M_ANY,  /* unified addressing: any of the above */
	M_PEER, /* device memory of a given device */
};

/* Classifies [addr, addr+n) for a copy. ep->raw is set for pageable host
 * memory. G.mu held. */
static CUresult classify(uintptr_t addr, size_t n, int mode, int dev, fc_ep *ep)
{
	fc_range r;
	ep->addr = addr;
	ep->raw = 0;
	if (addr > UINTPTR_MAX - n)
		return CUDA_ERROR_INVALID_VALUE;
	int ok = fc_lookup(addr, n, &r);
	switch (mode) {
	case M_DEV:
		return ok ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
	case M_PEER:
		return ok && (r.kind == R_DEV || r.kind == R_IPC) && r.dev == dev ? CUDA_SUCCESS
										 : CUDA_ERROR_INVALID_VALUE;
	case M_HOST:
		if (ok && r.kind == R_HOST)
			return CUDA_SUCCESS;
		break;
	default:
		if (ok)
			return CUDA_SUCCESS;
		break;
	}
	/* pageable host memory, unless it touches a device region or
	 * starts inside an allocation it overruns */
	if (r.in_region || r.kind != R_NONE || fc_in_any_region(addr + n - 1) || addr == 0)
		return CUDA_ERROR_INVALID_VALUE;
	ep->raw = 1;
	return CUDA_SUCCESS;
}

/* The result of a copy the caller executed itself (a synchronous one, or
 * one on the legacy default stream) that returned r: on failure, the
 * context's error if the copy failed it (an injected fault), else an
 * invalid value (the copy raced with a free after validation). */
static CUresult copy_result(fc_ctx *c, unsigned gen, CUresult r)
{
	if (!r)
		return CUDA_SUCCESS;
	fc_lock();
	r = fc_ctx_state(c, gen);
	fc_unlock();
	return r ? r : CUDA_ERROR_INVALID_VALUE;
}

static CUresult sync_copy(uintptr_t dst, int dmode, int ddev, uintptr_t src, int smode, int sdev,
			  size_t n)
{
	fc_ctx *c;
	CUresult r = fc_enter_ctx(&c);
	if (r)
		return r;
	fc_op op;
	memset(&op, 0, sizeof op);
	if (n == 0) {
		fc_unlock();
		return CUDA_SUCCESS;
	}
	r = classify(dst, n, dmode, ddev, &op.dst);
	if (!r)
		r = classify(src, n, smode, sdev, &op.src);
	unsigned gen = c->gen;
	fc_unlock();
	if (r)
		return r;
	op.kind = OP_COPY;
	op.n = n;
	return copy_result(c, gen, fc_exec_copy(&op, c, gen));
}

API CUresult cuMemcpy(CUdeviceptr dst, CUdeviceptr src, size_t n)
{
	return sync_copy(dst, M_ANY, 0, src, M_ANY, 0, n);
}

API CUresult cuMemcpyHtoD_v2(CUdeviceptr dst, const void *src, size_t n)
{
	return sync_copy(dst, M_DEV, 0, (uintptr_t)src, M_HOST, 0, n);
}

API CUresult cuMemcpyDtoH_v2(void *dst, CUdeviceptr src, size_t n)
{
	return sync_copy((uintptr_t)dst, M_HOST, 0, src, M_DEV, 0, n);
}

API CUresult cuMemcpyDtoD_v2(CUdeviceptr dst, CUdeviceptr src, size_t n)
{
	return sync_copy(dst, M_DEV, 0, src, M_DEV, 0, n);
}

/* Checks the contexts of a peer copy. G.mu held. */
static CUresult peer_ctxs(fc_ctx *dctx, fc_ctx *sctx)
{
	if (!dctx || !sctx || !fc_valid_ctx(dctx) || !fc_valid_ctx(sctx))
		return CUDA_ERROR_INVALID_CONTEXT;
	CUresult r = fc_ctx_state(dctx, dctx->gen);
	if (!r)
		r = fc_ctx_state(sctx, sctx->gen);
	if (r == CUDA_ERROR_CONTEXT_IS_DESTROYED)
		r = CUDA_ERROR_INVALID_CONTEXT;
	return r;
}

API CUresult cuMemcpyPeer(CUdeviceptr dst, CUcontext dctx, CUdeviceptr src, CUcontext sctx, size_t n)
{
	CUresult r = fc_enter();
	if (r)
		return r;
	fc_lock();
	r = peer_ctxs(dctx, sctx);
	int dd = r ? 0 : dctx->dev, sd = r ? 0 : sctx->dev;
	fc_unlock();
	if (r)
		return r;
	return sync_copy(dst, M_PEER, dd, src, M_PEER, sd, n);
}

/* ---- asynchronous copies ---- */

static CUresult async_copy(uintptr_t dst, int dmode, int ddev, uintptr_t src, int smode, int sdev,
			   size_t n, CUstream hs, fc_ctx *dctx, fc_ctx *sctx)
{
	fc_ctx *c;
	CUresult r = fc_enter_ctx(&c);
	if (r)
		return r;
	fc_stream *s = NULL;
	fc_op *op = calloc(1, sizeof *op);
	if (!op) {
		fc_unlock();
		return CUDA_ERROR_OUT_OF_MEMORY;
	}
	op->kind = OP_COPY;
	op->n = n;
	if (dctx || sctx) {
		r = peer_ctxs(dctx, sctx);
		if (!r) {
			ddev = dctx->dev;
			sdev = sctx->dev;
		}
	}
	if (!r)
		r = fc_stream_get(hs, c, &s);
	if (!r && n != 0) {
		r = classify(dst, n, dmode, ddev, &op->dst);
		if (!r)
			r = classify(src, n, smode, sdev, &op->src);
	}
	if (r || n == 0) {
		fc_stream_unref(s);
		fc_unlock();
		free(op);
		return r;
	}
	unsigned gen = c->gen;
	fc_unlock();
	if (!s) {
		/* the legacy default stream: synchronous, in the caller */
		r = copy_result(c, gen, fc_exec_copy(op, c, gen));
		free(op);
		if (r)
			return r;
		fc_lock();
		G.n_async_copies++;
		fc_unlock();
		return CUDA_SUCCESS;
	}
	if (op->src.raw) {
		/* pageable source: snapshot it now, as the driver stages it */
		op->staging = malloc(n);
		if (!op->staging) {
			free(op);
			fc_lock();
			fc_stream_unref(s);
			fc_unlock();
			return CUDA_ERROR_OUT_OF_MEMORY;
		}
		memcpy(op->staging, (void *)src, n);
		op->src.addr = (uintptr_t)op->staging;
	}
	fc_waiter w = {0, 0};
	int wait = op->dst.raw;
	if (wait)
		op->w = &w; /* pageable destination: return when written */
	fc_lock();
	r = fc_submit(s, c, op); /* frees op on failure */
	if (r == CUDA_SUCCESS && wait) {
		while (!w.done)
			fc_wait();
		r = w.res;
	}
	fc_stream_unref(s);
	fc_unlock();
	return r;
}

API CUresult cuMemcpyAsync(CUdeviceptr dst, CUdeviceptr src, size_t n, CUstream s)
{
	return async_copy(dst, M_ANY, 0, src, M_ANY, 0, n, s, NULL, NULL);
}

API CUresult cuMemcpyHtoDAsync_v2(CUdeviceptr dst, const void *src, size_t n, CUstream s)
{
	return async_copy(dst, M_DEV, 0, (uintptr_t)src, M_HOST, 0, n, s, NULL, NULL);
}

API CUresult cuMemcpyDtoHAsync_v2(void *dst, CUdeviceptr src, size_t n, CUstream s)
{
	return async_copy((uintptr_t)dst, M_HOST, 0, src, M_DEV, 0, n, s, NULL, NULL);
}

API CUresult cuMemcpyDtoDAsync_v2(CUdeviceptr dst, CUdeviceptr src, size_t n, CUstream s)
{
	return async_copy(dst, M_DEV, 0, src, M_DEV, 0, n, s, NULL, NULL);
}

API CUresult cuMemcpyPeerAsync(CUdeviceptr dst, CUcontext dctx, CUdeviceptr src, CUcontext sctx,
			       size_t n, CUstream s)
{
	if (!dctx || !sctx) {
		CUresult r = fc_enter();
		return r ? r : CUDA_ERROR_INVALID_CONTEXT;
	}
	return async_copy(dst, M_PEER, 0, src, M_PEER, 0, n, s, dctx, sctx);
}

/* ---- memsets ---- */

static CUresult memset_common(uintptr_t p, uint32_t v, int esz, size_t count, int async, CUstream hs)
{
	fc_ctx *c;
	CUresult r = fc_enter_ctx(&c);
	if (r)
		return r;
	fc_stream *s = NULL;
	if (async) {
		r = fc_stream_get(hs, c, &s);
		if (r) {
			fc_unlock();
			return r;
		}
	}
	fc_op op;
	memset(&op, 0, sizeof op);
	op.kind = OP_MEMSET;
	op.esz = esz;
	op.val = v;
	op.count = count;
	op.dst.addr = p;
	if (count != 0) {
		fc_range rg;
		if (p % (uintptr_t)esz != 0 || count > SIZE_MAX / (size_t)esz ||
		    !fc_lookup(p, count * (size_t)esz, &rg))
			r = CUDA_ERROR_INVALID_VALUE;
	}
	if (r || count == 0) {
		if (s)
			fc_stream_unref(s);
		fc_unlock();
		return r;
	}
	if (!s) {
		unsigned gen = c->gen;
		fc_unlock();
		return copy_result(c, gen, fc_exec_memset(&op, c, gen));
	}
	fc_op *q = malloc(sizeof *q);
	if (!q) {
		fc_stream_unref(s);
		fc_unlock();
		return CUDA_ERROR_OUT_OF_MEMORY;
	}
	*q = op;
	r = fc_submit(s, c, q);
	fc_stream_unref(s);
	fc_unlock();
	return r;
}

API CUresult cuMemsetD8_v2(CUdeviceptr p, unsigned char v, size_t n)
{
	return memset_common(p, v, 1, n, 0, NULL);
}

API CUresult cuMemsetD8Async(CUdeviceptr p, unsigned char v, size_t n, CUstream s)
{
	return memset_common(p, v, 1, n, 1, s);
}

API CUresult cuMemsetD16Async(CUdeviceptr p, unsigned short v, size_t n, CUstream s)
{
	return memset_common(p, v, 2, n, 1, s);
}

API CUresult cuMemsetD32Async(CUdeviceptr p, unsigned int v, size_t n, CUstream s)
{
	return memset_common(p, v, 4, n, 1, s);
}
