package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"slices"
	"time"

	"github.com/xpu-go/xpu/backends/rdma"
	"github.com/xpu-go/xpu/comm"
	"github.com/xpu-go/xpu/internal/tooling/bench"
	"github.com/xpu-go/xpu/memspace"
)

const (
	runs   = 5
	window = 16
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "rdmabench:", err)
		os.Exit(1)
	}
}

func run() error {
	iters := flag.Int("n", 2000, "ping-pong round trips per run")
	big := flag.Int("big", 64<<20, "bytes of the allreduce")
	only := flag.String("only", "", "run only this measurement: pingpong, bw, put or allreduce")
	profile := flag.String("cpuprofile", "", "write rank 0's CPU profile to this file")
	flag.Parse()
	want := func(m string) bool { return *only == "" || *only == m }
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Minute)
	defer cancel()
	c, err := rdma.FromEnv(ctx)
	if err != nil {
		return err
	}
	defer c.Close()
	p, r := c.Size(), c.Rank()
	if *profile != "" && r == 0 {
		stop, err := bench.CPUProfile(*profile)
		if err != nil {
			return err
		}
		defer stop()
	}
	report := func(name string, v float64, unit string) {
		if r == 0 {
			fmt.Printf("rdma.np%d.%s %.2f %s\n", p, name, v, unit)
		}
	}
	median := func(f func() (float64, error)) (float64, error) {
		var xs []float64
		for range runs {
			if err := comm.Barrier(ctx, c); err != nil {
				return 0, err
			}
			x, err := f()
			if err != nil {
				return 0, err
			}
			xs = append(xs, x)
		}
		slices.Sort(xs)
		return xs[len(xs)/2], nil
	}
	if p == 2 && want("pingpong") {
		var p50s []float64
		lat, err := median(func() (float64, error) {
			mean, p50, err := pingPong(ctx, c, 8, *iters)
			p50s = append(p50s, p50)
			return mean, err
		})
		if err != nil {
			return fmt.Errorf("ping-pong: %w", err)
		}
		slices.Sort(p50s)
		report("pingpong.8B", lat/1e3, "us")
		report("pingpong.8B.p50", p50s[len(p50s)/2]/1e3, "us")
	}
	for _, size := range []int{1 << 20, 4 << 20} {
		if p != 2 {
			break
		}
		if want("bw") {
			bw, err := median(func() (float64, error) { return stream(ctx, c, size, 64) })
			if err != nil {
				return fmt.Errorf("stream: %w", err)
			}
			report(fmt.Sprintf("bw.%dMiB", size>>20), bw, "MiB/s")
		}
		if want("put") {
			bw, err := median(func() (float64, error) { return put(ctx, c, size, 64) })
			if err != nil {
				return fmt.Errorf("put: %w", err)
			}
			report(fmt.Sprintf("put.%dMiB", size>>20), bw, "MiB/s")
		}
	}
	if want("allreduce") {
		v := make([]float64, *big/8) // one vector for every run: no run pays the collector for another's
		t, err := median(func() (float64, error) { return allreduce(ctx, c, v) })
		if err != nil {
			return fmt.Errorf("allreduce: %w", err)
		}
		where := "" // over the queue pairs
		if c.OneNode() {
			where = "node." // in the node's shared memory
		}
		report(fmt.Sprintf("allreduce.%s%dMiB", where, *big>>20), t/1e6, "ms")
	}
	return comm.Barrier(ctx, c)
}

// pingPong returns the mean half round trip of size bytes over iters
// round trips, and the median, in ns: ib_send_lat's t_avg and t_typical.
func pingPong(ctx context.Context, c comm.Comm, size, iters int) (mean, median float64, err error) {
	buf := make([]byte, size)
	b := bench.Block(buf)
	other := 1 - c.Rank()
	rtts := make([]time.Duration, 0, iters)
	start := time.Now()
	last := start
	for i := range iters {
		if c.Rank() == 0 {
			buf[0] = byte(i)
			if err := comm.Send(ctx, c, b, other, 1); err != nil {
				return 0, 0, err
			}
		}
		if _, err := comm.Recv(ctx, c, b, other, 1); err != nil {
			return 0, 0, err
		}
		if buf[0] != byte(i) {
			return 0, 0, fmt.Errorf("round trip %d: got %d", i, buf[0])
		}
		if c.Rank() == 1 {
			if err := comm.Send(ctx, c, b, other, 1); err != nil {
				return 0, 0, err
			}
		}
		now := time.Now()
		rtts = append(rtts, now.Sub(last))
		last = now
	}
	slices.Sort(rtts)
	return float64(last.Sub(start)) / float64(iters) / 2, float64(rtts[len(rtts)/2]) / 2, nil
}

