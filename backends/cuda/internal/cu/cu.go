//go:build cgo

package cu

/*
#cgo LDFLAGS: -ldl
#include <dlfcn.h>
#include <stdlib.h>
#include <string.h>
#include <stdint.h>

typedef int CUresult;
typedef int CUdevice;
typedef unsigned long long CUdeviceptr;
typedef void *CUcontext;
typedef void *CUstream;
typedef void *CUevent;
typedef void *CUmodule;
typedef void *CUfunction;

enum {
	F_cuInit, F_cuDriverGetVersion, F_cuDeviceGetCount, F_cuDeviceGet, F_cuDeviceGetName,
	F_cuDeviceGetUuid_v2, F_cuDeviceTotalMem_v2, F_cuDeviceGetAttribute, F_cuDeviceGetPCIBusId,
	F_cuDeviceCanAccessPeer, F_cuDevicePrimaryCtxRetain, F_cuDevicePrimaryCtxRelease_v2,
	F_cuCtxSetCurrent, F_cuCtxGetCurrent, F_cuCtxSynchronize, F_cuCtxEnablePeerAccess,
	F_cuMemGetInfo_v2, F_cuMemAlloc_v2, F_cuMemFree_v2, F_cuMemHostAlloc, F_cuMemFreeHost,
	F_cuMemAllocManaged, F_cuMemHostGetDevicePointer_v2, F_cuMemcpy, F_cuMemcpyAsync,
	F_cuMemcpyHtoD_v2, F_cuMemcpyDtoH_v2, F_cuMemcpyDtoD_v2, F_cuMemcpyHtoDAsync_v2,
	F_cuMemcpyDtoHAsync_v2, F_cuMemcpyDtoDAsync_v2, F_cuMemcpyPeer, F_cuMemcpyPeerAsync,
	F_cuMemsetD8_v2, F_cuMemsetD8Async, F_cuMemsetD16Async, F_cuMemsetD32Async,
	F_cuStreamCreate, F_cuStreamDestroy_v2, F_cuStreamSynchronize, F_cuStreamQuery, F_cuStreamWaitEvent,
	F_cuEventCreate, F_cuEventRecord, F_cuEventQuery, F_cuEventSynchronize, F_cuEventElapsedTime,
	F_cuEventDestroy_v2, F_cuModuleLoadDataEx, F_cuModuleUnload, F_cuModuleGetFunction,
	F_cuLaunchKernel, F_cuGetErrorName, F_cuGetErrorString,
	F_N,
	// Optional entry points, NULL when the driver lacks them: IPC.
	F_cuIpcGetMemHandle = F_N, F_cuIpcOpenMemHandle, F_cuIpcCloseMemHandle,
	F_NOPT
};

// The optional entry points' names, the preferred first: cuda.h maps
// cuIpcOpenMemHandle to cuIpcOpenMemHandle_v2 since CUDA 11.
static const char *xpu_cu_optional[F_NOPT - F_N][2] = {
	{"cuIpcGetMemHandle", NULL},
	{"cuIpcOpenMemHandle_v2", "cuIpcOpenMemHandle"},
	{"cuIpcCloseMemHandle", NULL},
};

static const char *xpu_cu_names[F_N] = {
	"cuInit", "cuDriverGetVersion", "cuDeviceGetCount", "cuDeviceGet", "cuDeviceGetName",
	"cuDeviceGetUuid_v2", "cuDeviceTotalMem_v2", "cuDeviceGetAttribute", "cuDeviceGetPCIBusId",
	"cuDeviceCanAccessPeer", "cuDevicePrimaryCtxRetain", "cuDevicePrimaryCtxRelease_v2",
	"cuCtxSetCurrent", "cuCtxGetCurrent", "cuCtxSynchronize", "cuCtxEnablePeerAccess",
	"cuMemGetInfo_v2", "cuMemAlloc_v2", "cuMemFree_v2", "cuMemHostAlloc", "cuMemFreeHost",
	"cuMemAllocManaged", "cuMemHostGetDevicePointer_v2", "cuMemcpy", "cuMemcpyAsync",
	"cuMemcpyHtoD_v2", "cuMemcpyDtoH_v2", "cuMemcpyDtoD_v2", "cuMemcpyHtoDAsync_v2",
	"cuMemcpyDtoHAsync_v2", "cuMemcpyDtoDAsync_v2", "cuMemcpyPeer", "cuMemcpyPeerAsync",
	"cuMemsetD8_v2", "cuMemsetD8Async", "cuMemsetD16Async", "cuMemsetD32Async",
	"cuStreamCreate", "cuStreamDestroy_v2", "cuStreamSynchronize", "cuStreamQuery", "cuStreamWaitEvent",
	"cuEventCreate", "cuEventRecord", "cuEventQuery", "cuEventSynchronize", "cuEventElapsedTime",
	"cuEventDestroy_v2", "cuModuleLoadDataEx", "cuModuleUnload", "cuModuleGetFunction",
	"cuLaunchKernel", "cuGetErrorName", "cuGetErrorString",
};

// xpu_cu_open loads path and resolves every entry point into a table it
// allocates. On failure it returns NULL and a message in err (static or
// the loader's).
static void **xpu_cu_open(const char *path, const char **err) {
	void *h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
	if (!h) { *err = dlerror(); return NULL; }
	void **fns = calloc(F_NOPT, sizeof(void *));
	if (!fns) { *err = "out of memory"; return NULL; }
	for (int i = 0; i < F_N; i++) {
		fns[i] = dlsym(h, xpu_cu_names[i]);
		if (!fns[i]) { *err = xpu_cu_names[i]; free(fns); return NULL; }
	}
	for (int i = F_N; i < F_NOPT; i++)
		for (int j = 0; j < 2 && !fns[i] && xpu_cu_optional[i - F_N][j]; j++)
			fns[i] = dlsym(h, xpu_cu_optional[i - F_N][j]);
	return fns;
}

#define FN(i, ret, args) ((ret (*) args) fns[i])
static CUresult xpu_set(void **fns, CUcontext c) { return FN(F_cuCtxSetCurrent, CUresult, (CUcontext))(c); }
#define CTX(call) do { CUresult r_ = xpu_set(fns, ctx); if (r_) return r_; return call; } while (0)

static int x_init(void **fns, unsigned f) { return FN(F_cuInit, CUresult, (unsigned))(f); }
static int x_driverVersion(void **fns, int *v) { return FN(F_cuDriverGetVersion, CUresult, (int *))(v); }
static int x_deviceCount(void **fns, int *n) { return FN(F_cuDeviceGetCount, CUresult, (int *))(n); }
static int x_deviceGet(void **fns, CUdevice *d, int o) { return FN(F_cuDeviceGet, CUresult, (CUdevice *, int))(d, o); }
static int x_deviceName(void **fns, char *s, int n, CUdevice d) { return FN(F_cuDeviceGetName, CUresult, (char *, int, CUdevice))(s, n, d); }
static int x_deviceUuid(void **fns, unsigned char *u, CUdevice d) { return FN(F_cuDeviceGetUuid_v2, CUresult, (unsigned char *, CUdevice))(u, d); }
static int x_deviceTotalMem(void **fns, size_t *b, CUdevice d) { return FN(F_cuDeviceTotalMem_v2, CUresult, (size_t *, CUdevice))(b, d); }
static int x_deviceAttr(void **fns, int *v, int a, CUdevice d) { return FN(F_cuDeviceGetAttribute, CUresult, (int *, int, CUdevice))(v, a, d); }
static int x_devicePCI(void **fns, char *s, int n, CUdevice d) { return FN(F_cuDeviceGetPCIBusId, CUresult, (char *, int, CUdevice))(s, n, d); }
static int x_canAccessPeer(void **fns, int *c, CUdevice d, CUdevice p) { return FN(F_cuDeviceCanAccessPeer, CUresult, (int *, CUdevice, CUdevice))(c, d, p); }
static int x_retain(void **fns, CUcontext *c, CUdevice d) { return FN(F_cuDevicePrimaryCtxRetain, CUresult, (CUcontext *, CUdevice))(c, d); }
static int x_release(void **fns, CUdevice d) { return FN(F_cuDevicePrimaryCtxRelease_v2, CUresult, (CUdevice))(d); }
static int x_ctxGetCurrent(void **fns, CUcontext *c) { return FN(F_cuCtxGetCurrent, CUresult, (CUcontext *))(c); }
static int x_ctxSync(void **fns, CUcontext ctx) { CTX(FN(F_cuCtxSynchronize, CUresult, (void))()); }
static int x_enablePeer(void **fns, CUcontext ctx, CUcontext p) { CTX(FN(F_cuCtxEnablePeerAccess, CUresult, (CUcontext, unsigned))(p, 0)); }
static int x_memInfo(void **fns, CUcontext ctx, size_t *f, size_t *t) { CTX(FN(F_cuMemGetInfo_v2, CUresult, (size_t *, size_t *))(f, t)); }
static int x_alloc(void **fns, CUcontext ctx, CUdeviceptr *p, size_t n) { CTX(FN(F_cuMemAlloc_v2, CUresult, (CUdeviceptr *, size_t))(p, n)); }
static int x_free(void **fns, CUcontext ctx, CUdeviceptr p) { CTX(FN(F_cuMemFree_v2, CUresult, (CUdeviceptr))(p)); }
static int x_hostAlloc(void **fns, CUcontext ctx, void **p, size_t n, unsigned f) { CTX(FN(F_cuMemHostAlloc, CUresult, (void **, size_t, unsigned))(p, n, f)); }
static int x_freeHost(void **fns, CUcontext ctx, void *p) { CTX(FN(F_cuMemFreeHost, CUresult, (void *))(p)); }
static int x_allocManaged(void **fns, CUcontext ctx, CUdeviceptr *p, size_t n, unsigned f) { CTX(FN(F_cuMemAllocManaged, CUresult, (CUdeviceptr *, size_t, unsigned))(p, n, f)); }
static int x_hostDevPtr(void **fns, CUcontext ctx, CUdeviceptr *d, void *p) { CTX(FN(F_cuMemHostGetDevicePointer_v2, CUresult, (CUdeviceptr *, void *, unsigned))(d, p, 0)); }
static int x_memcpy(void **fns, CUcontext ctx, CUdeviceptr d, CUdeviceptr s, size_t n) { CTX(FN(F_cuMemcpy, CUresult, (CUdeviceptr, CUdeviceptr, size_t))(d, s, n)); }
static int x_memcpyAsync(void **fns, CUcontext ctx, CUdeviceptr d, CUdeviceptr s, size_t n, CUstream st) { CTX(FN(F_cuMemcpyAsync, CUresult, (CUdeviceptr, CUdeviceptr, size_t, CUstream))(d, s, n, st)); }
static int x_htod(void **fns, CUcontext ctx, CUdeviceptr d, const void *s, size_t n) { CTX(FN(F_cuMemcpyHtoD_v2, CUresult, (CUdeviceptr, const void *, size_t))(d, s, n)); }
static int x_dtoh(void **fns, CUcontext ctx, void *d, CUdeviceptr s, size_t n) { CTX(FN(F_cuMemcpyDtoH_v2, CUresult, (void *, CUdeviceptr, size_t))(d, s, n)); }
static int x_dtod(void **fns, CUcontext ctx, CUdeviceptr d, CUdeviceptr s, size_t n) { CTX(FN(F_cuMemcpyDtoD_v2, CUresult, (CUdeviceptr, CUdeviceptr, size_t))(d, s, n)); }
static int x_htodAsync(void **fns, CUcontext ctx, CUdeviceptr d, const void *s, size_t n, CUstream st) { CTX(FN(F_cuMemcpyHtoDAsync_v2, CUresult, (CUdeviceptr, const void *, size_t, CUstream))(d, s, n, st)); }
static int x_dtohAsync(void **fns, CUcontext ctx, void *d, CUdeviceptr s, size_t n, CUstream st) { CTX(FN(F_cuMemcpyDtoHAsync_v2, CUresult, (void *, CUdeviceptr, size_t, CUstream))(d, s, n, st)); }
static int x_dtodAsync(void **fns, CUcontext ctx, CUdeviceptr d, CUdeviceptr s, size_t n, CUstream st) { CTX(FN(F_cuMemcpyDtoDAsync_v2, CUresult, (CUdeviceptr, CUdeviceptr, size_t, CUstream))(d, s, n, st)); }
static int x_peer(void **fns, CUcontext ctx, CUdeviceptr d, CUcontext dc, CUdeviceptr s, CUcontext sc, size_t n) { CTX(FN(F_cuMemcpyPeer, CUresult, (CUdeviceptr, CUcontext, CUdeviceptr, CUcontext, size_t))(d, dc, s, sc, n)); }
static int x_peerAsync(void **fns, CUcontext ctx, CUdeviceptr d, CUcontext dc, CUdeviceptr s, CUcontext sc, size_t n, CUstream st) { CTX(FN(F_cuMemcpyPeerAsync, CUresult, (CUdeviceptr, CUcontext, CUdeviceptr, CUcontext, size_t, CUstream))(d, dc, s, sc, n, st)); }
static int x_memsetD8(void **fns, CUcontext ctx, CUdeviceptr p, unsigned char v, size_t n) { CTX(FN(F_cuMemsetD8_v2, CUresult, (CUdeviceptr, unsigned char, size_t))(p, v, n)); }
static int x_memsetD8Async(void **fns, CUcontext ctx, CUdeviceptr p, unsigned char v, size_t n, CUstream st) { CTX(FN(F_cuMemsetD8Async, CUresult, (CUdeviceptr, unsigned char, size_t, CUstream))(p, v, n, st)); }
static int x_memsetD16Async(void **fns, CUcontext ctx, CUdeviceptr p, unsigned short v, size_t n, CUstream st) { CTX(FN(F_cuMemsetD16Async, CUresult, (CUdeviceptr, unsigned short, size_t, CUstream))(p, v, n, st)); }
static int x_memsetD32Async(void **fns, CUcontext ctx, CUdeviceptr p, unsigned int v, size_t n, CUstream st) { CTX(FN(F_cuMemsetD32Async, CUresult, (CUdeviceptr, unsigned int, size_t, CUstream))(p, v, n, st)); }
static int x_streamCreate(void **fns, CUcontext ctx, CUstream *s, unsigned f) { CTX(FN(F_cuStreamCreate, CUresult, (CUstream *, unsigned))(s, f)); }
static int x_streamDestroy(void **fns, CUcontext ctx, CUstream s) { CTX(FN(F_cuStreamDestroy_v2, CUresult, (CUstream))(s)); }
static int x_streamSync(void **fns, CUstream s) { return FN(F_cuStreamSynchronize, CUresult, (CUstream))(s); }
static int x_streamQuery(void **fns, CUstream s) { return FN(F_cuStreamQuery, CUresult, (CUstream))(s); }
static int x_streamWait(void **fns, CUcontext ctx, CUstream s, CUevent e) { CTX(FN(F_cuStreamWaitEvent, CUresult, (CUstream, CUevent, unsigned))(s, e, 0)); }
static int x_eventCreate(void **fns, CUcontext ctx, CUevent *e, unsigned f) { CTX(FN(F_cuEventCreate, CUresult, (CUevent *, unsigned))(e, f)); }
static int x_eventRecord(void **fns, CUcontext ctx, CUevent e, CUstream s) { CTX(FN(F_cuEventRecord, CUresult, (CUevent, CUstream))(e, s)); }
static int x_eventQuery(void **fns, CUevent e) { return FN(F_cuEventQuery, CUresult, (CUevent))(e); }
static int x_eventSync(void **fns, CUevent e) { return FN(F_cuEventSynchronize, CUresult, (CUevent))(e); }
static int x_eventElapsed(void **fns, float *ms, CUevent a, CUevent b) { return FN(F_cuEventElapsedTime, CUresult, (float *, CUevent, CUevent))(ms, a, b); }
static int x_eventDestroy(void **fns, CUcontext ctx, CUevent e) { CTX(FN(F_cuEventDestroy_v2, CUresult, (CUevent))(e)); }
static int x_moduleLoad(void **fns, CUcontext ctx, CUmodule *m, const char *image, char *log, size_t logSize) {
	int opts[2] = {5, 6}; // CU_JIT_ERROR_LOG_BUFFER, CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES
	void *vals[2] = {log, (void *)(uintptr_t)logSize};
	CTX(FN(F_cuModuleLoadDataEx, CUresult, (CUmodule *, const void *, unsigned, int *, void **))(m, image, 2, opts, vals));
}
static int x_moduleUnload(void **fns, CUcontext ctx, CUmodule m) { CTX(FN(F_cuModuleUnload, CUresult, (CUmodule))(m)); }
static int x_moduleFunc(void **fns, CUcontext ctx, CUfunction *f, CUmodule m, const char *name) { CTX(FN(F_cuModuleGetFunction, CUresult, (CUfunction *, CUmodule, const char *))(f, m, name)); }

// x_launch points kernelParams[i] at slot offs[i] of the packed arguments:
// the driver copies the values during the call.
static int x_launch(void **fns, CUcontext ctx, CUfunction f, unsigned gx, unsigned gy, unsigned gz,
		unsigned bx, unsigned by, unsigned bz, unsigned shared, CUstream st,
		uint64_t *slots, int32_t *offs, int nargs) {
	void *params[64];
	for (int i = 0; i < nargs; i++) params[i] = &slots[offs[i]];
	CTX(FN(F_cuLaunchKernel, CUresult, (CUfunction, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned,
		unsigned, CUstream, void **, void **))(f, gx, gy, gz, bx, by, bz, shared, st, nargs ? params : NULL, NULL));
}

typedef struct { char reserved[64]; } CUipcMemHandle;
static int x_hasIPC(void **fns) {
	return fns[F_cuIpcGetMemHandle] && fns[F_cuIpcOpenMemHandle] && fns[F_cuIpcCloseMemHandle];
}
static int x_ipcGet(void **fns, CUcontext ctx, unsigned char *out, CUdeviceptr p) {
	CUresult r = xpu_set(fns, ctx);
	if (r) return r;
	CUipcMemHandle h;
	r = FN(F_cuIpcGetMemHandle, CUresult, (CUipcMemHandle *, CUdeviceptr))(&h, p);
	if (!r) memcpy(out, h.reserved, sizeof h.reserved);
	return r;
}
static int x_ipcOpen(void **fns, CUcontext ctx, CUdeviceptr *p, const unsigned char *in, unsigned flags) {
	CUipcMemHandle h;
	memcpy(h.reserved, in, sizeof h.reserved);
	CTX(FN(F_cuIpcOpenMemHandle, CUresult, (CUdeviceptr *, CUipcMemHandle, unsigned))(p, h, flags));
}
static int x_ipcClose(void **fns, CUcontext ctx, CUdeviceptr p) { CTX(FN(F_cuIpcCloseMemHandle, CUresult, (CUdeviceptr))(p)); }

static int x_errorString(void **fns, int r, const char **s) { return FN(F_cuGetErrorString, CUresult, (CUresult, const char **))(r, s); }
*/
import "C"

