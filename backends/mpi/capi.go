//go:build mpi

package mpi

// This file is the only one that speaks C: thin Go wrappers over small C
// helpers, so that every MPI handle and macro (MPI_COMM_WORLD, MPI_INT8_T,
// MPI_IN_PLACE, …, pointers in Open MPI and integers in MPICH) stays on the
// C side, and each operation is one cgo call. The helpers take and return
// handles by value; the only Go memory they see is message data, which
// holds no Go pointers, and which is pinned by the callers for as long as
// MPI keeps a pointer to it (nonblocking operations).
//
// The mpi.h and library come from pkg-config: ompi-c (Open MPI) by
// default, mpich with the build tag mpich (files pkgconfig_*.go).

/*
// No helper calls back into Go, but none is annotated "#cgo nocallback":
// the annotation makes every call of it record and clear a flag (about
// 1 ns), and buys no speed.

#include <mpi.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

// Communicators cross to Go as integers (xpu_comm): an MPI_Comm is a
// pointer in Open MPI, and cgo checks every pointer argument of a call for
// Go pointers (about 5 ns a call); as an integer it passes unchecked. In
// MPICH, where MPI_Comm is an int, the conversions round-trip as well.
typedef uintptr_t xpu_comm;
#define XC(h) ((MPI_Comm)(h))

// Element types, numbered by this package (see dtypeCode).
enum {
	XPU_BYTE = 0, XPU_INT8, XPU_INT16, XPU_INT32, XPU_INT64,
	XPU_UINT8, XPU_UINT16, XPU_UINT32, XPU_UINT64,
	XPU_FLOAT32, XPU_FLOAT64, XPU_COMPLEX64, XPU_COMPLEX128
};

// Reduction operators, numbered by this package (see opCode).
enum { XPU_SUM = 1, XPU_PROD, XPU_MIN, XPU_MAX };

// Error classes this package maps to sentinels (see classify).
enum { XPU_CLASS_OTHER = 0, XPU_CLASS_TRUNCATE, XPU_CLASS_ARG, XPU_CLASS_PEER, XPU_CLASS_UNSUPPORTED };

static MPI_Datatype xpu_dtype(int d) {
	switch (d) {
	case XPU_INT8: return MPI_INT8_T;
	case XPU_INT16: return MPI_INT16_T;
	case XPU_INT32: return MPI_INT32_T;
	case XPU_INT64: return MPI_INT64_T;
	case XPU_UINT8: return MPI_UINT8_T;
	case XPU_UINT16: return MPI_UINT16_T;
	case XPU_UINT32: return MPI_UINT32_T;
	case XPU_UINT64: return MPI_UINT64_T;
	case XPU_FLOAT32: return MPI_FLOAT;
	case XPU_FLOAT64: return MPI_DOUBLE;
	case XPU_COMPLEX64: return MPI_C_FLOAT_COMPLEX;
	case XPU_COMPLEX128: return MPI_C_DOUBLE_COMPLEX;
	}
	return MPI_BYTE;
}

static MPI_Op xpu_op(int o) {
	switch (o) {
	case XPU_PROD: return MPI_PROD;
	case XPU_MIN: return MPI_MIN;
	case XPU_MAX: return MPI_MAX;
	}
	return MPI_SUM;
}

static void *xpu_sendbuf(void *s, int inplace) { return inplace ? MPI_IN_PLACE : s; }

typedef struct { int source, tag, count, cancelled; } xpu_status;

static void xpu_fill(MPI_Status *s, xpu_status *o) {
	int n = 0, c = 0;
	if (MPI_Get_count(s, MPI_BYTE, &n) != MPI_SUCCESS || n == MPI_UNDEFINED) n = 0;
	MPI_Test_cancelled(s, &c);
	o->source = s->MPI_SOURCE;
	o->tag = s->MPI_TAG;
	o->count = n;
	o->cancelled = c;
}

typedef struct { MPI_Request req; int rc; } xpu_start;

typedef struct { MPI_Request req; int rc, flag; xpu_status st; } xpu_test_t;

// ---- environment ----

static int xpu_initialized(void) { int f = 0; MPI_Initialized(&f); return f; }

static int xpu_init(int required, int *provided) {
	int rc = MPI_Init_thread(NULL, NULL, required, provided);
	if (rc != MPI_SUCCESS) return rc;
	MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
	MPI_Comm_set_errhandler(MPI_COMM_SELF, MPI_ERRORS_RETURN);
	return MPI_SUCCESS;
}

static int xpu_finalize(void) { return MPI_Finalize(); }

static int xpu_query_thread(void) { int p = -1; MPI_Query_thread(&p); return p; }

static int xpu_level(int l) {
	switch (l) {
	case 0: return MPI_THREAD_SINGLE;
	case 1: return MPI_THREAD_FUNNELED;
	case 2: return MPI_THREAD_SERIALIZED;
	}
	return MPI_THREAD_MULTIPLE;
}

static int xpu_level_of(int p) {
	if (p == MPI_THREAD_SINGLE) return 0;
	if (p == MPI_THREAD_FUNNELED) return 1;
	if (p == MPI_THREAD_SERIALIZED) return 2;
	if (p == MPI_THREAD_MULTIPLE) return 3;
	return -1;
}

static int xpu_library_version(char *out, int cap) {
	char v[MPI_MAX_LIBRARY_VERSION_STRING];
	int n = 0;
	if (MPI_Get_library_version(v, &n) != MPI_SUCCESS) return 0;
	if (n > cap) n = cap;
	memcpy(out, v, n);
	return n;
}

static int xpu_error_string(int code, char *out, int cap) {
	char s[MPI_MAX_ERROR_STRING];
	int n = 0;
	if (MPI_Error_string(code, s, &n) != MPI_SUCCESS) return 0;
	if (n > cap) n = cap;
	memcpy(out, s, n);
	return n;
}

static int xpu_classify(int code) {
	int c = code;
	MPI_Error_class(code, &c);
	switch (c) {
	case MPI_ERR_TRUNCATE: return XPU_CLASS_TRUNCATE;
	case MPI_ERR_RANK: case MPI_ERR_TAG: case MPI_ERR_COUNT: case MPI_ERR_BUFFER:
	case MPI_ERR_TYPE: case MPI_ERR_OP: case MPI_ERR_ROOT: case MPI_ERR_ARG:
	case MPI_ERR_COMM: case MPI_ERR_REQUEST:
	case MPI_ERR_RMA_RANGE: case MPI_ERR_DISP: case MPI_ERR_BASE: case MPI_ERR_SIZE:
		return XPU_CLASS_ARG;
	case MPI_ERR_UNSUPPORTED_OPERATION: case MPI_ERR_UNSUPPORTED_DATAREP:
		return XPU_CLASS_UNSUPPORTED;
#ifdef MPIX_ERR_PROC_FAILED
	case MPIX_ERR_PROC_FAILED: return XPU_CLASS_PEER;
#endif
#ifdef MPIX_ERR_REVOKED
	case MPIX_ERR_REVOKED: return XPU_CLASS_PEER;
#endif
	}
	return XPU_CLASS_OTHER;
}

static int xpu_error_class(int code) { int c = code; MPI_Error_class(code, &c); return c; }

// ---- communicators ----

static xpu_comm xpu_world(void) { return (xpu_comm)MPI_COMM_WORLD; }
static int xpu_is_null(xpu_comm c) { return XC(c) == MPI_COMM_NULL; }
static int xpu_undefined(void) { return MPI_UNDEFINED; }

static int xpu_rank(xpu_comm c) { int r = -1; MPI_Comm_rank(XC(c), &r); return r; }
static int xpu_size(xpu_comm c) { int s = -1; MPI_Comm_size(XC(c), &s); return s; }

static int xpu_tag_ub(xpu_comm c) {
	void *v = NULL;
	int flag = 0;
	if (MPI_Comm_get_attr(XC(c), MPI_TAG_UB, &v, &flag) != MPI_SUCCESS || !flag || v == NULL) return 32767;
	return *(int *)v;
}

typedef struct { xpu_comm comm; int rc; } xpu_comm_t;

static xpu_comm_t xpu_dup(xpu_comm c) {
	xpu_comm_t o;
	MPI_Comm m = MPI_COMM_NULL;
	o.rc = MPI_Comm_dup(XC(c), &m);
	if (o.rc == MPI_SUCCESS) MPI_Comm_set_errhandler(m, MPI_ERRORS_RETURN);
	o.comm = (xpu_comm)m;
	return o;
}

static xpu_comm_t xpu_split(xpu_comm c, int color, int key) {
	xpu_comm_t o;
	MPI_Comm m = MPI_COMM_NULL;
	o.rc = MPI_Comm_split(XC(c), color, key, &m);
	if (o.rc == MPI_SUCCESS && m != MPI_COMM_NULL) MPI_Comm_set_errhandler(m, MPI_ERRORS_RETURN);
	o.comm = (xpu_comm)m;
	return o;
}

static int xpu_comm_free(xpu_comm c) { MPI_Comm m = XC(c); return MPI_Comm_free(&m); }

// ---- point to point ----

// The blocking helpers take addresses as integers: see cAddr.
static int xpu_send(uintptr_t buf, int n, int dest, int tag, xpu_comm c) {
	return MPI_Send((void *)buf, n, MPI_BYTE, dest, tag, XC(c));
}

typedef struct { int rc; xpu_status st; } xpu_recv_t;


static xpu_start xpu_isend(void *buf, int n, int dest, int tag, xpu_comm c) {
	xpu_start o;
	o.req = MPI_REQUEST_NULL;
	o.rc = MPI_Isend(buf, n, MPI_BYTE, dest, tag, XC(c), &o.req);
	return o;
}


// xpu_test tests r once. A request that fails completes (MPI frees it).
static xpu_test_t xpu_test(MPI_Request r) {
	xpu_test_t o;
	MPI_Status s;
	memset(&o, 0, sizeof o);
	memset(&s, 0, sizeof s);
	o.rc = MPI_Test(&r, &o.flag, &s);
	o.req = r;
	if (o.rc != MPI_SUCCESS && r == MPI_REQUEST_NULL) o.flag = 1;
	if (o.flag) xpu_fill(&s, &o.st);
	return o;
}

static int xpu_cancel(MPI_Request r) { return MPI_Cancel(&r); }

// Matched probes (MPI_Improbe, MPI_Mprobe) learn a message's length before
// it is received, so that a message longer than the buffer is received
// into memory of its own length: Open MPI 4.1 writes a truncated message
// past the end of the receive buffer when it went by rendezvous.

// xpu_len is the length of the message of a probe's status, or -1 when it
// exceeds an int.
static int xpu_len(MPI_Status *s) {
	int n = 0;
	if (MPI_Get_count(s, MPI_BYTE, &n) != MPI_SUCCESS || n == MPI_UNDEFINED) return -1;
	return n;
}

typedef struct { int rc, found, len; MPI_Message msg; xpu_status st; } xpu_probe_t;

static xpu_probe_t xpu_improbe(int src, int tag, xpu_comm c) {
	xpu_probe_t o;
	MPI_Status s;
	memset(&o, 0, sizeof o);
	memset(&s, 0, sizeof s);
	o.msg = MPI_MESSAGE_NULL;
	o.rc = MPI_Improbe(src, tag, XC(c), &o.found, &o.msg, &s);
	if (o.rc == MPI_SUCCESS && o.found) {
		xpu_fill(&s, &o.st);
		o.len = xpu_len(&s);
	}
	return o;
}

static xpu_start xpu_imrecv(void *buf, int n, MPI_Message m) {
	xpu_start o;
	o.req = MPI_REQUEST_NULL;
	o.rc = MPI_Imrecv(buf, n, MPI_BYTE, &m, &o.req);
	return o;
}

// xpu_precv waits for a message (MPI_Mprobe) and receives it when it fits
// n bytes (fits); otherwise it returns the matched message, for the
// caller to receive into memory of its length.
typedef struct { int rc, fits, len; MPI_Message msg; xpu_status st; } xpu_precv_t;

static xpu_precv_t xpu_precv(uintptr_t buf, int n, int src, int tag, xpu_comm c) {
	xpu_precv_t o;
	MPI_Status s;
	memset(&o, 0, sizeof o);
	o.msg = MPI_MESSAGE_NULL;
	o.rc = MPI_Mprobe(src, tag, XC(c), &o.msg, &s);
	if (o.rc != MPI_SUCCESS) return o;
	// The probe's status describes the message: the receive needs no
	// status of its own, and the blocking receive cannot be canceled.
	o.len = xpu_len(&s);
	o.st.source = s.MPI_SOURCE;
	o.st.tag = s.MPI_TAG;
	o.st.count = o.len < 0 ? 0 : o.len;
	if (o.len < 0 || o.len > n) return o;
	o.fits = 1;
	o.rc = MPI_Mrecv((void *)buf, n, MPI_BYTE, &o.msg, MPI_STATUS_IGNORE);
	return o;
}

static xpu_recv_t xpu_mrecv(uintptr_t buf, int n, MPI_Message m) {
	MPI_Status s;
	xpu_recv_t o;
	memset(&s, 0, sizeof s);
	o.rc = MPI_Mrecv((void *)buf, n, MPI_BYTE, &m, &s);
	xpu_fill(&s, &o.st);
	return o;
}

// ---- collectives (blocking) ----

static int xpu_barrier(xpu_comm c) { return MPI_Barrier(XC(c)); }

static int xpu_bcast(uintptr_t buf, int n, int root, xpu_comm c) {
	return MPI_Bcast((void *)buf, n, MPI_BYTE, root, XC(c));
}

static int xpu_reduce(uintptr_t s, uintptr_t r, int n, int dt, int op, int root, int inplace, xpu_comm c) {
	return MPI_Reduce(xpu_sendbuf((void *)s, inplace), (void *)r, n, xpu_dtype(dt), xpu_op(op), root, XC(c));
}

static int xpu_allreduce(uintptr_t s, uintptr_t r, int n, int dt, int op, int inplace, xpu_comm c) {
	return MPI_Allreduce(xpu_sendbuf((void *)s, inplace), (void *)r, n, xpu_dtype(dt), xpu_op(op), XC(c));
}

static int xpu_gather(uintptr_t s, uintptr_t r, int n, int root, int inplace, xpu_comm c) {
	return MPI_Gather(xpu_sendbuf((void *)s, inplace), n, MPI_BYTE, (void *)r, n, MPI_BYTE, root, XC(c));
}

static int xpu_scatter(uintptr_t s, uintptr_t r, int n, int root, int inplace, xpu_comm c) {
	return MPI_Scatter((void *)s, n, MPI_BYTE, inplace ? MPI_IN_PLACE : (void *)r, n, MPI_BYTE, root, XC(c));
}

static int xpu_allgather(uintptr_t s, uintptr_t r, int n, int inplace, xpu_comm c) {
	return MPI_Allgather(xpu_sendbuf((void *)s, inplace), n, MPI_BYTE, (void *)r, n, MPI_BYTE, XC(c));
}

static int xpu_alltoall(uintptr_t s, uintptr_t r, int n, xpu_comm c) {
	return MPI_Alltoall((void *)s, n, MPI_BYTE, (void *)r, n, MPI_BYTE, XC(c));
}

static int xpu_reduce_scatter(uintptr_t s, uintptr_t r, int n, int dt, int op, xpu_comm c) {
	return MPI_Reduce_scatter_block((void *)s, (void *)r, n, xpu_dtype(dt), xpu_op(op), XC(c));
}

// ---- collectives (nonblocking) ----

static xpu_start xpu_ibarrier(xpu_comm c) {
	xpu_start o;
	o.req = MPI_REQUEST_NULL;
	o.rc = MPI_Ibarrier(XC(c), &o.req);
	return o;
}

static xpu_start xpu_ibcast(void *buf, int n, int root, xpu_comm c) {
	xpu_start o;
	o.req = MPI_REQUEST_NULL;
	o.rc = MPI_Ibcast(buf, n, MPI_BYTE, root, XC(c), &o.req);
	return o;
}

static xpu_start xpu_ireduce(void *s, void *r, int n, int dt, int op, int root, int inplace, xpu_comm c) {
	xpu_start o;
	o.req = MPI_REQUEST_NULL;
	o.rc = MPI_Ireduce(xpu_sendbuf(s, inplace), r, n, xpu_dtype(dt), xpu_op(op), root, XC(c), &o.req);
	return o;
}

static xpu_start xpu_iallreduce(void *s, void *r, int n, int dt, int op, int inplace, xpu_comm c) {
	xpu_start o;
	o.req = MPI_REQUEST_NULL;
	o.rc = MPI_Iallreduce(xpu_sendbuf(s, inplace), r, n, xpu_dtype(dt), xpu_op(op), XC(c), &o.req);
	return o;
}

static xpu_start xpu_igather(void *s, void *r, int n, int root, int inplace, xpu_comm c) {
	xpu_start o;
	o.req = MPI_REQUEST_NULL;
	o.rc = MPI_Igather(xpu_sendbuf(s, inplace), n, MPI_BYTE, r, n, MPI_BYTE, root, XC(c), &o.req);
	return o;
}

static xpu_start xpu_iscatter(void *s, void *r, int n, int root, int inplace, xpu_comm c) {
	xpu_start o;
	o.req = MPI_REQUEST_NULL;
	o.rc = MPI_Iscatter(s, n, MPI_BYTE, inplace ? MPI_IN_PLACE : r, n, MPI_BYTE, root, XC(c), &o.req);
	return o;
}

static xpu_start xpu_iallgather(void *s, void *r, int n, int inplace, xpu_comm c) {
	xpu_start o;
	o.req = MPI_REQUEST_NULL;
	o.rc = MPI_Iallgather(xpu_sendbuf(s, inplace), n, MPI_BYTE, r, n, MPI_BYTE, XC(c), &o.req);
	return o;
}

static xpu_start xpu_ialltoall(void *s, void *r, int n, xpu_comm c) {
	xpu_start o;
	o.req = MPI_REQUEST_NULL;
	o.rc = MPI_Ialltoall(s, n, MPI_BYTE, r, n, MPI_BYTE, XC(c), &o.req);
	return o;
}

static xpu_start xpu_ireduce_scatter(void *s, void *r, int n, int dt, int op, xpu_comm c) {
	xpu_start o;
	o.req = MPI_REQUEST_NULL;
	o.rc = MPI_Ireduce_scatter_block(s, r, n, xpu_dtype(dt), xpu_op(op), XC(c), &o.req);
	return o;
}
// ---- one-sided (RMA windows) ----

// Windows cross to Go as integers, as communicators do.
typedef uintptr_t xpu_win;
#define XW(w) ((MPI_Win)(w))

typedef struct { xpu_win win; int rc; } xpu_win_t;

// xpu_win_dynamic creates a dynamic window over c (collective), has it
// return errors, and opens a passive-target epoch to every rank.
static xpu_win_t xpu_win_dynamic(xpu_comm c) {
	xpu_win_t o;
	MPI_Win w = MPI_WIN_NULL;
	o.rc = MPI_Win_create_dynamic(MPI_INFO_NULL, XC(c), &w);
	if (o.rc == MPI_SUCCESS) {
		MPI_Win_set_errhandler(w, MPI_ERRORS_RETURN);
		o.rc = MPI_Win_lock_all(MPI_MODE_NOCHECK, w);
		if (o.rc != MPI_SUCCESS) {
			MPI_Win_free(&w);
			w = MPI_WIN_NULL;
		}
	}
	o.win = (xpu_win)w;
	return o;
}

// xpu_win_free ends the epoch and frees the window (collective).
static int xpu_win_free(xpu_win win) {
	MPI_Win w = XW(win);
	int rc = MPI_Win_unlock_all(w);
	int rc2 = MPI_Win_free(&w);
	return rc != MPI_SUCCESS ? rc : rc2;
}

typedef struct { uint64_t addr; int rc; } xpu_attach_t;

// xpu_attach attaches n bytes at base and returns their address for the
// window's target displacements (MPI_Get_address).
static xpu_attach_t xpu_attach(xpu_win win, uintptr_t base, size_t n) {
	xpu_attach_t o;
	MPI_Aint a = 0;
	o.addr = 0;
	o.rc = MPI_Win_attach(XW(win), (void *)base, (MPI_Aint)n);
	if (o.rc != MPI_SUCCESS) return o;
	o.rc = MPI_Get_address((void *)base, &a);
	if (o.rc != MPI_SUCCESS) {
		MPI_Win_detach(XW(win), (void *)base);
		return o;
	}
	o.addr = (uint64_t)a;
	return o;
}

static int xpu_detach(xpu_win win, uintptr_t base) { return MPI_Win_detach(XW(win), (void *)base); }

// xpu_rma starts a Put (put) or a Get of n bytes between buf and the
// target's address addr + off (MPI_Rput, MPI_Rget).
static xpu_start xpu_rma(int put, void *buf, int n, int target, uint64_t addr, uint64_t off, xpu_win win) {
	xpu_start o;
	MPI_Aint disp = MPI_Aint_add((MPI_Aint)addr, (MPI_Aint)off);
	o.req = MPI_REQUEST_NULL;
	if (put)
		o.rc = MPI_Rput(buf, n, MPI_BYTE, target, disp, n, MPI_BYTE, XW(win), &o.req);
	else
		o.rc = MPI_Rget(buf, n, MPI_BYTE, target, disp, n, MPI_BYTE, XW(win), &o.req);
	return o;
}

// xpu_test_rma tests an RMA request once (no status: it has none to tell).
static xpu_test_t xpu_test_rma(MPI_Request r) {
	xpu_test_t o;
	memset(&o, 0, sizeof o);
	o.rc = MPI_Test(&r, &o.flag, MPI_STATUS_IGNORE);
	o.req = r;
	if (o.rc != MPI_SUCCESS && r == MPI_REQUEST_NULL) o.flag = 1;
	return o;
}

// xpu_flush completes every RMA operation of this process to target, or to
// every rank when target is negative, at the target (MPI_Win_flush,
// MPI_Win_flush_all).
static int xpu_flush(int target, xpu_win win) {
	if (target < 0) return MPI_Win_flush_all(XW(win));
	return MPI_Win_flush(target, XW(win));
}

static int xpu_win_sync(xpu_win win) { return MPI_Win_sync(XW(win)); }

static int xpu_bcast_bytes(void *buf, int n, int root, xpu_comm c) {
	return MPI_Bcast(buf, n, MPI_BYTE, root, XC(c));
}
*/
import "C"

