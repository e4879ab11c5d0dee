package sweep

import (
	"cmp"
	"fmt"
	"io"
	"math"
	"slices"
	"strings"
	"text/tabwriter"

	"golang.org/x/perf/benchmath"
	"golang.org/x/perf/benchunit"
)

// The fewest samples a side that Compare needs at its default level (α =
// 0.05, confidence 0.95): to call a change with the Mann-Whitney U test,
// and for a confidence interval around a median. Fewer get "~" and no
// interval, whatever the figures.
const (
	MinSamplesToCompare   = 4
	MinSamplesForInterval = 6
)

// compareConfidence is the confidence level of the intervals Compare
// gives around the medians, benchstat's.
const compareConfidence = 0.95

// Estimate is the median of a point's samples in its operation's figure
// and a confidence interval around it: benchmath's AssumeNothing summary,
// the one benchstat prints.
type Estimate struct {
	// Median is the median of the samples in the operation's figure:
	// the time of one operation in nanoseconds for a MetricTime
	// operation; for a MetricBandwidth one, GB/s (bytes per nanosecond),
	// each sample's bandwidth being Op.Moves × Size / the sample's time.
	// (For an even number of samples this is the mean of the two middle
	// bandwidths, which Point.Bandwidth, taken from the median time, need
	// not equal exactly.)
	Median float64
	// Lo and Hi bound the confidence interval of the median, in the same
	// unit; they are infinite when there are too few samples for one.
	Lo, Hi float64
	// Confidence is the interval's actual confidence level: 0.95 or
	// above.
	Confidence float64
	// N is the number of samples.
	N int
}

// summary returns e as benchmath's Summary.
func (e *Estimate) summary() benchmath.Summary {
	return benchmath.Summary{Center: e.Median, Lo: e.Lo, Hi: e.Hi, Confidence: e.Confidence}
}

// Delta is the comparison of one point in two documents.
type Delta struct {
	// Key is the point compared.
	Key Key
	// Metric is the figure the point is judged by: its operation's
	// Metric (MetricTime for an operation Ops does not list).
	Metric Metric
	// Old and New are the point's medians in the two documents, in the
	// figure Metric says (nanoseconds or GB/s); nil where the document
	// has no such point or the point has no samples.
	Old, New *Estimate
	// Alpha is the significance level the point was judged at.
	Alpha float64
	// P is the p-value of the Mann-Whitney U test of the samples of Old
	// and New; 1 where no test was made (the point is not in both).
	P float64
	// N1 and N2 are the numbers of samples of the point in the old and
	// the new document; 0 where it is not in one.
	N1, N2 int
	// Invalid says that the point's check of the results failed in
	// either document (Point.Invalid).
	Invalid bool
	// Significant says that the samples of Old and New differ at Alpha
	// (P ≤ Alpha, as benchmath's FormatDelta decides) and that the point
	// is valid in both documents: a point whose results were wrong in
	// either is never reported as a change.
	Significant bool
	// Change is New.Median/Old.Median − 1, 0 where the point is not in
	// both. For a MetricTime point a positive Change is slower; for a
	// MetricBandwidth point it is faster.
	Change float64
	// Verdict is "~" for a change that is not Significant, else
	// benchmath's FormatDelta of the medians, such as "+12.34%".
	Verdict string
	// Note says why the point could not be judged or what to mind
	// about it: "only in old", "only in new", "invalid in old: …",
	// benchmath's warnings about too few samples; empty when none.
	Note string
}

// Faster reports whether d is a significant change for the better: less
// time or more bandwidth.
func (d Delta) Faster() bool { return d.Significant && d.better() > 0 }

// Slower reports whether d is a significant change for the worse: more
// time or less bandwidth.
func (d Delta) Slower() bool { return d.Significant && d.better() < 0 }

// better returns the sign of Change in the direction of better figures.
func (d Delta) better() int {
	switch {
	case d.Change == 0:
		return 0
	case (d.Change > 0) == (d.Metric == MetricBandwidth):
		return 1
	}
	return -1
}