import (
	"fmt"
	"strings"
	"sync"
	"unsafe"
)

// Lib is a loaded driver library.
type Lib struct {
	path    string
	fns     *unsafe.Pointer // the C table of entry points
	version int
	noIPC   bool // WithoutIPC: the IPC entry points count as missing
}

var (
	libsMu sync.Mutex
	libs   = map[string]libResult{}
)

type libResult struct {
	l   *Lib
	err error
}

// Open loads the driver library at path (a name like "libcuda.so.1" is
// searched as dlopen searches), resolves every entry point the backend
// calls, initializes the driver and checks its version. The outcome is
// kept: a second Open of the same path returns the same Lib or error (a
// driver library is never unloaded). The error says which step failed:
// the library not found, an entry point missing, cuInit's Result (e.g.
// ErrNoDevice), or a driver older than MinDriverVersion.
func Open(path string) (*Lib, error) {
	libsMu.Lock()
	defer libsMu.Unlock()
	if r, ok := libs[path]; ok {
		return r.l, r.err
	}
	l, err := open(path)
	libs[path] = libResult{l, err}
	return l, err
}

func open(path string) (*Lib, error) {
	cpath := C.CString(path)
	defer C.free(unsafe.Pointer(cpath))
	var cerr *C.char
	fns := C.xpu_cu_open(cpath, &cerr)
	if fns == nil {
		msg := C.GoString(cerr)
		if !strings.Contains(msg, " ") { // a symbol name
			return nil, fmt.Errorf("%s lacks the entry point %s: driver too old", path, msg)
		}
		return nil, fmt.Errorf("cannot load %s: %s", path, strings.TrimPrefix(msg, path+": "))
	}
	l := &Lib{path: path, fns: fns}
	if r := C.x_init(l.fns, 0); r != 0 {
		return nil, fmt.Errorf("cuInit: %w", Result(r))
	}
	var v C.int
	if err := check(int(C.x_driverVersion(l.fns, &v))); err != nil {
		return nil, fmt.Errorf("cuDriverGetVersion: %w", err)
	}
	l.version = int(v)
	if l.version < MinDriverVersion {
		return nil, fmt.Errorf("driver version %s is older than %s, the oldest supported: driver too old",
			VersionString(l.version), VersionString(MinDriverVersion))
	}
	return l, nil
}

