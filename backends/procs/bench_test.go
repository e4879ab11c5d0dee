package procs_test

import (
	"testing"

	"github.com/xpu-go/xpu/backends/procs"
	"github.com/xpu-go/xpu/internal/tooling/bench"
)

// BenchmarkTCP runs the cases of bench.TCP (go test -bench TCP), named as
// the cases.
func BenchmarkTCP(b *testing.B) {
	for _, c := range bench.TCP {
		b.Run(c.Name, c.Run)
	}
}

// BenchmarkExpose1GiB exposes a 1 GiB block and withdraws it: what a
// region costs here, where nothing is registered with a device (the
// region is an entry of the rank's table).
func BenchmarkExpose1GiB(b *testing.B) {
	cs := group(b, 2, procs.Config{})
	buf := bench.Block(make([]byte, 1<<30))
	b.ReportAllocs()
	for b.Loop() {
		reg, err := cs[0].Expose(buf)
		if err != nil {
			b.Fatal(err)
		}
		if err := reg.Close(); err != nil {
			b.Fatal(err)
		}
	}
}
