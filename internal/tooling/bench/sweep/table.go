package sweep

import (
	"fmt"
	"io"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/xpu-go/xpu/internal/tooling/bench/stats"
	"github.com/xpu-go/xpu/internal/tooling/bench/units"
)

// PrintTables prints d as OSU prints its benchmarks: a table per
// operation, rank count and series, a row per size, with the reference
// the series is compared with beside it and the ratio of the two. Times
// are per operation; bw, bibw and copy are bandwidths (powers of 1000
// bytes per second); the collectives that move data also show
// nccl-tests' algorithm and bus bandwidths. Each column of figures is in
// one unit, which its header names, scaled to the column's median (µs,
// ms; MB/s, GB/s); the figures have three significant digits. RATIO is
// ours over theirs: below 1 is better for a time, above 1 for a
// bandwidth.
//
// The header names the machine, the references measured (those with
// points in d: Open MPI's series are "openmpi.*") and how many samples
// each point has.
func PrintTables(w io.Writer, d *Document) error {
	ew := &errWriter{w: w}
	fmt.Fprintln(ew, "# "+machineLine(d))
	fmt.Fprintln(ew, "# "+samplesLine(d))
	byKey := map[Key]Point{}
	for _, p := range d.Points {
		byKey[p.Key()] = p
	}
	shown := map[string]bool{} // reference series printed beside ours, per op/ranks
	for _, op := range Ops {
		for _, n := range ranksOf(d, op.Name) {
			for _, s := range d.Series {
				pts := pointsOf(d, s.Name, op.Name, n)
				tag := fmt.Sprintf("%s/%s/%d", s.Name, op.Name, n)
				if len(pts) == 0 || shown[tag] {
					continue
				}
				var ref []Point
				if s.Against != "" {
					ref = pointsOf(d, s.Against, op.Name, n)
					if len(ref) > 0 {
						shown[fmt.Sprintf("%s/%s/%d", s.Against, op.Name, n)] = true
					}
				}
				printTable(ew, op, n, s, pts, ref, byKey)
			}
		}
	}
	if d.Stopped != "" {
		fmt.Fprintf(ew, "\nstopped early (%s): the points above are those measured before\n", d.Stopped)
	}
	for _, e := range d.Errors {
		fmt.Fprintf(ew, "note: %s\n", e)
	}
	return ew.err
}

// machineLine describes the machine of d and the references measured
// in it: "AMD EPYC · 2 cores · 23.5 GiB · linux/amd64 · go1.26.8 ·
// Open MPI 4.1.4".
func machineLine(d *Document) string {
	m := d.Machine
	parts := []string{m.CPU, fmt.Sprintf("%d cores", m.Cores)}
	if m.MemoryBytes > 0 {
		parts = append(parts, fmt.Sprintf("%.1f GiB", float64(m.MemoryBytes)/(1<<30)))
	}
	parts = append(parts, m.OS, m.GoVersion)
	for _, r := range m.References {
		if r.Version != "" && measured(d, r) {
			parts = append(parts, r.Version)
		}
	}
	return strings.Join(slices.DeleteFunc(parts, func(s string) bool { return s == "" }), " · ")
}

// measured reports whether d has points of the reference r: of a series
// named after it, "openmpi.tcp" for "Open MPI".
func measured(d *Document, r Component) bool {
	prefix := strings.ToLower(strings.ReplaceAll(r.Name, " ", "")) + "."
	return r.Available && slices.ContainsFunc(d.Points, func(p Point) bool { return strings.HasPrefix(p.Series, prefix) })
}

// samplesLine says how many samples the points of d have, from the
// points themselves (a budget or a failed job can leave a point fewer
// than the rounds promised), how long each aimed at, and what compare
// needs of them.
func samplesLine(d *Document) string {
	lo, hi := 0, 0
	for i, p := range d.Points {
		if n := len(p.Samples); i == 0 || n < lo {
			lo = n
		}
		hi = max(hi, len(p.Samples))
	}
	var n string
	switch {
	case lo == hi:
		n = fmt.Sprintf("%d samples per point", hi)
	default:
		n = fmt.Sprintf("%d to %d samples per point", lo, hi)
	}
	if c := d.Config; c.Rounds > 0 {
		n += fmt.Sprintf(" (%d rounds of %d)", c.Rounds, c.Count)
	}
	return fmt.Sprintf("%s, each about %v; the figure is their median; compare needs %d a side to call a change, %d for a confidence interval",
		n, time.Duration(d.Config.SampleTime), MinSamplesToCompare, MinSamplesForInterval)
}