import (
	"runtime"
	"strings"
	"unsafe"
)

// handle is an MPI communicator (as an integer: see xpu_comm); request an
// MPI request.
type (
	handle  = C.xpu_comm
	request = C.MPI_Request
)

// cStatus is the status of a completed receive.
type cStatus struct {
	source, tag, count int
	cancelled          bool
}

func statusOf(s C.xpu_status) cStatus {
	return cStatus{source: int(s.source), tag: int(s.tag), count: int(s.count), cancelled: s.cancelled != 0}
}

// Error classes of classify.
const (
	classOther       = C.XPU_CLASS_OTHER
	classTruncate    = C.XPU_CLASS_TRUNCATE
	classArg         = C.XPU_CLASS_ARG
	classPeer        = C.XPU_CLASS_PEER
	classUnsupported = C.XPU_CLASS_UNSUPPORTED
)

const (
	cAnySource = int(C.MPI_ANY_SOURCE)
	cAnyTag    = int(C.MPI_ANY_TAG)
)

// MPI_ANY_TAG is comm.AnyTag (-1) in every MPI: the fast path of Recv
// passes the tag through. These fail to compile otherwise.
const (
	_ = uint(cAnyTag + 1)
	_ = uint(-(cAnyTag + 1))
)

// ---- environment ----

