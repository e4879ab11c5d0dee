//go:build mpi

package mpi_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/xpu-go/xpu/backends/mpi"
	"github.com/xpu-go/xpu/comm"
	"github.com/xpu-go/xpu/memspace"
)

// The benchmarks run as the ranks of an MPI job:
//
//	go test -c -tags mpi -o mpi.test ./backends/mpi
//	mpirun -np 2 ./mpi.test -test.run='^$' -test.bench=.
//
// Rank 0 runs them under package testing and reports; before each timed
// loop it broadcasts which case and how many iterations, and the other
// ranks, which run no benchmarks of their own (followBenchmarks), run the
// same loop. internal/tooling/mpibench prints the same operations beside the C
// reference.

// benchCase is one benchmarked operation: make prepares its buffers on c
// and returns the loop.
type benchCase struct {
	name  string
	bytes int64
	make  func(c *mpi.Comm) func(n int) error
}

// pair reports whether the case needs 2 ranks.
func (bc benchCase) pair() bool {
	return strings.HasPrefix(bc.name, "pingpong/") || strings.HasPrefix(bc.name, "put/") || strings.HasPrefix(bc.name, "get/")
}

// benchCases is the same list on every rank: a case is named by its index.
var benchCases = func() []benchCase {
	var cs []benchCase
	ctxs := []struct {
		name string
		ctx  context.Context
	}{{"background", context.Background()}, {"deadline", farDeadline}}
	for _, cx := range ctxs {
		ctx := cx.ctx
		for _, n := range []int{8, 4 << 20} {
			cs = append(cs, benchCase{"pingpong/" + cx.name + "/" + sizeName(n), int64(2 * n), func(c *mpi.Comm) func(int) error {
				blk := mustBlock(make([]byte, n))
				return func(iters int) error {
					for range iters {
						var err error
						switch c.Rank() {
						case 0:
							if err = comm.Send(ctx, c, blk, 1, 1); err == nil {
								_, err = comm.Recv(ctx, c, blk, 1, 1)
							}
						case 1:
							if _, err = comm.Recv(ctx, c, blk, 0, 1); err == nil {
								err = comm.Send(ctx, c, blk, 0, 1)
							}
						}
						if err != nil {
							return err
						}
					}
					return nil
				}
			}})
		}
		for _, n := range []int{8, 64 << 10, 64 << 20} {
			cs = append(cs, benchCase{"allreduce/" + cx.name + "/" + sizeName(n), int64(n), func(c *mpi.Comm) func(int) error {
				s, r := mustBlock(make([]float64, n/8)), mustBlock(make([]float64, n/8))
				return func(iters int) error {
					for range iters {
						if err := comm.AllreduceBlock(ctx, c, s, r, comm.Float64, comm.Sum); err != nil {
							return err
						}
					}
					return nil
				}
			}})
		}
	}
	for _, n := range []int{8, 64 << 10, 4 << 20} {
		cs = append(cs, benchCase{"bcast/" + sizeName(n), int64(n), func(c *mpi.Comm) func(int) error {
			blk := mustBlock(make([]byte, n))
			return func(iters int) error {
				for range iters {
					if err := comm.BcastBlock(context.Background(), c, blk, 0); err != nil {
						return err
					}
				}
				return nil
			}
		}})
	}
	for _, n := range []int{8, 64 << 10} {
		cs = append(cs, benchCase{"alltoall/" + sizeName(n), int64(n), func(c *mpi.Comm) func(int) error {
			s, r := mustBlock(make([]byte, n*c.Size())), mustBlock(make([]byte, n*c.Size()))
			return func(iters int) error {
				for range iters {
					if err := comm.AlltoallBlock(context.Background(), c, s, r); err != nil {
						return err
					}
				}
				return nil
			}
		}})
	}
	// One-sided, as the C reference (tcp_mpi_ref.c) measures MPI_Put and
	// MPI_Get: rank 0 the origin, rank 1 the target, which waits in the
	// next command's broadcast. lat: a transfer and its Wait (a Put's
	// Wait flushes); bw: windows of 64 transfers of 1 MiB to one place,
	// then Flush.
	for _, put := range []bool{true, false} {
		name := "get"
		if put {
			name = "put"
		}
		cs = append(cs, benchCase{name + "/lat/8B", 8, func(c *mpi.Comm) func(int) error {
			return func(iters int) error {
				o, err := oneBenchOf(c)
				if err != nil || c.Rank() != 0 {
					return err
				}
				local := mustBlock(o.local[:8])
				for range iters {
					if err := o.transfer(c, put, local); err != nil {
						return err
					}
				}
				return nil
			}
		}})
		cs = append(cs, benchCase{name + "/bw/1MiB", 1 << 20, func(c *mpi.Comm) func(int) error {
			return func(iters int) error {
				o, err := oneBenchOf(c)
				if err != nil || c.Rank() != 0 {
					return err
				}
				local := mustBlock(o.local[:1<<20])
				start := c.Get
				if put {
					start = c.Put
				}
				reqs := make([]comm.Request, 0, oneWindow)
				for i := range iters {
					r, err := start(local, o.keys[1], 0)
					if err != nil {
						return err
					}
					if reqs = append(reqs, r); len(reqs) == oneWindow || i == iters-1 {
						if err := c.Flush(context.Background(), 1); err != nil {
							return err
						}
						if err := comm.WaitAll(context.Background(), reqs...); err != nil {
							return err
						}
						reqs = reqs[:0]
					}
				}
				return nil
			}
		}})
	}
	return cs
}()