// stream sends n messages of size bytes from rank 0 to rank 1, window in
// flight, and returns the bandwidth in MiB/s.
func stream(ctx context.Context, c comm.Comm, size, n int) (float64, error) {
	bufs := make([][]byte, window)
	for i := range bufs {
		bufs[i] = make([]byte, size)
	}
	start := time.Now()
	reqs := make([]comm.Request, window)
	for i := range n {
		k := i % window
		if reqs[k] != nil {
			if _, err := reqs[k].Wait(ctx); err != nil {
				return 0, err
			}
			if c.Rank() == 1 && (bufs[k][0] != byte(i-window) || bufs[k][size-1] != byte(i-window)) {
				return 0, fmt.Errorf("message %d: wrong bytes", i-window)
			}
		}
		var err error
		if c.Rank() == 0 {
			bufs[k][0], bufs[k][size-1] = byte(i), byte(i)
			reqs[k], err = c.Isend(bench.Block(bufs[k]), 1, 2)
		} else {
			reqs[k], err = c.Irecv(bench.Block(bufs[k]), 0, 2)
		}
		if err != nil {
			return 0, err
		}
	}
	if err := comm.WaitAll(ctx, reqs...); err != nil {
		return 0, err
	}
	// The receiver's last message says the stream is in.
	ack := make([]byte, 1)
	if c.Rank() == 1 {
		if err := comm.Send(ctx, c, bench.Block(ack), 0, 3); err != nil {
			return 0, err
		}
	} else if _, err := comm.Recv(ctx, c, bench.Block(ack), 1, 3); err != nil {
		return 0, err
	}
	return float64(n*size) / (1 << 20) / time.Since(start).Seconds(), nil
}

// put writes n messages of size bytes from rank 0 into rank 1's region,
// window in flight, and returns the bandwidth in MiB/s.
func put(ctx context.Context, c *rdma.Comm, size, n int) (float64, error) {
	region := make([]byte, size)
	reg, err := c.Expose(bench.Block(region))
	if err != nil {
		return 0, err
	}
	defer reg.Close()
	keys, err := comm.ExchangeKeys(ctx, c, reg.Key())
	if err != nil {
		return 0, err
	}
	src := make([]byte, size)
	src[0], src[size-1] = 7, 9
	start := time.Now()
	if c.Rank() == 0 {
		reqs := make([]comm.Request, window)
		for i := range n {
			k := i % window
			if reqs[k] != nil {
				if _, err := reqs[k].Wait(ctx); err != nil {
					return 0, err
				}
			}
			if reqs[k], err = c.Put(bench.Block(src), keys[1], 0); err != nil {
				return 0, err
			}
		}
		if err := c.Flush(ctx, 1); err != nil {
			return 0, err
		}
	}
	if err := comm.Barrier(ctx, c); err != nil {
		return 0, err
	}
	el := time.Since(start)
	if c.Rank() == 1 && (region[0] != 7 || region[size-1] != 9) {
		return 0, fmt.Errorf("the region holds %d…%d, want 7…9", region[0], region[size-1])
	}
	return float64(n*size) / (1 << 20) / el.Seconds(), nil
}

// allreduce sums v, filled anew, over every rank, checks the sums and
// returns the time in ns.
func allreduce(ctx context.Context, c comm.Comm, v []float64) (float64, error) {
	count := len(v)
	for i := range v {
		v[i] = float64(c.Rank() + i%7)
	}
	b, err := memspace.FromSlice(v)
	if err != nil {
		return 0, err
	}
	start := time.Now()
	if err := comm.Allreduce(ctx, c, b, b, comm.Sum); err != nil {
		return 0, err
	}
	el := time.Since(start)
	p := c.Size()
	for i := 0; i < count; i += 4099 {
		if want := float64(p*(p-1)/2 + p*(i%7)); v[i] != want {
			return 0, fmt.Errorf("element %d is %v, want %v", i, v[i], want)
		}
	}
	return float64(el), nil
}
