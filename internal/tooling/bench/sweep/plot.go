package sweep

import (
	"cmp"
	"fmt"
	"image/color"
	"image/png"
	"io"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/plotutil"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgimg"
	"gonum.org/v1/plot/vg/vgsvg"
)

// The size of the charts Plot draws, and the resolution of its PNGs:
// 7in × 4.5in at 120 dpi is 840 × 540 pixels.
const (
	plotWidth  = 7 * vg.Inch
	plotHeight = 4.5 * vg.Inch
	plotDPI    = 120
)

// PlotName returns the base name, without extension, of the chart Plot
// draws for the operation op at ranks ranks: "latency.np2", and
// "allreduce.np2.busbw" for the bus bandwidth chart of a collective
// (busbw). A transfer operation's chart is one per operation whatever
// ranks is: "copy".
func PlotName(op string, ranks int, busbw bool) string {
	name := op
	if o, ok := LookupOp(op); !ok || !o.Transfer {
		name += ".np" + strconv.Itoa(ranks)
	}
	if busbw {
		name += ".busbw"
	}
	return name
}

// Plot draws d's points into dir as PNG and SVG files and returns the
// paths written, sorted.
//
// It draws one chart per operation and rank count (per operation for the
// transfers), named by PlotName, with one line per series: the time of one
// operation in µs for the operations whose Metric is MetricTime, the
// bandwidth in GB/s for the others, against the size, both on log scales;
// a collective that moves data (Op.AlgBytes) has a second chart of its bus
// bandwidth. A line's band, in its color, spans the fastest to the
// slowest sample of each point (across rounds and samples), where the
// points have two samples or more. Under the title a line names the
// machine (CPU model, cores), the date the sweep started and what the
// bands are. Each series keeps its color, by its place in d.Series, in
// every chart; reference series are dashed, with hollow markers. Points marked Invalid are not
// drawn, nor are the NoSize operations (barrier), whose single point per
// series makes no curve; a chart with no point left is not written.
//
// Plot creates dir when it has a chart to write; it writes nothing, and
// returns nil and no error, for a document without anything to draw.
func Plot(d *Document, dir string) ([]string, error) {
	charts := buildCharts(d)
	if len(charts) == 0 {
		return nil, nil
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("plot: %w", err)
	}
	var paths []string
	for _, c := range charts {
		p, err := c.plot()
		if err != nil {
			return nil, fmt.Errorf("plot %s: %w", c.name, err)
		}
		base := filepath.Join(dir, c.name)
		img := vgimg.NewWith(vgimg.UseWH(plotWidth, plotHeight), vgimg.UseDPI(plotDPI))
		c.render(p, draw.New(img))
		// Compressed for speed: png.Encode's default level makes files 4%
		// smaller that take half as long again to write.
		enc := png.Encoder{CompressionLevel: png.BestSpeed}
		err = writeFile(base+".png", func(w io.Writer) error { return enc.Encode(w, img.Image()) })
		if err != nil {
			return nil, fmt.Errorf("plot: %w", err)
		}
		svg := vgsvg.New(plotWidth, plotHeight)
		c.render(p, draw.New(svg))
		err = writeFile(base+".svg", func(w io.Writer) error { _, err := svg.WriteTo(w); return err })
		if err != nil {
			return nil, fmt.Errorf("plot: %w", err)
		}
		paths = append(paths, base+".png", base+".svg")
	}
	slices.Sort(paths)
	return paths, nil
}

// writeFile creates the file path and writes it with write.
func writeFile(path string, write func(io.Writer) error) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if err := write(f); err != nil {
		f.Close()
		return fmt.Errorf("writing %s: %w", path, err)
	}
	return f.Close()
}

// chartKind is the figure a chart shows.
type chartKind int

const (
	chartTime      chartKind = iota // median time of one operation, µs
	chartBandwidth                  // Point.Bandwidth, GB/s
	chartBusBW                      // Point.BusBW, GB/s
)

