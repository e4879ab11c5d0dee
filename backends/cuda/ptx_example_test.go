//go:build cgo

package cuda_test

import "github.com/xpu-go/xpu/backends/cuda/internal/kernels"

// ptx is the examples' PTX: the test kernels, compiled by clang's NVPTX
// back end.
var ptx = kernels.TestPTX
