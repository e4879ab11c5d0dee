package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/xpu-go/xpu/internal/tooling/bench"
	"github.com/xpu-go/xpu/internal/tooling/bench/stats"
	"github.com/xpu-go/xpu/xpucmd"
)

// benchCommand is `xpu bench`, which only this repository's command has:
// its cases are those of this repository's backends.
var benchCommand = xpucmd.Command{
	Name:    "bench",
	Summary: "benchmark hot paths against baselines and C references; sweep, compare, plot, rounds (xpu bench -h)",
	Run:     runBench,
}

// benchRow is one line of the bench report.
type benchRow struct {
	Name   string    `json:"name"`
	Doc    string    `json:"doc,omitempty"`
	Unit   string    `json:"unit"`
	Median float64   `json:"median"`
	Runs   []float64 `json:"runs"`
	// BaseRuns are runs of the baseline, each taken just before the run of
	// Runs with the same index: the pairs the baseline ratio comes from.
	BaseRuns []float64 `json:"baseline_runs,omitempty"`
	Against  []against `json:"against,omitempty"`
}

// against is a comparison of a row with a baseline or reference measured
// in the same run.
type against struct {
	What  string  `json:"what"` // "baseline <case>" or "ref <figure>"
	Value float64 `json:"value"`
	Ratio float64 `json:"ratio"`          // ours / theirs
	Goal  float64 `json:"goal,omitempty"` // the ratio to reach (at most for times, at least for rates)
	Met   *bool   `json:"met,omitempty"`
	// Ratios are the ratios of the single runs: each run's against the
	// baseline run beside it, or against the reference's figure; their
	// worst says how far a noisy run strays from Ratio.
	Ratios []float64 `json:"ratios,omitempty"`
}

func allCases() []bench.Case {
	var cs []bench.Case
	cs = append(cs, bench.CPU...)
	cs = append(cs, bench.Pool...)
	cs = append(cs, bench.Comm...)
	cs = append(cs, bench.TCP...)
	cs = append(cs, bench.CUDAIfAvailable()...) // none where no GPU: a skipped case would stop the run
	cs = append(cs, bench.RDMAIfAvailable()...) // none without -tags rdma or an RDMA device
	return cs
}

func runBench(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	if len(args) > 0 {
		if sub, ok := benchSubcommands[args[0]]; ok {
			return sub(ctx, args[1:], stdout, stderr)
		}
	}
	o, err := parseBenchFlags(args, stderr)
	if err != nil {
		return err
	}
	cases := allCases()
	if o.list {
		for _, c := range cases {
			fmt.Fprintf(stdout, "%-32s %-8s %s\n", c.Name, c.Unit, c.Doc)
		}
		return nil
	}
	var re *regexp.Regexp
	if o.filter != "" {
		var err error
		if re, err = regexp.Compile(o.filter); err != nil {
			return fmt.Errorf("%w: -filter: %v", xpucmd.ErrUsage, err)
		}
	}
	selected := selectCases(cases, re, o.short)
	if len(selected) == 0 && !slices.ContainsFunc(procPairs(), func(p bench.Pair) bool { return re.MatchString(p.Name) }) {
		return fmt.Errorf("%w: no case matches %q", xpucmd.ErrUsage, o.filter)
	}

	refs := map[string]bench.RefFigure{}
	if o.refDir != "" {
		var err error
		if refs, err = runRefs(ctx, o.refDir, stderr); err != nil {
			return err
		}
	}

	testing.Init()
	if err := flag.CommandLine.Set("test.benchtime", o.benchtime.String()); err != nil {
		return err
	}
	results, err := runCases(ctx, selected, o.count, o.benchtime, stderr)
	if err != nil {
		return err
	}
	rows := benchRows(selected, results, refs, re)
	var procs []*benchRow
	if !o.short { // --short leaves out the TCP cases, and their figures too
		procs = procRows(refs, re)
	}
	return reportBench(stdout, o, rows, procs, refs)
}

// benchOpts are the flags of `xpu bench`.
type benchOpts struct {
	asJSON    bool
	filter    string
	count     int
	benchtime time.Duration
	short     bool
	refDir    string
	list      bool
}

