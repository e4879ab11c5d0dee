// Command quickstart is the program shown in the README: typed host memory off the Go
// heap, a parallel loop, and an allreduce between two in-process ranks.
package main

import (
	"context"
	"fmt"

	"github.com/xpu-go/xpu/backends/cpu"
	"github.com/xpu-go/xpu/backends/local"
	"github.com/xpu-go/xpu/comm"
	"github.com/xpu-go/xpu/memspace"
)

func main() {
	ctx := context.Background()
	space, exec := cpu.NewSpace(cpu.SpaceOptions{}), cpu.NewExecutor(0) // host memory off the Go heap; a worker pool
	defer space.Close()
	defer exec.Close()
	buf, _ := memspace.Alloc[float64](space, 1<<20) // typed buffer; check errors in real code
	defer buf.Free()
	x, _ := buf.Host()
	_ = exec.ParallelRange(ctx, len(x), 0, func(lo, hi int) { // parallel loop, chunked
		for i := lo; i < hi; i++ {
			x[i] = 1
		}
	})
	ranks, _ := local.NewGroup(2, local.Options{}) // two ranks in this process
	done := make(chan error)
	go func() { done <- comm.Allreduce(ctx, ranks[1], buf, buf, comm.Sum) }() // rank 1 (same values)
	err := comm.Allreduce(ctx, ranks[0], buf, buf, comm.Sum)                  // rank 0, in place
	fmt.Println(x[0], err, <-done)                                            // 2 <nil> <nil>
}
