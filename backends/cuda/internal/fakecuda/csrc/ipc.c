/*
 * fakecuda IPC: device memory shared between processes of one machine
 * (cuIpcGetMemHandle, cuIpcOpenMemHandle(_v2), cuIpcCloseMemHandle).
 *
 * Device memory is a memfd per device. The first export creates the
 * process's IPC table, a memfd too: a per-process random secret, the fd
 * numbers of the device memfds, and one slot per exported allocation
 * (serial, offset, size, device, live). A handle (64 bytes) names the
 * machine (the kernel's boot id), the exporting process, its table's fd,
 * the slot and the serial, and carries a MAC keyed by the secret and a
 * checksum of the rest:
 *
 *   0  "fcIP"   4 version   5 device   6..7 zero
 *   8  boot id (16 bytes)
 *   24 pid      28 table fd   32 slot   36..39 zero
 *   40 serial (8)   48 MAC (8)   56 checksum (8)
 *
 * An importer opens /proc/<pid>/fd/<n> of the table and of the device
 * memfd (which needs the rights to inspect the exporter, as a debugger's
 * read access does), checks the MAC with the secret it finds there and
 * the slot's serial, and maps the allocation's pages twice at fresh
 * addresses: PROT_NONE for the host (what the open returns) and
 * read-write for the fake's copies. Every later copy, memset and kernel
 * through the mapping checks the slot: once the exporter has freed the
 * allocation, they fault with CUDA_ERROR_ILLEGAL_ADDRESS, sticky.
 */
#include "fakecuda.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

#define TAB_MAGIC "fcIPCtb1"
#define H_MAGIC "fcIP"
#define H_VERSION 1

/* The exporting process's table, shared read-only with importers. */
typedef struct fc_ipc_table {
	char magic[8];
	uint64_t secret[2];
	int32_t pid;
	int32_t nslots;
	int32_t devfd[FC_MAXDEV];
	fc_ipc_slot slot[FC_IPC_SLOTS];
} fc_ipc_table;

/* ---- the handle ---- */

static void put32(unsigned char *p, uint32_t v) { memcpy(p, &v, 4); }
static void put64(unsigned char *p, uint64_t v) { memcpy(p, &v, 8); }
static uint32_t get32(const unsigned char *p)
{
	uint32_t v;
	memcpy(&v, p, 4);
	return v;
}
static uint64_t get64(const unsigned char *p)
{
	uint64_t v;
	memcpy(&v, p, 8);
	return v;
}

static uint64_t mix(uint64_t z)
{
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
	return z ^ (z >> 31);
}

/* The MAC of the first 48 bytes of a handle, keyed by the exporter's
 * secret. */
static uint64_t mac(const unsigned char *h, const uint64_t secret[2])
{
	uint64_t a = secret[0];
	for (int i = 0; i < 48; i += 8)
		a = mix(a ^ get64(h + i) ^ secret[1]);
	return mix(a ^ secret[1]);
}

/* FNV-1a of the first 56 bytes: any flipped byte shows. */
static uint64_t checksum(const unsigned char *h)
{
	uint64_t x = 0xcbf29ce484222325ULL;
	for (int i = 0; i < 56; i++) {
		x ^= h[i];
		x *= 0x100000001b3ULL;
	}
	return x;
}

/* This machine's boot id, 16 bytes (zeros if the kernel does not say). */
static void boot_id(unsigned char out[16])
{
	static unsigned char id[16];
	static int have;
	if (!have) {
		char buf[64] = {0};
		FILE *f = fopen("/proc/sys/kernel/random/boot_id", "re");
		if (f) {
			if (!fgets(buf, sizeof buf, f))
				buf[0] = 0;
			fclose(f);
		}
		int n = 0;
		for (char *p = buf; *p && n < 32; p++) {
			int v;
			if (*p >= '0' && *p <= '9')
				v = *p - '0';
			else if (*p >= 'a' && *p <= 'f')
				v = *p - 'a' + 10;
			else
				continue;
			id[n / 2] = (unsigned char)(id[n / 2] << 4 | v);
			n++;
		}
		have = 1;
	}
	memcpy(out, id, 16);
}

/* ---- exporting ---- */