// benchHelp lists the subcommands of xpu bench, one line each, in the
// order -h shows them (sweep-rank, which a sweep starts, is not for
// users).
var benchHelp = []struct{ name, line string }{
	{"sweep", "measure communicators and transfer paths over message sizes beside Open MPI and memmove: tables, JSON, charts"},
	{"compare", "compare two sweep documents point by point: counts, geomean of the ratios, the significant changes"},
	{"plot", "draw the charts (PNG and SVG) of a sweep document"},
	{"rounds", "the one-process-per-rank comparisons of several rounds (make rounds-shm): median and worst ratio of each"},
}

// writeBenchUsage writes the usage of xpu bench: what it does, its
// subcommands, and fs's flags.
func writeBenchUsage(w io.Writer, fs *flag.FlagSet) {
	fmt.Fprintln(w, "usage: xpu bench [flags]                  run the cases against their baselines and C references")
	fmt.Fprintln(w, "       xpu bench <subcommand> [flags]     (xpu bench <subcommand> -h for its flags)")
	fmt.Fprintln(w)
	fmt.Fprintln(w, "Subcommands:")
	for _, h := range benchHelp {
		fmt.Fprintf(w, "  %-8s %s\n", h.name, h.line)
	}
	fmt.Fprintln(w)
	fmt.Fprintln(w, "Progress goes to stderr: on a terminal one line that rewrites itself, elsewhere a line per case.")
	fmt.Fprintln(w, "Figures are scaled (ns, µs, ms per operation; MB/s, GB/s), each with its unit.")
	fmt.Fprintln(w)
	fmt.Fprintln(w, "Flags:")
	fs.PrintDefaults()
}

// parseBenchFlags parses the flags of `xpu bench`, -short setting the
// -count and -benchtime not given.
func parseBenchFlags(args []string, stderr io.Writer) (*benchOpts, error) {
	fs := xpucmd.NewFlagSet("bench", stderr)
	fs.Usage = func() { writeBenchUsage(stderr, fs) }
	o := &benchOpts{}
	fs.BoolVar(&o.asJSON, "json", false, "print JSON")
	fs.StringVar(&o.filter, "filter", "", "run only cases whose name matches this regular expression (their baselines run too)")
	fs.IntVar(&o.count, "count", 5, "runs of each case; the median is reported")
	fs.DurationVar(&o.benchtime, "benchtime", time.Second, "target duration of each run")
	fs.BoolVar(&o.short, "short", false, "a quick pass: -count 3 -benchtime 200ms, and the largest sizes left out")
	fs.StringVar(&o.refDir, "ref", "", "directory of built C reference programs (make refs); each prints '<name> <value> <unit>' lines")
	fs.BoolVar(&o.list, "list", false, "list the cases and exit")
	if err := xpucmd.ParseFlags(fs, args); err != nil {
		return nil, err
	}
	if o.count < 1 {
		return nil, fmt.Errorf("%w: -count must be at least 1", xpucmd.ErrUsage)
	}
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	if o.short {
		if !set["count"] {
			o.count = 3
		}
		if !set["benchtime"] {
			o.benchtime = 200 * time.Millisecond
		}
	}
	return o, nil
}

