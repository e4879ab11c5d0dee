//go:build !cgo

package topo

import "github.com/xpu-go/xpu/xerr"

// DiscoverLocal would discover the GPUs of this machine through NVML, but
// NVML's Go binding needs cgo and this program was built without it: it
// returns an error matching xerr.ErrUnavailable that says so.
func DiscoverLocal() ([]Device, error) {
	return nil, xerr.Errorf("cuda", "nvml open", xerr.ErrUnavailable, "built without cgo, which NVML needs (CGO_ENABLED=0)")
}