// VersionString formats a driver version as "12.4".
func VersionString(v int) string { return fmt.Sprintf("%d.%d", v/1000, v%1000/10) }

// Path is the library's path as given to Open.
func (l *Lib) Path() string { return l.path }

// Version is the driver's version (cuDriverGetVersion), e.g. 12040.
func (l *Lib) Version() int { return l.version }

// DriverVersion asks the driver for its version (cuDriverGetVersion) on
// every call, where Version returns the answer Open kept: the cheapest
// call into the driver, which the benchmarks of the binding's cost use.
func (l *Lib) DriverVersion() (int, error) {
	var v C.int
	err := check(int(C.x_driverVersion(l.fns, &v)))
	return int(v), err
}

// DeviceCount is the number of devices.
func (l *Lib) DeviceCount() (int, error) {
	var n C.int
	err := check(int(C.x_deviceCount(l.fns, &n)))
	return int(n), err
}

// Device returns the device handle of ordinal i.
func (l *Lib) Device(i int) (int, error) {
	var d C.CUdevice
	err := check(int(C.x_deviceGet(l.fns, &d, C.int(i))))
	return int(d), err
}

// DeviceName is the device's name.
func (l *Lib) DeviceName(d int) (string, error) {
	return cString(256, func(s *C.char, n C.int) C.int { return C.x_deviceName(l.fns, s, n, C.CUdevice(d)) })
}

