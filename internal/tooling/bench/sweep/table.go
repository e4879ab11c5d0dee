package sweep

import (
	"fmt"
	"io"
	"slices"
	"strings"
	"text/tabwriter"
	"time"
)

// PrintTables prints d as OSU prints its benchmarks: a table per
// operation, rank count and series, a row per size, with the reference
// the series is compared with beside it and the ratio of the two. Times
// are per operation in microseconds; bw, bibw and copy are in GB/s (1e9
// bytes/s); the collectives that move data also show nccl-tests'
// algorithm and bus bandwidths. RATIO is ours over theirs: below 1 is
// better for a time, above 1 for a bandwidth.
func PrintTables(w io.Writer, d *Document) error {
	ew := &errWriter{w: w}
	m := d.Machine
	fmt.Fprintf(ew, "# %s · %d cores · %.1f GiB · %s · %s", m.CPU, m.Cores, float64(m.MemoryBytes)/(1<<30), m.OS, m.GoVersion)
	for _, r := range m.References {
		if r.Version != "" {
			fmt.Fprintf(ew, " · %s", r.Version)
		}
	}
	fmt.Fprintf(ew, "\n# %d samples per point, each about %v; the figure is their median\n", d.Config.Count, time.Duration(d.Config.SampleTime))
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

// printTable prints the table of series s for op at n ranks, with its
// reference's points ref (if any) beside.
func printTable(w io.Writer, op Op, n int, s Series, pts, ref []Point, byKey map[Key]Point) {
	what := "time per operation (µs), lower is better"
	if op.Metric == MetricBandwidth {
		what = "bandwidth (GB/s), higher is better"
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
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', tabwriter.AlignRight)
	cols := []string{"SIZE", strings.ToUpper(s.Name)}
	if op.AlgBytes != nil {
		cols = append(cols, "ALGBW", "BUSBW")
	}
	if len(ref) > 0 {
		cols = append(cols, strings.ToUpper(s.Against))
		if op.AlgBytes != nil {
			cols = append(cols, "BUSBW")
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
		row := []string{sizeCell(op, size), figure(op, ours, okO)}
		if op.AlgBytes != nil {
			row = append(row, gbs(ours.AlgBW, okO && ours.Invalid == ""), gbs(ours.BusBW, okO && ours.Invalid == ""))
		}
		if len(ref) > 0 {
			theirs, okT := byKey[Key{s.Against, op.Name, n, size}]
			row = append(row, figure(op, theirs, okT))
			if op.AlgBytes != nil {
				row = append(row, gbs(theirs.BusBW, okT && theirs.Invalid == ""))
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

// value is the point's figure: its median time or its bandwidth.
func value(op Op, p Point) float64 {
	if op.Metric == MetricBandwidth {
		return p.Bandwidth
	}
	return p.Median
}

// figure formats the point's figure for a table: µs or GB/s, "INVALID"
// for a point whose check failed, "-" for none.
func figure(op Op, p Point, ok bool) string {
	switch {
	case !ok:
		return "-"
	case p.Invalid != "":
		return "INVALID"
	case op.Metric == MetricBandwidth:
		return fmt.Sprintf("%.3f", p.Bandwidth)
	}
	us := p.Median / 1e3
	switch {
	case us >= 1000:
		return fmt.Sprintf("%.0f", us)
	case us >= 10:
		return fmt.Sprintf("%.1f", us)
	}
	return fmt.Sprintf("%.3f", us)
}

func gbs(v float64, ok bool) string {
	if !ok {
		return "-"
	}
	return fmt.Sprintf("%.3f", v)
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
