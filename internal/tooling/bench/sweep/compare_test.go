package sweep

import (
	"bytes"
	"errors"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
)

// compareSeries are the series of the documents of the compare tests.
var compareSeries = []Series{{Name: "tcp", Against: "openmpi.tcp"}, {Name: "openmpi.tcp", Reference: true}, {Name: "local"}}

// compareDoc returns a document of points, their figures filled in.
func compareDoc(points ...Point) *Document {
	d := &Document{Schema: Schema, Series: compareSeries, Points: points}
	for i := range d.Points {
		d.Points[i].Fill()
	}
	return d
}

// compareNoise returns n samples of base ± 5%, uniform.
func compareNoise(r *rand.Rand, base float64, n int) []float64 {
	s := make([]float64, n)
	for i := range s {
		s[i] = base * (1 + 0.1*(r.Float64()-0.5))
	}
	return s
}

// compareTwins returns two sets of n samples of base ± 5% drawn from one
// distribution: 2n draws, sorted and dealt in turn, then shuffled, so
// that their ranks interleave whatever the seed and the U test cannot
// tell them apart.
func compareTwins(r *rand.Rand, base float64, n int) (a, b []float64) {
	all := compareNoise(r, base, 2*n)
	slices.Sort(all)
	for i, v := range all {
		if i%2 == 0 {
			a = append(a, v)
		} else {
			b = append(b, v)
		}
	}
	r.Shuffle(n, func(i, j int) { a[i], a[j] = a[j], a[i] })
	r.Shuffle(n, func(i, j int) { b[i], b[j] = b[j], b[i] })
	return a, b
}

// comparePoint is a point of 10 samples of about ns.
type comparePoint struct {
	key Key
	ns  float64
}

// compareKeys are the points of the compare tests, a time and a
// bandwidth operation among them.
var compareKeys = []comparePoint{
	{Key{"tcp", "latency", 2, 8}, 1500},
	{Key{"tcp", "latency", 2, 64 << 10}, 12000},
	{Key{"openmpi.tcp", "latency", 2, 8}, 1400},
	{Key{"tcp", "bw", 2, 64 << 10}, 9000},
	{Key{"tcp", "allreduce", 4, 1 << 10}, 30000},
	{Key{"local", "copy", 1, 1 << 20}, 80000},
}

// compareSame returns two documents of compareKeys whose samples come
// from one distribution.
func compareSame(seed uint64) (old, new *Document) {
	r := rand.New(rand.NewPCG(seed, 42))
	var po, pn []Point
	for _, c := range compareKeys {
		p := Point{Series: c.key.Series, Op: c.key.Op, Ranks: c.key.Ranks, Size: c.key.Size, Iters: 100}
		a, b := p, p
		a.Samples, b.Samples = compareTwins(r, c.ns, 10)
		po, pn = append(po, a), append(pn, b)
	}
	return compareDoc(po...), compareDoc(pn...)
}

// slowDown multiplies the samples of the point k of d by f.
func slowDown(t *testing.T, d *Document, k Key, f float64) {
	t.Helper()
	for i := range d.Points {
		if d.Points[i].Key() == k {
			for j := range d.Points[i].Samples {
				d.Points[i].Samples[j] *= f
			}
			d.Points[i].Fill()
			return
		}
	}
	t.Fatalf("no point %s", k)
}

// deltaOf returns the delta of k.
func deltaOf(t *testing.T, deltas []Delta, k Key) Delta {
	t.Helper()
	for _, d := range deltas {
		if d.Key == k {
			return d
		}
	}
	t.Fatalf("no delta for %s", k)
	return Delta{}
}

func TestCompareSameDistribution(t *testing.T) {
	for seed := range uint64(5) {
		old, new := compareSame(seed)
		deltas := Compare(old, new, 0)
		if len(deltas) != len(compareKeys) {
			t.Fatalf("seed %d: %d deltas, want %d", seed, len(deltas), len(compareKeys))
		}
		for _, d := range deltas {
			if d.Significant || d.Verdict != "~" || d.Faster() || d.Slower() {
				t.Errorf("seed %d: %s: significant=%v verdict %q, P=%.3f: want ~", seed, d.Key, d.Significant, d.Verdict, d.P)
			}
			if d.P <= 0.05 || d.N1 != 10 || d.N2 != 10 || d.Note != "" || d.Invalid {
				t.Errorf("seed %d: %s: P=%v N=%d+%d note %q invalid %v", seed, d.Key, d.P, d.N1, d.N2, d.Note, d.Invalid)
			}
			if d.Old == nil || d.New == nil || math.Abs(d.Change) > 0.05 {
				t.Errorf("seed %d: %s: old %v new %v change %v", seed, d.Key, d.Old, d.New, d.Change)
			}
		}
	}
}

