package main

import (
	"fmt"
	"io"
	"slices"
	"strings"
	"text/tabwriter"

	"github.com/xpu-go/xpu/internal/tooling/bench"
	"github.com/xpu-go/xpu/internal/tooling/bench/stats"
	"github.com/xpu-go/xpu/internal/tooling/bench/units"
)

// The report of xpu bench: a table whose rows mix units (times per
// operation, per iteration, rates), so each figure carries its own unit,
// scaled to it (126 ns/op, 7.26 µs/op, 28.0 GB/s); then one line per goal
// that says what was compared, the ratio with its spread over the runs,
// and the goal; then, once, how noisy the runs were.

// figure writes v, a figure in unit, scaled: a time per something
// ("ns/op", "ns/iter") in ns, µs, ms or s per it; GB/s in B/s to GB/s;
// another metric as three significant digits and its unit.
func figure(v float64, unit string) string {
	switch {
	case unit == bench.GBPerSec:
		return units.Rate(v)
	case strings.HasPrefix(unit, "ns/"):
		return units.Time(v) + unit[len("ns"):]
	}
	return units.Digits(v) + " " + unit
}

// printBench prints the table of rows, what the figures are, the table
// of procs (the one-process-per-rank comparisons, if any), and the
// verdicts of the goals of both.
func printBench(w io.Writer, rows, procs []*benchRow, count int, haveRefs bool) {
	printTable(w, rows)
	fmt.Fprintf(w, "\nOURS and THEIRS are medians of %d runs; RATIO is ours/theirs (times: lower is better; rates: higher is better);\n", count)
	fmt.Fprintln(w, "against a baseline each run alternates with one of the baseline's, and RATIO is the median of the pairs' ratios.")
	if !haveRefs {
		fmt.Fprintln(w, "C references not run: build them with `make refs` and pass --ref .bench (make bench does both).")
	}
	if len(procs) > 0 {
		fmt.Fprintln(w, "\nOne process per rank (figures of make refs-tcp, refs-mpi and refs-shm, medians of 5 runs each):")
		printTable(w, procs)
	}
	printVerdicts(w, slices.Concat(rows, procs))
}

// printTable prints rows with their comparisons, one line each.
func printTable(w io.Writer, rows []*benchRow) {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "CASE\tOURS\tAGAINST\tTHEIRS\tRATIO\tGOAL\t\t")
	for _, r := range rows {
		if len(r.Against) == 0 {
			fmt.Fprintf(tw, "%s\t%s\t\t\t\t\t\t\n", r.Name, figure(r.Median, r.Unit))
			continue
		}
		for i, a := range r.Against {
			name, ours := r.Name, figure(r.Median, r.Unit)
			if i > 0 {
				name, ours = "", ""
			}
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%.2f\t%s\t%s\t\n", name, ours, a.What, figure(a.Value, r.Unit), a.Ratio,
				goalText(r.Unit, a.Goal), verdictWord(a))
		}
	}
	tw.Flush()
}

// goalText writes a goal as "≤0.60" for a time, "≥0.90" for a rate; ""
// for none.
func goalText(unit string, goal float64) string {
	if goal == 0 {
		return ""
	}
	if (bench.Case{Unit: unit}).LowerIsBetter() {
		return fmt.Sprintf("≤%.2f", goal)
	}
	return fmt.Sprintf("≥%.2f", goal)
}

// verdictWord is "met" or "NOT MET" for a comparison with a goal, "" for
// one without.
func verdictWord(a against) string {
	switch {
	case a.Goal == 0 || a.Met == nil:
		return ""
	case *a.Met:
		return "met"
	}
	return "NOT MET"
}

// printVerdicts prints a line per comparison with a goal, the goals not
// met first, then once how much the runs of a case spread here.
func printVerdicts(w io.Writer, rows []*benchRow) {
	var met, notMet []string
	for _, r := range rows {
		for _, a := range r.Against {
			switch verdictWord(a) {
			case "met":
				met = append(met, verdictLine(r, a))
			case "NOT MET":
				notMet = append(notMet, verdictLine(r, a))
			}
		}
	}
	if len(met)+len(notMet) == 0 {
		return
	}
	fmt.Fprintf(w, "\ngoals: %d met, %d NOT MET\n", len(met), len(notMet))
	for _, l := range slices.Concat(notMet, met) {
		fmt.Fprintln(w, "  "+l)
	}
	fmt.Fprintln(w, noiseLine(rows))
}

// verdictLine says what a goal compared and how it came out:
//
//	NOT MET  triad 28.0 GB/s against the C reference omp.triad 32.0 GB/s: ratio 0.87 (median of 3 runs, worst 0.84); goal ≥0.90, higher is better
func verdictLine(r *benchRow, a against) string {
	what := a.What
	switch {
	case strings.HasPrefix(what, "baseline "):
		what = "the baseline " + strings.TrimPrefix(what, "baseline ")
	case strings.HasPrefix(what, "ref "):
		what = "the reference " + strings.TrimPrefix(what, "ref ")
	}
	ratio := fmt.Sprintf("ratio %.2f", a.Ratio)
	switch n := len(a.Ratios); {
	case n > 1:
		kind := "runs"
		if strings.HasPrefix(a.What, "baseline ") {
			kind = "paired runs"
		}
		ratio += fmt.Sprintf(" (median of %d %s, worst %.2f)", n, kind, worstRatio(r.Unit, a.Ratios))
	case n == 0:
		ratio += " (one figure each: no spread measured)"
	}
	better := "higher is better"
	if (bench.Case{Unit: r.Unit}).LowerIsBetter() {
		better = "lower is better"
	}
	return fmt.Sprintf("%-7s  %s %s against %s %s: %s; goal %s, %s",
		verdictWord(a), r.Name, figure(r.Median, r.Unit), what, figure(a.Value, r.Unit), ratio, goalText(r.Unit, a.Goal), better)
}

// worstRatio returns the worst of ratios: the highest for a time, the
// lowest for a rate.
func worstRatio(unit string, ratios []float64) float64 {
	if (bench.Case{Unit: unit}).LowerIsBetter() {
		return slices.Max(ratios)
	}
	return slices.Min(ratios)
}

// noiseLine says how much the runs of one case spread in this report —
// (slowest − fastest) / median, the largest and the median over the rows
// with two runs or more — and what follows for the verdicts.
func noiseLine(rows []*benchRow) string {
	var spreads []float64
	widest := ""
	for _, r := range rows {
		if len(r.Runs) < 2 || r.Median <= 0 {
			continue
		}
		sp := (slices.Max(r.Runs) - slices.Min(r.Runs)) / r.Median
		if len(spreads) == 0 || sp > slices.Max(spreads) {
			widest = r.Name
		}
		spreads = append(spreads, sp)
	}
	if len(spreads) == 0 {
		return "noise: no spread measured (one figure each), and on a shared machine one figure can miss a goal\n" +
			"by chance: rerun before trusting one verdict (make rounds-shm: the median and the worst of 10 rounds)."
	}
	return fmt.Sprintf("noise: the runs of one case spread by up to %.0f%% here (%s; median %.0f%%): a ratio within that\n"+
		"of its goal can pass or fail by chance on this machine: rerun (--count 10) before trusting one verdict.",
		100*slices.Max(spreads), widest, 100*stats.Median(spreads))
}