// timeRatio returns the ratio of the new median time to the old for a
// point valid in both documents, and false for the others.
func (d Delta) timeRatio() (float64, bool) {
	if d.Old == nil || d.New == nil || d.Old.Median <= 0 || d.New.Median <= 0 || d.Invalid {
		return 0, false
	}
	r := d.New.Median / d.Old.Median
	if d.Metric == MetricBandwidth {
		r = 1 / r
	}
	return r, !math.IsInf(r, 0) && !math.IsNaN(r)
}

// Compare compares the points of old and new, matched by Key, with the
// Mann-Whitney U test (benchmath.AssumeNothing) at the significance level
// alpha; alpha ≤ 0 means 0.05. There is one Delta for each Key in either
// document, in the order of the operations in Ops (those it does not list
// last, by name), then of rank counts, series (as the documents list them)
// and sizes. A document with two points of one Key has the first
// compared. A nil document has no points.
func Compare(old, new *Document, alpha float64) []Delta {
	if !(alpha > 0) {
		alpha = benchmath.DefaultThresholds.CompareAlpha
	}
	th := benchmath.DefaultThresholds
	th.CompareAlpha = alpha

	type pair struct {
		old, new       *Point
		oldDup, newDup bool
	}
	pairs := map[Key]*pair{}
	var keys []Key
	seriesOrder := map[string]int{}
	add := func(d *Document, isOld bool) {
		if d == nil {
			return
		}
		for _, s := range d.Series {
			if _, ok := seriesOrder[s.Name]; !ok {
				seriesOrder[s.Name] = len(seriesOrder)
			}
		}
		for i := range d.Points {
			p := &d.Points[i]
			k := p.Key()
			pr := pairs[k]
			if pr == nil {
				pr = &pair{}
				pairs[k] = pr
				keys = append(keys, k)
			}
			slot, dup := &pr.new, &pr.newDup
			if isOld {
				slot, dup = &pr.old, &pr.oldDup
			}
			if *slot == nil {
				*slot = p
			} else {
				*dup = true
			}
		}
	}
	add(old, true)
	add(new, false)

	opIndex := func(name string) int {
		if i := slices.IndexFunc(Ops, func(o Op) bool { return o.Name == name }); i >= 0 {
			return i
		}
		return len(Ops)
	}
	seriesIndex := func(name string) int {
		if i, ok := seriesOrder[name]; ok {
			return i
		}
		return len(seriesOrder)
	}
	slices.SortFunc(keys, func(a, b Key) int {
		return cmp.Or(
			cmp.Compare(opIndex(a.Op), opIndex(b.Op)),
			cmp.Compare(a.Op, b.Op),
			cmp.Compare(a.Ranks, b.Ranks),
			cmp.Compare(seriesIndex(a.Series), seriesIndex(b.Series)),
			cmp.Compare(a.Series, b.Series),
			cmp.Compare(a.Size, b.Size),
		)
	})

	out := make([]Delta, 0, len(keys))
	for _, k := range keys {
		pr := pairs[k]
		out = append(out, compareOne(k, pr.old, pr.new, pr.oldDup, pr.newDup, &th))
	}
	return out
}