// cString returns the string that get, a driver call, writes into a
// buffer of size bytes.
func cString(size int, get func(s *C.char, n C.int) C.int) (string, error) {
	buf := make([]C.char, size)
	if err := check(int(get(&buf[0], C.int(size)))); err != nil {
		return "", err
	}
	return C.GoString(&buf[0]), nil
}

// DeviceUUID is the device's UUID, formatted as nvidia-smi does
// ("GPU-xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx").
func (l *Lib) DeviceUUID(d int) (string, error) {
	var u [16]C.uchar
	if err := check(int(C.x_deviceUuid(l.fns, &u[0], C.CUdevice(d)))); err != nil {
		return "", err
	}
	b := make([]byte, 16)
	for i := range b {
		b[i] = byte(u[i])
	}
	return fmt.Sprintf("GPU-%x-%x-%x-%x-%x", b[0:4], b[4:6], b[6:8], b[8:10], b[10:16]), nil
}

// DeviceTotalMem is the device's memory in bytes.
func (l *Lib) DeviceTotalMem(d int) (int64, error) {
	var n C.size_t
	err := check(int(C.x_deviceTotalMem(l.fns, &n, C.CUdevice(d))))
	return int64(n), err
}

// DeviceAttribute reads one attribute (Attr…) of the device.
func (l *Lib) DeviceAttribute(d, attr int) (int, error) {
	var v C.int
	err := check(int(C.x_deviceAttr(l.fns, &v, C.int(attr), C.CUdevice(d))))
	return int(v), err
}

