//go:build cgo

package fakecuda

// A minimal caller of the fake's driver entry points, for this package's
// tests: function pointers looked up with dlsym, called through C
// trampolines. The backend has its own loader; this one only exercises the
// fake directly.

/*
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

typedef unsigned long long dptr;

static int t_u(void *f, unsigned a) { return ((int (*)(unsigned))f)(a); }
static int t_v(void *f) { return ((int (*)(void))f)(); }
static int t_i(void *f, int a) { return ((int (*)(int))f)(a); }
static int t_p(void *f, void *a) { return ((int (*)(void *))f)(a); }
static int t_pi(void *f, int *a) { return ((int (*)(int *))f)(a); }
static int t_pi_i(void *f, int *a, int b) { return ((int (*)(int *, int))f)(a, b); }
static int t_pi_i_i(void *f, int *a, int b, int c) { return ((int (*)(int *, int, int))f)(a, b, c); }
static int t_s_i_i(void *f, char *s, int n, int d) { return ((int (*)(char *, int, int))f)(s, n, d); }
static int t_pz_i(void *f, size_t *a, int d) { return ((int (*)(size_t *, int))f)(a, d); }
static int t_p_i(void *f, void *a, int d) { return ((int (*)(void *, int))f)(a, d); }
static int t_pp_i(void *f, void **a, int d) { return ((int (*)(void **, int))f)(a, d); }
static int t_pp(void *f, void **a) { return ((int (*)(void **))f)(a); }
static int t_p_u(void *f, void *a, unsigned b) { return ((int (*)(void *, unsigned))f)(a, b); }
static int t_pz_pz(void *f, size_t *a, size_t *b) { return ((int (*)(size_t *, size_t *))f)(a, b); }
static int t_pd_z(void *f, dptr *p, size_t n) { return ((int (*)(dptr *, size_t))f)(p, n); }
static int t_d(void *f, dptr p) { return ((int (*)(dptr))f)(p); }
static int t_pp_z_u(void *f, void **p, size_t n, unsigned fl) { return ((int (*)(void **, size_t, unsigned))f)(p, n, fl); }
static int t_pd_z_u(void *f, dptr *p, size_t n, unsigned fl) { return ((int (*)(dptr *, size_t, unsigned))f)(p, n, fl); }
static int t_pd_p_u(void *f, dptr *d, void *p, unsigned fl) { return ((int (*)(dptr *, void *, unsigned))f)(d, p, fl); }
static int t_d_p_z(void *f, dptr d, void *s, size_t n) { return ((int (*)(dptr, void *, size_t))f)(d, s, n); }
static int t_p_d_z(void *f, void *d, dptr s, size_t n) { return ((int (*)(void *, dptr, size_t))f)(d, s, n); }
static int t_d_d_z(void *f, dptr d, dptr s, size_t n) { return ((int (*)(dptr, dptr, size_t))f)(d, s, n); }
static int t_d_p_z_p(void *f, dptr d, void *s, size_t n, void *st) { return ((int (*)(dptr, void *, size_t, void *))f)(d, s, n, st); }
static int t_p_d_z_p(void *f, void *d, dptr s, size_t n, void *st) { return ((int (*)(void *, dptr, size_t, void *))f)(d, s, n, st); }
static int t_d_d_z_p(void *f, dptr d, dptr s, size_t n, void *st) { return ((int (*)(dptr, dptr, size_t, void *))f)(d, s, n, st); }
static int t_peer(void *f, dptr d, void *dc, dptr s, void *sc, size_t n) { return ((int (*)(dptr, void *, dptr, void *, size_t))f)(d, dc, s, sc, n); }
static int t_peer_async(void *f, dptr d, void *dc, dptr s, void *sc, size_t n, void *st) { return ((int (*)(dptr, void *, dptr, void *, size_t, void *))f)(d, dc, s, sc, n, st); }
static int t_d8(void *f, dptr p, unsigned v, size_t n) { return ((int (*)(dptr, unsigned char, size_t))f)(p, (unsigned char)v, n); }
static int t_d32_async(void *f, dptr p, unsigned v, size_t n, void *st) { return ((int (*)(dptr, unsigned, size_t, void *))f)(p, v, n, st); }
static int t_pp_u(void *f, void **p, unsigned fl) { return ((int (*)(void **, unsigned))f)(p, fl); }
static int t_p_p(void *f, void *a, void *b) { return ((int (*)(void *, void *))f)(a, b); }
static int t_p_p_u(void *f, void *a, void *b, unsigned fl) { return ((int (*)(void *, void *, unsigned))f)(a, b, fl); }
static int t_elapsed(void *f, float *ms, void *a, void *b) { return ((int (*)(float *, void *, void *))f)(ms, a, b); }
static int t_getfn(void *f, void **fn, void *m, const char *name) { return ((int (*)(void **, void *, const char *))f)(fn, m, name); }
static int t_errname(void *f, int r, const char **s) { return ((int (*)(int, const char **))f)(r, s); }

// cuModuleLoadDataEx with an error log buffer; *used gets the size back.
static int t_load(void *f, void **m, const char *img, char *log, size_t size, size_t *used)
{
	int opts[2] = {5, 6};
	void *vals[2] = {log, (void *)(uintptr_t)size};
	int r = ((int (*)(void **, const void *, unsigned, int *, void **))f)(m, img, 2, opts, vals);
	*used = (size_t)(uintptr_t)vals[1];
	return r;
}

// cuLaunchKernel of a 1-D grid; each argument is passed as a 64-bit slot
// (the fake reads the first sizeof(T) bytes, little-endian).
static int t_launch(void *f, void *fn, unsigned gx, unsigned bx, unsigned shm, void *st, int nargs,
		    const unsigned long long *args)
{
	unsigned long long slot[8];
	void *params[8];
	for (int i = 0; i < nargs && i < 8; i++) {
		slot[i] = args[i];
		params[i] = &slot[i];
	}
	return ((int (*)(void *, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, void *,
			 void **, void **))f)(fn, gx, 1, 1, bx, 1, 1, shm, st, nargs ? params : NULL, NULL);
}

// cuLaunchKernel with a full 3-D configuration and no arguments.
static int t_launch3(void *f, void *fn, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by,
		     unsigned bz, unsigned shm)
{
	return ((int (*)(void *, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, void *,
			 void **, void **))f)(fn, gx, gy, gz, bx, by, bz, shm, NULL, NULL, NULL);
}

// The IPC entry points: CUipcMemHandle is 64 bytes passed by value.
typedef struct { char r[64]; } t_ipch;
static int t_ipc_get(void *f, unsigned char *out, dptr p)
{
	t_ipch h;
	int r = ((int (*)(t_ipch *, dptr))f)(&h, p);
	memcpy(out, h.r, 64);
	return r;
}
static int t_ipc_open(void *f, dptr *p, const unsigned char *in, unsigned fl)
{
	t_ipch h;
	memcpy(h.r, in, 64);
	return ((int (*)(dptr *, t_ipch, unsigned))f)(p, h, fl);
}

// Reads a byte at p: for a child process that must crash.
static unsigned t_peek(dptr p) { return *(volatile unsigned char *)(uintptr_t)p; }
*/
import "C"