// runCases runs each selected case count times, and returns its row by
// name, with the runs and their median. Progress goes to stderr
// (benchProgress): a line that rewrites itself on a terminal, a line per
// case elsewhere.
func runCases(ctx context.Context, selected []bench.Case, count int, benchtime time.Duration, stderr io.Writer) (map[string]*benchRow, error) {
	total := 0
	for _, c := range selected {
		_, paired := bench.Find(selected, c.Baseline)
		total += count * (1 + b2i(paired))
	}
	pr := newBenchProgress(stderr, isTerminal(stderr), time.Now, total)
	defer pr.finish()
	fmt.Fprintf(stderr, "xpu bench: %s, %d runs of at least %v each: at least %v\n",
		plural(len(selected), "case"), total, benchtime, (time.Duration(total) * benchtime).Round(time.Second))
	results := map[string]*benchRow{}
	run := func(c bench.Case) (float64, error) {
		res := testing.Benchmark(c.Run)
		if res.N == 0 {
			pr.finish()
			return 0, fmt.Errorf("case %s failed (see its log above)", c.Name)
		}
		return c.Value(res), nil
	}
	for i, c := range selected {
		row := &benchRow{Name: c.Name, Doc: c.Doc, Unit: c.Unit}
		// A case with a baseline alternates with it, run for run, so that
		// both see the same moments of a noisy machine.
		base, paired := bench.Find(selected, c.Baseline)
		pr.caseBegins(i+1, len(selected), c.Name, count*(1+b2i(paired)))
		for r := 0; r < count; r++ {
			if err := ctx.Err(); err != nil {
				return nil, err
			}
			pr.run(i+1, len(selected), c.Name, r+1, count)
			if paired {
				v, err := run(base)
				if err != nil {
					return nil, err
				}
				row.BaseRuns = append(row.BaseRuns, v)
				pr.ran(1)
			}
			v, err := run(c)
			if err != nil {
				return nil, err
			}
			row.Runs = append(row.Runs, v)
			pr.ran(1)
		}
		row.Median = stats.Median(row.Runs)
		results[c.Name] = row
	}
	return results, nil
}

// plural writes "1 case", "2 cases".
func plural(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return fmt.Sprintf("%d %ss", n, noun)
}

// b2i is 1 for true, 0 for false.
func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}

// benchRows returns the rows to report, in the order of selected: those
// of the cases re matches and of their baselines, each compared with its
// baseline and reference figure.
func benchRows(selected []bench.Case, results map[string]*benchRow, refs map[string]bench.RefFigure, re *regexp.Regexp) []*benchRow {
	var rows []*benchRow
	for _, c := range selected {
		if re != nil && !re.MatchString(c.Name) && !isBaselineOfSelected(c.Name, selected, re) {
			continue
		}
		row := results[c.Name]
		if len(row.BaseRuns) > 0 {
			row.Against = append(row.Against, comparePaired(c, "baseline "+c.Baseline, row.Runs, row.BaseRuns, c.BaselineGoal))
		}
		if c.Ref != "" {
			if f, ok := refs[c.Ref]; ok {
				a := compare(c, "ref "+c.Ref, row.Median, f.Value, c.RefGoal)
				for _, v := range row.Runs {
					a.Ratios = append(a.Ratios, bench.Ratio(v, f.Value))
				}
				row.Against = append(row.Against, a)
			}
		}
		rows = append(rows, row)
	}
	return rows
}

// reportBench writes the report, as JSON with -json.
func reportBench(stdout io.Writer, o *benchOpts, rows, procs []*benchRow, refs map[string]bench.RefFigure) error {
	if o.asJSON {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(struct {
			Count     int                        `json:"count"`
			Benchtime string                     `json:"benchtime"`
			Rows      []*benchRow                `json:"rows"`
			Procs     []*benchRow                `json:"procs,omitempty"`
			Refs      map[string]bench.RefFigure `json:"refs,omitempty"`
		}{o.count, o.benchtime.String(), rows, procs, refs})
	}
	printBench(stdout, rows, procs, o.count, o.refDir != "")
	return nil
}

// procPairs are the comparisons of programs that run one process per rank:
// over TCP links (bench.Procs), then over shared memory (bench.ShmProcs).
func procPairs() []bench.Pair { return slices.Concat(bench.Procs, bench.ShmProcs) }

// procRows compares the figures of programs that run one process per rank
// (procPairs), where refs holds both figures of a pair and re (when not
// nil) matches the compared one.
func procRows(refs map[string]bench.RefFigure, re *regexp.Regexp) []*benchRow {
	var rows []*benchRow
	byName := map[string]*benchRow{}
	for _, p := range procPairs() {
		ours, ok := refs[p.Name]
		theirs, ok2 := refs[p.Against]
		if !ok || !ok2 || (re != nil && !re.MatchString(p.Name)) {
			continue
		}
		row := byName[p.Name]
		if row == nil {
			row = &benchRow{Name: p.Name, Unit: ours.Unit, Median: ours.Value}
			byName[p.Name] = row
			rows = append(rows, row)
		}
		row.Against = append(row.Against, compare(bench.Case{Unit: ours.Unit}, "ref "+p.Against, ours.Value, theirs.Value, p.Goal))
	}
	return rows
}