// chart is one chart Plot draws: its lines, in the order of the
// document's series.
type chart struct {
	name  string
	op    Op
	ranks int
	kind  chartKind
	lines []chartLine
	// machine names the machine and the date: "AMD EPYC · 2 cores ·
	// 2026-12-05"; the samples the points have, least and most.
	machine          string
	minSamp, maxSamp int
}

// chartLine is one series' points in a chart, sorted by size.
type chartLine struct {
	series    string
	index     int // the series' place in the document, which picks its color
	reference bool
	xys       plotter.XYs
	spans     []span // the band, by size
}

// span is the range of a point's samples in a chart's figure.
type span struct{ x, lo, hi float64 }

// buildCharts collects the charts d's points make, in the order of Ops
// and then of rank counts; charts without a point are left out.
func buildCharts(d *Document) []*chart {
	if d == nil {
		return nil
	}
	// The series' places: the document's order, then the series its
	// points name without listing them, by name.
	index := map[string]int{}
	reference := map[string]bool{}
	for _, s := range d.Series {
		if _, dup := index[s.Name]; !dup {
			index[s.Name] = len(index)
			reference[s.Name] = s.Reference
		}
	}
	var unlisted []string
	for _, p := range d.Points {
		if _, ok := index[p.Series]; !ok && !slices.Contains(unlisted, p.Series) {
			unlisted = append(unlisted, p.Series)
		}
	}
	slices.Sort(unlisted)
	for _, s := range unlisted {
		index[s] = len(index)
	}

	machine := machineOf(d)
	type key struct {
		op    string
		ranks int
		busbw bool
	}
	charts := map[key]*chart{}
	for _, p := range d.Points {
		op, ok := LookupOp(p.Op)
		if !ok || op.NoSize || p.Invalid != "" || !(p.Size > 0) {
			continue
		}
		p.Fill() // a copy: d is left as it is
		ranks := p.Ranks
		if op.Transfer {
			ranks = 1
		}
		// The samples' extremes; a figure of the median time y reads
		// y·median/t for a sample of time t when it is a bandwidth.
		fast, slow := slices.Min(p.Samples), slices.Max(p.Samples)
		add := func(busbw bool, kind chartKind, y float64) {
			if !(y > 0) || math.IsInf(y, 0) {
				return // no figure, or none a log scale can show
			}
			k := key{op.Name, ranks, busbw}
			c := charts[k]
			if c == nil {
				c = &chart{name: PlotName(op.Name, ranks, busbw), op: op, ranks: ranks, kind: kind, machine: machine,
					minSamp: len(p.Samples)}
				charts[k] = c
			}
			c.minSamp, c.maxSamp = min(c.minSamp, len(p.Samples)), max(c.maxSamp, len(p.Samples))
			i := slices.IndexFunc(c.lines, func(l chartLine) bool { return l.series == p.Series })
			if i < 0 {
				c.lines = append(c.lines, chartLine{series: p.Series, index: index[p.Series], reference: reference[p.Series]})
				i = len(c.lines) - 1
			}
			c.lines[i].xys = append(c.lines[i].xys, plotter.XY{X: float64(p.Size), Y: y})
			sp := span{x: float64(p.Size), lo: y * fast / p.Median, hi: y * slow / p.Median}
			if kind != chartTime {
				sp.lo, sp.hi = y*p.Median/slow, y*p.Median/fast
			}
			c.lines[i].spans = append(c.lines[i].spans, sp)
		}
		switch op.Metric {
		case MetricTime:
			add(false, chartTime, p.Median/1e3)
		case MetricBandwidth:
			add(false, chartBandwidth, p.Bandwidth)
		}
		if op.AlgBytes != nil {
			add(true, chartBusBW, p.BusBW)
		}
	}

	var out []*chart
	for _, c := range charts {
		slices.SortFunc(c.lines, func(a, b chartLine) int { return a.index - b.index })
		for _, l := range c.lines {
			slices.SortStableFunc(l.xys, func(a, b plotter.XY) int { return cmp.Compare(a.X, b.X) })
			slices.SortStableFunc(l.spans, func(a, b span) int { return cmp.Compare(a.x, b.x) })
		}
		out = append(out, c)
	}
	opIndex := func(name string) int {
		return slices.IndexFunc(Ops, func(o Op) bool { return o.Name == name })
	}
	slices.SortFunc(out, func(a, b *chart) int {
		if d := opIndex(a.op.Name) - opIndex(b.op.Name); d != 0 {
			return d
		}
		if d := a.ranks - b.ranks; d != 0 {
			return d
		}
		return int(a.kind) - int(b.kind)
	})
	return out
}