func TestCompareSlowdown(t *testing.T) {
	old, new := compareSame(7)
	lat, bw := compareKeys[0].key, compareKeys[3].key
	slowDown(t, new, lat, 1.25)
	slowDown(t, new, bw, 1.25)
	deltas := Compare(old, new, 0.05)

	d := deltaOf(t, deltas, lat)
	if !d.Significant || !d.Slower() || d.Faster() || d.Metric != MetricTime {
		t.Errorf("%s: significant=%v slower=%v metric %v, want a significant slowdown", lat, d.Significant, d.Slower(), d.Metric)
	}
	if math.Abs(d.Change-0.25) > 0.05 || !strings.HasPrefix(d.Verdict, "+") || !strings.HasSuffix(d.Verdict, "%") {
		t.Errorf("%s: change %v verdict %q, want about +25%%", lat, d.Change, d.Verdict)
	}
	if d.P >= 0.001 || d.Old.Median < 1400 || d.Old.Median > 1600 || !(d.Old.Lo <= d.Old.Median && d.Old.Median <= d.Old.Hi) {
		t.Errorf("%s: P=%v old %+v", lat, d.P, *d.Old)
	}

	d = deltaOf(t, deltas, bw)
	if !d.Significant || !d.Slower() || d.Metric != MetricBandwidth {
		t.Errorf("%s: significant=%v slower=%v metric %v, want a significant slowdown", bw, d.Significant, d.Slower(), d.Metric)
	}
	if math.Abs(d.Change-(1/1.25-1)) > 0.05 || !strings.HasPrefix(d.Verdict, "-") {
		t.Errorf("%s: change %v verdict %q, want about -20%%", bw, d.Change, d.Verdict)
	}
	if gbs := float64(64<<10) / 9000; math.Abs(d.Old.Median/gbs-1) > 0.05 {
		t.Errorf("%s: old median %v GB/s, want about %v", bw, d.Old.Median, gbs)
	}

	for _, d := range deltas {
		if d.Key != lat && d.Key != bw && d.Verdict != "~" {
			t.Errorf("%s: verdict %q, want ~", d.Key, d.Verdict)
		}
	}

	// A speedup is the reverse.
	back := Compare(new, old, 0)
	if d := deltaOf(t, back, lat); !d.Faster() || d.Change > -0.15 {
		t.Errorf("%s reversed: faster=%v change %v", lat, d.Faster(), d.Change)
	}
	if d := deltaOf(t, back, bw); !d.Faster() || d.Change < 0.2 {
		t.Errorf("%s reversed: faster=%v change %v", bw, d.Faster(), d.Change)
	}
}

func TestCompareOnlyInOneAndInvalid(t *testing.T) {
	old, new := compareSame(3)
	gone, invalid := compareKeys[1].key, compareKeys[4].key
	added := Key{"tcp", "alltoall", 4, 256}
	new.Points = slices.DeleteFunc(new.Points, func(p Point) bool { return p.Key() == gone })
	new.Points = append(new.Points, Point{Series: added.Series, Op: added.Op, Ranks: added.Ranks, Size: added.Size,
		Iters: 10, Samples: compareNoise(rand.New(rand.NewPCG(1, 2)), 5000, 10)})
	// Wrong results and much slower: still no change to report.
	slowDown(t, new, invalid, 1.3)
	for i := range new.Points {
		if new.Points[i].Key() == invalid {
			new.Points[i].Invalid = "rank 1's buffer differs at byte 0"
		}
	}
	deltas := Compare(old, new, 0)
	if len(deltas) != len(compareKeys)+1 {
		t.Fatalf("%d deltas, want %d", len(deltas), len(compareKeys)+1)
	}

	d := deltaOf(t, deltas, gone)
	if d.Note != "only in old" || d.Old == nil || d.New != nil || d.N1 != 10 || d.N2 != 0 || d.P != 1 || d.Significant || d.Verdict != "~" {
		t.Errorf("%s: %+v, want only in old", gone, d)
	}
	d = deltaOf(t, deltas, added)
	if d.Note != "only in new" || d.Old != nil || d.New == nil || d.N1 != 0 || d.N2 != 10 || d.Significant || d.Change != 0 {
		t.Errorf("%s: %+v, want only in new", added, d)
	}
	d = deltaOf(t, deltas, invalid)
	if d.Significant || d.Verdict != "~" || !d.Invalid || d.Slower() || !strings.Contains(d.Note, "invalid in new: rank 1's buffer") {
		t.Errorf("%s: significant=%v verdict %q invalid=%v note %q: want an invalid point, not a change", invalid, d.Significant, d.Verdict, d.Invalid, d.Note)
	}
	if d.P >= 0.05 || d.Change < 0.2 {
		t.Errorf("%s: P=%v change %v: the figures are still compared", invalid, d.P, d.Change)
	}

	// Invalid in old, or in both, is the same.
	for i := range old.Points {
		if old.Points[i].Key() == invalid {
			old.Points[i].Invalid = "wrong"
		}
	}
	d = deltaOf(t, Compare(old, new, 0), invalid)
	if d.Significant || !strings.Contains(d.Note, "invalid in old: wrong") || !strings.Contains(d.Note, "invalid in new") {
		t.Errorf("%s invalid in both: significant=%v note %q", invalid, d.Significant, d.Note)
	}
}