func cInitialized() bool { return C.xpu_initialized() != 0 }

// cInit initialises MPI asking for level and returns the level provided.
func cInit(level ThreadLevel) (ThreadLevel, int) {
	var provided C.int
	rc := C.xpu_init(C.xpu_level(C.int(level)), &provided)
	return ThreadLevel(C.xpu_level_of(provided)), int(rc)
}

func cFinalize() int { return int(C.xpu_finalize()) }

func cQueryThread() ThreadLevel { return ThreadLevel(C.xpu_level_of(C.xpu_query_thread())) }

func cLibraryVersion() string {
	buf := make([]byte, 8192)
	n := C.xpu_library_version((*C.char)(unsafe.Pointer(&buf[0])), C.int(len(buf)))
	return strings.TrimRight(string(buf[:n]), "\x00\n ")
}

func cErrorString(code int) string {
	buf := make([]byte, 2048)
	n := C.xpu_error_string(C.int(code), (*C.char)(unsafe.Pointer(&buf[0])), C.int(len(buf)))
	return strings.TrimRight(string(buf[:n]), "\x00\n ")
}

func cClassify(code int) int   { return int(C.xpu_classify(C.int(code))) }
func cErrorClass(code int) int { return int(C.xpu_error_class(C.int(code))) }

// ---- communicators ----

