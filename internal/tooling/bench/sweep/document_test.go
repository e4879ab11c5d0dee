package sweep

import (
	"bytes"
	"errors"
	"reflect"
	"strings"
	"testing"
	"time"
)

// sampleDoc is a small document with one series of ours, its reference
// and a point of each kind of figure.
func sampleDoc() *Document {
	start := time.Date(2026, 11, 24, 10, 0, 0, 0, time.UTC)
	return &Document{
		Schema: Schema, Command: []string{"xpu", "bench", "sweep"},
		Started: start, Finished: start.Add(time.Minute),
		Machine: Machine{CPU: "test CPU", Cores: 2, MemoryBytes: 1 << 30, OS: "linux/amd64", GoVersion: "go1.26",
			Backends:   []Component{{Name: "tcp", Available: true}},
			References: []Component{{Name: "Open MPI", Version: "Open MPI 4.1.4", Available: true}}},
		Config: Config{Sizes: []int64{8, 1 << 20}, Ranks: []int{2}, Ops: []string{"latency", "bw", "allreduce"},
			Count: 3, SampleTime: Duration(20 * time.Millisecond), Budget: Duration(time.Minute)},
		Series: []Series{{Name: "tcp", Against: "openmpi.tcp"}, {Name: "openmpi.tcp", Reference: true}},
		Points: []Point{
			{Series: "tcp", Op: "latency", Ranks: 2, Size: 8, Iters: 1000, Samples: []float64{5000, 5200, 4900}},
			{Series: "tcp", Op: "bw", Ranks: 2, Size: 1 << 20, Iters: 10, Samples: []float64{500000, 520000, 510000}},
			{Series: "openmpi.tcp", Op: "allreduce", Ranks: 2, Size: 1 << 20, Iters: 10, Samples: []float64{1e6, 1.1e6, 0.9e6}},
			{Series: "openmpi.tcp", Op: "allreduce", Ranks: 2, Size: 8, Iters: 10, Samples: []float64{900}, Invalid: "wrong"},
		},
	}
}

func TestDocumentRoundTrip(t *testing.T) {
	d := sampleDoc()
	var buf bytes.Buffer
	if err := d.Write(&buf); err != nil {
		t.Fatal(err)
	}
	got, err := Read(&buf)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, d) {
		t.Fatalf("round trip changed the document:\n got %+v\nwant %+v", got, d)
	}
	lat, bw, ar := got.Points[0], got.Points[1], got.Points[2]
	if lat.Median != 5000 || lat.Bandwidth != 0 || lat.AlgBW != 0 {
		t.Errorf("latency: median %v, bandwidth %v, algbw %v", lat.Median, lat.Bandwidth, lat.AlgBW)
	}
	if want := float64(1<<20) / 510000; bw.Bandwidth != want {
		t.Errorf("bw: %v GB/s, want %v", bw.Bandwidth, want)
	}
	// nccl-tests: algbw = size/time, busbw = algbw * 2(n-1)/n for allreduce.
	if algbw := float64(1<<20) / 1e6; ar.AlgBW != algbw || ar.BusBW != algbw*2*(2-1)/2 {
		t.Errorf("allreduce: algbw %v busbw %v", ar.AlgBW, ar.BusBW)
	}
}

func TestReadRefuses(t *testing.T) {
	for name, mod := range map[string]func(*Document){
		"schema":         func(d *Document) { d.Schema = "something/v9" },
		"unknown op":     func(d *Document) { d.Points[0].Op = "gossip" },
		"unknown series": func(d *Document) { d.Points[0].Series = "nobody" },
		"no samples":     func(d *Document) { d.Points[0].Samples = nil },
		"zero sample":    func(d *Document) { d.Points[0].Samples[1] = 0 },
		"no ranks":       func(d *Document) { d.Points[0].Ranks = 0 },
		"no iters":       func(d *Document) { d.Points[0].Iters = 0 },
	} {
		d := sampleDoc()
		mod(d)
		var buf bytes.Buffer
		if err := d.Write(&buf); err != nil {
			t.Fatal(err)
		}
		if _, err := Read(&buf); !errors.Is(err, ErrFormat) {
			t.Errorf("%s: %v, want ErrFormat", name, err)
		}
	}
	if _, err := Read(strings.NewReader("{not json")); !errors.Is(err, ErrFormat) {
		t.Errorf("garbage: %v, want ErrFormat", err)
	}
}