// compareOne compares the point k of the old document (po, nil when it
// has none) with that of the new one (pn).
func compareOne(k Key, po, pn *Point, oldDup, newDup bool, th *benchmath.Thresholds) Delta {
	d := Delta{Key: k, Metric: MetricTime, Alpha: th.CompareAlpha, P: 1, Verdict: "~"}
	var notes []string
	note := func(s string) {
		if s != "" && !slices.Contains(notes, s) {
			notes = append(notes, s)
		}
	}
	op, known := LookupOp(k.Op)
	if known {
		d.Metric = op.Metric
	} else {
		note("unknown operation")
	}

	sample := func(p *Point, which string, dup bool) (*Estimate, *benchmath.Sample) {
		switch {
		case p == nil:
			return nil, nil
		case dup:
			note("more than one point in " + which + ", the first compared")
		}
		if p.Invalid != "" {
			d.Invalid = true
			note("invalid in " + which + ": " + p.Invalid)
		}
		if len(p.Samples) == 0 {
			note("no samples in " + which)
			return nil, nil
		}
		v := slices.Clone(p.Samples) // NewSample sorts its values in place
		if d.Metric == MetricBandwidth {
			moved := float64(op.bytesMoved(p.Size))
			for i, ns := range v {
				v[i] = moved / ns
			}
		}
		s := benchmath.NewSample(v, th)
		sum := benchmath.AssumeNothing.Summary(s, compareConfidence)
		for _, w := range sum.Warnings {
			note(w.Error())
		}
		return &Estimate{Median: sum.Center, Lo: sum.Lo, Hi: sum.Hi, Confidence: sum.Confidence, N: len(v)}, s
	}
	var so, sn *benchmath.Sample
	d.Old, so = sample(po, "old", oldDup)
	d.New, sn = sample(pn, "new", newDup)
	if po != nil {
		d.N1 = len(po.Samples)
	}
	if pn != nil {
		d.N2 = len(pn.Samples)
	}
	switch {
	case po == nil:
		note("only in new")
	case pn == nil:
		note("only in old")
	}

	if so != nil && sn != nil {
		c := benchmath.AssumeNothing.Compare(so, sn)
		d.P = c.P
		if d.Old.Median != 0 {
			d.Change = d.New.Median/d.Old.Median - 1
		}
		if v := c.FormatDelta(d.Old.Median, d.New.Median); !d.Invalid && v != "~" {
			d.Significant, d.Verdict = true, v
		}
		for _, w := range c.Warnings {
			note(w.Error())
		}
	}
	d.Note = strings.Join(notes, "; ")
	return d
}

