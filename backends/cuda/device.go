package cuda

import (
	"os"
	"unsafe"

	"github.com/xpu-go/xpu"
	"github.com/xpu-go/xpu/backends/cuda/internal/cu"
	"github.com/xpu-go/xpu/xerr"
)

// EnvLibrary names the environment variable that points the backend at a
// driver library other than libcuda.so.1 (a path), when no option does.
const EnvLibrary = "XPU_CUDA_LIBRARY"

// DefaultLibrary is the driver library loaded when neither the option nor
// EnvLibrary names one.
const DefaultLibrary = "libcuda.so.1"

func libraryPath(opt string) string {
	if opt != "" {
		return opt
	}
	if p := os.Getenv(EnvLibrary); p != "" {
		return p
	}
	return DefaultLibrary
}

// load opens the driver library, or says why it is unavailable.
func load(path string) (*cu.Lib, error) {
	l, err := cu.Open(libraryPath(path))
	if err != nil {
		return nil, xerr.Errorf(Name, "open", xpu.ErrUnavailable, "%w", err)
	}
	return l, nil
}

// dev is one device's primary context, retained by a component (a space,
// an executor) for its lifetime: the context every call of the component
// makes current on its OS thread.
type dev struct {
	lib *cu.Lib
	idx int
	h   int // the driver's device handle
	ctx cu.Context
}

// retain checks the device index and retains its primary context.
func retain(lib *cu.Lib, idx int) (dev, error) {
	n, err := lib.DeviceCount()
	if err != nil {
		return dev{}, devErr(idx, "open", err)
	}
	if idx < 0 || idx >= n {
		return dev{}, xerr.Dev(Name, idx, "open", xerr.Detail(ErrNoSuchDevice, "device %d of %d", idx, n))
	}
	h, err := lib.Device(idx)
	if err != nil {
		return dev{}, devErr(idx, "open", err)
	}
	ctx, err := lib.PrimaryCtxRetain(h)
	if err != nil {
		return dev{}, devErr(idx, "open", err)
	}
	return dev{lib: lib, idx: idx, h: h, ctx: ctx}, nil
}

func (d dev) release() error {
	return devErr(d.idx, "close", closing(d.lib.PrimaryCtxRelease(d.h)))
}

// hostPointer is the host view of a unified address.
func hostPointer(p cu.DevPtr) unsafe.Pointer {
	u := uintptr(p)
	return *(*unsafe.Pointer)(unsafe.Pointer(&u))
}
