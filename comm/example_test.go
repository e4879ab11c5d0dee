package comm_test

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/xpu-go/xpu/backends/local"
	"github.com/xpu-go/xpu/comm"
	"github.com/xpu-go/xpu/memspace"
)

// Four ranks in one process sum their vectors; every rank gets the total.
func ExampleAllreduce() {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	ranks, err := local.NewGroup(4, local.Options{})
	if err != nil {
		panic(err)
	}
	results := make([][]float64, len(ranks))
	var wg sync.WaitGroup
	for _, c := range ranks {
		wg.Go(func() {
			defer c.Close()
			r := float64(c.Rank())
			data, _ := memspace.FromSlice([]float64{r, 10 * r, 100 * r})
			// send == recv: in place.
			if err := comm.Allreduce(ctx, c, data, data, comm.Sum); err != nil {
				panic(err)
			}
			results[c.Rank()], _ = data.Host()
		})
	}
	wg.Wait()
	for r, v := range results {
		fmt.Println("rank", r, v)
	}
	// Output:
	// rank 0 [6 60 600]
	// rank 1 [6 60 600]
	// rank 2 [6 60 600]
	// rank 3 [6 60 600]
}

// Rank 0 broadcasts a vector of structs; any fixed-size, pointer-free
// element type will do.
func ExampleBcast() {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	type point struct{ X, Y float32 }
	ranks, err := local.NewGroup(3, local.Options{})
	if err != nil {
		panic(err)
	}
	got := make([][]point, len(ranks))
	var wg sync.WaitGroup
	for _, c := range ranks {
		wg.Go(func() {
			defer c.Close()
			pts := make([]point, 2)
			if c.Rank() == 0 {
				pts = []point{{1, 2}, {3, 4}}
			}
			b, _ := memspace.FromSlice(pts)
			if err := comm.Bcast(ctx, c, b, 0); err != nil {
				panic(err)
			}
			got[c.Rank()] = pts
		})
	}
	wg.Wait()
	fmt.Println(got)
	// Output: [[{1 2} {3 4}] [{1 2} {3 4}] [{1 2} {3 4}]]
}

// Every rank contributes its rank and gets everyone's, in rank order.
func ExampleAllgather() {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	ranks, err := local.NewGroup(3, local.Options{})
	if err != nil {
		panic(err)
	}
	got := make([][]int32, len(ranks))
	var wg sync.WaitGroup
	for _, c := range ranks {
		wg.Go(func() {
			defer c.Close()
			send, _ := memspace.FromSlice([]int32{int32(c.Rank()) * 10})
			all := make([]int32, c.Size())
			recv, _ := memspace.FromSlice(all)
			if err := comm.Allgather(ctx, c, send, recv); err != nil {
				panic(err)
			}
			got[c.Rank()] = all
		})
	}
	wg.Wait()
	fmt.Println(got)
	// Output: [[0 10 20] [0 10 20] [0 10 20]]
}

// Rank i of the result holds block i of the element-wise sum.
func ExampleReduceScatter() {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	ranks, err := local.NewGroup(2, local.Options{})
	if err != nil {
		panic(err)
	}
	got := make([][]int64, len(ranks))
	var wg sync.WaitGroup
	for _, c := range ranks {
		wg.Go(func() {
			defer c.Close()
			send, _ := memspace.FromSlice([]int64{1, 2, 3, 4}) // 2 ranks × 2
			mine := make([]int64, 2)
			recv, _ := memspace.FromSlice(mine)
			if err := comm.ReduceScatter(ctx, c, send, recv, comm.Sum); err != nil {
				panic(err)
			}
			got[c.Rank()] = mine
		})
	}
	wg.Wait()
	fmt.Println(got)
	// Output: [[2 4] [6 8]]
}

// Rank 0 exposes a pool of pages; rank 1 pulls a scattered list of them
// with one batch of Gets, prepared once and posted as often as needed.
func ExamplePrepareBatch() {
	ranks, err := local.NewGroup(2, local.Options{})
	if err != nil {
		panic(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	const page = 4
	pool := []byte("aaaabbbbccccddddeeee") // five pages of rank 0
	var got []byte
	var wg sync.WaitGroup
	for _, c := range ranks {
		wg.Go(func() {
			defer c.Close()
			var mine comm.RemoteKey
			if c.Rank() == 0 {
				b, _ := memspace.FromSlice(pool)
				reg, err := c.Expose(b.Block())
				if err != nil {
					panic(err)
				}
				defer reg.Close()
				mine = reg.Key()
			} else {
				mine.Rank = 1 // rank 1 exposes nothing
			}
			keys, err := comm.ExchangeKeys(ctx, c, mine)
			if err != nil {
				panic(err)
			}
			if c.Rank() == 1 {
				local := make([]byte, 3*page)
				lb, _ := memspace.FromSlice(local)
				var xfers []comm.Xfer
				for i, p := range []int{4, 1, 2} { // pages e, b, c
					dst, _ := lb.Block().Slice(i*page, page)
					xfers = append(xfers, comm.Xfer{Local: dst, Remote: keys[0], RemoteOff: p * page})
				}
				batch, err := comm.PrepareBatch(c, false, xfers)
				if err != nil {
					panic(err)
				}
				if err := batch.Run(ctx); err != nil {
					panic(err)
				}
				got = local
			}
			// Rank 0 keeps its pages exposed until rank 1 has pulled them.
			if err := comm.Barrier(ctx, c); err != nil {
				panic(err)
			}
		})
	}
	wg.Wait()
	fmt.Println(string(got))
	// Output:
	// eeeebbbbcccc
}

// Every rank makes its communicator stage in pieces of 4 KiB: long
// Allreduces of device memory then copy one piece while the collective
// runs on the next. Host buffers, as here, run the same pieces.
func ExampleStageInPieces() {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	ranks, err := local.NewGroup(2, local.Options{})
	if err != nil {
		panic(err)
	}
	sums := make([]float64, len(ranks))
	var wg sync.WaitGroup
	for _, c := range ranks {
		wg.Go(func() {
			defer c.Close()
			pc, err := comm.StageInPieces(ctx, c, 4<<10) // a collective: every rank, the same size
			if err != nil {
				panic(err)
			}
			v := make([]float64, 10000) // 80 KB: 20 pieces
			for i := range v {
				v[i] = float64(c.Rank() + 1)
			}
			data, _ := memspace.FromSlice(v)
			if err := comm.Allreduce(ctx, pc, data, data, comm.Sum); err != nil {
				panic(err)
			}
			for _, x := range v {
				sums[c.Rank()] += x
			}
		})
	}
	wg.Wait()
	fmt.Println(sums)
	// Output:
	// [30000 30000]
}
