package sweep

import (
	"encoding/xml"
	"image"
	"image/color"
	"image/png"
	"math"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"gonum.org/v1/plot"
)

// plotDocument returns a document with points of latency, bw and
// allreduce at 2 ranks from 8B to 1MiB for a series and its reference,
// copies, a single alltoall point, barrier points and invalid points.
func plotDocument() *Document {
	d := &Document{
		Schema: Schema,
		Series: []Series{
			{Name: "tcp", Against: "openmpi.tcp"},
			{Name: "openmpi.tcp", Reference: true},
			{Name: "copy.cpu"},
			{Name: "memmove", Reference: true},
		},
	}
	point := func(series, op string, ranks int, size int64, ns float64) Point {
		return Point{Series: series, Op: op, Ranks: ranks, Size: size, Iters: 10,
			Samples: []float64{ns * 1.02, ns, ns * 0.97}}
	}
	for size := int64(8); size <= 1<<20; size *= 2 {
		for i, s := range []string{"tcp", "openmpi.tcp"} {
			base := 2000 + 1500*float64(i) // ns
			gbs := 2.0 - 0.5*float64(i)    // bytes per ns
			t := base + float64(size)/gbs
			d.Points = append(d.Points,
				point(s, "latency", 2, size, t),
				point(s, "bw", 2, size, 300+float64(size)/gbs),
				point(s, "allreduce", 2, size, 2*t))
		}
		d.Points = append(d.Points, point("copy.cpu", "copy", 1, size, 20+float64(size)/10))
	}
	d.Points = append(d.Points,
		point("memmove", "copy", 1, 4096, 300),  // a series of one point
		point("tcp", "alltoall", 4, 1024, 9000), // a chart of one point
		point("tcp", "barrier", 2, 0, 3000),
		point("openmpi.tcp", "barrier", 2, 0, 4000))
	invalid := point("tcp", "latency", 2, 4<<20, 1e9)
	invalid.Invalid = "the check of the results failed"
	bcast := point("tcp", "bcast", 2, 1024, 5000)
	bcast.Invalid = "the check of the results failed"
	d.Points = append(d.Points, invalid, bcast)
	return d
}

