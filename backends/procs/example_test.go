package procs_test

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/xpu-go/xpu/backends/procs"
	"github.com/xpu-go/xpu/comm"
	"github.com/xpu-go/xpu/memspace"
)

// A job of 3 ranks over loopback TCP in one process; in a real job each
// rank is its own process and calls procs.FromEnv.
func ExampleNewLoopbackGroup() {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	ranks, err := procs.NewLoopbackGroup(ctx, 3)
	if err != nil {
		panic(err)
	}
	sums := make([]float64, 3)
	var wg sync.WaitGroup
	for r, c := range ranks {
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer c.Close()
			v, _ := memspace.FromSlice([]float64{float64(r + 1)})
			if err := comm.Allreduce(ctx, c, v, v, comm.Sum); err != nil {
				panic(err)
			}
			h, _ := v.Host()
			sums[r] = h[0]
		}()
	}
	wg.Wait()
	fmt.Println(sums)
	// Output: [6 6 6]
}
