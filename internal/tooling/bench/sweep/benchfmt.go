package sweep

import (
	"io"
	"strconv"
	"strings"
	"time"
	"unicode"

	"golang.org/x/perf/benchfmt"
)

// WriteBenchfmt writes d's points in the format of `go test -bench`
// (golang.org/design/14313-benchmark-format) so that benchstat can read
// it.
//
// A comment line comes first, "# xpu sweep started <Started, RFC 3339>",
// which readers of the format skip: the start time differs from run to
// run, and as file configuration it would have benchstat put two runs in
// two tables instead of comparing them. Then the file configuration:
// goos and goarch (from Machine.OS) and cpu (Machine.CPU) when known, and
// "xpu-sweep: " Schema. Then every sample of every valid point is one
// result, named
//
//	Sweep/op=<op>/series=<series>/ranks=<ranks>/size=<FormatSize(size)>
//
// with the point's Iters as its iteration count, the sample as "ns/op"
// and, for the operations whose Metric is MetricBandwidth, the sample's
// bandwidth as "B/s" (Op.Moves × Size bytes per operation), which
// benchstat knows to be better higher. Results follow the order of
// d.Points. Spaces and slashes in an operation or series name are
// written as "_".
//
// benchstat takes the "/key=value" parts of a name as sub-benchmark keys:
// `benchstat old.txt new.txt` compares two sweeps point by point, and
// `benchstat -col '/series@(openmpi.tcp tcp)' -row /op,/ranks,/size
// sweep.txt` compares the series of one sweep against the first listed.
//
// Invalid points are left out: their samples time operations whose
// results were wrong, and the format has no way to mark them. A document
// without a valid point gives the comment line alone.
func WriteBenchfmt(w io.Writer, d *Document) error {
	if !d.Started.IsZero() {
		if _, err := io.WriteString(w, "# xpu sweep started "+d.Started.Format(time.RFC3339)+"\n"); err != nil {
			return err
		}
	}
	bw := benchfmt.NewWriter(w)
	res := &benchfmt.Result{Config: benchfmtConfig(d)}
	for _, p := range d.Points {
		if p.Invalid != "" {
			continue
		}
		var moved float64
		if op, ok := LookupOp(p.Op); ok && op.Metric == MetricBandwidth {
			moved = float64(op.bytesMoved(p.Size))
		}
		res.Name = benchfmt.Name(benchfmtName(p.Key()))
		res.Iters = p.Iters
		for _, ns := range p.Samples {
			res.Values = append(res.Values[:0], benchfmt.Value{Value: ns, Unit: "ns/op"})
			if moved > 0 {
				res.Values = append(res.Values, benchfmt.Value{Value: moved / ns * 1e9, Unit: "B/s"})
			}
			if err := bw.Write(res); err != nil {
				return err
			}
		}
	}
	return nil
}

// benchfmtName returns the name WriteBenchfmt gives the results of the
// point k, without the "Benchmark" prefix of the format's lines.
func benchfmtName(k Key) string {
	return "Sweep/op=" + benchfmtPart(k.Op) + "/series=" + benchfmtPart(k.Series) +
		"/ranks=" + strconv.Itoa(k.Ranks) + "/size=" + FormatSize(k.Size)
}

// benchfmtPart writes s so that it stays one part of a benchmark name:
// white space and slashes become "_".
func benchfmtPart(s string) string {
	return strings.Map(func(r rune) rune {
		if r == '/' || unicode.IsSpace(r) {
			return '_'
		}
		return r
	}, s)
}

// benchfmtConfig returns the file configuration of d's results.
func benchfmtConfig(d *Document) []benchfmt.Config {
	var cfg []benchfmt.Config
	add := func(key, value string) {
		// A value is the rest of its line.
		value = strings.Join(strings.Fields(value), " ")
		if value != "" {
			cfg = append(cfg, benchfmt.Config{Key: key, Value: []byte(value), File: true})
		}
	}
	if f := strings.Fields(d.Machine.OS); len(f) > 0 {
		if goos, goarch, ok := strings.Cut(f[0], "/"); ok {
			add("goos", goos)
			add("goarch", goarch)
		}
	}
	add("cpu", d.Machine.CPU)
	add("xpu-sweep", Schema)
	return cfg
}
