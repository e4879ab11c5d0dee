/*
 * fakecuda: a test double of the CUDA driver library (libcuda.so.1).
 *
 * Internal declarations shared by the translation units. Nothing here is
 * exported except the functions marked API (the driver entry points the
 * xpu CUDA backend calls, and the fakecuda_* test controls).
 *
 * Locking: one global mutex (G.mu) guards every piece of shared state;
 * one global condition variable (G.cv) is broadcast whenever anything a
 * waiter may be waiting for changes (an operation finished, a context
 * became sticky-failed or was reset, a device was lost, an allocation
 * stopped being in use). Each stream worker also has a condition variable
 * of its own on which it waits for work.
 */
#ifndef FAKECUDA_H
#define FAKECUDA_H

#define _GNU_SOURCE
#include <pthread.h>
#include <stddef.h>
#include <stdint.h>

#define API __attribute__((visibility("default")))

/* ---- driver types (defined here: no CUDA headers) ---- */
typedef int CUresult;
typedef int CUdevice;
typedef unsigned long long CUdeviceptr;
typedef struct fc_ctx *CUcontext;
typedef struct fc_stream *CUstream;
typedef struct fc_event *CUevent;
typedef struct fc_module *CUmodule;
typedef struct fc_func *CUfunction;
typedef struct {
	char bytes[16];
} CUuuid;
#define CU_IPC_HANDLE_SIZE 64
typedef struct {
	char reserved[CU_IPC_HANDLE_SIZE];
} CUipcMemHandle;
#define CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS 1

/* ---- result codes ---- */
enum {
	CUDA_SUCCESS = 0,
	CUDA_ERROR_INVALID_VALUE = 1,
	CUDA_ERROR_OUT_OF_MEMORY = 2,
	CUDA_ERROR_NOT_INITIALIZED = 3,
	CUDA_ERROR_DEINITIALIZED = 4,
	CUDA_ERROR_STUB_LIBRARY = 34,
	CUDA_ERROR_INSUFFICIENT_DRIVER = 35,
	CUDA_ERROR_DEVICE_UNAVAILABLE = 46,
	CUDA_ERROR_NO_DEVICE = 100,
	CUDA_ERROR_INVALID_DEVICE = 101,
	CUDA_ERROR_INVALID_IMAGE = 200,
	CUDA_ERROR_INVALID_CONTEXT = 201,
	CUDA_ERROR_ECC_UNCORRECTABLE = 214,
	CUDA_ERROR_PEER_ACCESS_UNSUPPORTED = 217,
	CUDA_ERROR_INVALID_PTX = 218,
	CUDA_ERROR_INVALID_HANDLE = 400,
	CUDA_ERROR_NOT_FOUND = 500,
	CUDA_ERROR_NOT_READY = 600,
	CUDA_ERROR_ILLEGAL_ADDRESS = 700,
	CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES = 701,
	CUDA_ERROR_PEER_ACCESS_ALREADY_ENABLED = 704,
	CUDA_ERROR_PEER_ACCESS_NOT_ENABLED = 705,
	CUDA_ERROR_CONTEXT_IS_DESTROYED = 709,
	CUDA_ERROR_HARDWARE_STACK_ERROR = 714,
	CUDA_ERROR_ILLEGAL_INSTRUCTION = 715,
	CUDA_ERROR_MISALIGNED_ADDRESS = 716,
	CUDA_ERROR_INVALID_PC = 718,
	CUDA_ERROR_LAUNCH_FAILED = 719,
	CUDA_ERROR_NOT_PERMITTED = 800,
	CUDA_ERROR_NOT_SUPPORTED = 801,
	CUDA_ERROR_UNKNOWN = 999,
};

/* ---- limits of the fake ---- */
#define FC_MAXDEV 16
#define FC_ALIGN 256
#define FC_MAXARGS 8

/* ---- device memory ---- */

/* A block of a device's region: used or free, in address order. */
typedef struct fc_block {
	struct fc_block *prev, *next;
	size_t off, size;  /* reserved extent, FC_ALIGN multiple */
	size_t req;        /* bytes the caller asked for (used blocks) */
	int used;
	int dying;         /* being freed: no longer live for lookups */
	int busy;          /* operations executing on it right now */
	struct fc_ctx *ctx;
	unsigned ctxgen;
	int ipc;           /* exported: its slot in the IPC table + 1; 0: not */
} fc_block;

/* A pinned (cuMemHostAlloc) or managed (cuMemAllocManaged) host range. */
enum { HOST_PINNED = 1, HOST_MANAGED = 2 };
typedef struct fc_hostalloc {
	struct fc_hostalloc *next;
	uintptr_t base;
	size_t len, maplen;
	int kind;
	int dying, busy;
	struct fc_ctx *ctx;
	unsigned ctxgen;
} fc_hostalloc;