// printTable prints the table of series s for op at n ranks, with its
// reference's points ref (if any) beside.
func printTable(w io.Writer, op Op, n int, s Series, pts, ref []Point, byKey map[Key]Point) {
	what := "time per operation, lower is better"
	if op.Metric == MetricBandwidth {
		what = "bandwidth, higher is better"
	}
	ranks := fmt.Sprintf(" · %d ranks", n)
	if op.Transfer {
		ranks = ""
	}
	vs := ""
	if len(ref) > 0 {
		vs = " against " + s.Against
	}
	fmt.Fprintf(w, "\n## %s%s · %s%s — %s\n", op.Name, ranks, s.Name, vs, what)

	// One unit for the figures of ours and theirs, one for the
	// collectives' bandwidths, each from the median of its column.
	var figs, bws []float64
	for _, p := range slices.Concat(pts, ref) {
		if p.Invalid != "" {
			continue
		}
		figs = append(figs, value(op, p))
		if op.AlgBytes != nil {
			bws = append(bws, p.AlgBW, p.BusBW)
		}
	}
	fig := units.TimeScale(stats.Median(figs))
	if op.Metric == MetricBandwidth {
		fig = units.RateScale(stats.Median(figs))
	}
	bw := units.RateScale(stats.Median(bws))
	col := func(name string, sc units.Scale) string { return name + " (" + sc.Name + ")" }

	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', tabwriter.AlignRight)
	cols := []string{"SIZE", col(strings.ToUpper(s.Name), fig)}
	if op.AlgBytes != nil {
		cols = append(cols, col("ALGBW", bw), col("BUSBW", bw))
	}
	if len(ref) > 0 {
		cols = append(cols, col(strings.ToUpper(s.Against), fig))
		if op.AlgBytes != nil {
			cols = append(cols, col("BUSBW", bw))
		}
		cols = append(cols, "RATIO")
	}
	fmt.Fprintln(tw, strings.Join(cols, "\t")+"\t")
	sizes := map[int64]bool{}
	for _, p := range slices.Concat(pts, ref) {
		sizes[p.Size] = true
	}
	for _, size := range sortedKeys(sizes) {
		ours, okO := byKey[Key{s.Name, op.Name, n, size}]
		row := []string{sizeCell(op, size), cell(fig, value(op, ours), okO, ours.Invalid)}
		if op.AlgBytes != nil {
			row = append(row, cell(bw, ours.AlgBW, okO, ours.Invalid), cell(bw, ours.BusBW, okO, ours.Invalid))
		}
		if len(ref) > 0 {
			theirs, okT := byKey[Key{s.Against, op.Name, n, size}]
			row = append(row, cell(fig, value(op, theirs), okT, theirs.Invalid))
			if op.AlgBytes != nil {
				row = append(row, cell(bw, theirs.BusBW, okT, theirs.Invalid))
			}
			ratio := "-"
			if okO && okT && ours.Invalid == "" && theirs.Invalid == "" {
				ratio = fmt.Sprintf("%.2f", value(op, ours)/value(op, theirs))
			}
			row = append(row, ratio)
		}
		fmt.Fprintln(tw, strings.Join(row, "\t")+"\t")
	}
	tw.Flush()
}

// value is the point's figure: its median time (ns) or its bandwidth
// (GB/s).
func value(op Op, p Point) float64 {
	if op.Metric == MetricBandwidth {
		return p.Bandwidth
	}
	return p.Median
}

// cell writes a figure v of a point in the column's unit sc: "INVALID"
// for a point whose check failed, "-" for none (ok false).
func cell(sc units.Scale, v float64, ok bool, invalid string) string {
	switch {
	case !ok:
		return "-"
	case invalid != "":
		return "INVALID"
	}
	return sc.Format(v)
}

func sizeCell(op Op, size int64) string {
	if op.NoSize {
		return "-"
	}
	return FormatSize(size)
}

// ranksOf returns the rank counts d has points of op at, in order.
func ranksOf(d *Document, op string) []int {
	set := map[int]bool{}
	for _, p := range d.Points {
		if p.Op == op {
			set[p.Ranks] = true
		}
	}
	return sortedKeys(set)
}

// pointsOf returns the points of series for op at n ranks.
func pointsOf(d *Document, series, op string, n int) []Point {
	var out []Point
	for _, p := range d.Points {
		if p.Series == series && p.Op == op && p.Ranks == n {
			out = append(out, p)
		}
	}
	return out
}

func sortedKeys[K int | int64](m map[K]bool) []K {
	out := make([]K, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}
