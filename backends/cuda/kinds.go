package cuda

import "github.com/xpu-go/xpu/xerr"

// Name is the name the driver is registered under and the backend its
// errors name.
const Name = "cuda"

// Kinds of memory (memspace.Properties.Kind).
const (
	// KindDevice is device memory: the host cannot touch it (a host view
	// is memspace.ErrNotHostAccessible); transfers reach it.
	KindDevice = "cuda-device"
	// KindPinned is page-locked host memory mapped for the device: host-
	// and device-accessible, the fastest source and target of copies.
	KindPinned = "cuda-pinned"
	// KindManaged is managed (unified) memory, migrated on demand.
	KindManaged = "cuda-managed"
)

// ErrNoSuchDevice reports a device index the driver does not have.
var ErrNoSuchDevice = xerr.NewKind("no such device", xerr.ErrInvalidArgument)
