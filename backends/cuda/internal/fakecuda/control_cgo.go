//go:build cgo

package fakecuda

/*
#cgo LDFLAGS: -ldl
#include <dlfcn.h>
#include <stdlib.h>

typedef void (*fakecuda_inject_fn)(int, int, int);
typedef void (*fakecuda_reset_fn)(void);
typedef void (*fakecuda_stats_fn)(long long *, int);
typedef void (*fakecuda_device_stats_fn)(int, long long *, int);

static void fc_call_inject(void *f, int kind, int dev, int count) { ((fakecuda_inject_fn)f)(kind, dev, count); }
static void fc_call_reset(void *f) { ((fakecuda_reset_fn)f)(); }
static void fc_call_stats(void *f, long long *out, int n) { ((fakecuda_stats_fn)f)(out, n); }
static void fc_call_device_stats(void *f, int dev, long long *out, int n) { ((fakecuda_device_stats_fn)f)(dev, out, n); }

static void *fc_dlopen(const char *path) { return dlopen(path, RTLD_NOW | RTLD_LOCAL); }
static const char *fc_dlerror(void) { const char *e = dlerror(); return e ? e : "unknown dlopen error"; }
*/
import "C"

import (
	"fmt"
	"unsafe"
)

// Control drives the test controls of one loaded instance of the fake.
// Its methods are safe for concurrent use.
type Control struct {
	path                              string
	inject, reset, stats, deviceStats unsafe.Pointer
}

// dlopenPath opens the library at path (RTLD_NOW), the same instance the
// backend gets when it loads the same path.
func dlopenPath(path string) (unsafe.Pointer, error) {
	cpath := C.CString(path)
	defer C.free(unsafe.Pointer(cpath))
	h := C.fc_dlopen(cpath)
	if h == nil {
		return nil, fmt.Errorf("fakecuda: dlopen %s: %s", path, C.GoString(C.fc_dlerror()))
	}
	return h, nil
}

func dlsym(h unsafe.Pointer, name string) unsafe.Pointer {
	cname := C.CString(name)
	defer C.free(unsafe.Pointer(cname))
	return C.dlsym(h, cname)
}

// Attach opens the library at path with dlopen (RTLD_NOW) and looks up its
// controls. Pass the path the backend loads: dlopen of the same path
// yields the same instance, so the controls act on the backend's driver.
// The library stays loaded for the rest of the process.
func Attach(path string) (*Control, error) {
	h, err := dlopenPath(path)
	if err != nil {
		return nil, err
	}
	c := &Control{
		path:        path,
		inject:      dlsym(h, "fakecuda_inject"),
		reset:       dlsym(h, "fakecuda_reset"),
		stats:       dlsym(h, "fakecuda_stats"),
		deviceStats: dlsym(h, "fakecuda_device_stats"),
	}
	if c.inject == nil || c.reset == nil || c.stats == nil || c.deviceStats == nil {
		return nil, fmt.Errorf("fakecuda: %s is not the fake driver (no fakecuda_* controls)", path)
	}
	return c, nil
}

// Path returns the path of the library the control drives.
func (c *Control) Path() string { return c.path }

// Inject arranges a fault on a device: for FaultOOM, FaultLaunch,
// FaultIllegalAddress and FaultCopy the next count operations of that
// kind fail (a count below 1 counts as 1); FaultDeviceLost ignores count.
func (c *Control) Inject(kind Fault, device, count int) {
	C.fc_call_inject(c.inject, C.int(kind), C.int(device), C.int(count))
}

// Reset clears the faults injected and not yet consumed, and makes lost
// devices available again. Allocations and other objects are kept.
func (c *Control) Reset() {
	C.fc_call_reset(c.reset)
}

// Stats returns the fake's counters.
func (c *Control) Stats() Stats {
	var v [statsLen]C.longlong
	C.fc_call_stats(c.stats, &v[0], C.int(len(v)))
	var w [statsLen]int64
	for i := range v {
		w[i] = int64(v[i])
	}
	return statsFrom(w)
}

// DeviceStats returns the fake's counters of one device (zeros for a
// device it does not have).
func (c *Control) DeviceStats(device int) DeviceStats {
	var v [4]C.longlong
	C.fc_call_device_stats(c.deviceStats, C.int(device), &v[0], C.int(len(v)))
	var w [4]int64
	for i := range v {
		w[i] = int64(v[i])
	}
	return deviceStatsFrom(w)
}