func cWorld() handle              { return C.xpu_world() }
func cIsNull(c handle) bool       { return C.xpu_is_null(c) != 0 }
func cUndefined() int             { return int(C.xpu_undefined()) }
func cRank(c handle) int          { return int(C.xpu_rank(c)) }
func cSize(c handle) int          { return int(C.xpu_size(c)) }
func cTagUB(c handle) int         { return int(C.xpu_tag_ub(c)) }
func cCommFree(c handle) int      { return int(C.xpu_comm_free(c)) }
func cDup(c handle) (handle, int) { o := C.xpu_dup(c); return o.comm, int(o.rc) }

func cSplit(c handle, color, key int) (handle, int) {
	o := C.xpu_split(c, C.int(color), C.int(key))
	return o.comm, int(o.rc)
}

// ---- point to point ----

// cAddr passes the address of message memory to a blocking helper as an
// integer. The memory is off the Go heap, or Go memory that holds no Go
// pointers (memspace admits no other element types) and that the caller
// keeps alive for the call (runtime.KeepAlive); the garbage collector does
// not move heap objects. cgo's check of pointer arguments — which such
// memory always passes — then costs nothing: it is a tenth of a small
// message's latency.
func cAddr(p unsafe.Pointer) C.uintptr_t { return C.uintptr_t(uintptr(p)) }

