package memspace_test

import (
	"testing"

	"github.com/xpu-go/xpu/internal/tooling/bench"
)

// BenchmarkPool runs the pool's benchmark cases (internal/tooling/bench/pool.go),
// which `xpu bench` runs too: go test -run x -bench Pool ./memspace/
func BenchmarkPool(b *testing.B) {
	for _, c := range bench.Pool {
		b.Run(c.Name, c.Run)
	}
}
