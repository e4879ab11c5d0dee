package local_test

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/xpu-go/xpu/backends/local"
	"github.com/xpu-go/xpu/comm"
	"github.com/xpu-go/xpu/memspace"
)

// Each rank of a group runs in its own goroutine; rank 0 sends a greeting
// to every other rank.
func ExampleNewGroup() {
	ranks, err := local.NewGroup(3, local.Options{})
	if err != nil {
		panic(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var wg sync.WaitGroup

	out := make([]string, len(ranks))
	for _, c := range ranks {
		wg.Go(func() {
			defer c.Close()
			if c.Rank() == 0 {
				for dst := 1; dst < c.Size(); dst++ {
					msg, _ := memspace.FromSlice([]byte(fmt.Sprintf("hello, rank %d", dst)))
					if err := comm.Send(ctx, c, msg.Block(), dst, 0); err != nil {
						panic(err)
					}
				}
				return
			}
			buf := make([]byte, 64)
			b, _ := memspace.FromSlice(buf)
			st, err := comm.Recv(ctx, c, b.Block(), 0, comm.AnyTag)
			if err != nil {
				panic(err)
			}
			out[c.Rank()] = fmt.Sprintf("rank %d got %q from %d", c.Rank(), buf[:st.Count], st.Source)
		})
	}
	wg.Wait()
	fmt.Println(out[1])
	fmt.Println(out[2])
	// Output:
	// rank 1 got "hello, rank 1" from 0
	// rank 2 got "hello, rank 2" from 0
}