func cSend(p unsafe.Pointer, n, dest, tag int, c handle) int {
	rc := int(C.xpu_send(cAddr(p), C.int(n), C.int(dest), C.int(tag), c))
	runtime.KeepAlive(p)
	return rc
}

func cIsend(p unsafe.Pointer, n, dest, tag int, c handle) (request, int) {
	o := C.xpu_isend(p, C.int(n), C.int(dest), C.int(tag), c)
	return o.req, int(o.rc)
}

// cTest tests r once: done reports completion (r is then freed by MPI),
// rc the request's error code.
func cTest(r request) (next request, done bool, st cStatus, rc int) {
	o := C.xpu_test(r)
	return o.req, o.flag != 0, statusOf(o.st), int(o.rc)
}

func cCancel(r request) int { return int(C.xpu_cancel(r)) }

// message is a message matched by a probe (MPI_Message).
type message = C.MPI_Message

// probed is the outcome of a matched probe.
type probed struct {
	found bool
	len   int // the message's length; -1 beyond an int
	msg   message
	st    cStatus
}

// cImprobe looks for a message without waiting (MPI_Improbe).
func cImprobe(src, tag int, c handle) (probed, int) {
	o := C.xpu_improbe(C.int(src), C.int(tag), c)
	return probed{found: o.found != 0, len: int(o.len), msg: o.msg, st: statusOf(o.st)}, int(o.rc)
}

