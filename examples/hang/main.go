// Command hang is a program that hangs on purpose, to show what `xpu run`
// says about a job that does: rank 1 waits for a message of tag 7 that
// rank 0 never sends — rank 0 sends tag 8, then waits in a Barrier that
// rank 1 never enters. Run it with a timeout:
//
//	xpu run -n 2 --timeout 5s -- go run ./examples/hang
//
// When the timeout expires, xpu run asks every rank for its flight record
// and prints what the records say: which receive waits and for what, the
// message nothing received, and the collective one rank never entered.
//
// It opens the default chain (xpu.OpenDefault): procs under xpu run, mpi
// (when built with -tags mpi) or procs under mpirun. There, give the job
// a directory for the records, send the ranks SIGUSR2 once each has said
// where it waits, and read the records:
//
//	XPU_FLIGHT_DIR=/tmp/rec mpirun -np 2 ./hang & …; kill -USR2 <mpirun>; xpu flight /tmp/rec
//
// With -mismatch it hangs another way: rank 1 calls Bcast where the other
// ranks call Allreduce (over links that carry the collectives' messages;
// procs' shared memory finds the mismatch itself and fails at once).
package main

import (
	"context"
	"flag"
	"fmt"
	"os"

	"github.com/xpu-go/xpu"
	"github.com/xpu-go/xpu/comm"
	"github.com/xpu-go/xpu/memspace"

	_ "github.com/xpu-go/xpu/backends/cpu"
	_ "github.com/xpu-go/xpu/backends/mpi"
	_ "github.com/xpu-go/xpu/backends/procs"
)

var mismatch = flag.Bool("mismatch", false, "rank 1 calls Bcast where the others call Allreduce")

func main() {
	flag.Parse()
	if err := run(context.Background()); err != nil {
		fmt.Fprintln(os.Stderr, "hang:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context) error {
	b, _, err := xpu.OpenDefault(ctx, nil)
	if err != nil {
		return err
	}
	defer b.Close()
	host, err := xpu.Open(ctx, "cpu", nil)
	if err != nil {
		return err
	}
	defer host.Close()
	buf, err := memspace.Alloc[float64](host.Memory, 8)
	if err != nil {
		return err
	}
	defer buf.Free()
	c := b.Comm
	if err := comm.Allreduce(ctx, c, buf, buf, comm.Sum); err != nil {
		return err
	}
	if *mismatch {
		if c.Rank() == 1 {
			fmt.Println("rank 1: calling Bcast")
			return comm.Bcast(ctx, c, buf, 0)
		}
		fmt.Printf("rank %d: calling Allreduce\n", c.Rank())
		return comm.Allreduce(ctx, c, buf, buf, comm.Sum)
	}
	switch c.Rank() {
	case 0:
		if err := comm.Send(ctx, c, buf.Block(), 1, 8); err != nil { // the wrong tag
			return err
		}
		fmt.Println("rank 0: sent tag 8; entering the barrier")
		return comm.Barrier(ctx, c)
	case 1:
		fmt.Println("rank 1: receiving tag 7")
		_, err := comm.Recv(ctx, c, buf.Block(), 0, 7)
		return err
	}
	return nil
}