// PrintCompare writes deltas (from Compare) in the manner of benchstat,
// summarised for a person:
//
//   - a heading that says what the columns are, and once, for all the
//     points it concerns, why an interval or a verdict is missing
//     (benchmath's warnings about too few samples);
//   - one section per operation, each row a point in both documents
//     with its old and new medians ± their confidence intervals (the
//     median alone where there are too few samples for one), the change,
//     the p-value, the sample counts and any note of its own (invalid,
//     duplicated);
//   - the points only in one document, as counts by operation, series
//     and rank count with their range of sizes — one row each, as the
//     others, with verbose;
//   - a summary: how many points valid in both got significantly
//     faster, slower or stayed unchanged, the geometric mean of the ratio
//     of the new time to the old over them, and each significant change.
func PrintCompare(w io.Writer, deltas []Delta, verbose bool) error {
	ew := &errWriter{w: w}
	alpha := benchmath.DefaultThresholds.CompareAlpha
	if len(deltas) > 0 {
		alpha = deltas[0].Alpha
	}
	fmt.Fprintf(ew, "old → new: median ± %.0f%% confidence interval; DELTA = new/old − 1 of the medians, "+
		"~ where the Mann-Whitney U test finds no difference (P > α = %v); N = samples, old+new\n",
		100*compareConfidence, alpha)
	fmt.Fprintf(ew, "time (s, ms, µs, ns per operation): lower is better; bandwidth (B/s, MB/s, GB/s): higher is better\n")

	// benchmath's warnings about the samples, said once with the number
	// of points they concern; the other notes stay on their rows.
	fewNotes, rowNotes := splitNotes(deltas)
	for _, f := range fewNotes {
		fmt.Fprintf(ew, "note: %d of %d points: %s%s\n", f.n, len(deltas), f.text, fewSamplesAdvice(f.text))
	}

	tw := tabwriter.NewWriter(ew, 0, 0, 2, ' ', 0)
	lastOp := ""
	var oneSided []Delta
	for i, d := range deltas {
		if (d.Old == nil) != (d.New == nil) && !verbose {
			oneSided = append(oneSided, d)
			continue
		}
		if d.Key.Op != lastOp {
			tw.Flush()
			fmt.Fprintf(ew, "\n%s: %s\n", d.Key.Op, metricHeading(d.Metric))
			fmt.Fprintf(tw, "POINT\tOLD\tNEW\tDELTA\tP\tN\tNOTE\n")
			lastOp = d.Key.Op
		}
		p := "-"
		if d.Old != nil && d.New != nil {
			p = fmt.Sprintf("%.3f", d.P)
		}
		n := fmt.Sprintf("%d+%d", d.N1, d.N2)
		if d.N1 == d.N2 {
			n = fmt.Sprint(d.N1)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s", d.Key, formatEstimate(d.Old, d.Metric),
			formatEstimate(d.New, d.Metric), d.Verdict, p, n)
		if note := rowNotes[i]; note != "" {
			fmt.Fprintf(tw, "\t%s", note)
		}
		fmt.Fprintln(tw)
	}
	tw.Flush()
	if len(oneSided) > 0 {
		fmt.Fprintf(ew, "\npoints in one document only (-v lists them):\n")
		for _, l := range oneSidedLines(oneSided) {
			fmt.Fprintln(ew, "  "+l)
		}
	}

	var faster, slower, same, invalid, onlyOld, onlyNew int
	var ratios []float64
	var changes []Delta
	for _, d := range deltas {
		switch {
		case d.Old == nil && d.New == nil:
			continue
		case d.Old == nil:
			onlyNew++
			continue
		case d.New == nil:
			onlyOld++
			continue
		case d.Invalid:
			invalid++
			continue
		case d.Faster():
			faster++
			changes = append(changes, d)
		case d.Slower():
			slower++
			changes = append(changes, d)
		default:
			same++
		}
		if r, ok := d.timeRatio(); ok {
			ratios = append(ratios, r)
		}
	}
	fmt.Fprintf(ew, "\nsummary: %d points valid in both: %d faster, %d slower, %d unchanged (α = %v)",
		faster+slower+same, faster, slower, same, alpha)
	if g, ok := geomean(ratios); ok {
		fmt.Fprintf(ew, "; geomean of new/old time %.4f (%+.2f%%)", g, 100*(g-1))
	}
	for _, c := range []struct {
		n    int
		what string
	}{{invalid, "invalid in either"}, {onlyOld, "only in old"}, {onlyNew, "only in new"}} {
		if c.n > 0 {
			fmt.Fprintf(ew, "; %d %s", c.n, c.what)
		}
	}
	fmt.Fprintln(ew)
	if len(changes) > 0 {
		fmt.Fprintln(ew, "significant changes:")
		ctw := tabwriter.NewWriter(ew, 0, 0, 2, ' ', 0)
		for _, d := range changes {
			word := "faster"
			if d.Slower() {
				word = "slower"
			}
			fmt.Fprintf(ctw, "  %s\t%s\t%s → %s\t%s\tP %.3f\n", word, d.Key, formatEstimate(d.Old, d.Metric),
				formatEstimate(d.New, d.Metric), d.Verdict, d.P)
		}
		ctw.Flush()
	}
	if n := faster + slower + same; n > 0 {
		// Each point is its own test: some come out significant by chance.
		fmt.Fprintf(ew, "at α = %v, about %.0f of %d points differ by chance alone where nothing changed: "+
			"judge a handful of scattered changes as noise, a run of neighbouring sizes as a change\n", alpha, alpha*float64(n), n)
	}
	return ew.err
}

// fewNote is one of benchmath's warnings about too few samples and the
// number of points it concerns.
type fewNote struct {
	text string
	n    int
}

// splitNotes takes benchmath's warnings about too few samples ("need >=
// 6 samples for confidence interval at level 0.95") out of the deltas'
// notes: it returns each with the number of points it concerns, in the
// order first met, and the rest of each delta's note.
func splitNotes(deltas []Delta) ([]fewNote, []string) {
	var few []fewNote
	rest := make([]string, len(deltas))
	for i, d := range deltas {
		var keep []string
		for _, part := range strings.Split(d.Note, "; ") {
			switch {
			case part == "":
			case strings.HasPrefix(part, "need >= "):
				j := slices.IndexFunc(few, func(f fewNote) bool { return f.text == part })
				if j < 0 {
					few = append(few, fewNote{text: part})
					j = len(few) - 1
				}
				few[j].n++
			default:
				keep = append(keep, part)
			}
		}
		rest[i] = strings.Join(keep, "; ")
	}
	return few, rest
}