// machineOf names the machine of d and the day its sweep started: "AMD
// EPYC · 2 cores · 2026-12-05", what it knows of them.
func machineOf(d *Document) string {
	var parts []string
	if d.Machine.CPU != "" {
		parts = append(parts, d.Machine.CPU)
	}
	if d.Machine.Cores > 0 {
		parts = append(parts, strconv.Itoa(d.Machine.Cores)+" cores")
	}
	if !d.Started.IsZero() {
		parts = append(parts, d.Started.Format("2006-01-02"))
	}
	return strings.Join(parts, " · ")
}

// about is the line under the chart's title: the machine, the date and
// what the bands span.
func (c *chart) about() string {
	var band string
	switch {
	case c.maxSamp < 2:
		band = "1 sample per point: no band"
	case c.minSamp == c.maxSamp:
		band = fmt.Sprintf("bands: fastest to slowest of %d samples", c.maxSamp)
	default:
		band = fmt.Sprintf("bands: fastest to slowest of %d to %d samples", c.minSamp, c.maxSamp)
	}
	if c.machine == "" {
		return band
	}
	return c.machine + " · " + band
}

// bandAlpha is the opacity of the bands.
const bandAlpha = 0x40

// Styles of the lines: colors by the series' place in the document, a
// filled marker for our series and a hollow one, on a dashed line, for the
// references.
var (
	plotColors    = plotutil.DarkColors
	filledGlyphs  = []draw.GlyphDrawer{draw.CircleGlyph{}, draw.BoxGlyph{}, draw.PyramidGlyph{}}
	hollowGlyphs  = []draw.GlyphDrawer{draw.RingGlyph{}, draw.SquareGlyph{}, draw.TriangleGlyph{}}
	referenceDash = []vg.Length{vg.Points(6), vg.Points(3)}
	gridColor     = color.Gray{Y: 215}
)

// labels returns the chart's title and the labels of its axes.
func (c *chart) labels() (title, xlabel, ylabel string) {
	var what string
	switch c.kind {
	case chartTime:
		what, ylabel = "time per operation (lower is better)", "time per operation (µs)"
	case chartBandwidth:
		what, ylabel = "bandwidth (higher is better)", "bandwidth (GB/s)"
	case chartBusBW:
		what, ylabel = "bus bandwidth (higher is better)", "bus bandwidth (GB/s)"
	}
	parts := []string{c.op.Name}
	xlabel = "transfer size"
	if !c.op.Transfer {
		ranks := strconv.Itoa(c.ranks) + " ranks"
		if c.ranks == 1 {
			ranks = "1 rank"
		}
		parts = append(parts, ranks)
		xlabel = "message size"
	}
	return strings.Join(append(parts, what), " · "), xlabel, ylabel
}

