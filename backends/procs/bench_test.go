package procs_test

import (
	"testing"

	"github.com/xpu-go/xpu/internal/tooling/bench"
)

// BenchmarkTCP runs the cases of bench.TCP (go test -bench TCP), named as
// the cases.
func BenchmarkTCP(b *testing.B) {
	for _, c := range bench.TCP {
		b.Run(c.Name, c.Run)
	}
}
