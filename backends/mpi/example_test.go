package mpi_test

import (
	"context"
	"fmt"
	"log"
	"time"

	"github.com/xpu-go/xpu/backends/mpi"
	"github.com/xpu-go/xpu/comm"
	"github.com/xpu-go/xpu/memspace"
)

// A program run as every rank of a job (mpirun -np 4 ./prog, built with
// -tags mpi) sums a vector over the ranks, then splits the job in two.
func Example() {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	c, err := mpi.Open(ctx, mpi.Options{})
	if err != nil {
		log.Fatal(err) // built without -tags mpi: xpu.ErrUnavailable
	}
	defer c.Close() // the last Close finalises MPI

	x := []float64{float64(c.Rank()), 1}
	xb, _ := memspace.FromSlice(x)
	// In place; context.Background() would make it one MPI_Allreduce.
	if err := comm.Allreduce(ctx, c, xb, xb, comm.Sum); err != nil {
		log.Fatal(err)
	}
	fmt.Printf("rank %d of %d: sum of ranks %v\n", c.Rank(), c.Size(), x[0])

	half, err := c.Split(ctx, c.Rank()%2, c.Rank())
	if err != nil {
		log.Fatal(err)
	}
	defer half.Close()
	if err := comm.Barrier(ctx, half); err != nil {
		log.Fatal(err)
	}
}