import (
	"fmt"
	"sync"
	"unsafe"
)

// drv calls the driver entry points of one loaded instance of the fake.
type drv struct {
	h    unsafe.Pointer
	mu   sync.Mutex
	syms map[string]unsafe.Pointer
}

func openDrv(path string) (*drv, error) {
	h, err := dlopenPath(path)
	if err != nil {
		return nil, err
	}
	return &drv{h: h, syms: map[string]unsafe.Pointer{}}, nil
}

func (d *drv) sym(name string) unsafe.Pointer {
	d.mu.Lock()
	defer d.mu.Unlock()
	f, ok := d.syms[name]
	if !ok {
		f = dlsym(d.h, name)
		if f == nil {
			panic(fmt.Sprintf("fakecuda: no symbol %s", name))
		}
		d.syms[name] = f
	}
	return f
}

type dptr = uint64

func (d *drv) cuInit(flags uint32) int { return int(C.t_u(d.sym("cuInit"), C.unsigned(flags))) }

func (d *drv) cuDriverGetVersion() (int, int) {
	var v C.int
	r := C.t_pi(d.sym("cuDriverGetVersion"), &v)
	return int(v), int(r)
}

func (d *drv) cuDeviceGetCount() (int, int) {
	var n C.int
	r := C.t_pi(d.sym("cuDeviceGetCount"), &n)
	return int(n), int(r)
}

func (d *drv) cuDeviceGet(ordinal int) (int, int) {
	var v C.int
	r := C.t_pi_i(d.sym("cuDeviceGet"), &v, C.int(ordinal))
	return int(v), int(r)
}

