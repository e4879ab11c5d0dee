package main

import (
	"context"
	"fmt"
	"os"
	"slices"
	"time"

	"github.com/xpu-go/xpu/backends/tcp"
	"github.com/xpu-go/xpu/comm"
	"github.com/xpu-go/xpu/memspace"
)

const runs = 5

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "tcpbench:", err)
		os.Exit(1)
	}
}

func block[T any](s []T) memspace.Block {
	b, err := memspace.FromSlice(s)
	if err != nil {
		panic(err)
	}
	return b.Block()
}

func run() error {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	c, err := tcp.FromEnv(ctx)
	if err != nil {
		return err
	}
	defer c.Close()
	p, r := c.Size(), c.Rank()
	report := func(name string, v float64, unit string) {
		if r == 0 {
			fmt.Printf("tcp.np%d.%s %.1f %s\n", p, name, v, unit)
		}
	}
	// measure runs body iters times per run and returns the median time
	// per iteration, in nanoseconds.
	measure := func(iters int, body func() error) (float64, error) {
		var ts []float64
		for range runs {
			if err := comm.Barrier(ctx, c); err != nil {
				return 0, err
			}
			start := time.Now()
			for range iters {
				if err := body(); err != nil {
					return 0, err
				}
			}
			ts = append(ts, float64(time.Since(start).Nanoseconds())/float64(iters))
		}
		slices.Sort(ts)
		return ts[len(ts)/2], nil
	}

	if p == 2 {
		buf := block(make([]byte, 8))
		us, err := measure(10000, func() error {
			if r == 0 {
				if err := comm.Send(ctx, c, buf, 1, 1); err != nil {
					return err
				}
				_, err := comm.Recv(ctx, c, buf, 1, 1)
				return err
			}
			if _, err := comm.Recv(ctx, c, buf, 0, 1); err != nil {
				return err
			}
			return comm.Send(ctx, c, buf, 0, 1)
		})
		if err != nil {
			return err
		}
		report("pingpong.8B", us/2, "ns/op")

		const size, window = 4 << 20, 8
		bufs := make([]memspace.Block, window)
		for i := range bufs {
			bufs[i] = block(make([]byte, size))
		}
		ack := block(make([]byte, 1))
		us, err = measure(4, func() error {
			reqs := make([]comm.Request, window)
			for i := range window {
				var err error
				if r == 0 {
					reqs[i], err = c.Isend(bufs[i], 1, 2)
				} else {
					reqs[i], err = c.Irecv(bufs[i], 0, 2)
				}
				if err != nil {
					return err
				}
			}
			if err := comm.WaitAll(ctx, reqs...); err != nil {
				return err
			}
			if r == 1 {
				return comm.Send(ctx, c, ack, 0, 3)
			}
			_, err := comm.Recv(ctx, c, ack, 1, 3)
			return err
		})
		if err != nil {
			return err
		}
		report("bw.4MiB", float64(window*size)/us, "GB/s")
	}

	for _, k := range []struct {
		name  string
		n     int
		iters int
	}{{"8B", 1, 2000}, {"64KiB", 8 << 10, 300}, {"64MiB", 8 << 20, 3}} {
		v := make([]float64, k.n)
		b, _ := memspace.FromSlice(v)
		us, err := measure(k.iters, func() error { return comm.Allreduce(ctx, c, b, b, comm.Sum) })
		if err != nil {
			return err
		}
		report("allreduce."+k.name, us, "ns/op")
	}
	for _, k := range []struct {
		name  string
		size  int
		iters int
	}{{"8B", 8, 2000}, {"1MiB", 1 << 20, 50}} {
		buf := block(make([]byte, k.size))
		us, err := measure(k.iters, func() error { return comm.BcastBlock(ctx, c, buf, 0) })
		if err != nil {
			return err
		}
		report("bcast."+k.name, us, "ns/op")
		// Alltoall: k.size bytes to each rank.
		send, recv := block(make([]byte, k.size*p)), block(make([]byte, k.size*p))
		us, err = measure(k.iters, func() error { return comm.AlltoallBlock(ctx, c, send, recv) })
		if err != nil {
			return err
		}
		report("alltoall."+k.name, us, "ns/op")
	}
	return comm.Barrier(ctx, c)
}