func TestPlot(t *testing.T) {
	d := plotDocument()
	dir := filepath.Join(t.TempDir(), "plots") // Plot creates it
	paths, err := Plot(d, dir)
	if err != nil {
		t.Fatal(err)
	}
	var want []string
	for _, name := range []string{
		"latency.np2", "bw.np2", "allreduce.np2", "allreduce.np2.busbw",
		"alltoall.np4", "alltoall.np4.busbw", "copy",
	} {
		want = append(want, filepath.Join(dir, name+".png"), filepath.Join(dir, name+".svg"))
	}
	slices.Sort(want)
	if !slices.Equal(paths, want) {
		t.Fatalf("Plot wrote\n%q\nwant\n%q", paths, want)
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(entries) != len(want) {
		t.Errorf("%s holds %d files, want %d", dir, len(entries), len(want))
	}
	if d.Points[0].Median != 0 {
		t.Errorf("Plot changed the document: point 0's median is %v", d.Points[0].Median)
	}

	for _, path := range paths {
		switch filepath.Ext(path) {
		case ".png":
			img := decodePNG(t, path)
			b := img.Bounds()
			if w, h := int(plotWidth.Dots(plotDPI)), int(plotHeight.Dots(plotDPI)); b.Dx() != w || b.Dy() != h {
				t.Errorf("%s: %dx%d pixels, want %dx%d", path, b.Dx(), b.Dy(), w, h)
			}
			if n := len(colorCounts(img)); n < 50 {
				t.Errorf("%s: %d colors: not a chart", path, n)
			}
		case ".svg":
			checkSVG(t, path)
		}
	}

	// The lines are drawn in their series' colors: tcp's (series 0) and
	// openmpi.tcp's (series 1), and not the colors of the series that
	// have no latency point.
	counts := colorCounts(decodePNG(t, filepath.Join(dir, "latency.np2.png")))
	for i, drawn := range []bool{true, true, false, false} {
		c := color.RGBAModel.Convert(plotColors[i]).(color.RGBA)
		if got := counts[c] > 20; got != drawn {
			t.Errorf("latency.np2.png: %d pixels of series %d's color %v; want drawn: %v", counts[c], i, c, drawn)
		}
	}
}

func TestPlotCharts(t *testing.T) {
	charts := buildCharts(plotDocument())
	var names []string
	for _, c := range charts {
		names = append(names, c.name)
	}
	want := []string{"latency.np2", "bw.np2", "allreduce.np2", "allreduce.np2.busbw", "alltoall.np4", "alltoall.np4.busbw", "copy"}
	if !slices.Equal(names, want) {
		t.Fatalf("charts %q, want %q", names, want)
	}
	lat := charts[0]
	if len(lat.lines) != 2 || lat.lines[0].series != "tcp" || lat.lines[1].series != "openmpi.tcp" || !lat.lines[1].reference {
		t.Fatalf("latency lines: %+v", lat.lines)
	}
	for _, l := range lat.lines {
		if len(l.xys) != 18 { // 8B..1MiB; the invalid 4MiB point left out
			t.Errorf("latency %s: %d points, want 18", l.series, len(l.xys))
		}
		if l.xys[0].X != 8 || l.xys[len(l.xys)-1].X != 1<<20 {
			t.Errorf("latency %s: sizes %v to %v, want 8 to 1MiB", l.series, l.xys[0].X, l.xys[len(l.xys)-1].X)
		}
	}
	// tcp's latency at 8B: median 2004ns → 2.004µs.
	if y := lat.lines[0].xys[0].Y; y < 2.003 || y > 2.005 {
		t.Errorf("latency tcp 8B: %vµs, want 2.004", y)
	}
	title, xlabel, ylabel := lat.labels()
	if title != "latency · 2 ranks · time per operation (lower is better)" || xlabel != "message size" || ylabel != "time per operation (µs)" {
		t.Errorf("latency labels %q, %q, %q", title, xlabel, ylabel)
	}
	title, xlabel, ylabel = charts[len(charts)-1].labels()
	if title != "copy · bandwidth (higher is better)" || xlabel != "transfer size" || ylabel != "bandwidth (GB/s)" {
		t.Errorf("copy labels %q, %q, %q", title, xlabel, ylabel)
	}
}

func TestPlotEmpty(t *testing.T) {
	for _, d := range []*Document{nil, {}, {Series: []Series{{Name: "tcp"}}, Points: []Point{
		{Series: "tcp", Op: "barrier", Ranks: 2, Iters: 1, Samples: []float64{100}},
	}}} {
		dir := filepath.Join(t.TempDir(), "plots")
		paths, err := Plot(d, dir)
		if err != nil || paths != nil {
			t.Errorf("Plot of an empty document: %q, %v; want nothing, no error", paths, err)
		}
		if _, err := os.Stat(dir); !os.IsNotExist(err) {
			t.Errorf("Plot of an empty document created %s", dir)
		}
	}
}

func TestPlotUnwritable(t *testing.T) {
	file := filepath.Join(t.TempDir(), "file")
	if err := os.WriteFile(file, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	paths, err := Plot(plotDocument(), filepath.Join(file, "plots"))
	if err == nil {
		t.Fatalf("Plot into a directory under a file: no error, wrote %q", paths)
	}
	if paths != nil {
		t.Errorf("Plot failed (%v) but returned paths %q", err, paths)
	}
}

func TestPlotName(t *testing.T) {
	for _, c := range []struct {
		op    string
		ranks int
		busbw bool
		want  string
	}{
		{"latency", 2, false, "latency.np2"},
		{"allreduce", 8, true, "allreduce.np8.busbw"},
		{"copy", 1, false, "copy"},
	} {
		if got := PlotName(c.op, c.ranks, c.busbw); got != c.want {
			t.Errorf("PlotName(%q, %d, %v) = %q, want %q", c.op, c.ranks, c.busbw, got, c.want)
		}
	}
}

func TestPlotTicks(t *testing.T) {
	for _, c := range []struct {
		ticker plot.Ticker
		lo, hi float64
		want   []string
	}{
		{sizeTicks{}, 8, 1 << 20, []string{"16B", "256B", "4KiB", "64KiB", "1MiB"}},
		{sizeTicks{}, 1, 1 << 30, []string{"1B", "16B", "256B", "4KiB", "64KiB", "1MiB", "16MiB", "256MiB"}},
		{sizeTicks{}, 1024, 8192, []string{"1KiB", "2KiB", "4KiB", "8KiB"}},
		{valueTicks{}, 1.5, 900, []string{"2", "5", "10", "20", "50", "100", "200", "500"}},
		{valueTicks{}, 0.15, 8, []string{"0.2", "0.5", "1", "2", "5"}},
		{valueTicks{}, 0.25, 0.9, []string{"0.3", "0.4", "0.5", "0.6", "0.7", "0.8", "0.9"}},
		{valueTicks{}, 2, 1e5, []string{"10", "100", "1000", "10000", "100000"}},
		{valueTicks{}, 4.09, 19.8, []string{"5", "6", "7", "8", "9", "10", "12", "15"}},
		{valueTicks{}, 0.0011, 1.1, []string{"0.002", "0.005", "0.01", "0.02", "0.05", "0.1", "0.2", "0.5", "1"}},
		{valueTicks{}, 2e6, 3e9, []string{"2e6", "5e6", "1e7", "2e7", "5e7", "1e8", "2e8", "5e8", "1e9", "2e9"}},
		{valueTicks{}, 1e-6, 1e7, []string{"1e-6", "0.0001", "0.01", "1", "100", "10000", "1e6"}},
	} {
		var got []string
		for _, tk := range c.ticker.Ticks(c.lo, c.hi) {
			if tk.Label != "" {
				got = append(got, tk.Label)
			}
		}
		if !slices.Equal(got, c.want) {
			t.Errorf("%T of [%v, %v]: labels %q, want %q", c.ticker, c.lo, c.hi, got, c.want)
		}
	}
}

func decodePNG(t *testing.T, path string) image.Image {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	img, err := png.Decode(f)
	if err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	return img
}

// colorCounts counts the pixels of each color of img.
func colorCounts(img image.Image) map[color.RGBA]int {
	counts := map[color.RGBA]int{}
	if rgba, ok := img.(*image.RGBA); ok { // what the PNGs decode to: fast
		for i := 0; i+3 < len(rgba.Pix); i += 4 {
			p := rgba.Pix[i : i+4 : i+4]
			counts[color.RGBA{p[0], p[1], p[2], p[3]}]++
		}
		return counts
	}
	b := img.Bounds()
	for y := b.Min.Y; y < b.Max.Y; y++ {
		for x := b.Min.X; x < b.Max.X; x++ {
			counts[color.RGBAModel.Convert(img.At(x, y)).(color.RGBA)]++
		}
	}
	return counts
}

// checkSVG checks that the file path is XML whose root element is <svg>.
func checkSVG(t *testing.T, path string) {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	dec := xml.NewDecoder(f)
	root := ""
	for {
		tok, err := dec.Token()
		if err != nil {
			t.Errorf("%s: %v", path, err)
			return
		}
		if se, ok := tok.(xml.StartElement); ok {
			if root == "" {
				root = se.Name.Local
			}
			if root != "svg" {
				t.Errorf("%s: root element <%s>, want <svg>", path, root)
				return
			}
			// Read the whole document: it must be well-formed.
			if err := dec.Skip(); err != nil {
				t.Errorf("%s: %v", path, err)
			}
			return
		}
	}
}

// TestPlotBands: each line has a band from its fastest to its slowest
// sample, under a title line that names the machine, the date and the
// bands; a band is drawn, in its series' color made light.
func TestPlotBands(t *testing.T) {
	d := plotDocument()
	d.Machine = Machine{CPU: "test CPU", Cores: 2}
	d.Started = time.Date(2026, 11, 24, 10, 0, 0, 0, time.UTC)
	charts := buildCharts(d)
	lat, bw := charts[0], charts[1]
	if got, want := lat.about(), "test CPU · 2 cores · 2026-11-24 · bands: fastest to slowest of 3 samples"; got != want {
		t.Errorf("about = %q, want %q", got, want)
	}
	// tcp's latency at 8B: samples 1.02, 1 and 0.97 × 2004 ns.
	band := lat.lines[0].band()
	if n := len(lat.lines[0].xys); len(band) != 2*n {
		t.Fatalf("latency band of %d vertices, want %d", len(band), 2*n)
	}
	near := func(got, want float64) bool { return math.Abs(got-want) < 1e-9*want }
	if lo, hi := band[0], band[len(band)-1]; lo.X != 8 || hi.X != 8 || !near(lo.Y, 2.004*0.97) || !near(hi.Y, 2.004*1.02) {
		t.Errorf("latency band at 8B: %v to %v, want 8B at %v to %v µs", lo, hi, 2.004*0.97, 2.004*1.02)
	}
	// A bandwidth's band: the slowest sample is the lowest rate.
	bwBand, y := bw.lines[0].band(), bw.lines[0].xys[0].Y
	if lo, hi := bwBand[0], bwBand[len(bwBand)-1]; !near(lo.Y, y/1.02) || !near(hi.Y, y/0.97) {
		t.Errorf("bw band at 8B: %v to %v, want %v to %v GB/s", lo.Y, hi.Y, y/1.02, y/0.97)
	}

	// One sample per point: no band, and the title says so.
	one := plotDocument()
	for i := range one.Points {
		one.Points[i].Samples = one.Points[i].Samples[:1]
	}
	c := buildCharts(one)[0]
	if c.lines[0].band() != nil || c.about() != "1 sample per point: no band" {
		t.Errorf("one sample: band %v, about %q", c.lines[0].band(), c.about())
	}

	// A band wide enough to count its pixels: tcp's latency samples
	// spread from half to twice the median.
	for i, p := range d.Points {
		if p.Series == "tcp" && p.Op == "latency" {
			m := p.Samples[1]
			d.Points[i].Samples = []float64{m / 2, m, 2 * m}
		}
	}
	dir := t.TempDir()
	if _, err := Plot(d, dir); err != nil {
		t.Fatal(err)
	}
	counts := colorCounts(decodePNG(t, filepath.Join(dir, "latency.np2.png")))
	r, g, b, _ := plotColors[0].RGBA()
	light := func(c uint32) uint8 { return uint8(255 - (255-int(c>>8))*bandAlpha/255) }
	want := color.RGBA{light(r), light(g), light(b), 255}
	n := 0
	for c, k := range counts {
		if absDiff(c.R, want.R) <= 2 && absDiff(c.G, want.G) <= 2 && absDiff(c.B, want.B) <= 2 {
			n += k
		}
	}
	if n < 500 {
		t.Errorf("latency.np2.png: %d pixels of tcp's band color %v: no band drawn", n, want)
	}
}

func absDiff(a, b uint8) uint8 {
	if a > b {
		return a - b
	}
	return b - a
}
