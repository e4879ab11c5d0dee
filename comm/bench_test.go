package comm_test

import (
	"context"
	"fmt"
	"sync"
	"testing"

	"github.com/xpu-go/xpu/backends/local"
	"github.com/xpu-go/xpu/comm"
	"github.com/xpu-go/xpu/memspace"
)

// BenchmarkAllreduce measures Allreduce of float64 on local ranks (the
// shared algorithms over the in-process communicator) per call, all ranks
// running at once. SetBytes is the vector size, so MB/s is the algorithm
// bandwidth of one rank.
func BenchmarkAllreduce(b *testing.B) {
	for _, p := range []int{2, 4} {
		for _, size := range []int{8, 64 << 10, 64 << 20} {
			b.Run(fmt.Sprintf("ranks=%d/bytes=%d", p, size), func(b *testing.B) {
				benchAllreduce(b, p, size/8)
			})
		}
	}
}

// BenchmarkAllreduceAlgorithms compares the two allreduce algorithms on 4
// local ranks on each side of the threshold between them.
func BenchmarkAllreduceAlgorithms(b *testing.B) {
	for _, size := range []int{8 << 10, 1 << 20} {
		for _, alg := range allreduceAlgs[1:] {
			b.Run(fmt.Sprintf("%s/bytes=%d", alg.name, size), func(b *testing.B) {
				benchAllreduceWith(b, 4, size/8, alg.fn)
			})
		}
	}
}

func benchAllreduce(b *testing.B, p, n int) {
	benchAllreduceWith(b, p, n, comm.AllreduceBlock)
}

func benchAllreduceWith(b *testing.B, p, n int, alg blockAlg) {
	ls, err := local.NewGroup(p, local.Options{})
	if err != nil {
		b.Fatal(err)
	}
	defer func() {
		for _, c := range ls {
			_ = c.Close()
		}
	}()
	b.SetBytes(int64(n * 8))
	// A failing rank cancels the others rather than leave them waiting.
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	iters := b.N
	errs := make([]error, p)
	// The vectors are made (and their pages touched) before the clock
	// starts.
	sends := make([]*memspace.Buffer[float64], p)
	recvs := make([]*memspace.Buffer[float64], p)
	for i := range p {
		data := make([]float64, n)
		for j := range data {
			data[j] = float64(j % 7)
		}
		out := make([]float64, n)
		for j := range out {
			out[j] = -1
		}
		sends[i], recvs[i] = buf(b, data), buf(b, out)
	}
	var wg sync.WaitGroup
	b.ResetTimer()
	for i, c := range ls {
		wg.Go(func() {
			for range iters {
				if err := alg(ctx, c, sends[i].Block(), recvs[i].Block(), comm.Float64, comm.Sum); err != nil {
					errs[i] = err
					cancel()
					return
				}
			}
		})
	}
	wg.Wait()
	b.StopTimer()
	for _, err := range errs {
		if err != nil {
			b.Fatal(err)
		}
	}
}
