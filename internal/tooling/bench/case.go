package bench

import (
	"strconv"
	"strings"
	"testing"
)

// Units a Case reports in.
const (
	NsPerOp   = "ns/op"   // time per b.N operation; lower is better
	NsPerIter = "ns/iter" // time per loop iteration, reported by the body with b.ReportMetric; lower is better
	GBPerSec  = "GB/s"    // 1e9 bytes per second from b.SetBytes; higher is better
)

// Case is one benchmark: a body that `go test -bench` (through thin
// wrappers) and `xpu bench` (through testing.Benchmark) both run, the unit
// its figure is read in, and what the figure is compared with.
type Case struct {
	// Name identifies the case, dot-separated: "parallel_for.empty".
	Name string
	// Run is the benchmark body.
	Run func(b *testing.B)
	// Unit is NsPerOp, NsPerIter or GBPerSec, or the name of another metric
	// the body reports with b.ReportMetric (lower is better).
	Unit string
	// Baseline names another Case of the same table measured in the same
	// run ("errgroup.empty"), or is empty.
	Baseline string
	// BaselineGoal is the ratio this case should reach against Baseline:
	// at most Goal times its time, or at least Goal times its rate (see
	// Meets). Zero means the baseline is shown for information only.
	BaselineGoal float64
	// Ref names a figure of the C reference program (a line
	// "<name> <value> <unit>" of internal/tooling/bench/ref/*.c), or is empty.
	Ref string
	// RefGoal is the ratio to reach against Ref, as for BaselineGoal.
	RefGoal float64
	// Doc says what is measured, in one line.
	Doc string
}

// LowerIsBetter reports whether smaller figures are better (times, not
// rates).
func (c Case) LowerIsBetter() bool { return c.Unit != GBPerSec }

// Value reads the case's figure from a benchmark result: a metric the body
// reported under Unit if there is one, else ns/op or, for GB/s, the bytes
// set with b.SetBytes over the time. It returns 0 for an empty result.
func (c Case) Value(r testing.BenchmarkResult) float64 {
	if v, ok := r.Extra[c.Unit]; ok {
		return v
	}
	if r.N == 0 || r.T <= 0 {
		return 0
	}
	switch c.Unit {
	case GBPerSec:
		return float64(r.Bytes) * float64(r.N) / float64(r.T.Nanoseconds())
	default:
		return float64(r.T.Nanoseconds()) / float64(r.N)
	}
}

// Ratio is value over against, the figure this case is compared with; it
// is 0 when against is not positive.
func Ratio(value, against float64) float64 {
	if against <= 0 {
		return 0
	}
	return value / against
}

// Meets reports whether value reaches goal against the figure against: for
// times, value <= goal*against; for rates, value >= goal*against. A zero
// goal is always met.
func (c Case) Meets(value, against, goal float64) bool {
	if goal == 0 {
		return true
	}
	if against <= 0 {
		return false
	}
	if c.LowerIsBetter() {
		return value <= goal*against
	}
	return value >= goal*against
}

// Find returns the case of cases named name.
func Find(cases []Case, name string) (Case, bool) {
	for _, c := range cases {
		if c.Name == name {
			return c, true
		}
	}
	return Case{}, false
}

// ParseRef reads the output of a reference program: one "<name> <value>
// <unit>" per line. Lines that do not parse are skipped.
func ParseRef(out string) map[string]RefFigure {
	figs := map[string]RefFigure{}
	for _, line := range strings.Split(out, "\n") {
		f := strings.Fields(line)
		if len(f) != 3 {
			continue
		}
		v, err := strconv.ParseFloat(f[1], 64)
		if err != nil {
			continue
		}
		figs[f[0]] = RefFigure{Value: v, Unit: f[2]}
	}
	return figs
}

// RefFigure is one figure of a reference program.
type RefFigure struct {
	Value float64
	Unit  string
}