// fewSamplesAdvice says what a warning about too few samples means for
// the table, and how to get more.
func fewSamplesAdvice(warning string) string {
	switch {
	case strings.Contains(warning, "confidence interval"):
		return " (their ± is left out)"
	case strings.Contains(warning, "detect a difference"):
		return " (their DELTA is ~ whatever the medians; sweep with more --rounds or --count)"
	}
	return ""
}

// oneSidedLines summarises the points of deltas, each in one document
// only, by side, operation, series and rank count: "only in old:
// latency/shm/np2, 10 sizes from 8B to 4KiB".
func oneSidedLines(deltas []Delta) []string {
	type group struct {
		side             string
		op, series       string
		ranks            int
		n                int
		minSize, maxSize int64
	}
	var groups []*group
	for _, d := range deltas {
		side := "only in new"
		if d.New == nil {
			side = "only in old"
		}
		i := slices.IndexFunc(groups, func(g *group) bool {
			return g.side == side && g.op == d.Key.Op && g.series == d.Key.Series && g.ranks == d.Key.Ranks
		})
		if i < 0 {
			groups = append(groups, &group{side: side, op: d.Key.Op, series: d.Key.Series, ranks: d.Key.Ranks,
				minSize: d.Key.Size, maxSize: d.Key.Size})
			i = len(groups) - 1
		}
		g := groups[i]
		g.n++
		g.minSize, g.maxSize = min(g.minSize, d.Key.Size), max(g.maxSize, d.Key.Size)
	}
	slices.SortStableFunc(groups, func(a, b *group) int { return cmp.Compare(b.side, a.side) }) // old first
	var out []string
	for _, g := range groups {
		sizes := "1 size, " + FormatSize(g.minSize)
		if g.n > 1 {
			sizes = fmt.Sprintf("%d sizes from %s to %s", g.n, FormatSize(g.minSize), FormatSize(g.maxSize))
		}
		out = append(out, fmt.Sprintf("%s: %s/%s/np%d, %s", g.side, g.op, g.series, g.ranks, sizes))
	}
	return out
}

// metricHeading says what a section's figures are and which way is
// better.
func metricHeading(m Metric) string {
	if m == MetricBandwidth {
		return "bandwidth, higher is better"
	}
	return "time per operation, lower is better"
}

// formatEstimate writes e as benchstat does: "1.234µs ± 2%", "12.3GB/s ±
// 1%"; the median alone where the interval is infinite (too few
// samples for one, which PrintCompare says once); "-" for nil.
func formatEstimate(e *Estimate, m Metric) string {
	if e == nil {
		return "-"
	}
	var v string
	if m == MetricBandwidth {
		v = benchunit.Scale(e.Median*1e9, benchunit.Decimal) + "B/s"
	} else {
		v = benchunit.Scale(e.Median*1e-9, benchunit.Decimal) + "s"
	}
	if math.IsInf(e.Lo, 0) || math.IsInf(e.Hi, 0) {
		return v
	}
	return v + " ± " + e.summary().PctRangeString()
}

// geomean returns the geometric mean of the positive numbers v, and false
// for none.
func geomean(v []float64) (float64, bool) {
	if len(v) == 0 {
		return 0, false
	}
	var sum float64
	for _, x := range v {
		sum += math.Log(x)
	}
	return math.Exp(sum / float64(len(v))), true
}

// errWriter keeps the first error of its writes and writes nothing after
// it.
type errWriter struct {
	w   io.Writer
	err error
}

func (e *errWriter) Write(b []byte) (int, error) {
	if e.err != nil {
		return 0, e.err
	}
	n, err := e.w.Write(b)
	e.err = err
	return n, err
}
