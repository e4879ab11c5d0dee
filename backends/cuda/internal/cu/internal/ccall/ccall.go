//go:build cgo

package ccall

/*
#cgo LDFLAGS: -ldl
#include <dlfcn.h>
#include <stddef.h>
#include <stdlib.h>

typedef int (*ccall_version_fn)(int *);
typedef int (*ccall_set_fn)(void *);
typedef int (*ccall_meminfo_fn)(size_t *, size_t *);

static ccall_version_fn ccall_version;
static ccall_set_fn ccall_set;
static ccall_meminfo_fn ccall_meminfo;

// ccall_open resolves the entry points; NULL on success, else the reason.
static const char *ccall_open(const char *path) {
	void *h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
	if (!h) return dlerror();
	ccall_version = (ccall_version_fn)dlsym(h, "cuDriverGetVersion");
	ccall_set = (ccall_set_fn)dlsym(h, "cuCtxSetCurrent");
	ccall_meminfo = (ccall_meminfo_fn)dlsym(h, "cuMemGetInfo_v2");
	if (!ccall_version || !ccall_set || !ccall_meminfo) return "an entry point is missing";
	return NULL;
}

static int ccall_version_loop(long n) {
	int v, r;
	for (long i = 0; i < n; i++) {
		if ((r = ccall_version(&v)) != 0) return r;
	}
	return 0;
}

static int ccall_set_current(void *ctx) { return ccall_set(ctx); }

static int ccall_mem_info(size_t *f, size_t *t) { return ccall_meminfo(f, t); }

static int ccall_set_mem_info_loop(void *ctx, long n) {
	size_t f, t;
	int r;
	for (long i = 0; i < n; i++) {
		if ((r = ccall_set(ctx)) != 0 || (r = ccall_meminfo(&f, &t)) != 0) return r;
	}
	return 0;
}
*/
import "C"

import (
	"errors"
	"unsafe"
)

// Open loads the driver library at path, which must be initialized
// already (cu.Open does it).
func Open(path string) error {
	cpath := C.CString(path)
	defer C.free(unsafe.Pointer(cpath))
	if msg := C.ccall_open(cpath); msg != nil {
		return errors.New("ccall: " + path + ": " + C.GoString(msg))
	}
	return nil
}

// DriverVersionLoop calls cuDriverGetVersion n times in one crossing and
// returns the first nonzero CUresult, or 0.
func DriverVersionLoop(n int) int { return int(C.ccall_version_loop(C.long(n))) }

// SetCurrent calls cuCtxSetCurrent(ctx) in a crossing of its own.
func SetCurrent(ctx unsafe.Pointer) int { return int(C.ccall_set_current(ctx)) }

// MemGetInfo calls cuMemGetInfo_v2 in a crossing of its own, under the
// calling thread's current context, with Go pointers as cu passes them.
func MemGetInfo(free, total *uint64) int {
	return int(C.ccall_mem_info((*C.size_t)(unsafe.Pointer(free)), (*C.size_t)(unsafe.Pointer(total))))
}

// SetMemGetInfoLoop makes n pairs of cuCtxSetCurrent(ctx) and
// cuMemGetInfo_v2 in one crossing.
func SetMemGetInfoLoop(ctx unsafe.Pointer, n int) int {
	return int(C.ccall_set_mem_info_loop(ctx, C.long(n)))
}
