package conformance_test

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/xpu-go/xpu"
	"github.com/xpu-go/xpu/backends/cpu"
	"github.com/xpu-go/xpu/backends/local"
	"github.com/xpu-go/xpu/comm"
	"github.com/xpu-go/xpu/conformance"
	"github.com/xpu-go/xpu/executor"
	"github.com/xpu-go/xpu/memspace"
	"github.com/xpu-go/xpu/transfer"
)

// brokenEnv enables the TestBroken… tests. They run the suites over
// deliberately broken implementations and are expected to fail: they run
// only in a child process started by TestSuiteCatchesBrokenImplementations,
// which checks that they do, and how.
const brokenEnv = "XPU_CONFORMANCE_BROKEN"

func onlyInChild(t *testing.T) {
	t.Helper()
	if os.Getenv(brokenEnv) != "1" {
		t.Skip("run (and expected to fail) in a child process of TestSuiteCatchesBrokenImplementations")
	}
}

// TestSuiteCatchesBrokenImplementations runs each TestBroken… test in a
// child process and checks that the suite fails it, naming the case that
// catches the defect.
func TestSuiteCatchesBrokenImplementations(t *testing.T) {
	if os.Getenv(brokenEnv) != "" {
		t.Skip("in the child process")
	}
	cases := []struct {
		test   string // the TestBroken… function, with an optional -run suffix
		ok     bool   // the child must pass (declarations), not fail
		want   []string
		absent []string // what the child's output must not say
		// fast is a case that must fail within bound of its start.
		fast  string
		bound time.Duration
	}{
		{test: "TestBrokenAlignment", want: []string{
			"--- FAIL: TestBrokenAlignment/space/alloc/alignment",
			"--- FAIL: TestBrokenAlignment/space/alloc/typed",
			"is not aligned to",
		}},
		{test: "TestBrokenDoubleFree", want: []string{
			"--- FAIL: TestBrokenDoubleFree/space/free/double",
			"Free #2 of a freed block",
		}},
		{test: "TestBrokenSubSliceFree", want: []string{
			"--- FAIL: TestBrokenSubSliceFree/space/free/sub-slice",
			"a prefix (same address, shorter)",
		}},
		{test: "TestBrokenLedger", want: []string{
			"--- FAIL: TestBrokenLedger/space/stats",
			"ledger of space fake at the end of the case",
		}},
		{test: "TestBrokenDropIndex", want: []string{
			"--- FAIL: TestBrokenDropIndex/executor/parallel/for/coverage",
			"--- FAIL: TestBrokenDropIndex/executor/parallel/range/chunks",
			"--- FAIL: TestBrokenDropIndex/executor/parallel/reduce",
			"indices never ran",
		}},
		{test: "TestBrokenStickyError", want: []string{
			"--- FAIL: TestBrokenStickyError/stream/error/sticky",
			"Synchronize reports the sticky error",
		}},
		{test: "TestBrokenReorder/^comm$/^p2p$", want: []string{
			"--- FAIL: TestBrokenReorder/comm/p2p/non-overtaking/n=2",
			"were reordered or lost",
		}},
		{test: "TestBrokenTransfer", want: []string{
			"--- FAIL: TestBrokenTransfer/transfer/copy/sync",
			"--- FAIL: TestBrokenTransfer/transfer/copy/async",
			"bytes differ",
		}},
		{test: "TestBrokenHang", want: []string{
			"conformance: case TestBrokenHang/executor/execute/canceled hung",
			"deafExec",
		}},
		{test: "TestBrokenHangComm/^comm$/^p2p$/^send-recv$", want: []string{
			"--- FAIL: TestBrokenHangComm/comm/p2p/send-recv/n=2",
			"conformance: case TestBrokenHangComm/comm/p2p/send-recv/n=2 hung: still running",
			"conformance_test.hangRequest.Wait", // the case's goroutines
			"conformance: case TestBrokenHangComm/comm/p2p/send-recv/n=2 left goroutines running after its cleanups",
			// The suite went on.
			"--- PASS: TestBrokenHangComm/comm/p2p/send-recv/n=3",
		}, fast: "TestBrokenHangComm/comm/p2p/send-recv/n=2", bound: conformance.DefaultTimeout + conformance.DefaultGrace + 5*time.Second},
		{test: "TestBrokenHangClose", want: []string{
			"conformance: case TestBrokenHangClose/space/properties hung: still running",
			"after its body returned, in its cleanups",
			"conformance_test.stuckSpace.Close",
		}, absent: []string{"--- PASS: TestBrokenHangClose/space/alloc"}},
		{test: "TestBrokenPanic", want: []string{
			"--- FAIL: TestBrokenPanic/executor/name",
			"conformance: case TestBrokenPanic/executor/name panicked: panicExec has no name",
			"conformance_test.panicExec.Name",
			"--- PASS: TestBrokenPanic/executor/execute/runs",
		}},
		{test: "TestBrokenDeclaration", want: []string{
			`Declare("executor/no-such-case") names no case of the executor suite`,
			`Declare("executor/name") has no reason`,
		}},
		{test: "TestBrokenDeclarationOutsideSuites", want: []string{
			`Declare("bogus/name") names no case: "bogus" is neither a suite`,
			// The other suites' names are not checked by TestSpace alone.
			"--- FAIL: TestBrokenDeclarationOutsideSuites (",
		}, absent: []string{`Declare("comm/p2p/cancel")`}},
		{test: "TestBrokenDeclarationWholeName/^fake$/^space$/^alloc$", want: []string{
			`Declare("TestBrokenDeclarationWholeName/space/alloc/alignment") names no case: no case of this run has that whole name`,
			`the nearest: "TestBrokenDeclarationWholeName/fake/space/alloc/alignment"`,
			`Declare("space/alloc/alignmnt") names no case of the space suite`,
			`the nearest: "space/alloc/alignment"`,
		}},
		{test: "TestDeclaredWholeName/^fake_space$/^space$/^alloc$", ok: true, want: []string{
			"--- SKIP: TestDeclaredWholeName/fake_space/space/alloc/alignment",
			"declared by the implementation: as printed",
			"--- SKIP: TestDeclaredWholeName/fake_space/space/alloc/typed",
			"declared by the implementation: with the space's own name",
			"--- PASS: TestDeclaredWholeName/fake_space/space/alloc/sizes",
		}},
		{test: "TestBrokenCapabilitiesListed/^backend$/^capabilities$", want: []string{
			"--- FAIL: TestBrokenCapabilitiesListed/backend/capabilities",
			"Info lists memory.stats 2 times",
			"Info lists memory.lookup but conformance_test.fakeSpace does not implement memspace.Lookuper",
			"Info lists streams but the backend has no executor",
			"Info lists group but Backend.Group is nil",
		}},
		{test: "TestBrokenCapabilitiesUnlisted/^backend$/^capabilities$", want: []string{
			"--- FAIL: TestBrokenCapabilitiesUnlisted/backend/capabilities",
			"conformance_test.fakeSpace implements memspace.StatsSpace but Info does not list memory.stats",
			"local.Comm implements comm.Comm but Info does not list p2p",
			"Backend.Group is set but Info does not list group",
		}},
		{test: "TestHonestDriver/^backend$/^capabilities$", ok: true, want: []string{
			"--- PASS: TestHonestDriver/backend/capabilities",
		}, absent: []string{"Info lists", "Info does not list"}},
		{test: "TestBrokenUnknownDriver", want: []string{
			`conformance: xpu describe: unknown backend "conformance-test-no-such-driver" (forgotten import?)`,
		}},
		{test: "TestRunDoesNotCheckInfo/^backend$", ok: true, want: []string{
			"--- PASS: TestRunDoesNotCheckInfo/backend/composition",
		}, absent: []string{"backend/capabilities"}},
		{test: "TestDeclared", ok: true, want: []string{
			"--- SKIP: TestDeclared/executor/parallel/nested",
			"declared by the implementation: nested loops are not supported here",
			"--- SKIP: TestDeclared/executor/execute/panic",
			"--- PASS: TestDeclared/executor/execute/runs",
		}},
	}
	// A child that waits out a case's timeout mostly sleeps: it starts
	// now, beside the others, rather than in a slot of its own.
	early := map[string]*child{}
	for _, tc := range cases {
		if tc.fast != "" {
			early[tc.test] = startChild(t, tc.test)
		}
	}
	for _, tc := range cases {
		name := strings.SplitN(tc.test, "/", 2)[0]
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			ch := early[tc.test]
			if ch == nil {
				ch = startChild(t, tc.test)
			}
			text, err := ch.wait()
			if tc.ok {
				require.NoError(t, err, "the child failed:\n%s", tail(text))
			} else {
				var ee *exec.ExitError
				require.ErrorAs(t, err, &ee, "the child passed a broken implementation:\n%s", tail(text))
				require.NotZero(t, ee.ExitCode())
			}
			for _, w := range tc.want {
				assert.Contains(t, text, w, "the child's output does not say %q:\n%s", w, tail(text))
			}
			for _, w := range tc.absent {
				assert.NotContains(t, text, w, "the child's output says %q:\n%s", w, tail(text))
			}
			if tc.fast != "" {
				m := regexp.MustCompile(`--- FAIL: ` + regexp.QuoteMeta(tc.fast) + ` \(([0-9.]+)s\)`).FindStringSubmatch(text)
				require.NotNil(t, m, "the child's output does not say that %s failed:\n%s", tc.fast, tail(text))
				took, err := time.ParseDuration(m[1] + "s")
				require.NoError(t, err)
				assert.LessOrEqual(t, took, tc.bound, "%s failed only after %v", tc.fast, took)
			}
			// A child that crashed (other than by the watchdog) proves nothing.
			assert.NotRegexp(t, regexp.MustCompile(`(?m)^panic: `), text, "the child crashed")
		})
	}
}

