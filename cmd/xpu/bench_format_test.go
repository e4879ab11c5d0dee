package main

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/xpu-go/xpu/internal/tooling/bench"
)

func TestFigure(t *testing.T) {
	for _, c := range []struct {
		v    float64
		unit string
		want string
	}{
		{122850, bench.NsPerOp, "123 µs/op"},
		{126, bench.NsPerOp, "126 ns/op"},
		{7264, bench.NsPerOp, "7.26 µs/op"},
		{1.633, bench.NsPerIter, "1.63 ns/iter"},
		{158.1, "ns/block", "158 ns/block"},
		{28.04, bench.GBPerSec, "28.0 GB/s"},
		{0.85, bench.GBPerSec, "850 MB/s"},
		{1.299, "peak-reserved/peak-inuse", "1.30 peak-reserved/peak-inuse"},
	} {
		require.Equal(t, c.want, figure(c.v, c.unit), "%v %s", c.v, c.unit)
	}
}

// met returns a pointer to b, as against.Met holds it.
func met(b bool) *bool { return &b }

func TestVerdictLine(t *testing.T) {
	triad := &benchRow{Name: "triad", Unit: bench.GBPerSec, Median: 28.04, Runs: []float64{28.04, 27.2, 29}}
	pfor := &benchRow{Name: "parallel_for.empty", Unit: bench.NsPerOp, Median: 126, Runs: []float64{126, 140, 120}}
	procs := &benchRow{Name: "shm.np2.pingpong.8B", Unit: bench.NsPerOp, Median: 390}
	for _, c := range []struct {
		row  *benchRow
		a    against
		want string
	}{
		{triad, against{What: "ref omp.triad", Value: 32, Ratio: 0.876, Goal: 0.9, Met: met(false), Ratios: []float64{0.876, 0.85, 0.906}},
			"NOT MET  triad 28.0 GB/s against the reference omp.triad 32.0 GB/s: ratio 0.88 (median of 3 runs, worst 0.85); goal ≥0.90, higher is better"},
		{pfor, against{What: "baseline errgroup.empty", Value: 809.5, Ratio: 0.16, Goal: 0.6, Met: met(true), Ratios: []float64{0.16, 0.18, 0.15}},
			"met      parallel_for.empty 126 ns/op against the baseline errgroup.empty 810 ns/op: ratio 0.16 (median of 3 paired runs, worst 0.18); goal ≤0.60, lower is better"},
		{procs, against{What: "ref vader.np2.pingpong.8B", Value: 350, Ratio: 1.114, Goal: 1.1, Met: met(false)},
			"NOT MET  shm.np2.pingpong.8B 390 ns/op against the reference vader.np2.pingpong.8B 350 ns/op: ratio 1.11 (one figure each: no spread measured); goal ≤1.10, lower is better"},
	} {
		require.Equal(t, c.want, verdictLine(c.row, c.a))
	}
}

func TestPrintVerdicts(t *testing.T) {
	rows := []*benchRow{
		{Name: "a", Unit: bench.NsPerOp, Median: 100, Runs: []float64{90, 100, 150},
			Against: []against{{What: "baseline b", Value: 200, Ratio: 0.5, Goal: 0.6, Met: met(true), Ratios: []float64{0.5, 0.5, 0.7}}}},
		{Name: "b", Unit: bench.NsPerOp, Median: 200, Runs: []float64{198, 200, 202}},
		{Name: "c", Unit: bench.GBPerSec, Median: 9, Runs: []float64{9, 9, 9},
			Against: []against{{What: "ref d", Value: 10, Ratio: 0.9, Goal: 0.95, Met: met(false), Ratios: []float64{0.9, 0.9, 0.9}},
				{What: "baseline e", Value: 9, Ratio: 1}}}, // no goal: no verdict
	}
	var out bytes.Buffer
	printVerdicts(&out, rows)
	require.Equal(t, `
goals: 1 met, 1 NOT MET
  NOT MET  c 9.00 GB/s against the reference d 10.0 GB/s: ratio 0.90 (median of 3 runs, worst 0.90); goal ≥0.95, higher is better
  met      a 100 ns/op against the baseline b 200 ns/op: ratio 0.50 (median of 3 paired runs, worst 0.70); goal ≤0.60, lower is better
noise: the runs of one case spread by up to 60% here (a; median 2%): a ratio within that
of its goal can pass or fail by chance on this machine: rerun (--count 10) before trusting one verdict.
`, out.String())

	// The widest spread is named wherever its row is.
	require.Equal(t, "noise: the runs of one case spread by up to 60% here (a; median 31%): a ratio within that\n"+
		"of its goal can pass or fail by chance on this machine: rerun (--count 10) before trusting one verdict.",
		noiseLine([]*benchRow{rows[1], rows[0]}))

	out.Reset()
	printVerdicts(&out, rows[1:2])
	require.Empty(t, out.String(), "no goal, no verdicts")

	single := []*benchRow{{Name: "p", Unit: bench.NsPerOp, Median: 100,
		Against: []against{{What: "ref q", Value: 100, Ratio: 1, Goal: 1.1, Met: met(true)}}}}
	out.Reset()
	printVerdicts(&out, single)
	require.Contains(t, out.String(), "noise: no spread measured (one figure each)")
}