/* Creates this process's table on the first export. G.mu held. */
static CUresult table(fc_ipc_table **out)
{
	if (G.ipc_tab) {
		*out = G.ipc_tab;
		return CUDA_SUCCESS;
	}
	int fd = memfd_create("fakecuda-ipc", MFD_CLOEXEC);
	if (fd < 0)
		return CUDA_ERROR_OUT_OF_MEMORY;
	if (ftruncate(fd, (off_t)sizeof(fc_ipc_table)) != 0) {
		close(fd);
		return CUDA_ERROR_OUT_OF_MEMORY;
	}
	fc_ipc_table *t = mmap(NULL, sizeof *t, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	if (t == MAP_FAILED) {
		close(fd);
		return CUDA_ERROR_OUT_OF_MEMORY;
	}
	if (getrandom(t->secret, sizeof t->secret, 0) != (ssize_t)sizeof t->secret) {
		munmap(t, sizeof *t);
		close(fd);
		return CUDA_ERROR_UNKNOWN;
	}
	t->pid = (int32_t)getpid();
	t->nslots = FC_IPC_SLOTS;
	for (int d = 0; d < G.ndev; d++)
		t->devfd[d] = G.dev[d].fd;
	memcpy(t->magic, TAB_MAGIC, 8);
	G.ipc_tab = t;
	G.ipc_tabfd = fd;
	*out = t;
	return CUDA_SUCCESS;
}

/* Takes the handle of the allocation whose base is p: the same handle for
 * every call until the allocation is freed, a new one (a new serial) for
 * a new allocation, even at the same address. */
API CUresult cuIpcGetMemHandle(CUipcMemHandle *h, CUdeviceptr p)
{
	fc_ctx *c;
	CUresult r = fc_enter_ctx(&c);
	if (r)
		return r;
	fc_range rg;
	fc_lookup((uintptr_t)p, 1, &rg);
	fc_block *b = rg.kind == R_DEV ? rg.obj : NULL;
	if (!h || !b || G.dev[rg.dev].dbase + b->off != p) {
		fc_unlock();
		return CUDA_ERROR_INVALID_VALUE;
	}
	fc_ipc_table *t;
	r = table(&t);
	if (r) {
		fc_unlock();
		return r;
	}
	if (!b->ipc) {
		int i;
		for (i = 0; i < t->nslots && t->slot[i].serial; i++)
			;
		if (i == t->nslots) {
			fc_unlock();
			return CUDA_ERROR_OUT_OF_MEMORY;
		}
		fc_ipc_slot *s = &t->slot[i];
		s->serial = ++G.ipc_serial;
		s->off = b->off;
		s->size = b->req;
		s->dev = rg.dev;
		__atomic_store_n(&s->live, 1, __ATOMIC_RELEASE);
		b->ipc = i + 1;
		G.n_ipc_exports++;
	}
	fc_ipc_slot *s = &t->slot[b->ipc - 1];
	unsigned char k[CU_IPC_HANDLE_SIZE];
	memset(k, 0, sizeof k);
	memcpy(k, H_MAGIC, 4);
	k[4] = H_VERSION;
	k[5] = (unsigned char)rg.dev;
	boot_id(k + 8);
	put32(k + 24, (uint32_t)t->pid);
	put32(k + 28, (uint32_t)G.ipc_tabfd);
	put32(k + 32, (uint32_t)(b->ipc - 1));
	put64(k + 40, s->serial);
	put64(k + 48, mac(k, t->secret));
	put64(k + 56, checksum(k));
	fc_unlock();
	memcpy(h->reserved, k, sizeof k);
	return CUDA_SUCCESS;
}

/* The allocation b is being freed: importers' mappings of it go stale and
 * its slot is free for another export. G.mu held. */
void fc_ipc_unexport(fc_block *b)
{
	if (!b->ipc)
		return;
	fc_ipc_table *t = G.ipc_tab;
	fc_ipc_slot *s = &t->slot[b->ipc - 1];
	__atomic_store_n(&s->live, 0, __ATOMIC_RELEASE);
	s->serial = 0;
	b->ipc = 0;
	G.n_ipc_exports--;
}

/* ---- importing ---- */

int fc_ipc_stale(const fc_ipcmap *m)
{
	return !__atomic_load_n(&m->slot->live, __ATOMIC_ACQUIRE) ||
	       __atomic_load_n(&m->slot->serial, __ATOMIC_ACQUIRE) != m->serial;
}

int fc_ipc_in_view(uintptr_t addr)
{
	for (fc_ipcmap *m = G.ipcmaps; m; m = m->next)
		if (!m->dying && addr >= m->dbase && addr - m->dbase < m->maplen)
			return 1;
	return 0;
}

int fc_ipc_lookup(uintptr_t addr, size_t n, fc_range *r)
{
	for (fc_ipcmap *m = G.ipcmaps; m; m = m->next) {
		if (m->dying || addr < m->dbase || addr - m->dbase >= m->maplen)
			continue;
		r->in_region = 1;
		if (addr < m->ptr || addr - m->ptr >= m->size)
			return 0;
		r->kind = R_IPC;
		r->dev = m->ctx->dev;
		r->obj = m;
		r->rw = m->rw + (addr - m->dbase);
		size_t off = addr - m->ptr;
		return n <= m->size - off;
	}
	return 0;
}

static int open_peer_fd(int32_t pid, int32_t fd, int flags)
{
	char path[64];
	snprintf(path, sizeof path, "/proc/%d/fd/%d", (int)pid, (int)fd);
	return open(path, flags | O_CLOEXEC);
}

/* Maps the allocation a checked handle names; the caller holds G.mu.
 * Returns the driver's answer for what went wrong (see doc.go). */
static CUresult map_handle(fc_ctx *c, const unsigned char *k, unsigned flags, fc_ipcmap **out)
{
	int32_t pid = (int32_t)get32(k + 24), tabfd = (int32_t)get32(k + 28);
	uint32_t slot = get32(k + 32);
	uint64_t serial = get64(k + 40);
	int dev = k[5];
	int fd = open_peer_fd(pid, tabfd, O_RDONLY);
	if (fd < 0)
		return CUDA_ERROR_NOT_FOUND; /* the exporter is gone */
	struct stat st;
	if (fstat(fd, &st) != 0 || (size_t)st.st_size < sizeof(fc_ipc_table)) {
		close(fd);
		return CUDA_ERROR_INVALID_VALUE;
	}
	fc_ipc_table *t = mmap(NULL, sizeof *t, PROT_READ, MAP_SHARED, fd, 0);
	close(fd);
	if (t == MAP_FAILED)
		return CUDA_ERROR_OUT_OF_MEMORY;
	CUresult r = CUDA_SUCCESS;
	if (memcmp(t->magic, TAB_MAGIC, 8) != 0 || t->pid != pid || get64(k + 48) != mac(k, t->secret) ||
	    slot >= (uint32_t)t->nslots || dev >= FC_MAXDEV)
		r = CUDA_ERROR_INVALID_VALUE; /* forged */
	else if (__atomic_load_n(&t->slot[slot].serial, __ATOMIC_ACQUIRE) != serial ||
		 !__atomic_load_n(&t->slot[slot].live, __ATOMIC_ACQUIRE))
		r = CUDA_ERROR_INVALID_HANDLE; /* freed */
	else if (dev != c->dev && G.no_peer)
		r = CUDA_ERROR_PEER_ACCESS_UNSUPPORTED;
	else if (dev != c->dev && !(flags & CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS) && !c->peer[dev])
		r = CUDA_ERROR_PEER_ACCESS_NOT_ENABLED;
	if (r) {
		munmap(t, sizeof *t);
		return r;
	}
	const fc_ipc_slot *s = &t->slot[slot];
	size_t page = (size_t)sysconf(_SC_PAGESIZE);
	size_t lo = s->off / page * page;
	size_t maplen = (s->off + s->size - lo + page - 1) / page * page;
	int mfd = open_peer_fd(pid, t->devfd[dev], O_RDWR);
	if (mfd < 0) {
		munmap(t, sizeof *t);
		return CUDA_ERROR_NOT_FOUND;
	}
	void *none = mmap(NULL, maplen, PROT_NONE, MAP_SHARED | MAP_NORESERVE, mfd, (off_t)lo);
	void *rw = none == MAP_FAILED ? MAP_FAILED
				      : mmap(NULL, maplen, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_NORESERVE, mfd, (off_t)lo);
	close(mfd);
	fc_ipcmap *m = calloc(1, sizeof *m);
	if (none == MAP_FAILED || rw == MAP_FAILED || !m) {
		if (none != MAP_FAILED)
			munmap(none, maplen);
		if (rw != MAP_FAILED)
			munmap(rw, maplen);
		free(m);
		munmap(t, sizeof *t);
		return CUDA_ERROR_OUT_OF_MEMORY;
	}
	m->ctx = c;
	m->ctxgen = c->gen;
	memcpy(m->handle, k, CU_IPC_HANDLE_SIZE);
	m->dbase = (uintptr_t)none;
	m->rw = rw;
	m->maplen = maplen;
	m->ptr = (uintptr_t)none + (s->off - lo);
	m->size = s->size;
	m->slot = s;
	m->serial = serial;
	m->tab = t;
	m->tablen = sizeof *t;
	m->refs = 1;
	*out = m;
	return CUDA_SUCCESS;
}

/* Opens a handle another process of this machine took, in the current
 * context. A handle already open in this context is counted again and
 * its address returned (as the real driver does). */
API CUresult cuIpcOpenMemHandle_v2(CUdeviceptr *p, CUipcMemHandle h, unsigned flags)
{
	fc_ctx *c;
	CUresult r = fc_enter_ctx(&c);
	if (r)
		return r;
	const unsigned char *k = (const unsigned char *)h.reserved;
	unsigned char boot[16];
	boot_id(boot);
	if (!p || (flags & ~(unsigned)CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS) || memcmp(k, H_MAGIC, 4) != 0 ||
	    k[4] != H_VERSION)
		r = CUDA_ERROR_INVALID_VALUE;
	else if (memcmp(k + 8, boot, 16) != 0)
		r = CUDA_ERROR_INVALID_DEVICE; /* another machine's */
	else if (get64(k + 56) != checksum(k))
		r = CUDA_ERROR_INVALID_VALUE;
	else if ((pid_t)get32(k + 24) == getpid())
		r = CUDA_ERROR_INVALID_CONTEXT; /* the exporter's own */
	if (r) {
		fc_unlock();
		return r;
	}
	for (fc_ipcmap *m = G.ipcmaps; m; m = m->next) {
		if (m->dying || m->ctx != c || m->ctxgen != c->gen || memcmp(m->handle, k, CU_IPC_HANDLE_SIZE) != 0)
			continue;
		if (fc_ipc_stale(m)) {
			fc_unlock();
			return CUDA_ERROR_INVALID_HANDLE;
		}
		m->refs++;
		G.n_ipc_opens++;
		*p = m->ptr;
		fc_unlock();
		return CUDA_SUCCESS;
	}
	fc_ipcmap *m = NULL;
	r = map_handle(c, k, flags, &m);
	if (r == CUDA_SUCCESS) {
		m->next = G.ipcmaps;
		G.ipcmaps = m;
		G.n_ipc_maps++;
		G.n_ipc_opens++;
		*p = m->ptr;
	}
	fc_unlock();
	return r;
}

/* The name of the entry point before CUDA 11: the same call. */
API CUresult cuIpcOpenMemHandle(CUdeviceptr *p, CUipcMemHandle h, unsigned flags)
{
	return cuIpcOpenMemHandle_v2(p, h, flags);
}

/* Unmaps m, waiting until no operation executes on it. G.mu held. */
static void unmap(fc_ipcmap *m)
{
	m->dying = 1;
	while (m->busy)
		fc_wait();
	for (fc_ipcmap **pp = &G.ipcmaps; *pp; pp = &(*pp)->next)
		if (*pp == m) {
			*pp = m->next;
			break;
		}
	munmap((void *)m->dbase, m->maplen);
	munmap(m->rw, m->maplen);
	munmap(m->tab, m->tablen);
	G.n_ipc_maps--;
	free(m);
}

/* Closes one open of the mapping at p in the current context, unmapping
 * it at the last. On a failed context it still closes, then reports the
 * context's error, as the other destroying calls do. */
API CUresult cuIpcCloseMemHandle(CUdeviceptr p)
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
	CUresult state = fc_ctx_state(c, c->gen);
	fc_ipcmap *m;
	for (m = G.ipcmaps; m; m = m->next)
		if (!m->dying && m->ctx == c && m->ctxgen == c->gen && m->ptr == p)
			break;
	if (!m) {
		fc_unlock();
		return state ? state : CUDA_ERROR_INVALID_VALUE;
	}
	if (--m->refs == 0)
		unmap(m);
	fc_unlock();
	return state;
}

/* Unmaps what a reset context still had open, counting it as leaked.
 * G.mu held (dropped while waiting for busy mappings). */
void fc_destroy_ctx_ipc(fc_ctx *c, unsigned gen)
{
again:
	for (fc_ipcmap *m = G.ipcmaps; m; m = m->next)
		if (!m->dying && m->ctx == c && m->ctxgen == gen) {
			G.n_leaked++;
			unmap(m);
			goto again;
		}
}
