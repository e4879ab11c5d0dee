package cpu_test

import (
	"testing"

	"github.com/xpu-go/xpu/internal/tooling/bench"
)

// The benchmark bodies live in internal/tooling/bench, shared with `xpu bench`;
// these wrappers run them under `go test -bench`, one sub-benchmark per
// case of bench.CPU, named as the case.
func BenchmarkCPU(b *testing.B) {
	for _, c := range bench.CPU {
		b.Run(c.Name, c.Run)
	}
}