// plot builds the chart as a gonum plot, to be drawn by render: without
// its axes' labels, which render adds.
func (c *chart) plot() (*plot.Plot, error) {
	p := plot.New()
	title, _, _ := c.labels()
	p.Title.Text = title + "\n" + c.about()
	p.Title.Padding = vg.Points(8)
	p.X.Scale, p.Y.Scale = plot.LogScale{}, plot.LogScale{}
	p.X.Tick.Marker, p.Y.Tick.Marker = sizeTicks{}, valueTicks{}
	p.Legend.TextStyle.Font.Size = vg.Points(10)
	p.Legend.ThumbnailWidth = vg.Points(24)

	grid := plotter.NewGrid()
	grid.Vertical.Color, grid.Horizontal.Color = gridColor, gridColor
	grid.Vertical.Width, grid.Horizontal.Width = vg.Points(0.5), vg.Points(0.5)
	p.Add(grid)

	var xs, ys []float64
	// The bands first, under every line.
	for _, l := range c.lines {
		band := l.band()
		if band == nil {
			continue
		}
		poly, err := plotter.NewPolygon(band)
		if err != nil {
			return nil, fmt.Errorf("series %s: %w", l.series, err)
		}
		r, g, b, _ := plotColors[l.index%len(plotColors)].RGBA()
		poly.Color = color.NRGBA{R: uint8(r >> 8), G: uint8(g >> 8), B: uint8(b >> 8), A: bandAlpha}
		poly.LineStyle.Width = 0
		p.Add(poly)
		for _, xy := range band {
			xs, ys = append(xs, xy.X), append(ys, xy.Y)
		}
	}
	for _, l := range c.lines {
		line, points, err := plotter.NewLinePoints(l.xys)
		if err != nil {
			return nil, fmt.Errorf("series %s: %w", l.series, err)
		}
		col := plotColors[l.index%len(plotColors)]
		line.Color, line.Width = col, vg.Points(1.5)
		points.Color, points.Radius = col, vg.Points(3)
		points.Shape = filledGlyphs[l.index%len(filledGlyphs)]
		if l.reference {
			line.Dashes = referenceDash
			points.Shape = hollowGlyphs[l.index%len(hollowGlyphs)]
		}
		p.Add(line, points)
		p.Legend.Add(l.series, line, points)
		for _, xy := range l.xys {
			xs, ys = append(xs, xy.X), append(ys, xy.Y)
		}
	}

	// The axes' ranges: the data's, widened to a factor of 4 at least,
	// for a log scale needs an extent (a single size, a single value has
	// none) and valueTicks labels a factor of 4 well.
	p.X.Min, p.X.Max = logRange(slices.Min(xs), slices.Max(xs), 4)
	p.Y.Min, p.Y.Max = logRange(slices.Min(ys), slices.Max(ys), 4)
	p.Y.Min, p.Y.Max = p.Y.Min/1.1, p.Y.Max*1.1 // markers off the edges
	placeLegend(p, c.lines)
	return p, nil
}

// band returns the outline of the line's band: its spans' low ends by
// size, then their high ends back; nil where no point has a spread, or
// one that a log scale cannot show.
func (l chartLine) band() plotter.XYs {
	var out plotter.XYs
	spread := false
	for _, s := range l.spans {
		if !(s.lo > 0) || math.IsInf(s.hi, 0) {
			return nil
		}
		spread = spread || s.hi > s.lo
		out = append(out, plotter.XY{X: s.x, Y: s.lo})
	}
	if !spread || len(l.spans) < 2 {
		return nil
	}
	for _, s := range slices.Backward(l.spans) {
		out = append(out, plotter.XY{X: s.x, Y: s.hi})
	}
	return out
}

// render draws p, which plot built, onto cv with the labels of its axes.
//
// gonum lays an axis label out as if centred on the arithmetic middle of
// the axis range, which on a log scale lies near its end, while it draws
// it at the middle: half the label's length of the data area goes to
// waste at the top of the chart. So p has no axis labels: they are drawn
// here, in the margins gonum would give them, centred on the data area.
func (c *chart) render(p *plot.Plot, cv draw.Canvas) {
	_, xlabel, ylabel := c.labels()
	xsty, ysty := p.X.Label.TextStyle, p.Y.Label.TextStyle
	ysty.Rotation += math.Pi / 2
	xh, yw := xsty.Height(xlabel), ysty.Height(ylabel)
	cv.SetColor(p.BackgroundColor) // p.Draw fills inner only
	cv.Fill(cv.Rectangle.Path())
	inner := draw.Crop(cv, yw, 0, xh, 0)
	p.Draw(inner)
	data := p.DataCanvas(inner)
	cv.FillText(xsty, vg.Point{X: data.Center().X, Y: cv.Min.Y + xsty.FontExtents().Descent}, xlabel)
	cv.FillText(ysty, vg.Point{X: cv.Min.X + yw - ysty.FontExtents().Descent, Y: data.Center().Y}, ylabel)
}