/* ---- contexts and devices ---- */
typedef struct fc_ctx {
	int dev;
	int refcount;        /* primary-context retains; 0: inactive */
	unsigned gen;        /* bumped at every reset */
	CUresult sticky;     /* sticky error, 0 if healthy */
	int peer[FC_MAXDEV]; /* peer access enabled to device j */
} fc_ctx;

typedef struct fc_device {
	int fd;
	uintptr_t dbase; /* PROT_NONE view: the CUdeviceptr values */
	char *rw;        /* PROT_READ|PROT_WRITE view used by the fake */
	size_t size;
	size_t reserved; /* bytes of blocks in use (FC_ALIGN rounded) */
	size_t requested;
	fc_block *blocks;
	fc_ctx ctx; /* the primary context */
	/* injected faults */
	int inj_oom, inj_launch, inj_illegal, inj_copy;
	int lost;
	long long n_launches; /* kernels executed in its context */
} fc_device;

/* ---- events ---- */
typedef struct fc_event {
	struct fc_event *next; /* live list */
	unsigned flags;
	fc_ctx *ctx;
	unsigned ctxgen;
	int refs;      /* handle + queued operations + waiters */
	int dead;      /* handle destroyed */
	uint64_t recorded, completed;
	struct timespec ts; /* time of the latest completed record */
	int ever_recorded;
} fc_event;

/* ---- operations queued on streams ---- */
enum {
	OP_COPY = 1,
	OP_MEMSET,
	OP_KERNEL,
	OP_RECORD,
	OP_WAIT,
};

/* One side of a copy: a unified address looked up in the allocation
 * tables when the operation executes, or a raw host pointer (pageable
 * memory; the fake's own staging buffer or a caller that is waiting). */
typedef struct fc_ep {
	int raw;
	uintptr_t addr;
} fc_ep;

struct fc_kdef;

typedef struct fc_waiter {
	int done;
	CUresult res;
} fc_waiter;

typedef struct fc_op {
	struct fc_op *next;
	int kind;
	/* copy */
	fc_ep dst, src;
	size_t n;
	void *staging;
	/* memset */
	int esz;
	uint32_t val;
	size_t count;
	/* kernel */
	const struct fc_kdef *kd;
	unsigned grid[3], block[3], shmem;
	uint64_t args[FC_MAXARGS];
	/* record / wait */
	fc_event *ev;
	uint64_t gen;
	/* a caller blocked until this operation is done (pageable DtoH) */
	fc_waiter *w;
} fc_op;

typedef struct fc_stream {
	struct fc_stream *next; /* live list */
	fc_ctx *ctx;
	unsigned ctxgen;
	unsigned flags;
	pthread_t thr;
	pthread_cond_t wcv; /* the worker waits here for work */
	fc_op *head, *tail;
	int running; /* the worker is executing an operation */
	int stop;
	int dead; /* handle destroyed */
	int refs; /* handle + waiters */
} fc_stream;

/* ---- modules ---- */
typedef struct fc_func {
	struct fc_module *m;
	char *name;
	int nparams; /* .param count in the PTX entry */
	const struct fc_kdef *kd;
} fc_func;

typedef struct fc_module {
	struct fc_module *next;
	fc_ctx *ctx;
	unsigned ctxgen;
	int nfn;
	fc_func *fns;
} fc_module;

/* ---- kernels ---- */

/* What a kernel sees while it executes. */
typedef struct fc_kexec {
	fc_ctx *ctx;
	unsigned ctxgen;
	int dev;
	const uint64_t *args;
	unsigned grid[3], block[3], shmem;
	CUresult fault;
	int nheld;
	int heldkind[2 * FC_MAXARGS];
	void *held[2 * FC_MAXARGS];
} fc_kexec;

typedef int (*fc_kfn)(fc_kexec *k);

/* A kernel the fake implements: name, parameter sizes, body. */
typedef struct fc_kdef {
	const char *name;
	int nparams;
	int psize[FC_MAXARGS];
	fc_kfn fn;
} fc_kdef;

const fc_kdef *fc_kernel_lookup(const char *name);
/* Maps [addr, addr+bytes) for a kernel: 0 and *rw on success, else the
 * kernel faults (k->fault set) and must return nonzero. */
int fc_kmap(fc_kexec *k, uint64_t addr, uint64_t bytes, void **rw);
/* Waits ns nanoseconds, returning early if the context fails. */
void fc_ksleep(fc_kexec *k, uint64_t ns);

/* ---- IPC (ipc.c) ---- */

/* One exported allocation, in the exporting process's IPC table, which
 * importers map read-only: live goes to 0 when the allocation is freed. */
typedef struct fc_ipc_slot {
	uint64_t serial; /* unique in the exporting process; 0: slot unused */
	uint64_t off;    /* offset in the device's memfd */
	uint64_t size;   /* bytes the allocation was asked for */
	int32_t dev;
	int32_t live;
} fc_ipc_slot;