// cImrecv starts receiving a matched message into n bytes at p, memory
// pinned until the request completes (MPI_Imrecv).
func cImrecv(p unsafe.Pointer, n int, m message) (request, int) {
	return start(C.xpu_imrecv(p, C.int(n), m))
}

// cPrecv waits for a message and receives it into n bytes at p when it
// fits; otherwise fits is false and the matched message is returned.
func cPrecv(p unsafe.Pointer, n, src, tag int, c handle) (st cStatus, fits bool, length int, m message, rc int) {
	o := C.xpu_precv(cAddr(p), C.int(n), C.int(src), C.int(tag), c)
	runtime.KeepAlive(p)
	return statusOf(o.st), o.fits != 0, int(o.len), o.msg, int(o.rc)
}

// cMrecv receives a matched message into n bytes at p (MPI_Mrecv).
func cMrecv(p unsafe.Pointer, n int, m message) (cStatus, int) {
	o := C.xpu_mrecv(cAddr(p), C.int(n), m)
	runtime.KeepAlive(p)
	return statusOf(o.st), int(o.rc)
}

// ---- collectives ----

func b2i(b bool) C.int {
	if b {
		return 1
	}
	return 0
}

func cBarrier(c handle) int { return int(C.xpu_barrier(c)) }

// The blocking collectives take addresses as integers too (cAddr).