func TestLineRoundTrip(t *testing.T) {
	p := Point{Op: "alltoall", Ranks: 4, Size: 65536, Iters: 37, Samples: []float64{123456.7, 120000, 1.5e9}}
	line := FormatLine(p)
	got, ok, err := ParseLine(line, "shm")
	if err != nil || !ok {
		t.Fatalf("ParseLine(%q): ok %v, %v", line, ok, err)
	}
	p.Series = "shm"
	p.Fill()
	if !reflect.DeepEqual(got, p) {
		t.Fatalf("got %+v, want %+v", got, p)
	}
	points, end, err := ParseLines("noise\n"+line+"\n"+FormatLine(Point{Op: "bcast", Ranks: 2, Size: 8, Iters: 1, Samples: []float64{9}, Invalid: "x"})+"\nend budget\n", "shm")
	if err != nil || end != EndBudget || len(points) != 2 || points[1].Invalid == "" {
		t.Fatalf("ParseLines: %d points, end %q, %v", len(points), end, err)
	}
	for _, bad := range []string{
		"point latency 8 2 1 ok",       // no sample
		"point gossip 8 2 1 ok 5",      // unknown op
		"point latency -8 2 1 ok 5",    // size
		"point latency 8 0 1 ok 5",     // ranks
		"point latency 8 2 0 ok 5",     // iters
		"point latency 8 2 1 maybe 5",  // validity
		"point latency 8 2 1 ok 5 -1",  // sample
		"point latency 8 2 1 ok 5 abc", // sample
		"point latency 8 2 1 ok 5 NaN", // sample
	} {
		if _, ok, err := ParseLine(bad, "s"); !ok || !errors.Is(err, ErrFormat) {
			t.Errorf("ParseLine(%q): ok %v, %v; want ErrFormat", bad, ok, err)
		}
	}
}

func TestSizes(t *testing.T) {
	for in, want := range map[string]int64{"8": 8, "64KiB": 64 << 10, "4MiB": 4 << 20, "1GiB": 1 << 30, "2k": 2048, "3 MB": 3 << 20, "0": 0, "16B": 16} {
		if got, err := ParseSize(in); err != nil || got != want {
			t.Errorf("ParseSize(%q) = %d, %v; want %d", in, got, err, want)
		}
	}
	for _, in := range []string{"", "-8", "1.5KiB", "12XB", "2GiB", "KiB"} {
		if _, err := ParseSize(in); !errors.Is(err, ErrSize) {
			t.Errorf("ParseSize(%q): %v, want ErrSize", in, err)
		}
	}
	for _, n := range []int64{8, 1000, 64 << 10, 3 << 20, 1 << 30} {
		if got, err := ParseSize(FormatSize(n)); err != nil || got != n {
			t.Errorf("ParseSize(FormatSize(%d)) = %d, %v", n, got, err)
		}
	}
	s, err := Sizes(8, 64<<20)
	if err != nil || len(s) != 24 || s[0] != 8 || s[23] != 64<<20 {
		t.Errorf("Sizes(8, 64MiB) = %v, %v; want the 24 powers of two", s, err)
	}
	if s, err := Sizes(5, 40); err != nil || !reflect.DeepEqual(s, []int64{8, 16, 32}) {
		t.Errorf("Sizes(5, 40) = %v, %v", s, err)
	}
	if _, err := Sizes(9, 15); !errors.Is(err, ErrSize) {
		t.Errorf("Sizes(9, 15): %v, want ErrSize", err)
	}
	if s, err := ParseSizes("4MiB, 8,8,1KiB"); err != nil || !reflect.DeepEqual(s, []int64{8, 1024, 4 << 20}) {
		t.Errorf("ParseSizes = %v, %v", s, err)
	}
}