func (d *drv) str(name string, dev, size int) (string, int) {
	buf := make([]byte, size)
	r := C.t_s_i_i(d.sym(name), (*C.char)(unsafe.Pointer(&buf[0])), C.int(size), C.int(dev))
	return C.GoString((*C.char)(unsafe.Pointer(&buf[0]))), int(r)
}

func (d *drv) cuDeviceGetName(dev int) (string, int) { return d.str("cuDeviceGetName", dev, 256) }
func (d *drv) cuDeviceGetPCIBusID(dev int) (string, int) {
	return d.str("cuDeviceGetPCIBusId", dev, 32)
}

func (d *drv) cuDeviceGetUUID(dev int) ([16]byte, int) {
	var u [16]byte
	r := C.t_p_i(d.sym("cuDeviceGetUuid_v2"), unsafe.Pointer(&u[0]), C.int(dev))
	return u, int(r)
}

func (d *drv) cuDeviceTotalMem(dev int) (uint64, int) {
	var n C.size_t
	r := C.t_pz_i(d.sym("cuDeviceTotalMem_v2"), &n, C.int(dev))
	return uint64(n), int(r)
}

func (d *drv) cuDeviceGetAttribute(attr, dev int) (int, int) {
	var v C.int
	r := C.t_pi_i_i(d.sym("cuDeviceGetAttribute"), &v, C.int(attr), C.int(dev))
	return int(v), int(r)
}

func (d *drv) cuDeviceCanAccessPeer(dev, peer int) (int, int) {
	var v C.int
	r := C.t_pi_i_i(d.sym("cuDeviceCanAccessPeer"), &v, C.int(dev), C.int(peer))
	return int(v), int(r)
}

func (d *drv) cuPrimaryCtxRetain(dev int) (unsafe.Pointer, int) {
	var c unsafe.Pointer
	r := C.t_pp_i(d.sym("cuDevicePrimaryCtxRetain"), &c, C.int(dev))
	return c, int(r)
}

func (d *drv) cuPrimaryCtxRelease(dev int) int {
	return int(C.t_i(d.sym("cuDevicePrimaryCtxRelease_v2"), C.int(dev)))
}

func (d *drv) cuCtxSetCurrent(c unsafe.Pointer) int { return int(C.t_p(d.sym("cuCtxSetCurrent"), c)) }

func (d *drv) cuCtxGetCurrent() (unsafe.Pointer, int) {
	var c unsafe.Pointer
	r := C.t_pp(d.sym("cuCtxGetCurrent"), &c)
	return c, int(r)
}

func (d *drv) cuCtxSynchronize() int { return int(C.t_v(d.sym("cuCtxSynchronize"))) }

func (d *drv) cuCtxEnablePeerAccess(peer unsafe.Pointer, flags uint32) int {
	return int(C.t_p_u(d.sym("cuCtxEnablePeerAccess"), peer, C.unsigned(flags)))
}

func (d *drv) cuMemGetInfo() (free, total uint64, r int) {
	var f, t C.size_t
	rr := C.t_pz_pz(d.sym("cuMemGetInfo_v2"), &f, &t)
	return uint64(f), uint64(t), int(rr)
}

func (d *drv) cuMemAlloc(n uint64) (dptr, int) {
	var p C.dptr
	r := C.t_pd_z(d.sym("cuMemAlloc_v2"), &p, C.size_t(n))
	return dptr(p), int(r)
}

func (d *drv) cuMemFree(p dptr) int { return int(C.t_d(d.sym("cuMemFree_v2"), C.dptr(p))) }

func (d *drv) cuMemHostAlloc(n uint64, flags uint32) (unsafe.Pointer, int) {
	var p unsafe.Pointer
	r := C.t_pp_z_u(d.sym("cuMemHostAlloc"), &p, C.size_t(n), C.unsigned(flags))
	return p, int(r)
}

func (d *drv) cuMemFreeHost(p unsafe.Pointer) int { return int(C.t_p(d.sym("cuMemFreeHost"), p)) }

func (d *drv) cuMemAllocManaged(n uint64, flags uint32) (dptr, int) {
	var p C.dptr
	r := C.t_pd_z_u(d.sym("cuMemAllocManaged"), &p, C.size_t(n), C.unsigned(flags))
	return dptr(p), int(r)
}

func (d *drv) cuMemHostGetDevicePointer(p unsafe.Pointer) (dptr, int) {
	var v C.dptr
	r := C.t_pd_p_u(d.sym("cuMemHostGetDevicePointer_v2"), &v, p, 0)
	return dptr(v), int(r)
}

