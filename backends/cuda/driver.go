package cuda

import (
	"context"
	"errors"
	"fmt"

	"github.com/xpu-go/xpu"
	"github.com/xpu-go/xpu/backends/cuda/internal/cu"
	"github.com/xpu-go/xpu/memspace"
	"github.com/xpu-go/xpu/xerr"
)

func init() {
	xpu.Register(Name, Driver{})
}

// Driver opens the CUDA backend; it is registered as "cuda". Its options
// are the Opt constants (see Options in the package documentation); a
// machine without a usable driver or device is an error matching
// xpu.ErrUnavailable with the reason.
type Driver struct{}

// Open returns a backend of one device: its device memory as Memory; the
// device, pinned and managed spaces as Spaces; an Executor whose streams
// are CUDA streams. While it is open, Path serves copies between CUDA
// memory and host memory. Close closes the executor, then the spaces
// (reporting leaked blocks), and removes the paths.
func (Driver) Open(ctx context.Context, opts xpu.Options) (*xpu.Backend, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	r := opts.Reader(Name)
	idx := r.Int(OptDevice, 0, 0, 1<<20)
	library := r.String(OptLibrary, "")
	if err := r.Err(); err != nil {
		return nil, xerr.Op(Name, "open", err)
	}
	lib, err := load(library)
	if err != nil {
		return nil, err
	}
	b := &xpu.Backend{Name: Name}
	fail := func(err error) (*xpu.Backend, error) {
		_ = b.Close()
		return nil, err
	}
	for _, kind := range []string{KindDevice, KindPinned, KindManaged} {
		sp, err := newSpace(lib, kind, idx)
		if err != nil {
			return fail(err)
		}
		b.Spaces = append(b.Spaces, sp)
		b.OnClose(func() error { return ignoreClosed(sp.Close()) })
	}
	b.Memory = b.Spaces[0]
	unregisterImporter := memspace.RegisterImporter(b.Spaces[0].(*Space))
	b.OnClose(func() error {
		unregisterImporter()
		return nil
	})
	exec, err := newExecutor(lib, idx)
	if err != nil {
		return fail(err)
	}
	b.Exec = exec
	unregister := registerPaths()
	b.OnClose(func() error {
		unregister()
		return ignoreClosed(exec.Close())
	})
	return b, nil
}

// Options of Open: the keys of xpu.Options the driver reads (see Options
// in the package documentation).
const (
	// OptDevice is the index of the device, an integer from 0; 0 by
	// default.
	OptDevice = "device"
	// OptLibrary is the path of the driver library; EnvLibrary
	// ($XPU_CUDA_LIBRARY), else DefaultLibrary found as dlopen finds it,
	// by default.
	OptLibrary = "library"
)

func ignoreClosed(err error) error {
	if errors.Is(err, xerr.ErrClosed) {
		return nil
	}
	return err
}

// Info loads the driver (or says why it cannot) and describes every
// device: name, memory, compute capability, PCI address, and — where NVML
// is there to ask — UUID, NUMA node, CPU affinity and the links between
// devices.
func (Driver) Info(ctx context.Context) xpu.Info {
	info := xpu.Info{
		Name:     Name,
		Concepts: []string{"memory", "executor", "transfer"},
		Capabilities: append(xpu.CapabilitiesOf((*Space)(nil), (*Executor)(nil), (*Event)(nil)),
			CapKernels, CapPinned, CapManaged, CapPeer),
		ElementTypes: append(append([]string(nil), xpu.NumericTypes...),
			"bool", "fixed-size pointer-free structs and arrays"),
		Devices: []xpu.Device{},
	}
	lib, err := cu.Open(libraryPath(""))
	if err != nil {
		info.Reason = err.Error()
		return info
	}
	info.Library = fmt.Sprintf("%s (driver API %s)", lib.Path(), cu.VersionString(lib.Version()))
	devs, err := describe(lib)
	if err != nil {
		info.Reason = reason(err)
		return info
	}
	if len(devs) == 0 {
		info.Reason = "the driver reports no device"
		return info
	}
	info.Available = true
	info.Devices = devs
	return info
}

// reason is an error's text without the backend's name in front.
func reason(err error) string {
	var e *xerr.Error
	if errors.As(err, &e) {
		return e.Err.Error()
	}
	return err.Error()
}

// Capabilities of the backend beyond the concepts'.
const (
	// CapKernels: PTX modules loaded and launched (Module, Function), and
	// built-in kernels.
	CapKernels = "kernels.ptx"
	// CapPinned: a page-locked host memory space.
	CapPinned = "memory.pinned"
	// CapManaged: a managed (unified) memory space.
	CapManaged = "memory.managed"
	// CapPeer: copies between devices.
	CapPeer = "transfer.peer"
)

// describe lists the devices as the driver sees them, with what NVML adds.
func describe(lib *cu.Lib) ([]xpu.Device, error) {
	n, err := lib.DeviceCount()
	if err != nil {
		return nil, driverErr(err)
	}
	devs := make([]xpu.Device, 0, n)
	for i := range n {
		d, err := deviceInfo(lib, i)
		if err != nil {
			return nil, err
		}
		devs = append(devs, d)
	}
	enrich(devs)
	return devs, nil
}

func deviceInfo(lib *cu.Lib, i int) (xpu.Device, error) {
	h, err := lib.Device(i)
	if err != nil {
		return xpu.Device{}, devErr(i, "info", err)
	}
	d := xpu.Device{Index: i, MemoryTotal: -1, MemoryFree: -1}
	if d.Name, err = lib.DeviceName(h); err != nil {
		return xpu.Device{}, devErr(i, "info", err)
	}
	if d.MemoryTotal, err = lib.DeviceTotalMem(h); err != nil {
		return xpu.Device{}, devErr(i, "info", err)
	}
	major, err1 := lib.DeviceAttribute(h, cu.AttrComputeCapabilityMajor)
	minor, err2 := lib.DeviceAttribute(h, cu.AttrComputeCapabilityMinor)
	if err1 == nil && err2 == nil {
		d.ComputeCapability = fmt.Sprintf("%d.%d", major, minor)
	}
	d.PCIBusID, _ = lib.DevicePCIBusID(h)
	d.UUID, _ = lib.DeviceUUID(h)
	// Free memory needs a context: the primary one, retained for the
	// question only.
	if ctx, err := lib.PrimaryCtxRetain(h); err == nil {
		if free, _, err := lib.MemGetInfo(ctx); err == nil {
			d.MemoryFree = free
		}
		_ = lib.PrimaryCtxRelease(h)
	}
	return d, nil
}
