package verbs

import "github.com/xpu-go/xpu/xerr"

// Errors of the package, in every build.
var (
	// ErrNotBuilt is the error of every entry point of a build without the
	// tag rdma or without cgo. It matches xerr.ErrUnavailable.
	ErrNotBuilt = xerr.NewKind(noRDMA, xerr.ErrUnavailable)
	// ErrNoDevice reports that no RDMA device (or none matching the name,
	// or none with an active port) is present, or that the kernel has no
	// RDMA support. It matches xerr.ErrUnavailable.
	ErrNoDevice = xerr.NewKind("no RDMA device", xerr.ErrUnavailable)
)

const noRDMA = "built without RDMA support: rebuild with -tags rdma (and libibverbs-dev, librdmacm-dev installed)"