// DevicePCIBusID is the device's PCI address ("0000:18:00.0").
func (l *Lib) DevicePCIBusID(d int) (string, error) {
	return cString(64, func(s *C.char, n C.int) C.int { return C.x_devicePCI(l.fns, s, n, C.CUdevice(d)) })
}

// CanAccessPeer reports whether device d can address peer's memory.
func (l *Lib) CanAccessPeer(d, peer int) (bool, error) {
	var c C.int
	err := check(int(C.x_canAccessPeer(l.fns, &c, C.CUdevice(d), C.CUdevice(peer))))
	return c != 0, err
}

// PrimaryCtxRetain retains the device's primary context.
func (l *Lib) PrimaryCtxRetain(d int) (Context, error) {
	var c C.CUcontext
	err := check(int(C.x_retain(l.fns, &c, C.CUdevice(d))))
	return Context{unsafe.Pointer(c)}, err
}

// PrimaryCtxRelease releases a reference PrimaryCtxRetain took.
func (l *Lib) PrimaryCtxRelease(d int) error {
	return check(int(C.x_release(l.fns, C.CUdevice(d))))
}

// CtxCurrent is the calling thread's current context (for tests of the
// binding).
func (l *Lib) CtxCurrent() (Context, error) {
	var c C.CUcontext
	err := check(int(C.x_ctxGetCurrent(l.fns, &c)))
	return Context{unsafe.Pointer(c)}, err
}