func cBcast(p unsafe.Pointer, n, root int, c handle) int {
	rc := C.xpu_bcast(cAddr(p), C.int(n), C.int(root), c)
	runtime.KeepAlive(p)
	return int(rc)
}

func cReduce(s, r unsafe.Pointer, n, dt, op, root int, inplace bool, c handle) int {
	rc := C.xpu_reduce(cAddr(s), cAddr(r), C.int(n), C.int(dt), C.int(op), C.int(root), b2i(inplace), c)
	runtime.KeepAlive(s)
	runtime.KeepAlive(r)
	return int(rc)
}

func cAllreduce(s, r unsafe.Pointer, n, dt, op int, inplace bool, c handle) int {
	rc := C.xpu_allreduce(cAddr(s), cAddr(r), C.int(n), C.int(dt), C.int(op), b2i(inplace), c)
	runtime.KeepAlive(s)
	runtime.KeepAlive(r)
	return int(rc)
}

func cGather(s, r unsafe.Pointer, n, root int, inplace bool, c handle) int {
	rc := C.xpu_gather(cAddr(s), cAddr(r), C.int(n), C.int(root), b2i(inplace), c)
	runtime.KeepAlive(s)
	runtime.KeepAlive(r)
	return int(rc)
}

func cScatter(s, r unsafe.Pointer, n, root int, inplace bool, c handle) int {
	rc := C.xpu_scatter(cAddr(s), cAddr(r), C.int(n), C.int(root), b2i(inplace), c)
	runtime.KeepAlive(s)
	runtime.KeepAlive(r)
	return int(rc)
}

func cAllgather(s, r unsafe.Pointer, n int, inplace bool, c handle) int {
	rc := C.xpu_allgather(cAddr(s), cAddr(r), C.int(n), b2i(inplace), c)
	runtime.KeepAlive(s)
	runtime.KeepAlive(r)
	return int(rc)
}

func cAlltoall(s, r unsafe.Pointer, n int, c handle) int {
	rc := C.xpu_alltoall(cAddr(s), cAddr(r), C.int(n), c)
	runtime.KeepAlive(s)
	runtime.KeepAlive(r)
	return int(rc)
}

func cReduceScatter(s, r unsafe.Pointer, n, dt, op int, c handle) int {
	rc := C.xpu_reduce_scatter(cAddr(s), cAddr(r), C.int(n), C.int(dt), C.int(op), c)
	runtime.KeepAlive(s)
	runtime.KeepAlive(r)
	return int(rc)
}

func start(o C.xpu_start) (request, int) { return o.req, int(o.rc) }

func cIbarrier(c handle) (request, int) { return start(C.xpu_ibarrier(c)) }

func cIbcast(p unsafe.Pointer, n, root int, c handle) (request, int) {
	return start(C.xpu_ibcast(p, C.int(n), C.int(root), c))
}