func (d *drv) cuMemcpyHtoD(dst dptr, src unsafe.Pointer, n uint64) int {
	return int(C.t_d_p_z(d.sym("cuMemcpyHtoD_v2"), C.dptr(dst), src, C.size_t(n)))
}

func (d *drv) cuMemcpyDtoH(dst unsafe.Pointer, src dptr, n uint64) int {
	return int(C.t_p_d_z(d.sym("cuMemcpyDtoH_v2"), dst, C.dptr(src), C.size_t(n)))
}

func (d *drv) cuMemcpyDtoD(dst, src dptr, n uint64) int {
	return int(C.t_d_d_z(d.sym("cuMemcpyDtoD_v2"), C.dptr(dst), C.dptr(src), C.size_t(n)))
}

func (d *drv) cuMemcpy(dst, src dptr, n uint64) int {
	return int(C.t_d_d_z(d.sym("cuMemcpy"), C.dptr(dst), C.dptr(src), C.size_t(n)))
}

func (d *drv) cuMemcpyHtoDAsync(dst dptr, src unsafe.Pointer, n uint64, s unsafe.Pointer) int {
	return int(C.t_d_p_z_p(d.sym("cuMemcpyHtoDAsync_v2"), C.dptr(dst), src, C.size_t(n), s))
}

func (d *drv) cuMemcpyDtoHAsync(dst unsafe.Pointer, src dptr, n uint64, s unsafe.Pointer) int {
	return int(C.t_p_d_z_p(d.sym("cuMemcpyDtoHAsync_v2"), dst, C.dptr(src), C.size_t(n), s))
}

func (d *drv) cuMemcpyDtoDAsync(dst, src dptr, n uint64, s unsafe.Pointer) int {
	return int(C.t_d_d_z_p(d.sym("cuMemcpyDtoDAsync_v2"), C.dptr(dst), C.dptr(src), C.size_t(n), s))
}

func (d *drv) cuMemcpyAsync(dst, src dptr, n uint64, s unsafe.Pointer) int {
	return int(C.t_d_d_z_p(d.sym("cuMemcpyAsync"), C.dptr(dst), C.dptr(src), C.size_t(n), s))
}

func (d *drv) cuMemcpyPeer(dst dptr, dctx unsafe.Pointer, src dptr, sctx unsafe.Pointer, n uint64) int {
	return int(C.t_peer(d.sym("cuMemcpyPeer"), C.dptr(dst), dctx, C.dptr(src), sctx, C.size_t(n)))
}

func (d *drv) cuMemcpyPeerAsync(dst dptr, dctx unsafe.Pointer, src dptr, sctx unsafe.Pointer, n uint64, s unsafe.Pointer) int {
	return int(C.t_peer_async(d.sym("cuMemcpyPeerAsync"), C.dptr(dst), dctx, C.dptr(src), sctx, C.size_t(n), s))
}

func (d *drv) cuMemsetD8(p dptr, v uint8, n uint64) int {
	return int(C.t_d8(d.sym("cuMemsetD8_v2"), C.dptr(p), C.unsigned(v), C.size_t(n)))
}

func (d *drv) cuMemsetD32Async(p dptr, v uint32, n uint64, s unsafe.Pointer) int {
	return int(C.t_d32_async(d.sym("cuMemsetD32Async"), C.dptr(p), C.unsigned(v), C.size_t(n), s))
}

func (d *drv) cuStreamCreate() (unsafe.Pointer, int) {
	var s unsafe.Pointer
	r := C.t_pp_u(d.sym("cuStreamCreate"), &s, 1)
	return s, int(r)
}

func (d *drv) cuStreamDestroy(s unsafe.Pointer) int {
	return int(C.t_p(d.sym("cuStreamDestroy_v2"), s))
}
func (d *drv) cuStreamSynchronize(s unsafe.Pointer) int {
	return int(C.t_p(d.sym("cuStreamSynchronize"), s))
}
func (d *drv) cuStreamQuery(s unsafe.Pointer) int { return int(C.t_p(d.sym("cuStreamQuery"), s)) }

func (d *drv) cuStreamWaitEvent(s, e unsafe.Pointer) int {
	return int(C.t_p_p_u(d.sym("cuStreamWaitEvent"), s, e, 0))
}

func (d *drv) cuEventCreate(flags uint32) (unsafe.Pointer, int) {
	var e unsafe.Pointer
	r := C.t_pp_u(d.sym("cuEventCreate"), &e, C.unsigned(flags))
	return e, int(r)
}