func TestBenchUsage(t *testing.T) {
	var stdout, stderr bytes.Buffer
	err := runBench(context.Background(), []string{"-h"}, &stdout, &stderr)
	require.True(t, errors.Is(err, flag.ErrHelp), "%v", err)
	head, _, ok := strings.Cut(stderr.String(), "\nFlags:\n")
	require.True(t, ok, "the flags follow the subcommands:\n%s", stderr.String())
	require.Equal(t, `usage: xpu bench [flags]                  run the cases against their baselines and C references
       xpu bench <subcommand> [flags]     (xpu bench <subcommand> -h for its flags)

Subcommands:
  sweep    measure communicators and transfer paths over message sizes beside Open MPI and memmove: tables, JSON, charts
  compare  compare two sweep documents point by point: counts, geomean of the ratios, the significant changes
  plot     draw the charts (PNG and SVG) of a sweep document
  rounds   the one-process-per-rank comparisons of several rounds (make rounds-shm): median and worst ratio of each

Progress goes to stderr: on a terminal one line that rewrites itself, elsewhere a line per case.
Figures are scaled (ns, µs, ms per operation; MB/s, GB/s), each with its unit.
`, head)
	require.Contains(t, stderr.String(), "-benchtime duration")

	// Every subcommand a user runs is listed.
	for name := range benchSubcommands {
		if name == "sweep-rank" {
			continue // started by a sweep, not by users
		}
		require.True(t, slices.ContainsFunc(benchHelp, func(h struct{ name, line string }) bool { return h.name == name }),
			"xpu bench -h does not list %s", name)
	}
}

// fakeClock is a clock a test moves.
type fakeClock struct{ t time.Time }

func (c *fakeClock) now() time.Time { return c.t }

func TestBenchProgress(t *testing.T) {
	clock := &fakeClock{t: time.Unix(1e9, 0)}
	var log bytes.Buffer
	p := newBenchProgress(&log, false, clock.now, 6)
	p.caseBegins(1, 2, "a", 4)
	p.run(1, 2, "a", 1, 2) // silent in a log
	clock.t = clock.t.Add(4 * time.Second)
	p.ran(4)
	p.caseBegins(2, 2, "b", 2)
	p.finish()
	require.Equal(t, "xpu bench: [1/2] a: 4 runs (0s elapsed)\n"+
		"xpu bench: [2/2] b: 2 runs (4s elapsed, about 2s left)\n", log.String())

	var tty bytes.Buffer
	p = newBenchProgress(&tty, true, clock.now, 2)
	p.caseBegins(1, 1, "a", 2) // the run lines say it
	p.run(1, 1, "a", 1, 2)
	clock.t = clock.t.Add(3 * time.Second)
	p.ran(1)
	p.run(1, 1, "a", 2, 2)
	p.ran(1)
	p.finish()
	require.Equal(t, "\r\033[K[1/1] a run 1/2 · 0s elapsed"+
		"\r\033[K[1/1] a run 2/2 · 3s elapsed, about 3s left"+
		"\r\033[K", tty.String())
}

func TestPlural(t *testing.T) {
	require.Equal(t, "1 case", plural(1, "case"))
	require.Equal(t, "30 cases", plural(30, "case"))
}
