package xpucmd

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"os"
	"regexp"
	"sort"
	"strings"
	"sync"
	"testing"
	"text/tabwriter"
	"time"

	"github.com/xpu-go/xpu"
	"github.com/xpu-go/xpu/conformance"
	"github.com/xpu-go/xpu/internal/testmain"
)

func runConformance(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	f, err := parseConformanceFlags(args, stderr)
	if err != nil {
		return err
	}
	names := f.backendNames()
	tests, cols, unavailable, err := conformanceTests(ctx, names, f.opts, f.suiteOpts())
	if err != nil {
		return err
	}
	var results []result
	var log []string
	code := 0
	if len(tests) > 0 {
		var err error
		results, log, code, err = capture(func() (int, error) { return testmain.Run(tests, f.testFlags()...) }, f.verbose, stderr)
		if err != nil {
			return err
		}
	}
	failed := printMatrix(stdout, cols, leaves(results), unavailable)
	// A test can fail outside its cases (a declaration that names no case,
	// a backend that does not open): its own result says so.
	whole := 0
	for _, r := range results {
		if r.status == "FAIL" && !strings.Contains(r.name, "/") {
			whole++
		}
	}
	if failed > 0 || whole > 0 || code != 0 {
		// One line per failed requirement; the whole log only with -v
		// (echoed above as it ran).
		printFailures(stderr, failures(log, results))
		if !f.verbose {
			fmt.Fprintln(stderr, "(-v prints every case's whole log)")
		}
		if failed > 0 {
			return fmt.Errorf("%d conformance case(s) failed", failed)
		}
		return fmt.Errorf("the conformance run failed outside its cases (exit status %d); its log says how", code)
	}
	if len(tests) == 0 {
		return fmt.Errorf("no available backend among %s", strings.Join(names, ", "))
	}
	return nil
}

// conformanceFlags are the flags of `conformance`.
type conformanceFlags struct {
	backend     string
	runPat      string
	verbose     bool
	timeout     time.Duration
	caseTimeout time.Duration
	opts        xpu.Options
}

func parseConformanceFlags(args []string, stderr io.Writer) (*conformanceFlags, error) {
	fs := NewFlagSet("conformance", stderr)
	f := &conformanceFlags{opts: xpu.Options{}}
	fs.StringVar(&f.backend, "backend", "", "comma-separated backends to test (default: every available one)")
	fs.StringVar(&f.runPat, "run", "", "run only the cases whose name matches this regular expression (as go test -run)")
	fs.BoolVar(&f.verbose, "v", false, "print every case's whole log (without it, one line per failed requirement)")
	fs.DurationVar(&f.timeout, "timeout", 0, "fail if the whole run takes longer (0: no limit)")
	fs.DurationVar(&f.caseTimeout, "case-timeout", 0, fmt.Sprintf(
		"how long one case may run before its context expires (0: conformance.DefaultTimeout, %v); raise it for a slow device",
		conformance.DefaultTimeout))
	fs.Func("o", "a backend option KEY=VALUE, repeatable, given to every backend tested "+
		"(scope it to one as NAME.KEY=VALUE when testing several)", func(kv string) error {
		k, v, ok := strings.Cut(kv, "=")
		if k = strings.TrimSpace(k); !ok || k == "" {
			return fmt.Errorf("want KEY=VALUE, got %q", kv)
		}
		f.opts[k] = v
		return nil
	})
	if err := ParseFlags(fs, args); err != nil {
		return nil, err
	}
	return f, nil
}

// backendNames returns the backends -backend names, or every registered
// one.
func (f *conformanceFlags) backendNames() []string {
	if f.backend == "" {
		return xpu.Drivers()
	}
	var names []string
	for _, n := range strings.Split(f.backend, ",") {
		if n = strings.TrimSpace(n); n != "" {
			names = append(names, n)
		}
	}
	return names
}

func (f *conformanceFlags) suiteOpts() []conformance.Option {
	var suiteOpts []conformance.Option
	if f.caseTimeout > 0 {
		suiteOpts = append(suiteOpts, conformance.Timeout(f.caseTimeout))
	}
	return suiteOpts
}

// testFlags returns the go test flags of -run and -timeout.
func (f *conformanceFlags) testFlags() []string {
	flags := []string{}
	if f.runPat != "" {
		flags = append(flags, "-test.run="+f.runPat)
	}
	if f.timeout > 0 {
		flags = append(flags, "-test.timeout="+f.timeout.String())
	}
	return flags
}

// conformanceTests returns a test running the suite on each available
// backend of names, the matrix's columns (every backend of names), and
// why each backend not available is not.
func conformanceTests(ctx context.Context, names []string, opts xpu.Options, suiteOpts []conformance.Option) (
	tests []testing.InternalTest, cols []string, unavailable map[string]string, err error) {
	unavailable = map[string]string{}
	for _, name := range names {
		info, err := xpu.Describe(ctx, name)
		if err != nil {
			return nil, nil, nil, fmt.Errorf("%w: %v", ErrUsage, err)
		}
		cols = append(cols, name)
		if !info.Available {
			unavailable[name] = info.Reason
			continue
		}
		tests = append(tests, testing.InternalTest{Name: name, F: func(t *testing.T) {
			if err := ctx.Err(); err != nil {
				t.Fatalf("not run: %v", err) // interrupted
			}
			conformance.RunDriver(t, name, opts, suiteOpts...)
		}})
	}
	return tests, cols, unavailable, nil
}