func cc(c Context) C.CUcontext  { return C.CUcontext(c.p) }
func cs(s Stream) C.CUstream    { return C.CUstream(s.p) }
func ce(e Event) C.CUevent      { return C.CUevent(e.p) }
func dp(p DevPtr) C.CUdeviceptr { return C.CUdeviceptr(p) }

// CtxSynchronize waits for all work of ctx.
func (l *Lib) CtxSynchronize(ctx Context) error { return check(int(C.x_ctxSync(l.fns, cc(ctx)))) }

// EnablePeerAccess lets ctx's device address peer's memory.
func (l *Lib) EnablePeerAccess(ctx, peer Context) error {
	return check(int(C.x_enablePeer(l.fns, cc(ctx), cc(peer))))
}

// MemGetInfo is the free and total memory of ctx's device.
func (l *Lib) MemGetInfo(ctx Context) (free, total int64, err error) {
	var f, t C.size_t
	err = check(int(C.x_memInfo(l.fns, cc(ctx), &f, &t)))
	return int64(f), int64(t), err
}

// MemAlloc allocates n bytes of device memory.
func (l *Lib) MemAlloc(ctx Context, n int) (DevPtr, error) {
	var p C.CUdeviceptr
	err := check(int(C.x_alloc(l.fns, cc(ctx), &p, C.size_t(n))))
	return DevPtr(p), err
}

// MemFree frees device memory.
func (l *Lib) MemFree(ctx Context, p DevPtr) error {
	return check(int(C.x_free(l.fns, cc(ctx), dp(p))))
}

// MemHostAlloc allocates n bytes of page-locked host memory.
func (l *Lib) MemHostAlloc(ctx Context, n int, flags uint) (unsafe.Pointer, error) {
	var p unsafe.Pointer
	err := check(int(C.x_hostAlloc(l.fns, cc(ctx), &p, C.size_t(n), C.unsigned(flags))))
	return p, err
}

// MemFreeHost frees page-locked host memory.
func (l *Lib) MemFreeHost(ctx Context, p unsafe.Pointer) error {
	return check(int(C.x_freeHost(l.fns, cc(ctx), p)))
}

// MemAllocManaged allocates n bytes of managed (unified) memory.
func (l *Lib) MemAllocManaged(ctx Context, n int) (DevPtr, error) {
	var p C.CUdeviceptr
	err := check(int(C.x_allocManaged(l.fns, cc(ctx), &p, C.size_t(n), MemAttachGlobal)))
	return DevPtr(p), err
}

// HostDevicePointer is the device address of page-locked host memory.
func (l *Lib) HostDevicePointer(ctx Context, p unsafe.Pointer) (DevPtr, error) {
	var d C.CUdeviceptr
	err := check(int(C.x_hostDevPtr(l.fns, cc(ctx), &d, p)))
	return DevPtr(d), err
}

// Memcpy copies n bytes between unified addresses.
func (l *Lib) Memcpy(ctx Context, dst, src DevPtr, n int) error {
	return check(int(C.x_memcpy(l.fns, cc(ctx), dp(dst), dp(src), C.size_t(n))))
}

// MemcpyAsync copies n bytes between unified addresses in stream order.
func (l *Lib) MemcpyAsync(ctx Context, dst, src DevPtr, n int, s Stream) error {
	return check(int(C.x_memcpyAsync(l.fns, cc(ctx), dp(dst), dp(src), C.size_t(n), cs(s))))
}

// MemcpyHtoD copies n bytes from host memory to the device.
func (l *Lib) MemcpyHtoD(ctx Context, dst DevPtr, src unsafe.Pointer, n int) error {
	return check(int(C.x_htod(l.fns, cc(ctx), dp(dst), src, C.size_t(n))))
}

// MemcpyDtoH copies n bytes from the device to host memory.
func (l *Lib) MemcpyDtoH(ctx Context, dst unsafe.Pointer, src DevPtr, n int) error {
	return check(int(C.x_dtoh(l.fns, cc(ctx), dst, dp(src), C.size_t(n))))
}

// MemcpyDtoD copies n bytes between device addresses.
func (l *Lib) MemcpyDtoD(ctx Context, dst, src DevPtr, n int) error {
	return check(int(C.x_dtod(l.fns, cc(ctx), dp(dst), dp(src), C.size_t(n))))
}