// logRange returns [lo, hi] widened about its geometric middle to span at
// least a factor of minRatio.
func logRange(lo, hi, minRatio float64) (float64, float64) {
	if hi/lo >= minRatio {
		return lo, hi
	}
	mid := math.Sqrt(lo * hi)
	f := math.Sqrt(minRatio)
	return mid / f, mid * f
}

// placeLegend puts the legend in the corner of the data area that the
// lines cross least. When every corner is crossed it puts the legend top
// left and raises the top of the y axis until the lines pass below it.
func placeLegend(p *plot.Plot, lines []chartLine) {
	// The legend's extent as a fraction of the data area, which is
	// roughly the image less the axes, their labels and the title.
	sty := p.Legend.TextStyle
	var textW vg.Length
	for _, l := range lines {
		textW = max(textW, sty.Width(" "+l.series))
	}
	const margin = 0.03
	w := float64(p.Legend.ThumbnailWidth+textW)/float64(plotWidth-1.1*vg.Inch) + margin
	h := float64(vg.Length(len(lines))*sty.Height("X"))/float64(plotHeight-1.3*vg.Inch) + margin

	// Where the lines are, in the unit square: their points and points
	// along their segments.
	norm := func(lo, hi, v float64) float64 { return math.Log(v/lo) / math.Log(hi/lo) }
	var pts [][2]float64
	for _, l := range lines {
		for i, xy := range l.xys {
			pts = append(pts, [2]float64{norm(p.X.Min, p.X.Max, xy.X), norm(p.Y.Min, p.Y.Max, xy.Y)})
			if i == 0 {
				continue
			}
			a, b := pts[len(pts)-2], pts[len(pts)-1]
			for t := 0.125; t < 1; t += 0.125 {
				pts = append(pts, [2]float64{a[0] + t*(b[0]-a[0]), a[1] + t*(b[1]-a[1])})
			}
		}
	}
	corners := []struct{ top, left bool }{{true, true}, {true, false}, {false, true}, {false, false}}
	best, bestN := corners[0], -1
	for _, c := range corners {
		n := 0
		for _, q := range pts {
			inX := (c.left && q[0] <= w) || (!c.left && q[0] >= 1-w)
			inY := (c.top && q[1] >= 1-h) || (!c.top && q[1] <= h)
			if inX && inY {
				n++
			}
		}
		if bestN < 0 || n < bestN {
			best, bestN = c, n
		}
	}
	if bestN > 0 {
		best = corners[0]
		if h < 0.6 {
			// Data up to 1-h of the height: log(max'/min) = log(max/min)/(1-h).
			p.Y.Max = p.Y.Min * math.Pow(p.Y.Max/p.Y.Min, 1/(1-h))
		}
	}
	p.Legend.Top, p.Legend.Left = best.top, best.left
	inset := vg.Points(6)
	p.Legend.YOffs = -inset
	if !best.top {
		p.Legend.YOffs = inset
	}
	p.Legend.XOffs = inset
	if !best.left {
		p.Legend.XOffs = -inset
	}
}

// sizeTicks marks a log axis of sizes in bytes at the powers of two,
// labelling them in FormatSize's form every 1, 2, 4 or 8 powers (those
// multiple of it: 1B, 16B, 256B, 4KiB, … every 4), at most 8 labels.
type sizeTicks struct{}

// Ticks returns the ticks of the range [min, max].
func (sizeTicks) Ticks(vmin, vmax float64) []plot.Tick {
	if !(vmin > 0) || !(vmax >= vmin) {
		return nil
	}
	lo, hi := int(math.Floor(math.Log2(vmin))), int(math.Ceil(math.Log2(vmax)))
	lo, hi = max(lo, 0), min(hi, 62)
	if math.Ldexp(1, lo) < vmin {
		lo++
	}
	if math.Ldexp(1, hi) > vmax {
		hi--
	}
	step := 1
	for step < 8 && countMultiples(lo, hi, step) > 8 {
		step *= 2
	}
	var ticks []plot.Tick
	for e := lo; e <= hi; e++ {
		t := plot.Tick{Value: math.Ldexp(1, e)}
		if e%step == 0 {
			t.Label = FormatSize(1 << e)
		}
		ticks = append(ticks, t)
	}
	return ticks
}

