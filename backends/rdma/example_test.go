package rdma_test

import (
	"context"
	"fmt"
	"log"
	"time"

	"github.com/xpu-go/xpu/backends/rdma"
	"github.com/xpu-go/xpu/comm"
	"github.com/xpu-go/xpu/memspace"
)

// A rank of a job started by `xpu run -n 4 -- prog` (or mpirun, or srun)
// joins over RDMA and sums a buffer with the others.
func Example() {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	c, err := rdma.FromEnv(ctx)
	if err != nil {
		log.Fatal(err) // no device, no -tags rdma, or no job: the error says which
	}
	defer c.Close()
	grads := make([]float32, 1<<20)
	b, _ := memspace.FromSlice(grads)
	if err := comm.Allreduce(ctx, c, b, b, comm.Sum); err != nil {
		log.Fatal(err)
	}
}

// Every rank exposes a region, the ranks exchange its key, and each writes
// into the next rank's region with Put, then tells it with a message.
func ExampleComm_Put() {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	c, err := rdma.FromEnv(ctx)
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()
	inbox := make([]byte, 4096)
	ib, _ := memspace.FromSlice(inbox)
	region, err := c.Expose(ib.Block())
	if err != nil {
		log.Fatal(err)
	}
	defer region.Close()
	keys, err := comm.ExchangeKeys(ctx, c, region.Key())
	if err != nil {
		log.Fatal(err)
	}
	next := (c.Rank() + 1) % c.Size()
	msg, _ := memspace.FromSlice([]byte(fmt.Sprintf("hello from rank %d", c.Rank())))
	if _, err := c.Put(msg.Block(), keys[next], 0); err != nil {
		log.Fatal(err)
	}
	if err := c.Flush(ctx, next); err != nil { // the bytes are in place
		log.Fatal(err)
	}
	if err := comm.Barrier(ctx, c); err != nil { // and every rank's are
		log.Fatal(err)
	}
	fmt.Printf("%s\n", inbox[:17])
}