// selectCases returns the cases matching re (all when nil) and the
// baselines they name, in table order. short leaves out the largest sizes.
func selectCases(cases []bench.Case, re *regexp.Regexp, short bool) []bench.Case {
	want := map[string]bool{}
	for _, c := range cases {
		if short && isLarge(c.Name) {
			continue
		}
		if re == nil || re.MatchString(c.Name) {
			want[c.Name] = true
			if c.Baseline != "" {
				want[c.Baseline] = true
			}
		}
	}
	var out []bench.Case
	for _, c := range cases {
		if want[c.Name] {
			out = append(out, c)
		}
	}
	return out
}

func isLarge(name string) bool {
	return strings.Contains(name, "256MiB") || strings.Contains(name, "64MiB") ||
		strings.HasPrefix(name, "tcp.") || strings.HasPrefix(name, "rawtcp.")
}

// isTerminal reports whether w is a terminal, where progress lines that
// rewrite themselves make sense.
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	st, err := f.Stat()
	return err == nil && st.Mode()&os.ModeCharDevice != 0
}

func isBaselineOfSelected(name string, selected []bench.Case, re *regexp.Regexp) bool {
	for _, c := range selected {
		if c.Baseline == name && re.MatchString(c.Name) {
			return true
		}
	}
	return false
}

func compare(c bench.Case, what string, ours, theirs, goal float64) against {
	a := against{What: what, Value: theirs, Ratio: bench.Ratio(ours, theirs), Goal: goal}
	if goal != 0 {
		met := c.Meets(ours, theirs, goal)
		a.Met = &met
	}
	return a
}

// comparePaired compares runs with the baseline runs taken beside them:
// the ratio is the median of the pairs' ratios, which the drift of a noisy
// machine moves less than a ratio of medians; the baseline's figure is its
// median.
func comparePaired(c bench.Case, what string, ours, theirs []float64, goal float64) against {
	ratios := make([]float64, 0, len(ours))
	for i := range min(len(ours), len(theirs)) {
		ratios = append(ratios, bench.Ratio(ours[i], theirs[i]))
	}
	a := compare(c, what, stats.Median(ratios), 1, goal)
	a.Value = stats.Median(theirs)
	a.Ratios = ratios
	return a
}

// runRefs runs every executable in dir and collects its figures, and reads
// the figures of *.out files (references that must run under a launcher,
// such as mpirun, write their output there).
func runRefs(ctx context.Context, dir string, stderr io.Writer) (map[string]bench.RefFigure, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("reference programs: %w", err)
	}
	figs := map[string]bench.RefFigure{}
	for _, e := range entries {
		if strings.HasSuffix(e.Name(), ".out") && !e.IsDir() {
			data, err := os.ReadFile(filepath.Join(dir, e.Name()))
			if err != nil {
				return nil, fmt.Errorf("reference figures: %w", err)
			}
			for k, v := range bench.ParseRef(string(data)) {
				figs[k] = v
			}
			continue
		}
		info, err := e.Info()
		if err != nil || e.IsDir() || info.Mode()&0o111 == 0 || strings.HasPrefix(e.Name(), "mpi_") {
			continue // MPI references run under mpirun, by their own target
		}
		path := filepath.Join(dir, e.Name())
		fmt.Fprintf(stderr, "reference %s …\n", e.Name())
		rctx, cancel := context.WithTimeout(ctx, 5*time.Minute)
		cmd := exec.CommandContext(rctx, path)
		cmd.Env = append(os.Environ(), "OMP_NUM_THREADS=2", "OMP_PROC_BIND=false")
		out, err := cmd.Output()
		cancel()
		if err != nil {
			return nil, fmt.Errorf("reference %s: %w", path, err)
		}
		for k, v := range bench.ParseRef(string(out)) {
			figs[k] = v
		}
	}
	return figs, nil
}
