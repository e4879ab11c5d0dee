package sweep

import (
	"bytes"
	"testing"
	"time"
)

// tableDoc is a document of a latency and an allreduce of tcp beside
// Open MPI over three sizes, two rounds of one sample; one point of ours
// lost its second sample (a budget cut the round short).
func tableDoc() *Document {
	d := sampleDoc()
	d.Config = Config{Sizes: []int64{8, 64 << 10, 4 << 20}, Ranks: []int{2}, Count: 1, Rounds: 2,
		SampleTime: Duration(10 * time.Millisecond)}
	d.Points = nil
	add := func(series, op string, size int64, ns ...float64) {
		p := Point{Series: series, Op: op, Ranks: 2, Size: size, Iters: 1, Samples: ns}
		p.Fill()
		d.Points = append(d.Points, p)
	}
	add("tcp", "latency", 8, 14600, 14600)
	add("tcp", "latency", 64<<10, 46400, 46400)
	add("tcp", "latency", 4<<20, 2.5e6)
	add("openmpi.tcp", "latency", 8, 7689, 7689)
	add("openmpi.tcp", "latency", 64<<10, 31000, 31000)
	add("openmpi.tcp", "latency", 4<<20, 1.2e6, 1.2e6)
	add("tcp", "allreduce", 8, 38800, 38800)
	add("tcp", "allreduce", 64<<10, 120000, 120000)
	add("openmpi.tcp", "allreduce", 8, 14000, 14000)
	add("openmpi.tcp", "allreduce", 64<<10, 60000, 60000)
	return d
}

func TestPrintTables(t *testing.T) {
	var b bytes.Buffer
	if err := PrintTables(&b, tableDoc()); err != nil {
		t.Fatal(err)
	}
	want := `# test CPU · 2 cores · 1.0 GiB · linux/amd64 · go1.26 · Open MPI 4.1.4
# 1 to 2 samples per point (2 rounds of 1), each about 10ms; the figure is their median; compare needs 4 a side to call a change, 6 for a confidence interval

## latency · 2 ranks · tcp against openmpi.tcp — time per operation, lower is better
   SIZE  TCP (µs)  OPENMPI.TCP (µs)  RATIO
     8B      14.6              7.69   1.90
  64KiB      46.4              31.0   1.50
   4MiB      2500              1200   2.08

## allreduce · 2 ranks · tcp against openmpi.tcp — time per operation, lower is better
   SIZE  TCP (µs)  ALGBW (MB/s)  BUSBW (MB/s)  OPENMPI.TCP (µs)  BUSBW (MB/s)  RATIO
     8B      38.8         0.206         0.206              14.0         0.571   2.77
  64KiB       120           546           546              60.0          1090   2.00
`
	if got := b.String(); got != want {
		t.Errorf("PrintTables:\n%s\nwant:\n%s", got, want)
	}
}

// TestPrintTablesNamesOnlyWhatWasMeasured: Open MPI found but without
// points (no --ref, or a filter that left its series out) is not in the
// header; every point with the same number of samples says that number.
func TestPrintTablesNamesOnlyWhatWasMeasured(t *testing.T) {
	d := tableDoc()
	var ours []Point
	for _, p := range d.Points {
		if p.Series == "tcp" && len(p.Samples) == 2 {
			ours = append(ours, p)
		}
	}
	d.Points = ours
	var b bytes.Buffer
	if err := PrintTables(&b, d); err != nil {
		t.Fatal(err)
	}
	want := "# test CPU · 2 cores · 1.0 GiB · linux/amd64 · go1.26\n" +
		"# 2 samples per point (2 rounds of 1), each about 10ms; the figure is their median; compare needs 4 a side to call a change, 6 for a confidence interval\n"
	if got := b.String(); len(got) < len(want) || got[:len(want)] != want {
		t.Errorf("header:\n%s\nwant:\n%s", got, want)
	}
}
