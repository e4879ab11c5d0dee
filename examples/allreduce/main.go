package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/xpu-go/xpu"
	"github.com/xpu-go/xpu/comm"
	"github.com/xpu-go/xpu/memspace"

	_ "github.com/xpu-go/xpu/backends/cpu"   // host memory
	_ "github.com/xpu-go/xpu/backends/procs" // the communicator between processes
)

// n is the length of each rank's vector.
const n = 1 << 16

func main() {
	// Ctrl-C, or `xpu run` stopping the job, cancels the context and every
	// blocking call returns; a minute bounds the run, in case a rank never
	// shows up.
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	err := run(ctx)
	cancel()
	stop()
	if err != nil {
		fmt.Fprintln(os.Stderr, "allreduce:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context) (err error) {
	// Join the job: the procs backend reads this rank's place from the
	// environment that xpu run (or mpirun, or srun) set.
	network, err := xpu.Open(ctx, "procs", nil)
	if err != nil {
		return err
	}
	defer func() { err = errors.Join(err, network.Close()) }()
	c := network.Comm
	if c == nil {
		// Not started by a launcher: be a job of one rank.
		ranks, err := network.Group(ctx, 1)
		if err != nil {
			return err
		}
		c = ranks[0]
	}
	rank, size := c.Rank(), c.Size()

	host, err := xpu.Open(ctx, "cpu", nil)
	if err != nil {
		return err
	}
	// Closing the backend reports memory not freed: free before it.
	defer func() { err = errors.Join(err, host.Close()) }()

	send, err := memspace.Alloc[float64](host.Memory, n)
	if err != nil {
		return err
	}
	defer send.Free()
	recv, err := memspace.Alloc[float64](host.Memory, n)
	if err != nil {
		return err
	}
	defer recv.Free()

	// Rank r contributes (r+1)·(i+1) at index i.
	values, err := send.Host()
	if err != nil {
		return err
	}
	for i := range values {
		values[i] = float64((rank + 1) * (i + 1))
	}

	if err := comm.Allreduce(ctx, c, send, recv, comm.Sum); err != nil {
		return err
	}

	// The sum over r of (r+1)·(i+1) is (i+1)·size·(size+1)/2, exactly: the
	// values are integers well within float64's 53 bits.
	sums, err := recv.Host()
	if err != nil {
		return err
	}
	ranks := float64(size * (size + 1) / 2)
	for i, got := range sums {
		if want := ranks * float64(i+1); got != want {
			return fmt.Errorf("rank %d of %d: element %d is %v, want %v", rank, size, i, got, want)
		}
	}
	fmt.Printf("rank %d of %d: allreduce of %d float64: ok (last element %.0f)\n", rank, size, n, sums[n-1])
	return nil
}
