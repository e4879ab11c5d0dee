package bench

import (
	"context"
	"fmt"
	"sync"
	"testing"

	"github.com/xpu-go/xpu/backends/cpu"
	"github.com/xpu-go/xpu/backends/local"
	"github.com/xpu-go/xpu/comm"
	"github.com/xpu-go/xpu/executor"
	"github.com/xpu-go/xpu/memspace"
)

// Comm holds the in-process communication cases (backends/local) and the
// parallel reduction.
var Comm = []Case{
	{Name: "local.pingpong.8B", Run: PingPong(8), Unit: NsPerOp,
		Doc: "half round trip of an 8-byte message between 2 local ranks"},
	{Name: "local.pingpong.4MiB", Run: PingPong(4 << 20), Unit: GBPerSec,
		Doc: "ping-pong of 4 MiB between 2 local ranks (rendezvous: one copy)", Baseline: "memmove.4MiB", BaselineGoal: 0.8},
	{Name: "memmove.4MiB", Run: Memmove(4 << 20), Unit: GBPerSec, Doc: "copy() of 4 MiB, the floor of one message copy"},
	{Name: "local.allreduce.2r.8B", Run: LocalAllreduce(2, 1), Unit: NsPerOp, Doc: "allreduce of one float64 over 2 local ranks"},
	{Name: "local.allreduce.2r.64KiB", Run: LocalAllreduce(2, 8<<10), Unit: NsPerOp, Doc: "allreduce of 64 KiB of float64 over 2 local ranks"},
	{Name: "local.allreduce.4r.64KiB", Run: LocalAllreduce(4, 8<<10), Unit: NsPerOp, Doc: "allreduce of 64 KiB of float64 over 4 local ranks"},
	{Name: "local.allreduce.2r.64MiB", Run: LocalAllreduce(2, 8<<20), Unit: NsPerOp, Doc: "allreduce of 64 MiB of float64 over 2 local ranks"},
	{Name: "reduce.sum.16M", Run: ReduceSum, Unit: GBPerSec, Doc: "executor.Reduce sum of 16M float64 on 2 workers",
		Baseline: "loop.sum.16M", BaselineGoal: 1.0},
	{Name: "loop.sum.16M", Run: LoopSum, Unit: GBPerSec, Doc: "sequential for-loop sum of 16M float64"},
}

// pair makes a 2-rank local group and a buffer per rank.
func localGroup(b *testing.B, n, bytes int) ([]*local.Comm, []*memspace.Buffer[byte], func()) {
	b.Helper()
	g, err := local.NewGroup(n, local.Options{})
	if err != nil {
		b.Fatal(err)
	}
	space := cpu.NewSpace(cpu.SpaceOptions{})
	bufs := make([]*memspace.Buffer[byte], n)
	for i := range bufs {
		if bufs[i], err = memspace.Alloc[byte](space, bytes); err != nil {
			b.Fatal(err)
		}
	}
	return g, bufs, func() {
		for i := range bufs {
			_ = bufs[i].Free()
			_ = g[i].Close()
		}
		_ = space.Close()
	}
}

// PingPong measures a half round trip of size bytes between 2 local ranks.
func PingPong(size int) func(b *testing.B) {
	return func(b *testing.B) {
		g, bufs, done := localGroup(b, 2, size)
		defer done()
		ctx := context.Background()
		b.SetBytes(int64(size))
		b.ResetTimer()
		var wg sync.WaitGroup
		var errs [2]error
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < b.N; i += 2 {
				if _, err := comm.Recv(ctx, g[1], bufs[1].Block(), 0, 1); err != nil {
					errs[1] = err
					return
				}
				if i+1 < b.N {
					if err := comm.Send(ctx, g[1], bufs[1].Block(), 0, 1); err != nil {
						errs[1] = err
						return
					}
				}
			}
		}()
		for i := 0; i < b.N; i += 2 {
			if err := comm.Send(ctx, g[0], bufs[0].Block(), 1, 1); err != nil {
				errs[0] = err
				break
			}
			if i+1 < b.N {
				if _, err := comm.Recv(ctx, g[0], bufs[0].Block(), 1, 1); err != nil {
					errs[0] = err
					break
				}
			}
		}
		wg.Wait()
		for _, err := range errs {
			if err != nil {
				b.Fatal(err)
			}
		}
	}
}

// LocalAllreduce measures comm.Allreduce of n float64 over ranks local ranks.
func LocalAllreduce(ranks, n int) func(b *testing.B) {
	return func(b *testing.B) {
		g, bufs, done := localGroup(b, ranks, 2*8*n)
		defer done()
		ctx := context.Background()
		var wg sync.WaitGroup
		errs := make([]error, ranks)
		// round runs iters allreduces on every rank at once.
		round := func(iters int) {
			for r := range ranks {
				wg.Add(1)
				go func() {
					defer wg.Done()
					all, err := memspace.View[float64](bufs[r].Block())
					if err != nil {
						errs[r] = err
						return
					}
					send, _ := all.Slice(0, n)
					recv, _ := all.Slice(n, 2*n)
					for range iters {
						if err := comm.Allreduce(ctx, g[r], send, recv, comm.Sum); err != nil {
							errs[r] = err
							return
						}
					}
				}()
			}
			wg.Wait()
		}
		// One untimed call first: the first touch of fresh pages (buffers
		// and the algorithm's scratch) costs far more than the collective
		// on a virtual machine, and would be all a 1-iteration run measured.
		round(1)
		b.ResetTimer()
		round(b.N)
		for _, err := range errs {
			if err != nil {
				b.Fatal(err)
			}
		}
	}
}

const sumN = 16 << 20

func sumData(b *testing.B) []float64 {
	v := make([]float64, sumN)
	for i := range v {
		v[i] = float64(i % 7)
	}
	b.SetBytes(8 * sumN)
	b.ResetTimer()
	return v
}

var sink float64

// ReduceSum sums 16M float64 with executor.Reduce on a 2-worker executor.
func ReduceSum(b *testing.B) {
	e := cpu.NewExecutor(2)
	defer e.Close()
	v := sumData(b)
	for range b.N {
		s, err := executor.Reduce(context.Background(), executor.Parallel(e), len(v), 0, 0.0,
			func(lo, hi int, acc float64) float64 {
				for _, x := range v[lo:hi] {
					acc += x
				}
				return acc
			}, func(a, b float64) float64 { return a + b })
		if err != nil {
			b.Fatal(err)
		}
		sink = s
	}
	if want := expectedSum(); sink != want {
		b.Fatal(fmt.Sprintf("sum %v, want %v", sink, want))
	}
}

// LoopSum is ReduceSum's baseline: one goroutine, one loop.
func LoopSum(b *testing.B) {
	v := sumData(b)
	for range b.N {
		s := 0.0
		for _, x := range v {
			s += x
		}
		sink = s
	}
}

func expectedSum() float64 {
	s := 0.0
	for i := range sumN {
		s += float64(i % 7)
	}
	return s
}