type result struct {
	name   string // backend/suite/case/...
	status string // PASS, FAIL, SKIP
}

var resultLine = regexp.MustCompile(`^\s*--- (PASS|FAIL|SKIP): (\S+) \(`)

// capture runs f with os.Stdout redirected, parses go test -v output from
// it, and returns the results (of every test and subtest) and the whole
// log.
func capture(f func() (int, error), echo bool, echoTo io.Writer) ([]result, []string, int, error) {
	r, w, err := os.Pipe()
	if err != nil {
		return nil, nil, 1, err
	}
	saved := os.Stdout
	os.Stdout = w
	var (
		results []result
		log     []string
		wg      sync.WaitGroup
	)
	wg.Add(1)
	go func() {
		defer wg.Done()
		sc := bufio.NewScanner(r)
		sc.Buffer(make([]byte, 64<<10), 16<<20)
		for sc.Scan() {
			line := sc.Text()
			log = append(log, line)
			if echo {
				fmt.Fprintln(echoTo, line)
			}
			if m := resultLine.FindStringSubmatch(line); m != nil {
				results = append(results, result{name: m[2], status: m[1]})
			}
		}
	}()
	code, runErr := f()
	os.Stdout = saved
	w.Close()
	wg.Wait()
	r.Close()
	return results, log, code, runErr
}

// leaves keeps the results of tests that have no subtests.
func leaves(rs []result) []result {
	parent := map[string]bool{}
	for _, r := range rs {
		if i := strings.LastIndex(r.name, "/"); i > 0 {
			for p := r.name[:i]; ; {
				parent[p] = true
				j := strings.LastIndex(p, "/")
				if j < 0 {
					break
				}
				p = p[:j]
			}
		}
	}
	var out []result
	for _, r := range rs {
		if !parent[r.name] {
			out = append(out, r)
		}
	}
	return out
}

type cell struct{ pass, fail, skip int }

// count adds a result of status (PASS, FAIL or SKIP) to c.
func (c *cell) count(status string) {
	switch status {
	case "PASS":
		c.pass++
	case "FAIL":
		c.fail++
	case "SKIP":
		c.skip++
	}
}

func (c cell) String() string {
	switch {
	case c.pass+c.fail+c.skip == 0:
		return "-"
	case c.fail > 0:
		return fmt.Sprintf("FAIL %d/%d", c.fail, c.pass+c.fail+c.skip)
	case c.skip > 0 && c.pass == 0:
		return fmt.Sprintf("skip %d", c.skip)
	case c.skip > 0:
		return fmt.Sprintf("pass %d, skip %d", c.pass, c.skip)
	}
	return fmt.Sprintf("pass %d", c.pass)
}

// printMatrix prints requirement areas (two levels under the backend) by
// backend and returns the number of failed cases.
func printMatrix(w io.Writer, cols []string, rs []result, unavailable map[string]string) int {
	cells := map[string]map[string]*cell{} // by row, then backend
	total := map[string]*cell{}            // by backend
	var rows []string
	failed := 0
	for _, r := range rs {
		parts := strings.Split(r.name, "/")
		be := parts[0]
		cellOf(total, be).count(r.status)
		if len(parts) < 2 {
			continue
		}
		row := strings.Join(parts[1:min(3, len(parts))], "/")
		if cells[row] == nil {
			cells[row] = map[string]*cell{}
			rows = append(rows, row)
		}
		cellOf(cells[row], be).count(r.status)
		if r.status == "FAIL" {
			failed++
		}
	}
	sort.Strings(rows)
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprint(tw, "REQUIREMENT")
	for _, c := range cols {
		fmt.Fprint(tw, "\t"+c)
	}
	fmt.Fprintln(tw)
	for _, row := range rows {
		fmt.Fprint(tw, row)
		for _, be := range cols {
			if _, ok := unavailable[be]; ok {
				fmt.Fprint(tw, "\tunavailable")
				continue
			}
			fmt.Fprint(tw, "\t"+cellOf(cells[row], be).String())
		}
		fmt.Fprintln(tw)
	}
	tw.Flush()
	fmt.Fprintln(w)
	for _, be := range cols {
		if why, ok := unavailable[be]; ok {
			fmt.Fprintf(w, "%s: unavailable (%s)\n", be, why)
			continue
		}
		c := cellOf(total, be)
		fmt.Fprintf(w, "%s: %d passed, %d failed, %d skipped\n", be, c.pass, c.fail, c.skip)
	}
	return failed
}

// cellOf returns m's cell for key, added empty if m has none.
func cellOf(m map[string]*cell, key string) *cell {
	c := m[key]
	if c == nil {
		c = &cell{}
		m[key] = c
	}
	return c
}