func cIreduce(s, r unsafe.Pointer, n, dt, op, root int, inplace bool, c handle) (request, int) {
	return start(C.xpu_ireduce(s, r, C.int(n), C.int(dt), C.int(op), C.int(root), b2i(inplace), c))
}

func cIallreduce(s, r unsafe.Pointer, n, dt, op int, inplace bool, c handle) (request, int) {
	return start(C.xpu_iallreduce(s, r, C.int(n), C.int(dt), C.int(op), b2i(inplace), c))
}

func cIgather(s, r unsafe.Pointer, n, root int, inplace bool, c handle) (request, int) {
	return start(C.xpu_igather(s, r, C.int(n), C.int(root), b2i(inplace), c))
}

func cIscatter(s, r unsafe.Pointer, n, root int, inplace bool, c handle) (request, int) {
	return start(C.xpu_iscatter(s, r, C.int(n), C.int(root), b2i(inplace), c))
}

func cIallgather(s, r unsafe.Pointer, n int, inplace bool, c handle) (request, int) {
	return start(C.xpu_iallgather(s, r, C.int(n), b2i(inplace), c))
}

func cIalltoall(s, r unsafe.Pointer, n int, c handle) (request, int) {
	return start(C.xpu_ialltoall(s, r, C.int(n), c))
}

func cIreduceScatter(s, r unsafe.Pointer, n, dt, op int, c handle) (request, int) {
	return start(C.xpu_ireduce_scatter(s, r, C.int(n), C.int(dt), C.int(op), c))
}

// dtype codes of the C side.
const (
	dtByte       = C.XPU_BYTE
	dtInt8       = C.XPU_INT8
	dtInt16      = C.XPU_INT16
	dtInt32      = C.XPU_INT32
	dtInt64      = C.XPU_INT64
	dtUint8      = C.XPU_UINT8
	dtUint16     = C.XPU_UINT16
	dtUint32     = C.XPU_UINT32
	dtUint64     = C.XPU_UINT64
	dtFloat32    = C.XPU_FLOAT32
	dtFloat64    = C.XPU_FLOAT64
	dtComplex64  = C.XPU_COMPLEX64
	dtComplex128 = C.XPU_COMPLEX128

	opSum  = C.XPU_SUM
	opProd = C.XPU_PROD
	opMin  = C.XPU_MIN
	opMax  = C.XPU_MAX
)

// ---- one-sided ----

// window is an MPI window (as an integer: see xpu_win).
type window = C.xpu_win

// cWinDynamic creates a dynamic window over c, collectively, and locks it
// for every rank (MPI_Win_lock_all, passive target).
func cWinDynamic(c handle) (window, int) {
	o := C.xpu_win_dynamic(c)
	return o.win, int(o.rc)
}

// cWinFree unlocks and frees w (collective).
func cWinFree(w window) int { return int(C.xpu_win_free(w)) }

// cAttach attaches the n bytes at p to w and returns their address for
// MPI (MPI_Get_address). p is memory that stays put while attached.
func cAttach(w window, p unsafe.Pointer, n int) (uint64, int) {
	o := C.xpu_attach(w, cAddr(p), C.size_t(n))
	return uint64(o.addr), int(o.rc)
}

// cDetach detaches the memory attached at p.
func cDetach(w window, p unsafe.Pointer) int { return int(C.xpu_detach(w, cAddr(p))) }

// cRMA starts an MPI_Rput (put) or MPI_Rget of n bytes between p, memory
// pinned until the request completes, and addr+off at target.
func cRMA(put bool, p unsafe.Pointer, n, target int, addr, off uint64, w window) (request, int) {
	return start(C.xpu_rma(b2i(put), p, C.int(n), C.int(target), C.uint64_t(addr), C.uint64_t(off), w))
}

// cTestRMA tests an RMA request once; done reports completion (r is then
// freed by MPI).
func cTestRMA(r request) (next request, done bool, rc int) {
	o := C.xpu_test_rma(r)
	return o.req, o.flag != 0, int(o.rc)
}

// cFlush completes this process's RMA operations to target (every rank
// when target < 0) at the target.
func cFlush(target int, w window) int { return int(C.xpu_flush(C.int(target), w)) }

// cWinSync synchronises the window's public and private copies of this
// process's memory (MPI_Win_sync: a memory barrier in the unified model).
func cWinSync(w window) int { return int(C.xpu_win_sync(w)) }

// cBcastBytes broadcasts the n bytes at p, Go memory held by the caller,
// from root (blocking).
func cBcastBytes(p unsafe.Pointer, n, root int, c handle) int {
	rc := C.xpu_bcast_bytes(p, C.int(n), C.int(root), c)
	runtime.KeepAlive(p)
	return int(rc)
}