func TestCompareOrder(t *testing.T) {
	p := func(series, op string, ranks int, size int64) Point {
		return Point{Series: series, Op: op, Ranks: ranks, Size: size, Iters: 1, Samples: []float64{1, 2, 3}}
	}
	old := compareDoc(
		p("local", "copy", 1, 8),
		p("tcp", "allreduce", 4, 8),
		p("tcp", "latency", 2, 1024),
		p("openmpi.tcp", "latency", 2, 8),
		p("tcp", "allreduce", 2, 64),
		p("tcp", "latency", 2, 8),
	)
	new := compareDoc(
		p("tcp", "bw", 2, 8),
		p("tcp", "latency", 2, 8),
	)
	var got []string
	for _, d := range Compare(old, new, 0) {
		got = append(got, d.Key.String())
	}
	want := []string{
		"latency/tcp/np2/8B", "latency/tcp/np2/1KiB", "latency/openmpi.tcp/np2/8B",
		"bw/tcp/np2/8B",
		"allreduce/tcp/np2/64B", "allreduce/tcp/np4/8B",
		"copy/local/np1/8B",
	}
	if !slices.Equal(got, want) {
		t.Errorf("order\n got %q\nwant %q", got, want)
	}
	if got := Compare(nil, nil, 0); len(got) != 0 {
		t.Errorf("Compare(nil, nil) = %v", got)
	}
}

func TestCompareAlpha(t *testing.T) {
	old, new := compareSame(11)
	lat := compareKeys[0].key
	slowDown(t, new, lat, 1.25)

	def, five := Compare(old, new, 0), Compare(old, new, 0.05)
	for i := range def {
		if def[i].Alpha != 0.05 || def[i].Significant != five[i].Significant || def[i].P != five[i].P {
			t.Errorf("%s: alpha 0 gives %+v, alpha 0.05 %+v", def[i].Key, def[i], five[i])
		}
	}
	if d := deltaOf(t, Compare(old, new, -1), lat); d.Alpha != 0.05 || !d.Significant {
		t.Errorf("alpha -1: %+v, want 0.05 and significant", d)
	}
	// Ten samples each cannot reach P < 1e-6.
	d := deltaOf(t, Compare(old, new, 1e-6), lat)
	if d.Alpha != 1e-6 || d.Significant || d.Verdict != "~" || d.P > 0.001 {
		t.Errorf("alpha 1e-6: alpha %v significant=%v verdict %q P=%v", d.Alpha, d.Significant, d.Verdict, d.P)
	}
	// A P between two levels is significant at the higher only.
	d = deltaOf(t, def, lat)
	if got := deltaOf(t, Compare(old, new, d.P*2), lat); !got.Significant {
		t.Errorf("alpha %v above P=%v: not significant", d.P*2, d.P)
	}
	if got := deltaOf(t, Compare(old, new, d.P/2), lat); got.Significant {
		t.Errorf("alpha %v below P=%v: significant", d.P/2, d.P)
	}
}

func TestCompareFewSamples(t *testing.T) {
	k := Key{"tcp", "latency", 2, 8}
	p := func(s ...float64) Point {
		return Point{Series: k.Series, Op: k.Op, Ranks: 2, Size: 8, Iters: 1, Samples: s}
	}
	d := Compare(compareDoc(p(100, 101, 102)), compareDoc(p(200, 201, 202)), 0)[0]
	noInterval := math.IsInf(d.Old.Lo, -1) || math.IsInf(d.Old.Hi, 1)
	if d.Significant || d.Verdict != "~" || !noInterval || !strings.Contains(d.Note, "need >= 4 samples to detect a difference") ||
		!strings.Contains(d.Note, "samples for confidence interval") {
		t.Errorf("3 samples each: %+v, old %+v", d, *d.Old)
	}
}

