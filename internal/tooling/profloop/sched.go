package main

import (
	"bufio"
	"bytes"
	"cmp"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"

	"github.com/xpu-go/xpu/comm"
	"github.com/xpu-go/xpu/memspace"
)

// schedCounts are the scheduler's counts for one process, summed over its
// threads: how often they left a processor (switches, of which
// involuntary: preempted, not blocked) and moved to another (migrations).
type schedCounts struct {
	switches, involuntary, migrations int64
}

func (a schedCounts) minus(b schedCounts) schedCounts {
	return schedCounts{a.switches - b.switches, a.involuntary - b.involuntary, a.migrations - b.migrations}
}

func (a schedCounts) plus(b schedCounts) schedCounts {
	return schedCounts{a.switches + b.switches, a.involuntary + b.involuntary, a.migrations + b.migrations}
}

// readSched sums the counts of every thread of this process. A thread
// that ends between the listing and the read is left out; so are its
// counts, which makes an interval's difference a little low, never wrong
// by more than that thread's.
func readSched() (schedCounts, error) {
	var sum schedCounts
	files, err := filepath.Glob("/proc/self/task/*/sched")
	if err != nil || len(files) == 0 {
		return sum, fmt.Errorf("the scheduler's counts of this process's threads (/proc/self/task/*/sched) cannot be read here")
	}
	seen := 0
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			continue // the thread ended
		}
		c, err := parseSched(b)
		if err != nil {
			return sum, fmt.Errorf("%s: %w", f, err)
		}
		sum = sum.plus(c)
		seen++
	}
	if seen == 0 {
		return sum, fmt.Errorf("no thread's scheduler counts could be read (/proc/self/task/*/sched)")
	}
	return sum, nil
}

// parseSched reads the counts of one thread's sched file: the lines
// nr_switches, nr_involuntary_switches and se.nr_migrations, which Linux
// writes with its scheduler's debug statistics, as distributions build it.
func parseSched(b []byte) (schedCounts, error) {
	var c schedCounts
	found := 0
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		name, value, ok := bytes.Cut(sc.Bytes(), []byte(":"))
		if !ok {
			continue
		}
		var field *int64
		switch string(bytes.TrimSpace(name)) {
		case "nr_switches":
			field = &c.switches
		case "nr_involuntary_switches":
			field = &c.involuntary
		case "se.nr_migrations":
			field = &c.migrations
		default:
			continue
		}
		n, err := strconv.ParseInt(string(bytes.TrimSpace(value)), 10, 64)
		if err != nil {
			return c, fmt.Errorf("%q is not a count", bytes.TrimSpace(value))
		}
		*field = n
		found++
	}
	if found != 3 {
		return c, fmt.Errorf("%d of the 3 counts it needs (a kernel without scheduler statistics?)", found)
	}
	return c, nil
}

// intervals keeps, for -sched, each interval's time per call (rank 0) and
// the scheduler's counts of all ranks over it.
type intervals struct {
	last   schedCounts
	perOp  []float64
	counts []schedCounts
}

func newIntervals() (*intervals, error) {
	c, err := readSched()
	if err != nil {
		return nil, err
	}
	return &intervals{last: c}, nil
}

// next ends an interval on every rank: it returns the counts of all
// ranks' threads since the last, summed, and keeps them with perOp.
func (iv *intervals) next(ctx context.Context, c comm.Comm, perOp float64) (schedCounts, error) {
	cur, err := readSched()
	if err != nil {
		return schedCounts{}, err
	}
	d := cur.minus(iv.last)
	iv.last = cur
	sum := []int64{d.switches, d.involuntary, d.migrations}
	v, err := memspace.FromSlice(sum)
	if err != nil {
		return schedCounts{}, err
	}
	if err := comm.Allreduce(ctx, c, v, v, comm.Sum); err != nil {
		return schedCounts{}, err
	}
	d = schedCounts{sum[0], sum[1], sum[2]}
	iv.perOp, iv.counts = append(iv.perOp, perOp), append(iv.counts, d)
	return d, nil
}

// summary prints the mean time per call and the mean counts of the
// fastest and the slowest third of the intervals, and the correlation of
// the time with each count: whether the slow moments are the ones where
// the ranks' threads are switched or moved more.
func (iv *intervals) summary(op string) {
	n := len(iv.perOp)
	if n < 3 {
		fmt.Printf("%s: %d intervals, too few to compare\n", op, n)
		return
	}
	order := make([]int, n)
	for i := range order {
		order[i] = i
	}
	slices.SortFunc(order, func(a, b int) int { return cmp.Compare(iv.perOp[a], iv.perOp[b]) })
	mean := func(idx []int) (t, sw, inv, mig float64) {
		for _, i := range idx {
			t += iv.perOp[i]
			sw += float64(iv.counts[i].switches)
			inv += float64(iv.counts[i].involuntary)
			mig += float64(iv.counts[i].migrations)
		}
		k := float64(len(idx))
		return t / k, sw / k, inv / k, mig / k
	}
	for _, third := range []struct {
		name string
		idx  []int
	}{{"fastest third", order[:n/3]}, {"slowest third", order[n-n/3:]}} {
		t, sw, inv, mig := mean(third.idx)
		fmt.Printf("%s of %d intervals: %.1f ns/op, switches %.1f (involuntary %.1f), migrations %.1f an interval\n", third.name, n, t, sw, inv, mig)
	}
	col := func(f func(schedCounts) int64) []float64 {
		v := make([]float64, n)
		for i, c := range iv.counts {
			v[i] = float64(f(c))
		}
		return v
	}
	fmt.Printf("correlation of %s with switches %.2f, involuntary %.2f, migrations %.2f\n", op,
		correlation(iv.perOp, col(func(c schedCounts) int64 { return c.switches })),
		correlation(iv.perOp, col(func(c schedCounts) int64 { return c.involuntary })),
		correlation(iv.perOp, col(func(c schedCounts) int64 { return c.migrations })))
}
