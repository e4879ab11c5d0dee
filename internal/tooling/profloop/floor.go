package main

import (
	"context"
	"fmt"
	"math"
	"slices"
	"time"

	"github.com/xpu-go/xpu/backends/procs"
	"github.com/xpu-go/xpu/comm"
	"github.com/xpu-go/xpu/internal/tooling/bench"
)

// floorRuns times the floor beside the loop (-floor): after each chunk of
// the loop's calls, as many round trips of a spin ring between the same
// two processes, so that each pair of figures sees the same moment of the
// machine (ADR 49).
type floorRuns struct {
	ctx   context.Context
	c     *procs.Comm
	ring  *bench.SpinRing
	buf   []byte
	ours  []float64     // ns per call of each chunk of the loop
	floor []float64     // ns per round trip of the spin ring after it
	spent time.Duration // the ring's time, with its barriers: not the loop's
}

func newFloorRuns(ctx context.Context, c *procs.Comm) (*floorRuns, error) {
	if c.Size() != 2 {
		return nil, fmt.Errorf("-floor needs 2 ranks, not %d", c.Size())
	}
	ring, err := bench.ShareSpinRing(ctx, c)
	if err != nil {
		return nil, err
	}
	return &floorRuns{ctx: ctx, c: c, ring: ring, buf: make([]byte, 8)}, nil
}

func (f *floorRuns) close() { _ = f.ring.Close() }

// spentSoFar is the time the ring's runs have taken, with their barriers:
// none without -floor (a nil f).
func (f *floorRuns) spentSoFar() time.Duration {
	if f == nil {
		return 0
	}
	return f.spent
}

// next keeps ours, the time per call of the chunk just run, times 10000
// round trips of the ring, and prints both on rank 0.
func (f *floorRuns) next(ours float64) error {
	begin := time.Now()
	defer func() { f.spent += time.Since(begin) }()
	if err := comm.Barrier(f.ctx, f.c); err != nil {
		return err
	}
	start := time.Now()
	for range 10000 {
		if err := f.ring.PingPong(f.c.Rank(), f.buf); err != nil {
			return err
		}
	}
	floor := float64(time.Since(start).Nanoseconds()) / 10000
	f.ours, f.floor = append(f.ours, ours), append(f.floor, floor)
	if f.c.Rank() == 0 {
		fmt.Printf("%.1f ns/op, floor %.1f ns a round trip, ratio %.2f\n", ours, floor, ours/floor)
	}
	return nil
}

// summary prints, for the loop's chunks, the ring's and their ratios, the
// 10th percentile, the median and the 90th, and the correlation of the
// loop's figures with the ring's.
func (f *floorRuns) summary(op string) {
	ratio := make([]float64, len(f.ours))
	for i := range ratio {
		ratio[i] = f.ours[i] / f.floor[i]
	}
	for _, row := range []struct {
		name string
		v    []float64
	}{{op, f.ours}, {"floor", f.floor}, {"ratio", ratio}} {
		p10, p50, p90 := percentiles(row.v)
		fmt.Printf("%s: p10 %.2f median %.2f p90 %.2f (p90/p10 %.2f)\n", row.name, p10, p50, p90, p90/p10)
	}
	fmt.Printf("correlation of %s with the floor over %d chunks: %.2f\n", op, len(f.ours), correlation(f.ours, f.floor))
}

// percentiles returns the 10th, 50th and 90th percentiles of v (nearest
// rank).
func percentiles(v []float64) (p10, p50, p90 float64) {
	s := slices.Sorted(slices.Values(v))
	at := func(p float64) float64 { return s[int(math.Round(p*float64(len(s)-1)))] }
	return at(0.1), at(0.5), at(0.9)
}

// correlation is Pearson's coefficient of x and y (NaN when either is
// constant).
func correlation(x, y []float64) float64 {
	n := float64(len(x))
	var sx, sy float64
	for i := range x {
		sx, sy = sx+x[i], sy+y[i]
	}
	mx, my := sx/n, sy/n
	var cxy, cxx, cyy float64
	for i := range x {
		dx, dy := x[i]-mx, y[i]-my
		cxy, cxx, cyy = cxy+dx*dy, cxx+dx*dx, cyy+dy*dy
	}
	return cxy / math.Sqrt(cxx*cyy)
}