// MemcpyHtoDAsync is MemcpyHtoD in stream order (src must stay valid and
// unchanged until the copy has run; page-locked for a true asynchronous
// copy).
func (l *Lib) MemcpyHtoDAsync(ctx Context, dst DevPtr, src unsafe.Pointer, n int, s Stream) error {
	return check(int(C.x_htodAsync(l.fns, cc(ctx), dp(dst), src, C.size_t(n), cs(s))))
}

// MemcpyDtoHAsync is MemcpyDtoH in stream order.
func (l *Lib) MemcpyDtoHAsync(ctx Context, dst unsafe.Pointer, src DevPtr, n int, s Stream) error {
	return check(int(C.x_dtohAsync(l.fns, cc(ctx), dst, dp(src), C.size_t(n), cs(s))))
}

// MemcpyDtoDAsync is MemcpyDtoD in stream order.
func (l *Lib) MemcpyDtoDAsync(ctx Context, dst, src DevPtr, n int, s Stream) error {
	return check(int(C.x_dtodAsync(l.fns, cc(ctx), dp(dst), dp(src), C.size_t(n), cs(s))))
}

// MemcpyPeer copies n bytes from src in sctx's device to dst in dctx's.
func (l *Lib) MemcpyPeer(ctx Context, dst DevPtr, dctx Context, src DevPtr, sctx Context, n int) error {
	return check(int(C.x_peer(l.fns, cc(ctx), dp(dst), cc(dctx), dp(src), cc(sctx), C.size_t(n))))
}

// MemcpyPeerAsync is MemcpyPeer in stream order.
func (l *Lib) MemcpyPeerAsync(ctx Context, dst DevPtr, dctx Context, src DevPtr, sctx Context, n int, s Stream) error {
	return check(int(C.x_peerAsync(l.fns, cc(ctx), dp(dst), cc(dctx), dp(src), cc(sctx), C.size_t(n), cs(s))))
}

// MemsetD8 sets n bytes to v.
func (l *Lib) MemsetD8(ctx Context, p DevPtr, v byte, n int) error {
	return check(int(C.x_memsetD8(l.fns, cc(ctx), dp(p), C.uchar(v), C.size_t(n))))
}

// MemsetD8Async sets n bytes to v in stream order.
func (l *Lib) MemsetD8Async(ctx Context, p DevPtr, v byte, n int, s Stream) error {
	return check(int(C.x_memsetD8Async(l.fns, cc(ctx), dp(p), C.uchar(v), C.size_t(n), cs(s))))
}

// MemsetD16Async sets n 16-bit values to v in stream order.
func (l *Lib) MemsetD16Async(ctx Context, p DevPtr, v uint16, n int, s Stream) error {
	return check(int(C.x_memsetD16Async(l.fns, cc(ctx), dp(p), C.ushort(v), C.size_t(n), cs(s))))
}

// MemsetD32Async sets n 32-bit values to v in stream order.
func (l *Lib) MemsetD32Async(ctx Context, p DevPtr, v uint32, n int, s Stream) error {
	return check(int(C.x_memsetD32Async(l.fns, cc(ctx), dp(p), C.uint(v), C.size_t(n), cs(s))))
}

// StreamCreate creates a non-blocking stream.
func (l *Lib) StreamCreate(ctx Context) (Stream, error) {
	var s C.CUstream
	err := check(int(C.x_streamCreate(l.fns, cc(ctx), &s, StreamNonBlocking)))
	return Stream{unsafe.Pointer(s)}, err
}

// StreamDestroy destroys a stream (its pending work still runs).
func (l *Lib) StreamDestroy(ctx Context, s Stream) error {
	return check(int(C.x_streamDestroy(l.fns, cc(ctx), cs(s))))
}

// StreamSynchronize blocks the calling thread until s has drained.
func (l *Lib) StreamSynchronize(s Stream) error { return check(int(C.x_streamSync(l.fns, cs(s)))) }

// StreamQuery is nil when s has drained, ErrNotReady when not.
func (l *Lib) StreamQuery(s Stream) error { return check(int(C.x_streamQuery(l.fns, cs(s)))) }

// StreamWaitEvent makes s wait for e's latest record.
func (l *Lib) StreamWaitEvent(ctx Context, s Stream, e Event) error {
	return check(int(C.x_streamWait(l.fns, cc(ctx), cs(s), ce(e))))
}

// EventCreate creates an event (flags Event…).
func (l *Lib) EventCreate(ctx Context, flags uint) (Event, error) {
	var e C.CUevent
	err := check(int(C.x_eventCreate(l.fns, cc(ctx), &e, C.unsigned(flags))))
	return Event{unsafe.Pointer(e)}, err
}

// EventRecord records e at the current end of s.
func (l *Lib) EventRecord(ctx Context, e Event, s Stream) error {
	return check(int(C.x_eventRecord(l.fns, cc(ctx), ce(e), cs(s))))
}

// EventQuery is nil when e's work is done, ErrNotReady when not.
func (l *Lib) EventQuery(e Event) error { return check(int(C.x_eventQuery(l.fns, ce(e)))) }

// EventSynchronize blocks the calling thread until e's work is done.
func (l *Lib) EventSynchronize(e Event) error { return check(int(C.x_eventSync(l.fns, ce(e)))) }