#define FC_IPC_SLOTS 4096

/* A handle opened in this process: a view of another process's device
 * memfd, PROT_NONE for the host plus a read-write one for the fake. */
typedef struct fc_ipcmap {
	struct fc_ipcmap *next;
	fc_ctx *ctx;
	unsigned ctxgen;
	unsigned char handle[CU_IPC_HANDLE_SIZE];
	uintptr_t dbase; /* PROT_NONE view, page-aligned */
	char *rw;        /* read-write view of the same pages */
	size_t maplen;
	uintptr_t ptr;   /* the allocation's start: what the open returned */
	size_t size;
	const volatile fc_ipc_slot *slot; /* in the exporter's table */
	uint64_t serial;
	void *tab; /* the exporter's table, mapped read-only */
	size_t tablen;
	int refs; /* opens not yet closed */
	int busy; /* operations executing on it right now */
	int dying;
} fc_ipcmap;

/* The exporter freed the allocation m maps (or its slot was reused). */
int fc_ipc_stale(const fc_ipcmap *m);
/* The block is being freed: its export, if any, ends. G.mu held. */
void fc_ipc_unexport(fc_block *b);
void fc_destroy_ctx_ipc(fc_ctx *c, unsigned gen);

/* ---- global state ---- */
typedef struct fc_global {
	pthread_mutex_t mu;
	pthread_cond_t cv;
	int inited; /* read with atomics outside mu */
	int ndev;
	size_t memsize;
	int driver_version;
	int no_peer;
	fc_device dev[FC_MAXDEV];
	fc_hostalloc *hosts;
	fc_stream *streams;
	fc_event *events;
	fc_module *modules;
	long long n_pinned, n_managed, n_streams, n_events, n_modules;
	long long n_devallocs, n_leaked, n_launches, n_async_copies;
	/* IPC: the export table (NULL until the first export), the handles
	 * opened here, and their counters */
	void *ipc_tab;
	int ipc_tabfd;
	uint64_t ipc_serial;
	fc_ipcmap *ipcmaps;
	long long n_ipc_maps, n_ipc_opens, n_ipc_exports;
} fc_global;

extern fc_global G;
extern __thread fc_ctx *fc_tls_ctx;
extern __thread int fc_tls_worker;

/* core.c */
void fc_lock(void);
void fc_unlock(void);
void fc_wake_all(void);
void fc_wait(void);
CUresult fc_enter(void);
CUresult fc_cur_ctx(fc_ctx **out);
CUresult fc_enter_ctx(fc_ctx **c);
CUresult fc_ctx_state(fc_ctx *c, unsigned gen);
void fc_set_sticky(fc_ctx *c, unsigned gen, CUresult code);
void fc_now(struct timespec *ts);
int fc_valid_ctx(fc_ctx *c);

/* mem.c */
enum { R_NONE = 0, R_DEV = 1, R_HOST = 2, R_IPC = 3 };
typedef struct fc_range {
	int kind;       /* R_DEV, R_HOST, R_IPC; R_NONE: not in any table */
	int dev;        /* device of R_DEV; of the importing context for R_IPC */
	int in_region;  /* the address is inside a device region or mapping */
	void *obj;      /* fc_block, fc_hostalloc or fc_ipcmap */
	char *rw;       /* where the fake reads and writes the bytes */
} fc_range;
int fc_lookup(uintptr_t addr, size_t n, fc_range *r);
void fc_hold(fc_range *r);
void fc_release(int kind, void *obj);
int fc_in_any_region(uintptr_t addr);
void fc_destroy_ctx_memory(fc_ctx *c, unsigned gen);
CUresult fc_exec_copy(fc_op *op, fc_ctx *c, unsigned gen);
CUresult fc_exec_memset(fc_op *op, fc_ctx *c, unsigned gen);

/* ipc.c: fc_lookup for addresses outside the device regions: 1 when
 * [addr, addr+n) lies in one open mapping (r filled as fc_lookup does),
 * else 0 with r->in_region set when addr is inside a mapping's view. */
int fc_ipc_lookup(uintptr_t addr, size_t n, struct fc_range *r);
int fc_ipc_in_view(uintptr_t addr);

/* stream.c */
CUresult fc_submit(fc_stream *s, fc_ctx *c, fc_op *op);
CUresult fc_stream_get(CUstream s, fc_ctx *c, fc_stream **out);
void fc_destroy_ctx_streams(fc_ctx *c, unsigned gen);
void fc_event_unref(fc_event *e);
void fc_stream_unref(fc_stream *s);
void fc_free_op(fc_op *op);
CUresult fc_run_kernel(fc_op *op, fc_ctx *c, unsigned gen);

/* module.c */
void fc_destroy_ctx_modules(fc_ctx *c, unsigned gen);

#endif
