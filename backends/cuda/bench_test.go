//go:build cgo

package cuda_test

import (
	"testing"

	"github.com/xpu-go/xpu/internal/tooling/bench"
)

// The benchmark bodies live in internal/tooling/bench, shared with `xpu bench`;
// these wrappers run them under `go test -bench`, one sub-benchmark per
// case of bench.CUDA, named as the case. TestMain points the backend at
// the fake driver, so here they are a smoke run (their figures mean
// nothing); with XPU_CUDA_TEST_REAL=1 they measure the machine's GPU.
func BenchmarkCUDA(b *testing.B) {
	for _, c := range bench.CUDA {
		b.Run(c.Name, c.Run)
	}
}