func TestPrintCompare(t *testing.T) {
	old, new := compareSame(5)
	lat, bw := compareKeys[0].key, compareKeys[3].key
	slowDown(t, new, lat, 1.25)
	slowDown(t, new, bw, 1/1.25) // faster
	gone := compareKeys[5].key
	new.Points = slices.DeleteFunc(new.Points, func(p Point) bool { return p.Key() == gone })
	inv := compareKeys[4].key
	for i := range old.Points {
		if old.Points[i].Key() == inv {
			old.Points[i].Invalid = "wrong sum"
		}
	}
	deltas := Compare(old, new, 0)
	var b bytes.Buffer
	if err := PrintCompare(&b, deltas, false); err != nil {
		t.Fatal(err)
	}
	out := b.String()
	t.Logf("\n%s", out)
	lines := strings.Split(out, "\n")
	line := func(prefix string) string {
		for _, l := range lines {
			if strings.HasPrefix(l, prefix) {
				return l
			}
		}
		t.Errorf("no line begins with %q", prefix)
		return ""
	}
	for _, want := range []string{
		"lower is better", "higher is better", "α = 0.05",
		"\nlatency: time per operation, lower is better\nPOINT ",
		"\nbw: bandwidth, higher is better\n",
		"\npoints in one document only (-v lists them):\n  only in old: copy/local/np1, 1 size, 1MiB\n",
		"\nsignificant changes:\n",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q", want)
		}
	}
	if l := line("latency/tcp/np2/8B "); !strings.Contains(l, "+2") || !strings.Contains(l, "µs ± ") || !slices.Contains(strings.Fields(l), "10") {
		t.Errorf("latency line %q: want µs, +2x%% and n=10", l)
	}
	if l := line("bw/tcp/np2/64KiB "); !strings.Contains(l, "+2") || !strings.Contains(l, "GB/s ± ") {
		t.Errorf("bw line %q: want GB/s and +2x%%", l)
	}
	if l := line("latency/openmpi.tcp/np2/8B "); !strings.Contains(l, " ~ ") {
		t.Errorf("unchanged line %q: want ~", l)
	}
	if strings.Contains(out, "copy/local/np1/1MiB ") || strings.Contains(out, "\ncopy:") {
		t.Errorf("a point in one document only has a row without -v")
	}
	if l := line("  slower  latency/tcp/np2/8B "); !strings.Contains(l, "+2") {
		t.Errorf("significant change %q: want +2x%%", l)
	}
	if l := line("  faster  bw/tcp/np2/64KiB "); !strings.Contains(l, "GB/s") {
		t.Errorf("significant change %q: want GB/s", l)
	}
	var verbose bytes.Buffer
	if err := PrintCompare(&verbose, deltas, true); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(verbose.String(), "\ncopy: bandwidth, higher is better\n") || strings.Contains(verbose.String(), "(-v lists them)") {
		t.Errorf("-v: want the row of the point only in old, not its count:\n%s", verbose.String())
	}
	for _, l := range strings.Split(verbose.String(), "\n") {
		if strings.HasPrefix(l, "copy/local/np1/1MiB ") && (!strings.Contains(l, "only in old") || !strings.Contains(l, " - ") || !strings.Contains(l, "10+0")) {
			t.Errorf("-v: only-in-old line %q", l)
		}
	}
	if l := line("allreduce/tcp/np4/1KiB "); !strings.Contains(l, "invalid in old: wrong sum") {
		t.Errorf("invalid line %q", l)
	}
	sum := line("summary: ")
	for _, want := range []string{"4 points valid in both", "1 faster", "1 slower", "2 unchanged", "geomean of new/old time", "1 invalid", "1 only in old"} {
		if !strings.Contains(sum, want) {
			t.Errorf("summary %q lacks %q", sum, want)
		}
	}
	if strings.Contains(sum, "only in new") {
		t.Errorf("summary %q counts points only in new", sum)
	}

	// The geomean is of the time ratios: 1.25 and 1/1.25 cancel out.
	exact := []Delta{
		{Key: lat, Metric: MetricTime, Old: &Estimate{Median: 100}, New: &Estimate{Median: 125}, Alpha: 0.05, Significant: true, Change: 0.25},
		{Key: bw, Metric: MetricBandwidth, Old: &Estimate{Median: 8}, New: &Estimate{Median: 10}, Alpha: 0.05, Significant: true, Change: 0.25},
	}
	b.Reset()
	if err := PrintCompare(&b, exact, false); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(b.String(), "geomean of new/old time 1.0000 (+0.00%)") || !strings.Contains(b.String(), "1 faster, 1 slower") {
		t.Errorf("output:\n%s\nwant a geomean of 1 and one faster, one slower", b.String())
	}
}