// child is a TestBroken… test running in a child process with brokenEnv
// set: the test function, matched exactly, with an optional -run suffix
// for its subtests.
type child struct {
	cmd  *exec.Cmd
	out  bytes.Buffer
	once sync.Once
	err  error
}

// startChild starts test in a child process, which is killed and waited
// for when t ends, if its output was not waited for before (its subtest
// filtered out by -run).
func startChild(t *testing.T, test string) *child {
	t.Helper()
	name, rest, _ := strings.Cut(test, "/")
	run := "^" + name + "$"
	if rest != "" {
		run += "/" + rest
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	c := &child{}
	c.cmd = exec.CommandContext(ctx, os.Args[0], "-test.run="+run, "-test.v", "-test.count=1", "-test.timeout=110s")
	c.cmd.Env = append(os.Environ(), brokenEnv+"=1")
	c.cmd.Stdout, c.cmd.Stderr = &c.out, &c.out
	if err := c.cmd.Start(); err != nil {
		c.once.Do(func() { c.err = err })
	}
	t.Cleanup(func() {
		cancel()
		_, _ = c.wait()
	})
	return c
}

// wait waits for the child to exit and returns its output and its error.
func (c *child) wait() (string, error) {
	c.once.Do(func() { c.err = c.cmd.Wait() })
	return c.out.String(), c.err
}

// tail returns the end of a long output.
func tail(s string) string {
	const max = 6000
	if len(s) > max {
		return "…" + s[len(s)-max:]
	}
	return s
}

func TestBrokenAlignment(t *testing.T) {
	onlyInChild(t)
	conformance.TestSpace(t, func(*testing.T) *fakeSpace { return newFakeSpace(ignoreAlignment) })
}

func TestBrokenDoubleFree(t *testing.T) {
	onlyInChild(t)
	conformance.TestSpace(t, func(*testing.T) *fakeSpace { return newFakeSpace(silentDoubleFree) })
}

func TestBrokenSubSliceFree(t *testing.T) {
	onlyInChild(t)
	conformance.TestSpace(t, func(*testing.T) *fakeSpace { return newFakeSpace(freeByAddressOnly) })
}

func TestBrokenLedger(t *testing.T) {
	onlyInChild(t)
	conformance.TestSpace(t, func(*testing.T) *fakeSpace { return newFakeSpace(uncountedFrees) })
}

// newCPUExec returns a CPU executor closed at the end of the test.
func newCPUExec(t *testing.T) *cpu.Executor {
	e := cpu.NewExecutor(4)
	t.Cleanup(func() { _ = e.Close() })
	return e
}

func TestBrokenDropIndex(t *testing.T) {
	onlyInChild(t)
	conformance.TestExecutor(t, func(t *testing.T) dropExec { return dropExec{newCPUExec(t)} })
}

func TestBrokenStickyError(t *testing.T) {
	onlyInChild(t)
	conformance.TestStream(t, func(t *testing.T) executor.Streamer { return forgetfulStreamer{newCPUExec(t)} })
}

func TestBrokenReorder(t *testing.T) {
	onlyInChild(t)
	conformance.TestComm(t, func(t *testing.T, n int) []comm.Comm {
		ranks, err := local.NewGroup(n, local.Options{})
		require.NoError(t, err)
		out := make([]comm.Comm, n)
		for i, r := range ranks {
			out[i] = newReorderComm(r)
		}
		return out
	})
}

func TestBrokenTransfer(t *testing.T) {
	onlyInChild(t)
	const kind = "conformance-test-short-copy"
	for _, p := range [][2]string{{kind, "host"}, {"host", kind}, {kind, kind}} {
		transfer.Register(p[0], p[1], transfer.PathFunc(shortCopy))
	}
	conformance.TestTransfer(t, func(*testing.T) []memspace.Space {
		s := newFakeSpace(correct)
		s.kind = kind
		return []memspace.Space{s}
	}, conformance.Streams(func(t *testing.T) executor.Streamer { return newCPUExec(t) }))
}

func TestBrokenHang(t *testing.T) {
	onlyInChild(t)
	conformance.TestExecutor(t, func(t *testing.T) deafExec { return deafExec{newCPUExec(t)} },
		conformance.Timeout(2*time.Second))
}

func TestBrokenDeclaration(t *testing.T) {
	onlyInChild(t)
	conformance.TestExecutor(t, newCPUExec,
		conformance.Declare("executor/no-such-case", "a typo"),
		conformance.Declare("executor/name", ""))
}

// TestDeclared checks that a declaration skips the cases it names, with
// its reason, and only those.
func TestDeclared(t *testing.T) {
	onlyInChild(t)
	conformance.TestExecutor(t, newCPUExec,
		conformance.Declare("executor/parallel/nested", "nested loops are not supported here"),
		conformance.Declare("executor/execute/panic", "panics crash this executor"))
}

// TestBrokenDeclarationOutsideSuites declares a name outside every suite:
// TestSpace alone must fail, though it does not check the names of other
// suites.
func TestBrokenDeclarationOutsideSuites(t *testing.T) {
	onlyInChild(t)
	conformance.TestSpace(t, func(*testing.T) *fakeSpace { return newFakeSpace(correct) },
		conformance.Declare("bogus/name", "x"),
		conformance.Declare("comm/p2p/cancel", "for the communicator suite"))
}

// fakeBackend opens a backend whose memory is a correct fakeSpace named
// name.
func fakeBackend(name string) func(t *testing.T) *xpu.Backend {
	return func(t *testing.T) *xpu.Backend {
		sp := newFakeSpace(correct)
		sp.name = name
		return &xpu.Backend{Name: "fake", Memory: sp}
	}
}

// TestBrokenDeclarationWholeName declares a whole name as go test would
// print it, but without the space's level, and a typo.
func TestBrokenDeclarationWholeName(t *testing.T) {
	onlyInChild(t)
	conformance.Run(t, fakeBackend("fake"),
		conformance.Declare("TestBrokenDeclarationWholeName/space/alloc/alignment", "x"),
		conformance.Declare("space/alloc/alignmnt", "x"))
}

// TestDeclaredWholeName declares cases by their whole names: as go test -v
// prints them, and with the space's name as the space says it, with a
// space that go test prints as an underscore.
func TestDeclaredWholeName(t *testing.T) {
	onlyInChild(t)
	conformance.Run(t, fakeBackend("fake space"),
		conformance.Declare("TestDeclaredWholeName/fake_space/space/alloc/alignment", "as printed"),
		conformance.Declare("TestDeclaredWholeName/fake space/space/alloc/typed", "with the space's own name"))
}
