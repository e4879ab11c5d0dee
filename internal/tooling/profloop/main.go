package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"time"

	"github.com/xpu-go/xpu/backends/procs"
	"github.com/xpu-go/xpu/comm"
	"github.com/xpu-go/xpu/internal/tooling/bench"
	"github.com/xpu-go/xpu/memspace"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "profloop:", err)
		os.Exit(1)
	}
}

func run() error {
	op := flag.String("op", "allreduce", `the operation: "allreduce", "allreduce-direct", "bcast" or "pingpong"`)
	dur := flag.Duration("d", 3*time.Second, "how long the loop runs")
	profile := flag.String("cpuprofile", "", "write a CPU profile of rank r to this file with \".r\" appended")
	traceTo := flag.String("trace", "", "write an execution trace of rank r to this file with \".r\" appended")
	every := flag.Duration("every", 0, "also print the time per call of each interval this long (rank 0): how it moves within a run")
	floor := flag.Bool("floor", false, "with 2 ranks on one machine: after each 10000 calls, time 10000 round trips of a spin ring between the same processes (bench.SpinRing), print both (rank 0), and at the end how they moved together")
	flag.Parse()
	ctx, cancel := context.WithTimeout(context.Background(), *dur+time.Minute)
	defer cancel()
	c, err := procs.FromEnv(ctx)
	if err != nil {
		return err
	}
	defer c.Close()
	body, err := operation(ctx, c, *op)
	if err != nil {
		return err
	}
	for range 20000 {
		if err := body(); err != nil {
			return err
		}
	}
	var fl *floorRuns
	if *floor {
		if fl, err = newFloorRuns(ctx, c); err != nil {
			return err
		}
		defer fl.close()
	}
	if *profile != "" {
		stop, err := bench.CPUProfile(fmt.Sprintf("%s.%d", *profile, c.Rank()))
		if err != nil {
			return err
		}
		defer stop()
	}
	if *traceTo != "" {
		stop, err := bench.Trace(fmt.Sprintf("%s.%d", *traceTo, c.Rank()))
		if err != nil {
			return err
		}
		defer stop()
	}
	calls, start := 0, time.Now()
	lastCalls, last, lastSpent := 0, start, time.Duration(0)
	for over := false; !over; {
		chunk := time.Now()
		for range 10000 {
			if err := body(); err != nil {
				return err
			}
		}
		if fl != nil {
			if err := fl.next(float64(time.Since(chunk).Nanoseconds()) / 10000); err != nil {
				return err
			}
		}
		calls += 10000
		if now := time.Now(); *every > 0 && c.Rank() == 0 && now.Sub(last) >= *every {
			loop := now.Sub(last) - (fl.spentSoFar() - lastSpent) // the ring's time is not the loop's
			fmt.Printf("%8.3fs %.1f ns/op\n", now.Sub(start).Seconds(), float64(loop.Nanoseconds())/float64(calls-lastCalls))
			lastCalls, last, lastSpent = calls, now, fl.spentSoFar()
		}
		if over, err = agreeOver(ctx, c, time.Since(start) > *dur); err != nil {
			return err
		}
	}
	if c.Rank() == 0 {
		elapsed := time.Since(start) - fl.spentSoFar()
		fmt.Printf("%s %.1f ns/op\n", *op, float64(elapsed.Nanoseconds())/float64(calls))
		if fl != nil {
			fl.summary(*op)
		}
	}
	return nil
}

// operation returns one call of op on c.
func operation(ctx context.Context, c *procs.Comm, op string) (func() error, error) {
	v, err := memspace.FromSlice([]float64{1})
	if err != nil {
		return nil, err
	}
	b := v.Block()
	switch op {
	case "allreduce":
		return func() error { return comm.Allreduce(ctx, c, v, v, comm.Sum) }, nil
	case "allreduce-direct":
		return func() error { return c.Allreduce(ctx, b, b, comm.Float64, comm.Sum) }, nil
	case "bcast":
		return func() error { return comm.Bcast(ctx, c, v, 0) }, nil
	case "pingpong":
		if c.Size() < 2 {
			return nil, errors.New("a ping-pong needs 2 ranks")
		}
		return func() error {
			switch c.Rank() {
			case 0:
				if err := comm.Send(ctx, c, b, 1, 1); err != nil {
					return err
				}
				_, err := comm.Recv(ctx, c, b, 1, 1)
				return err
			case 1:
				if _, err := comm.Recv(ctx, c, b, 0, 1); err != nil {
					return err
				}
				return comm.Send(ctx, c, b, 0, 1)
			}
			return nil
		}, nil
	}
	return nil, fmt.Errorf("unknown operation %q", op)
}

// agreeOver returns whether any rank says the loop is over.
func agreeOver(ctx context.Context, c comm.Comm, mine bool) (bool, error) {
	flag := []int32{0}
	if mine {
		flag[0] = 1
	}
	f, err := memspace.FromSlice(flag)
	if err != nil {
		return false, err
	}
	err = comm.Allreduce(ctx, c, f, f, comm.Max)
	return flag[0] == 1, err
}
