// Command gpuipc moves device memory between the ranks of a job. Each rank
// allocates on a GPU (rank modulo the devices there are), sends the next
// rank a vector it filled and receives the previous rank's — a small one
// that travels eagerly and a large one that waits for its receive — then
// all-reduces a device vector, and checks every element on the host.
//
//	xpu run -n 2 go run ./examples/gpuipc [-n 2097152] [-require]
//
// Between ranks of one machine the bytes go from one device buffer to the
// other through CUDA IPC (docs/adr/0040-cuda-ipc.md); elsewhere they are
// staged through host memory. On a machine without a usable GPU it says
// why and exits 0 (exit status 2 with -require).
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"strconv"
	"syscall"
	"time"

	"github.com/xpu-go/xpu"
	"github.com/xpu-go/xpu/backends/cuda"
	"github.com/xpu-go/xpu/comm"
	"github.com/xpu-go/xpu/memspace"
	"github.com/xpu-go/xpu/transfer"

	_ "github.com/xpu-go/xpu/backends/procs" // the communicator between processes
)

func main() {
	n := flag.Int("n", 1<<21, "float32s in the large vector")
	require := flag.Bool("require", false, "fail (exit 2) when no GPU is usable")
	flag.Parse()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	err := run(ctx, *n)
	cancel()
	stop()
	if err != nil {
		if errors.Is(err, xpu.ErrUnavailable) && !*require {
			fmt.Printf("gpuipc example skipped: %v\n", err)
			return
		}
		fmt.Fprintf(os.Stderr, "gpuipc: %v\n", err)
		os.Exit(2)
	}
}

func run(ctx context.Context, n int) (err error) {
	network, err := xpu.Open(ctx, "procs", nil)
	if err != nil {
		return err
	}
	defer func() { err = errors.Join(err, network.Close()) }()
	c := network.Comm
	if c == nil {
		return fmt.Errorf("not started by a launcher: run it under xpu run -n 2")
	}
	rank, size := c.Rank(), c.Size()

	info, err := xpu.Describe(ctx, cuda.Name)
	if err != nil {
		return err
	}
	if !info.Available || len(info.Devices) == 0 {
		return fmt.Errorf("%w: %s", xpu.ErrUnavailable, info.Reason)
	}
	device := rank % len(info.Devices)
	gpu, err := xpu.Open(ctx, cuda.Name, xpu.Options{cuda.OptDevice: strconv.Itoa(device)})
	if err != nil {
		return err
	}
	// Closing the backend reports memory not freed: free before it.
	defer func() { err = errors.Join(err, gpu.Close()) }()

	next, prev := (rank+1)%size, (rank+size-1)%size
	for _, k := range []int{1 << 10, n} {
		if err := ring(ctx, c, gpu.Memory, k, next, prev); err != nil {
			return fmt.Errorf("rank %d (device %d): ring of %d float32: %w", rank, device, k, err)
		}
	}
	if err := allreduce(ctx, c, gpu.Memory, n); err != nil {
		return fmt.Errorf("rank %d (device %d): allreduce of %d float32: %w", rank, device, n, err)
	}
	fmt.Printf("rank %d of %d: device %d: ring of %d and %d float32 and allreduce of %d: ok\n",
		rank, size, device, 1<<10, n, n)
	// How the device messages went: "ipc" where the receiver copied from
	// the sender's device memory, mapped; "staged" through host memory.
	if p, ok := comm.As[devicePather](c); ok && size > 1 {
		fmt.Printf("rank %d: device messages to rank %d: %s; from rank %d: %s\n",
			rank, next, p.DevicePath(next), prev, p.DevicePath(prev))
	}
	return nil
}

// devicePather is the procs communicator's report of the path its device
// messages took with a peer (procs.Comm.DevicePath).
type devicePather interface{ DevicePath(peer int) string }

// value is what rank r sends at index i: exact in float32.
func value(r, i int) float32 { return float32(r*1000 + i%1000) }

// filled allocates k float32s of device memory holding value(rank, i),
// and returns them with the host buffer they were copied from.
func filled(ctx context.Context, dev memspace.Space, k, rank int) (*memspace.Buffer[float32], *memspace.Buffer[float32], error) {
	buf, err := memspace.Alloc[float32](dev, k)
	if err != nil {
		return nil, nil, err
	}
	host := make([]float32, k)
	for i := range host {
		host[i] = value(rank, i)
	}
	hb, err := memspace.FromSlice(host)
	if err == nil {
		err = transfer.Copy(ctx, buf, hb)
	}
	if err != nil {
		return nil, nil, errors.Join(err, buf.Free())
	}
	return buf, hb, nil
}

// ring sends k float32s from device memory to next and receives k from
// prev into device memory, then checks what arrived.
func ring(ctx context.Context, c comm.Comm, dev memspace.Space, k, next, prev int) (err error) {
	send, hb, err := filled(ctx, dev, k, c.Rank())
	if err != nil {
		return err
	}
	defer func() { err = errors.Join(err, send.Free()) }()
	recv, err := memspace.Alloc[float32](dev, k)
	if err != nil {
		return err
	}
	defer func() { err = errors.Join(err, recv.Free()) }()
	if _, err := comm.Sendrecv(ctx, c, send.Block(), next, 1, recv.Block(), prev, 1); err != nil {
		return err
	}
	if err := transfer.Copy(ctx, hb, recv); err != nil {
		return err
	}
	host, _ := hb.Host()
	for i, got := range host {
		if want := value(prev, i); got != want {
			return fmt.Errorf("element %d from rank %d is %v, want %v", i, prev, got, want)
		}
	}
	return nil
}

// allreduce sums k float32s of device memory over the ranks and checks
// the sums.
func allreduce(ctx context.Context, c comm.Comm, dev memspace.Space, k int) (err error) {
	buf, hb, err := filled(ctx, dev, k, c.Rank())
	if err != nil {
		return err
	}
	defer func() { err = errors.Join(err, buf.Free()) }()
	if err := comm.Allreduce(ctx, c, buf, buf, comm.Sum); err != nil {
		return err
	}
	if err := transfer.Copy(ctx, hb, buf); err != nil {
		return err
	}
	host, _ := hb.Host()
	size := c.Size()
	for i, got := range host {
		var want float32
		for r := range size {
			want += value(r, i)
		}
		if got != want {
			return fmt.Errorf("sum %d is %v, want %v", i, got, want)
		}
	}
	return nil
}
