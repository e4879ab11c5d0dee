//go:build !rdma || !cgo

package verbs

import "github.com/xpu-go/xpu/backends/rdma/internal/fabric"

// This file is the build without RDMA (no -tags rdma, or no cgo): the same
// API, every entry point failing with ErrNotBuilt.

// Built reports whether the package was built with rdma-core (-tags rdma
// and cgo).
const Built = false

// Provider returns a provider whose methods fail with ErrNotBuilt.
func Provider() fabric.Provider { return provider{} }

type provider struct{}

// Devices fails with ErrNotBuilt.
func (provider) Devices() ([]fabric.DeviceInfo, error) { return nil, ErrNotBuilt }

// Open fails with ErrNotBuilt.
func (provider) Open(name string, cqDepth int) (fabric.Context, error) { return nil, ErrNotBuilt }