// countMultiples counts the multiples of step in [lo, hi], lo ≥ 0.
func countMultiples(lo, hi, step int) int {
	if hi < lo {
		return 0
	}
	return hi/step - (lo+step-1)/step + 1
}

// valueTicks marks a log axis of figures. It labels the powers of ten
// (every other one, or fewer, past 8 of them) when that makes 4 labels or
// more; else the finest of 1, 2 and 5 × 10^k, 1…9 × 10^k, and those with
// 1.2, 1.5 and 2.5 that makes 4 labels with no stretch of more than a
// third of the axis bare. It marks the other 1…9 × 10^k over up to 4
// decades, the other powers of ten beyond.
type valueTicks struct{}

// mantissas are the labelled mantissas of valueTicks, coarsest first.
var mantissas = [][]string{
	{"1"},
	{"1", "2", "5"},
	{"1", "2", "3", "4", "5", "6", "7", "8", "9"},
	{"1", "1.2", "1.5", "2", "2.5", "3", "4", "5", "6", "7", "8", "9"},
}

// Ticks returns the ticks of the range [vmin, vmax].
func (valueTicks) Ticks(vmin, vmax float64) []plot.Tick {
	if !(vmin > 0) || !(vmax > vmin) || math.IsInf(vmax, 0) {
		return nil
	}
	lo, hi := int(math.Floor(math.Log10(vmin))), int(math.Ceil(math.Log10(vmax)))
	span := math.Log10(vmax / vmin)
	in := func(v float64) bool { return v >= vmin*(1-1e-9) && v <= vmax*(1+1e-9) }

	// The labels, at the first level that suits.
	labels := map[float64]string{}
	for level, ms := range mantissas {
		clear(labels)
		var at []float64
		for k := lo; k <= hi; k++ {
			for _, m := range ms {
				if v := decimal(m, k); in(v) {
					labels[v] = formatValue(m, k)
					at = append(at, v)
				}
			}
		}
		if level == 0 && len(at) >= 4 {
			if every := (len(at) + 7) / 8; every > 1 {
				for k := lo; k <= hi; k++ {
					if k%every != 0 {
						delete(labels, decimal("1", k))
					}
				}
			}
			break
		}
		if len(at) >= 4 && maxGap(vmin, vmax, at) <= span/3 {
			break
		}
	}

	var ticks []plot.Tick
	for k := lo; k <= hi; k++ {
		for m := 1; m <= 9; m++ {
			v := decimal(strconv.Itoa(m), k)
			if in(v) && (m == 1 || span <= 4) {
				ticks = append(ticks, plot.Tick{Value: v, Label: labels[v]})
			}
		}
	}
	for v, l := range labels { // 1.2, 1.5, 2.5
		if !slices.ContainsFunc(ticks, func(t plot.Tick) bool { return t.Value == v }) {
			ticks = append(ticks, plot.Tick{Value: v, Label: l})
		}
	}
	slices.SortFunc(ticks, func(a, b plot.Tick) int { return cmp.Compare(a.Value, b.Value) })
	return ticks
}

// maxGap returns the longest stretch, in decades, of [vmin, vmax] without
// one of at (sorted).
func maxGap(vmin, vmax float64, at []float64) float64 {
	gap, last := 0.0, vmin
	for _, v := range append(at, vmax) {
		gap = max(gap, math.Log10(v/last))
		last = v
	}
	return gap
}

// decimal returns m × 10^k, the float64 nearest it (3 * math.Pow10(-1)
// is not: it is 0.30000000000000004).
func decimal(m string, k int) float64 {
	v, _ := strconv.ParseFloat(m+"e"+strconv.Itoa(k), 64)
	return v
}

// formatValue writes m × 10^k as a plain number ("0.002", "150") between
// 1e-4 and 1e6, and as "2e-5", "1.5e6" beyond.
func formatValue(m string, k int) string {
	if k < -4 || k >= 6 {
		return m + "e" + strconv.Itoa(k)
	}
	return strconv.FormatFloat(decimal(m, k), 'f', -1, 64)
}
