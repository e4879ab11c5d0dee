package cpu_test

import (
	"context"
	"fmt"
	"time"

	"github.com/xpu-go/xpu"
	"github.com/xpu-go/xpu/backends/cpu"
	"github.com/xpu-go/xpu/executor"
	"github.com/xpu-go/xpu/memspace"
	"github.com/xpu-go/xpu/transfer"
)

// Open the backend by name, allocate typed buffers off the Go heap, fill
// one in parallel, copy it, and reduce the copy.
func Example() {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	b, err := xpu.Open(ctx, "cpu", xpu.Options{"workers": "2"})
	if err != nil {
		panic(err)
	}
	defer b.Close()

	src, _ := memspace.Alloc[float64](b.Memory, 1000)
	dst, _ := memspace.Alloc[float64](b.Memory, 1000)
	defer src.Free()
	defer dst.Free()

	p, _ := executor.As[executor.Parallel](b.Exec)
	s, _ := src.Host()
	_ = p.ParallelFor(ctx, len(s), func(i int) { s[i] = float64(i) })

	_ = transfer.Copy(ctx, dst, src)

	d, _ := dst.Host()
	sum, _ := executor.Reduce(ctx, p, len(d), 0, 0.0,
		func(lo, hi int, acc float64) float64 {
			for _, v := range d[lo:hi] {
				acc += v
			}
			return acc
		},
		func(a, b float64) float64 { return a + b })
	fmt.Println(sum)
	// Output: 499500
}

// Work on a stream runs in order; an event marks a point in it, and
// Elapsed times the work between two events.
func ExampleExecutor_NewStream() {
	e := cpu.NewExecutor(2)
	defer e.Close()
	s, _ := e.NewStream()
	defer s.Close()

	start, _ := s.Record()
	total := 0
	for i := 1; i <= 4; i++ {
		_ = s.Enqueue(func(context.Context) error { total += i; return nil })
	}
	end, _ := s.Record()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	_ = end.Wait(ctx)

	d, err := executor.Elapsed(start, end)
	fmt.Println(total, d >= 0, err)
	// Output: 10 true <nil>
}

// A space with a limit refuses what would pass it, and keeps a ledger.
func ExampleNewSpace() {
	s := cpu.NewSpace(cpu.SpaceOptions{Limit: 1 << 20})
	defer s.Close()
	a, _ := s.Allocate(512<<10, 0)
	_, err := s.Allocate(768<<10, 0)
	fmt.Println(err != nil)
	_ = s.Free(a)
	st := s.Stats()
	fmt.Println(st.InUse, st.Peak, st.Allocs, st.Frees)
	// Output:
	// true
	// 0 524288 1 1
}