// EventElapsed is the time in milliseconds from start to end.
func (l *Lib) EventElapsed(start, end Event) (float32, error) {
	var ms C.float
	err := check(int(C.x_eventElapsed(l.fns, &ms, ce(start), ce(end))))
	return float32(ms), err
}

// EventDestroy destroys an event.
func (l *Lib) EventDestroy(ctx Context, e Event) error {
	return check(int(C.x_eventDestroy(l.fns, cc(ctx), ce(e))))
}

// ModuleLoad loads a module from PTX text (or a cubin). A failure returns
// the Result and the JIT's error log.
func (l *Lib) ModuleLoad(ctx Context, image string) (Module, string, error) {
	cimg := C.CString(image)
	defer C.free(unsafe.Pointer(cimg))
	const logSize = 8 << 10
	log := (*C.char)(C.calloc(logSize, 1))
	defer C.free(unsafe.Pointer(log))
	var m C.CUmodule
	err := check(int(C.x_moduleLoad(l.fns, cc(ctx), &m, cimg, log, logSize)))
	return Module{unsafe.Pointer(m)}, strings.TrimSpace(C.GoString(log)), err
}

// ModuleUnload unloads a module.
func (l *Lib) ModuleUnload(ctx Context, m Module) error {
	return check(int(C.x_moduleUnload(l.fns, cc(ctx), C.CUmodule(m.p))))
}

// ModuleFunction finds a kernel of the module by name.
func (l *Lib) ModuleFunction(ctx Context, m Module, name string) (Function, error) {
	cname := C.CString(name)
	defer C.free(unsafe.Pointer(cname))
	var f C.CUfunction
	err := check(int(C.x_moduleFunc(l.fns, cc(ctx), &f, C.CUmodule(m.p), cname)))
	return Function{unsafe.Pointer(f)}, err
}

// Launch launches f on s with the packed arguments.
func (l *Lib) Launch(ctx Context, f Function, grid, block Dim3, shared uint32, s Stream, args *Args) error {
	n := args.Len()
	if n > MaxArgs {
		return ErrInvalidValue
	}
	var slots *C.uint64_t
	var offs *C.int32_t
	if n > 0 {
		slots = (*C.uint64_t)(unsafe.Pointer(&args.buf[0]))
		offs = (*C.int32_t)(unsafe.Pointer(&args.offs[0]))
	}
	return check(int(C.x_launch(l.fns, cc(ctx), C.CUfunction(f.p),
		C.unsigned(grid.X), C.unsigned(grid.Y), C.unsigned(grid.Z),
		C.unsigned(block.X), C.unsigned(block.Y), C.unsigned(block.Z),
		C.unsigned(shared), cs(s), slots, offs, C.int(n))))
}

// ErrorString is the driver's description of r.
func (l *Lib) ErrorString(r Result) string {
	var s *C.char
	if C.x_errorString(l.fns, C.int(r), &s) != 0 || s == nil {
		return ""
	}
	return C.GoString(s)
}

// HasIPC reports whether the driver exports the IPC entry points
// (cuIpcGetMemHandle, cuIpcOpenMemHandle_v2 or cuIpcOpenMemHandle,
// cuIpcCloseMemHandle). They are optional: a driver without them loads,
// and the IPC calls fail with ErrNoIPC.
func (l *Lib) HasIPC() bool { return !l.noIPC && C.x_hasIPC(l.fns) != 0 }

// WithoutIPC returns a Lib that calls the same driver but behaves as one
// without the IPC entry points: for tests of what a backend does then.
func (l *Lib) WithoutIPC() *Lib {
	c := *l
	c.noIPC = true
	return &c
}

// IpcGetMemHandle returns the IPC handle of the allocation whose base
// (what MemAlloc returned) is p.
func (l *Lib) IpcGetMemHandle(ctx Context, p DevPtr) (IPCHandle, error) {
	var h IPCHandle
	if !l.HasIPC() {
		return h, ErrNoIPC
	}
	err := check(int(C.x_ipcGet(l.fns, cc(ctx), (*C.uchar)(unsafe.Pointer(&h[0])), dp(p))))
	return h, err
}

// IpcOpenMemHandle maps the allocation h names, another process's, in
// ctx and returns its base there (flags: IPCLazyEnablePeerAccess). A
// handle already open in ctx is counted again and the same base returned.
func (l *Lib) IpcOpenMemHandle(ctx Context, h IPCHandle, flags uint) (DevPtr, error) {
	if !l.HasIPC() {
		return 0, ErrNoIPC
	}
	var p C.CUdeviceptr
	err := check(int(C.x_ipcOpen(l.fns, cc(ctx), &p, (*C.uchar)(unsafe.Pointer(&h[0])), C.unsigned(flags))))
	return DevPtr(p), err
}

// IpcCloseMemHandle closes one open of the mapping at p (what
// IpcOpenMemHandle returned), unmapping it at the last.
func (l *Lib) IpcCloseMemHandle(ctx Context, p DevPtr) error {
	if !l.HasIPC() {
		return ErrNoIPC
	}
	return check(int(C.x_ipcClose(l.fns, cc(ctx), dp(p))))
}
