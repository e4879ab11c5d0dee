package sweep

import (
	"bytes"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/perf/benchfmt"
)

func TestWriteBenchfmt(t *testing.T) {
	d := compareDoc(
		Point{Series: "tcp", Op: "latency", Ranks: 2, Size: 8, Iters: 1000, Samples: []float64{1500, 1512.25, 1499.5}},
		Point{Series: "openmpi.tcp", Op: "bibw", Ranks: 2, Size: 64 << 10, Iters: 64, Samples: []float64{9000, 9100.125}},
		Point{Series: "tcp", Op: "allreduce", Ranks: 4, Size: 1 << 10, Iters: 10, Samples: []float64{3e4, 3.1e4},
			Invalid: "rank 2's buffer differs"},
		Point{Series: "local", Op: "copy", Ranks: 1, Size: 1 << 20, Iters: 3, Samples: []float64{8e4}},
		Point{Series: "tcp", Op: "barrier", Ranks: 4, Size: 0, Iters: 500, Samples: []float64{2100, 2200}},
	)
	d.Machine = Machine{CPU: "AMD EPYC 9654 96-Core Processor", OS: "linux/amd64 Ubuntu 24.04"}
	d.Started = time.Date(2026, 3, 1, 12, 30, 0, 0, time.UTC)

	var b bytes.Buffer
	if err := WriteBenchfmt(&b, d); err != nil {
		t.Fatal(err)
	}
	t.Logf("\n%s", b.String())
	if want := "# xpu sweep started 2026-03-01T12:30:00Z\ngoos: linux\ngoarch: amd64\ncpu: AMD EPYC 9654 96-Core Processor\nxpu-sweep: " + Schema + "\n\nBenchmarkSweep/"; !strings.HasPrefix(b.String(), want) {
		t.Errorf("output begins %q, want %q", b.String()[:min(len(want), b.Len())], want)
	}

	type want struct {
		name  string
		parts []string // the name's sub-benchmark keys
		iters int
		ns    float64
		bps   float64 // 0: no B/s
	}
	var wants []want
	for _, p := range d.Points {
		if p.Invalid != "" {
			continue
		}
		parts := []string{"/op=" + p.Op, "/series=" + p.Series, "/ranks=" + strconv.Itoa(p.Ranks), "/size=" + FormatSize(p.Size)}
		for _, ns := range p.Samples {
			w := want{name: "Sweep" + strings.Join(parts, ""), parts: parts, iters: p.Iters, ns: ns}
			switch p.Op {
			case "bibw":
				w.bps = 2 * float64(p.Size) / ns * 1e9
			case "copy":
				w.bps = float64(p.Size) / ns * 1e9
			}
			wants = append(wants, w)
		}
	}
	if len(wants) != 8 {
		t.Fatalf("test wants %d results", len(wants))
	}

	r := benchfmt.NewReader(&b, "sweep.txt")
	n := 0
	for r.Scan() {
		res, ok := r.Result().(*benchfmt.Result)
		if !ok {
			t.Fatalf("record %d: %v", n, r.Result())
		}
		if n >= len(wants) {
			t.Fatalf("result %d %s: more results than samples of valid points", n, res.Name)
		}
		w := wants[n]
		n++
		if res.Name.String() != w.name || res.Iters != w.iters {
			t.Errorf("result %d: %s %d, want %s %d", n, res.Name, res.Iters, w.name, w.iters)
		}
		if got := res.GetConfig("cpu"); got != "AMD EPYC 9654 96-Core Processor" {
			t.Errorf("result %d: cpu %q", n, got)
		}
		if got := res.GetConfig("xpu-sweep"); got != Schema {
			t.Errorf("result %d: xpu-sweep %q", n, got)
		}
		// The reader turns ns/op into sec/op and keeps what it read.
		if res.Values[0].Unit != "sec/op" || res.Values[0].OrigUnit != "ns/op" || res.Values[0].OrigValue != w.ns {
			t.Errorf("result %d %s: %+v, want %v ns/op", n, res.Name, res.Values[0], w.ns)
		}
		wantValues := 1
		if w.bps != 0 {
			wantValues = 2
		}
		if bps, ok := res.Value("B/s"); ok != (w.bps != 0) || bps != w.bps || len(res.Values) != wantValues {
			t.Errorf("result %d %s: values %+v, want B/s %v", n, res.Name, res.Values, w.bps)
		}
		base, parts := res.Name.Parts()
		var got []string
		for _, p := range parts {
			got = append(got, string(p))
		}
		if string(base) != "Sweep" || !slices.Equal(got, w.parts) {
			t.Errorf("result %d: name parts %q %q, want Sweep %q", n, base, got, w.parts)
		}
	}
	if err := r.Err(); err != nil {
		t.Fatal(err)
	}
	if n != len(wants) {
		t.Errorf("%d results, want %d (the samples of the valid points)", n, len(wants))
	}
}

func TestWriteBenchfmtEmptyAndOdd(t *testing.T) {
	var b bytes.Buffer
	if err := WriteBenchfmt(&b, compareDoc()); err != nil || b.Len() != 0 {
		t.Errorf("empty document: %q, %v", b.String(), err)
	}
	// A document without machine details has the one configuration line;
	// a series name with a slash or a space stays one part of the name.
	d := compareDoc(Point{Series: "my series/2", Op: "latency", Ranks: 2, Size: 8, Iters: 1, Samples: []float64{10}})
	if err := WriteBenchfmt(&b, d); err != nil {
		t.Fatal(err)
	}
	if got, want := b.String(), "xpu-sweep: "+Schema+"\n\nBenchmarkSweep/op=latency/series=my_series_2/ranks=2/size=8B 1 10 ns/op\n"; got != want {
		t.Errorf("got %q, want %q", got, want)
	}
}

// Two runs of a sweep differ in their start times only in a comment:
// the file configurations are the same, so that benchstat compares them
// in one table.
func TestWriteBenchfmtStartIsNoConfig(t *testing.T) {
	var out [2]string
	for i := range out {
		d := compareDoc(Point{Series: "tcp", Op: "latency", Ranks: 2, Size: 8, Iters: 1, Samples: []float64{10}})
		d.Machine.OS = "linux/arm64"
		d.Started = time.Date(2026, 3, 1+i, 0, 0, 0, 0, time.UTC)
		var b bytes.Buffer
		if err := WriteBenchfmt(&b, d); err != nil {
			t.Fatal(err)
		}
		first, rest, _ := strings.Cut(b.String(), "\n")
		if !strings.HasPrefix(first, "# xpu sweep started 2026-03-0") {
			t.Errorf("first line %q", first)
		}
		out[i] = rest
	}
	if out[0] != out[1] {
		t.Errorf("two runs differ beyond the first line:\n%s\n%s", out[0], out[1])
	}
}