// failWriter fails every write.
type failWriter struct{}

var errCompareWrite = errors.New("write failed")

func (failWriter) Write([]byte) (int, error) { return 0, errCompareWrite }

func TestPrintCompareWriteError(t *testing.T) {
	old, new := compareSame(1)
	if err := PrintCompare(failWriter{}, Compare(old, new, 0), false); !errors.Is(err, errCompareWrite) {
		t.Errorf("PrintCompare to a failing writer: %v", err)
	}
}

// TestMinSamples checks the counts the tables and compare quote against
// benchmath's own: one sample fewer a side gets its warnings, that many
// do not.
func TestMinSamples(t *testing.T) {
	k := Key{"tcp", "latency", 2, 8}
	warned := func(n int) (interval, test bool) {
		p := func(base float64) Point {
			s := make([]float64, n)
			for i := range s {
				s[i] = base + float64(i)
			}
			return Point{Series: k.Series, Op: k.Op, Ranks: 2, Size: 8, Iters: 1, Samples: s}
		}
		d := Compare(compareDoc(p(100)), compareDoc(p(200)), 0)[0]
		return strings.Contains(d.Note, "for confidence interval"), strings.Contains(d.Note, "to detect a difference")
	}
	if _, test := warned(MinSamplesToCompare - 1); !test {
		t.Errorf("%d samples a side: no warning that a change cannot be detected", MinSamplesToCompare-1)
	}
	if _, test := warned(MinSamplesToCompare); test {
		t.Errorf("%d samples a side: warned that a change cannot be detected", MinSamplesToCompare)
	}
	if interval, _ := warned(MinSamplesForInterval - 1); !interval {
		t.Errorf("%d samples a side: no warning about the interval", MinSamplesForInterval-1)
	}
	if interval, _ := warned(MinSamplesForInterval); interval {
		t.Errorf("%d samples a side: warned about the interval", MinSamplesForInterval)
	}
}

// TestPrintCompareFewSamples: with too few samples for an interval and a
// test, compare says so once, with the number of points, and leaves the
// ± out of the rows rather than print "± ∞" on each; points in one
// document only are counted by series with their sizes.
func TestPrintCompareFewSamples(t *testing.T) {
	p := func(series string, size int64, s ...float64) Point {
		return Point{Series: series, Op: "latency", Ranks: 2, Size: size, Iters: 1, Samples: s}
	}
	old := compareDoc(p("tcp", 8, 14000, 15000), p("tcp", 16, 16000, 17000), p("local", 8, 900, 910), p("local", 16, 950, 960))
	new := compareDoc(p("tcp", 8, 22000, 23000), p("tcp", 16, 15000, 16000), p("openmpi.tcp", 8, 7000, 7100))
	var b bytes.Buffer
	if err := PrintCompare(&b, Compare(old, new, 0), false); err != nil {
		t.Fatal(err)
	}
	want := `old → new: median ± 95% confidence interval; DELTA = new/old − 1 of the medians, ~ where the Mann-Whitney U test finds no difference (P > α = 0.05); N = samples, old+new
time (s, ms, µs, ns per operation): lower is better; bandwidth (B/s, MB/s, GB/s): higher is better
note: 5 of 5 points: need >= 6 samples for confidence interval at level 0.95 (their ± is left out)
note: 2 of 5 points: need >= 4 samples to detect a difference at alpha level 0.05 (their DELTA is ~ whatever the medians; sweep with more --rounds or --count)

latency: time per operation, lower is better
POINT                OLD      NEW      DELTA  P      N  NOTE
latency/tcp/np2/8B   14.50µs  22.50µs  ~      0.333  2
latency/tcp/np2/16B  16.50µs  15.50µs  ~      0.667  2

points in one document only (-v lists them):
  only in old: latency/local/np2, 2 sizes from 8B to 16B
  only in new: latency/openmpi.tcp/np2, 1 size, 8B

summary: 2 points valid in both: 0 faster, 0 slower, 2 unchanged (α = 0.05); geomean of new/old time 1.2073 (+20.73%); 2 only in old; 1 only in new
at α = 0.05, about 0 of 2 points differ by chance alone where nothing changed: judge a handful of scattered changes as noise, a run of neighbouring sizes as a change
`
	if got := b.String(); got != want {
		t.Errorf("got:\n%s\nwant:\n%s", got, want)
	}
}
