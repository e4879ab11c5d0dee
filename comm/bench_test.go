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

// BenchmarkIsendIrecvHost measures an 8-byte message between two local
// ranks, its receive and send started and waited for, through the
// communicator's methods and through the package functions Isend and
// Irecv, which must add nothing for host blocks.
func BenchmarkIsendIrecvHost(b *testing.B) {
	type starts struct {
		isend func(c comm.Comm, buf memspace.Block, dest, tag int) (comm.Request, error)
		irecv func(c comm.Comm, buf memspace.Block, source, tag int) (comm.Request, error)
	}
	for _, v := range []struct {
		name string
		s    starts
	}{
		{"method", starts{
			func(c comm.Comm, buf memspace.Block, dest, tag int) (comm.Request, error) {
				return c.Isend(buf, dest, tag)
			},
			func(c comm.Comm, buf memspace.Block, source, tag int) (comm.Request, error) {
				return c.Irecv(buf, source, tag)
			},
		}},
		{"package", starts{comm.Isend, comm.Irecv}},
	} {
		b.Run(v.name, func(b *testing.B) {
			ls, err := local.NewGroup(2, local.Options{})
			if err != nil {
				b.Fatal(err)
			}
			defer func() {
				for _, c := range ls {
					_ = c.Close()
				}
			}()
			ctx := context.Background()
			out, in := make([]byte, 8), make([]byte, 8)
			ob, err := memspace.FromSlice(out)
			if err != nil {
				b.Fatal(err)
			}
			ib, err := memspace.FromSlice(in)
			if err != nil {
				b.Fatal(err)
			}
			b.ReportAllocs()
			for b.Loop() {
				r, err := v.s.irecv(ls[1], ib.Block(), 0, 1)
				if err != nil {
					b.Fatal(err)
				}
				s, err := v.s.isend(ls[0], ob.Block(), 1, 1)
				if err != nil {
					b.Fatal(err)
				}
				if _, err := s.Wait(ctx); err != nil { // unbounded: the receive is posted
					b.Fatal(err)
				}
				if _, err := r.Wait(ctx); err != nil { // unbounded: the send is posted
					b.Fatal(err)
				}
			}
		})
	}
}