func (d *drv) cuEventRecord(e, s unsafe.Pointer) int {
	return int(C.t_p_p(d.sym("cuEventRecord"), e, s))
}
func (d *drv) cuEventQuery(e unsafe.Pointer) int { return int(C.t_p(d.sym("cuEventQuery"), e)) }
func (d *drv) cuEventSynchronize(e unsafe.Pointer) int {
	return int(C.t_p(d.sym("cuEventSynchronize"), e))
}
func (d *drv) cuEventDestroy(e unsafe.Pointer) int { return int(C.t_p(d.sym("cuEventDestroy_v2"), e)) }

func (d *drv) cuEventElapsedTime(a, b unsafe.Pointer) (float32, int) {
	var ms C.float
	r := C.t_elapsed(d.sym("cuEventElapsedTime"), &ms, a, b)
	return float32(ms), int(r)
}

// cuModuleLoad loads PTX text, returning the module, the error log and the
// result.
func (d *drv) cuModuleLoad(ptx string) (unsafe.Pointer, string, int) {
	var m unsafe.Pointer
	img := C.CString(ptx)
	defer C.free(unsafe.Pointer(img))
	log := (*C.char)(C.malloc(512))
	defer C.free(unsafe.Pointer(log))
	*log = 0
	var used C.size_t
	r := C.t_load(d.sym("cuModuleLoadDataEx"), &m, img, log, 512, &used)
	return m, C.GoStringN(log, C.int(used)), int(r)
}

func (d *drv) cuModuleUnload(m unsafe.Pointer) int { return int(C.t_p(d.sym("cuModuleUnload"), m)) }

func (d *drv) cuModuleGetFunction(m unsafe.Pointer, name string) (unsafe.Pointer, int) {
	var f unsafe.Pointer
	cname := C.CString(name)
	defer C.free(unsafe.Pointer(cname))
	r := C.t_getfn(d.sym("cuModuleGetFunction"), &f, m, cname)
	return f, int(r)
}

// cuLaunch launches f on a 1-D grid of gx blocks of bx threads with shm
// bytes of dynamic shared memory; each argument is a 64-bit slot.
func (d *drv) cuLaunch(f unsafe.Pointer, gx, bx, shm uint32, s unsafe.Pointer, args ...uint64) int {
	var a [8]C.ulonglong
	for i, v := range args {
		a[i] = C.ulonglong(v)
	}
	return int(C.t_launch(d.sym("cuLaunchKernel"), f, C.unsigned(gx), C.unsigned(bx), C.unsigned(shm), s,
		C.int(len(args)), &a[0]))
}

// cuLaunch3 launches f, which takes no arguments, with a 3-D configuration
// on the legacy stream.
func (d *drv) cuLaunch3(f unsafe.Pointer, g, b [3]uint32, shm uint32) int {
	return int(C.t_launch3(d.sym("cuLaunchKernel"), f, C.unsigned(g[0]), C.unsigned(g[1]), C.unsigned(g[2]),
		C.unsigned(b[0]), C.unsigned(b[1]), C.unsigned(b[2]), C.unsigned(shm)))
}

func (d *drv) cuErrorName(r int) string {
	var s *C.char
	if C.t_errname(d.sym("cuGetErrorName"), C.int(r), &s) != 0 || s == nil {
		return fmt.Sprintf("CUresult(%d)", r)
	}
	return C.GoString(s)
}

// peek reads a byte at a device address from the host: it must crash.
func peek(p dptr) uint32 { return uint32(C.t_peek(C.dptr(p))) }

func (d *drv) cuIpcGetMemHandle(p dptr) ([64]byte, int) {
	var h [64]byte
	r := C.t_ipc_get(d.sym("cuIpcGetMemHandle"), (*C.uchar)(unsafe.Pointer(&h[0])), C.dptr(p))
	return h, int(r)
}

// cuIpcOpenMemHandle calls cuIpcOpenMemHandle_v2, or the older name when
// old is set.
func (d *drv) cuIpcOpenMemHandle(h [64]byte, flags uint32, old bool) (dptr, int) {
	name := "cuIpcOpenMemHandle_v2"
	if old {
		name = "cuIpcOpenMemHandle"
	}
	var p C.dptr
	r := C.t_ipc_open(d.sym(name), &p, (*C.uchar)(unsafe.Pointer(&h[0])), C.unsigned(flags))
	return dptr(p), int(r)
}

func (d *drv) cuIpcCloseMemHandle(p dptr) int {
	return int(C.t_d(d.sym("cuIpcCloseMemHandle"), C.dptr(p)))
}