// oneWindow is how many transfers the bw cases keep in flight.
const oneWindow = 64

// oneBenchState is the one-sided cases' memory and keys.
type oneBenchState struct {
	once  sync.Once
	err   error
	local []byte
	keys  []comm.RemoteKey
}

// oneBench is exposed on every rank by the first run of a one-sided case
// (every rank runs it together), and stays exposed for the life of the
// process.
var oneBench oneBenchState

func oneBenchOf(c *mpi.Comm) (*oneBenchState, error) {
	o := &oneBench
	o.once.Do(func() {
		exposed := make([]byte, 1<<20)
		o.local = make([]byte, 1<<20)
		for i := range o.local {
			o.local[i] = byte(i)
		}
		reg, err := c.Expose(mustBlock(exposed))
		if err != nil {
			o.err = err
			return
		}
		o.keys, o.err = comm.ExchangeKeys(context.Background(), c, reg.Key())
	})
	return o, o.err
}

// transfer makes one Put (put) or Get of local to rank 1 and waits for it.
func (o *oneBenchState) transfer(c *mpi.Comm, put bool, local memspace.Block) error {
	start := c.Get
	if put {
		start = c.Put
	}
	r, err := start(local, o.keys[1], 0)
	if err != nil {
		return err
	}
	_, err = r.Wait(context.Background())
	return err
}

// farDeadline is a context that can end but does not during a benchmark:
// it takes the watched path.
var farDeadline, _ = context.WithDeadline(context.Background(), time.Now().Add(24*time.Hour))

func mustBlock[T any](s []T) memspace.Block {
	b, err := memspace.FromSlice(s)
	if err != nil {
		panic(err)
	}
	return b.Block()
}

func sizeName(n int) string {
	switch {
	case n >= 1<<20:
		return fmt.Sprintf("%dMiB", n>>20)
	case n >= 1<<10:
		return fmt.Sprintf("%dKiB", n>>10)
	}
	return fmt.Sprintf("%dB", n)
}

// command tells the other ranks what to run: a case index and an
// iteration count, or stop (index -1).
func command(c *mpi.Comm, cmd []int64) error {
	return comm.Bcast(context.Background(), c, mustBuffer(cmd), 0) // unbounded: the benchmark ranks' command loop, as long as -benchtime says
}

func mustBuffer(s []int64) *memspace.Buffer[int64] {
	b, err := memspace.FromSlice(s)
	if err != nil {
		panic(err)
	}
	return b
}

// BenchmarkMPI runs every case on rank 0, the other ranks following.
func BenchmarkMPI(b *testing.B) {
	if world == nil {
		b.Skip("runs as rank 0 of an MPI job: mpirun -np 2 <test binary> -test.run='^$' -test.bench=.")
	}
	c := world
	for i, bc := range benchCases {
		b.Run(bc.name, func(b *testing.B) {
			if c.Size() < 2 && bc.pair() {
				b.Skip("needs 2 ranks")
			}
			run := bc.make(c)
			b.SetBytes(bc.bytes)
			if err := command(c, []int64{int64(i), int64(b.N)}); err != nil {
				b.Fatal(err)
			}
			if err := comm.Barrier(context.Background(), c); err != nil {
				b.Fatal(err)
			}
			b.ResetTimer()
			if err := run(b.N); err != nil {
				b.Fatal(err)
			}
		})
	}
}

// followBenchmarks runs, on ranks other than 0, the loops rank 0's
// benchmarks announce, until rank 0 says stop.
func followBenchmarks(c *mpi.Comm) error {
	runs := map[int64]func(int) error{}
	for {
		cmd := []int64{0, 0}
		if err := command(c, cmd); err != nil {
			return err
		}
		if cmd[0] < 0 {
			return nil
		}
		run, ok := runs[cmd[0]]
		if !ok {
			run = benchCases[cmd[0]].make(c)
			runs[cmd[0]] = run
		}
		if err := comm.Barrier(context.Background(), c); err != nil { // unbounded: the benchmark ranks' command loop, as long as -benchtime says
			return err
		}
		if err := run(int(cmd[1])); err != nil {
			return err
		}
	}
}
