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
	sched := flag.Bool("sched", false, "with -every: also print the scheduler's counts over each interval, summed over every rank's threads (Linux): context switches, involuntary ones (preempted) and migrations between processors; at the end, their means over the fastest and the slowest third of the intervals")
	floor := flag.Bool("floor", false, "with 2 ranks on one machine: after each 10000 calls, time 10000 round trips of a spin ring between the same processes (bench.SpinRing), print both (rank 0), and at the end how they moved together")
	flag.Parse()
	if *sched && *every <= 0 {
		return errors.New("-sched counts per interval: it needs -every")
	}
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
	var iv *intervals
	if *sched {
		if iv, err = newIntervals(); err != nil {
			return err
		}
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
		// Rank 0's clock ends an interval; the others learn it with the
		// vote on the end, so that all count the same interval.
		now := time.Now()
		report := *every > 0 && c.Rank() == 0 && now.Sub(last) >= *every
		if over, report, err = agree(ctx, c, now.Sub(start) > *dur, report); err != nil {
			return err
		}
		if report {
			loop := now.Sub(last) - (fl.spentSoFar() - lastSpent) // the ring's time is not the loop's
			perCall := float64(loop.Nanoseconds()) / float64(calls-lastCalls)
			line := fmt.Sprintf("%8.3fs %.1f ns/op", now.Sub(start).Seconds(), perCall)
			if iv != nil {
				d, err := iv.next(ctx, c, perCall)
				if err != nil {
					return err
				}
				line += fmt.Sprintf(", switches %d (involuntary %d), migrations %d", d.switches, d.involuntary, d.migrations)
			}
			if c.Rank() == 0 {
				fmt.Println(line)
			}
			lastCalls, last, lastSpent = calls, now, fl.spentSoFar()
		}
	}
	if c.Rank() == 0 {
		elapsed := time.Since(start) - fl.spentSoFar()
		fmt.Printf("%s %.1f ns/op\n", *op, float64(elapsed.Nanoseconds())/float64(calls))
		if fl != nil {
			fl.summary(*op)
		}
		if iv != nil {
			iv.summary(*op)
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

// agree returns whether any rank says the loop is over, and whether any
// says an interval ends here (rank 0, by its clock).
func agree(ctx context.Context, c comm.Comm, over, report bool) (bool, bool, error) {
	flags := []int32{0, 0}
	if over {
		flags[0] = 1
	}
	if report {
		flags[1] = 1
	}
	f, err := memspace.FromSlice(flags)
	if err != nil {
		return false, false, err
	}
	err = comm.Allreduce(ctx, c, f, f, comm.Max)
	return flags[0] == 1, flags[1] == 1, err
}
