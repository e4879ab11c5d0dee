package xpucmd

import (
	"context"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"unicode"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/xpu-go/xpu"
	"github.com/xpu-go/xpu/backends/cpu"
	_ "github.com/xpu-go/xpu/backends/local" // the communicator cases of TestGuideSectionsCoverSuite
	"github.com/xpu-go/xpu/memspace"
	"github.com/xpu-go/xpu/xpucmd/xpucmdtest"
)

// The conformance command runs the suites through package testing, once
// per process: these tests run it in a child process, the test binary
// itself, which runs the command instead of the tests (xpucmdtest).

// unopenable is a driver that says it is available and fails to open.
type unopenable struct{}

func (unopenable) Open(context.Context, xpu.Options) (*xpu.Backend, error) {
	return nil, xpu.ErrUnavailable
}

func (unopenable) Info(context.Context) xpu.Info { return xpu.Info{Available: true} }

// forgetful opens a host space whose Free forgets nothing: every Free
// succeeds, a double one too.
type forgetful struct{}

type forgetfulSpace struct{ *cpu.Space }

func (forgetfulSpace) Free(memspace.Block) error { return nil }

func (forgetful) Open(context.Context, xpu.Options) (*xpu.Backend, error) {
	sp := forgetfulSpace{cpu.NewSpace(cpu.SpaceOptions{})}
	b := &xpu.Backend{Name: "xpucmd-test-forgetful", Memory: sp}
	b.OnClose(sp.Close)
	return b, nil
}

func (forgetful) Info(context.Context) xpu.Info { return xpu.Info{Available: true} }

func init() {
	xpu.Register("xpucmd-test-unopenable", unopenable{})
	xpu.Register("xpucmd-test-forgetful", forgetful{})
	xpucmdtest.Main(func() { os.Exit(Run(context.Background(), os.Args[1:], os.Stdout, os.Stderr)) })
}

// command runs the xpu command with args in a child process and returns
// its exit status, its standard output and its standard error.
func command(t *testing.T, args ...string) (int, string, string) {
	t.Helper()
	return xpucmdtest.Run(testCtx(t), t, args...)
}

// A backend that passes: the matrix, and status 0.
func TestConformancePasses(t *testing.T) {
	t.Parallel()
	code, stdout, stderr := command(t, "conformance", "--backend", "cpu", "--run", "^cpu$/^backend$", "-o", "workers=2")
	require.Equal(t, 0, code, "stdout:\n%s\nstderr:\n%s", stdout, stderr)
	assert.Contains(t, stdout, "backend/composition")
	assert.Contains(t, stdout, "backend/capabilities")
	assert.Contains(t, stdout, "backend/devices       skip 1") // one device: nothing to tell apart
	assert.Contains(t, stdout, "cpu: 2 passed, 0 failed, 1 skipped")
}

// Options reach the driver: one it does not know fails every case.
func TestConformanceOptions(t *testing.T) {
	t.Parallel()
	code, stdout, stderr := command(t, "conformance", "--backend", "cpu", "--run", "^cpu$/^backend$", "-o", "wrokers=2")
	assert.Equal(t, 1, code, "stdout:\n%s\nstderr:\n%s", stdout, stderr)
	assert.Contains(t, stderr, `unknown option wrokers="2"`)
	assert.Contains(t, stderr, "did you mean workers?")

	code, _, stderr = command(t, "conformance", "--backend", "cpu", "-o", "workers")
	assert.Equal(t, 2, code)
	assert.Contains(t, stderr, `invalid value "workers" for flag -o: want KEY=VALUE`)
}

// A backend that fails a case: the matrix says where; one line says which
// requirement, what was observed against what was expected, and where the
// guide states it; the status is 1. The testify trace is left to -v.
func TestConformanceFails(t *testing.T) {
	t.Parallel()
	code, stdout, stderr := command(t, "conformance", "--backend", "xpucmd-test-forgetful", "--run", "//space/free/double$")
	assert.Equal(t, 1, code, "stdout:\n%s\nstderr:\n%s", stdout, stderr)
	assert.Contains(t, stdout, "FAIL 1/1")
	assert.Contains(t, stdout, "xpucmd-test-forgetful: 0 passed, 1 failed, 0 skipped")
	lines := failLines(stderr)
	require.Len(t, lines, 1, "stderr:\n%s", stderr)
	assert.Regexp(t, `^FAIL xpucmd-test-forgetful/cpu/space/free/double: Free #2 of a freed block \(256 bytes\): `+
		`Expected error with "block freed twice or never allocated" in chain but got nil\. \(and \d+ more\) `+
		`\(see docs/backend-guide\.md#1-memory-memspacespace\)$`, lines[0])
	assert.NotContains(t, stderr, "Error Trace:", "the trace without -v")
	assert.Contains(t, stderr, "xpu conformance: 1 conformance case(s) failed")

	// -v: the whole log, the trace included, and the same line.
	code, _, stderr = command(t, "conformance", "--backend", "xpucmd-test-forgetful", "--run", "//space/free/double$", "-v")
	assert.Equal(t, 1, code)
	assert.Contains(t, stderr, "Error Trace:")
	assert.Contains(t, stderr, "Messages:   \tFree #2 of a freed block")
	assert.Equal(t, lines, failLines(stderr))
}

// failLines returns the lines of out that report a failed requirement.
func failLines(out string) []string {
	var lines []string
	for _, l := range strings.Split(out, "\n") {
		if strings.HasPrefix(l, "FAIL ") {
			lines = append(lines, l)
		}
	}
	return lines
}

// A backend that fails many cases, some with several failures each: its
// output is one line per failed requirement — each case that failed, as
// -v's log lists them, once — each pointing to a section of the guide
// that exists, and nothing else but the closing lines.
func TestConformanceOneLinePerRequirement(t *testing.T) {
	t.Parallel()
	code, _, verbose := command(t, "conformance", "--backend", "xpucmd-test-forgetful", "-v")
	require.Equal(t, 1, code)
	var names []string
	for _, m := range regexp.MustCompile(`(?m)^\s*--- FAIL: (\S+) `).FindAllStringSubmatch(verbose, -1) {
		names = append(names, m[1])
	}
	// The failed cases: failed tests with no subtest.
	want := map[string]bool{}
	for _, n := range names {
		leaf := true
		for _, o := range names {
			leaf = leaf && !strings.HasPrefix(o, n+"/")
		}
		if leaf {
			want[n] = true
		}
	}
	require.Greater(t, len(want), 10, "the forgetful backend fails many cases:\n%s", verbose)

	code, _, stderr := command(t, "conformance", "--backend", "xpucmd-test-forgetful")
	require.Equal(t, 1, code)
	anchors := guideAnchors(t)
	got := map[string]bool{}
	line := regexp.MustCompile(`^FAIL (\S+): \S.* \(see docs/backend-guide\.md#([\w-]+)\)$`)
	lines := strings.Split(strings.TrimSuffix(stderr, "\n"), "\n")
	require.GreaterOrEqual(t, len(lines), 2, stderr)
	for _, l := range lines[:len(lines)-2] {
		m := line.FindStringSubmatch(l)
		if !assert.NotNil(t, m, "not a failed requirement's line: %q", l) {
			continue
		}
		assert.False(t, got[m[1]], "two lines for %s", m[1])
		got[m[1]] = true
		assert.True(t, anchors[m[2]], "%s points to #%s, which the guide does not have", m[1], m[2])
	}
	assert.Equal(t, want, got)
	assert.Equal(t, "(-v prints every case's whole log)", lines[len(lines)-2])
	assert.Regexp(t, `^xpu conformance: \d+ conformance case\(s\) failed$`, lines[len(lines)-1])
}

// guideAnchors returns the anchors of the backend guide: its explicit ones
// (<a id="…">) and its headings' GitHub anchors.
func guideAnchors(t *testing.T) map[string]bool {
	t.Helper()
	text, err := os.ReadFile(filepath.Join("..", backendGuide))
	require.NoError(t, err)
	anchors := map[string]bool{}
	for _, m := range regexp.MustCompile(`<a id="([^"]+)"`).FindAllStringSubmatch(string(text), -1) {
		anchors[m[1]] = true
	}
	for _, line := range strings.Split(string(text), "\n") {
		if h, ok := strings.CutPrefix(strings.TrimLeft(line, "#"), " "); ok && strings.HasPrefix(line, "#") {
			anchors[strings.Map(func(r rune) rune {
				switch {
				case r == ' ':
					return '-'
				case r == '-' || r == '_' || unicode.IsLetter(r) || unicode.IsDigit(r):
					return unicode.ToLower(r)
				}
				return -1
			}, h)] = true
		}
	}
	return anchors
}

// Every section a failure line can point to is in the guide.
func TestGuideSectionsExist(t *testing.T) {
	anchors := guideAnchors(t)
	assert.True(t, anchors[guideOther], "#%s", guideOther)
	for _, s := range guideSections {
		assert.True(t, anchors[s.anchor], "%s points to #%s, which the guide does not have", s.prefix, s.anchor)
	}
}

// Every case the suite runs on the cpu and local backends (every area:
// spaces, pools, executor, streams, transfers, communicators) has a
// section of the guide of its own, not the catch-all.
func TestGuideSectionsCoverSuite(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the whole suite on cpu and local; skipped in -short mode")
	}
	t.Parallel()
	code, stdout, stderr := command(t, "conformance", "--backend", "cpu,local", "-v")
	require.Equal(t, 0, code, "stdout:\n%s\nstderr:\n%s", stdout, stderr)
	var rs []result
	for _, l := range strings.Split(stderr, "\n") {
		if m := resultLine.FindStringSubmatch(l); m != nil {
			rs = append(rs, result{name: m[2], status: m[1]})
		}
	}
	areas := map[string]bool{}
	for _, r := range leaves(rs) {
		be, name, ok := strings.Cut(r.name, "/")
		if !ok {
			continue
		}
		req, _ := requirement(name)
		anchor, named := guideAnchor(req)
		assert.True(t, named, "%s/%s: no section of the guide names it (it would point to #%s)", be, req, anchor)
		areas[strings.Split(req, "/")[0]] = true
	}
	for _, a := range []string{"backend", "cpu", "executor", "stream", "transfer", "comm"} {
		assert.True(t, areas[a], "no case of %s ran", a)
	}
}

// Failures of a case run at several sizes make one line, with the sizes it
// failed at; a failure that quotes a rule of the suite points to the rule's
// section rather than its area's.
func TestFailuresByRequirement(t *testing.T) {
	log := []string{
		"=== RUN   be",
		"=== RUN   be/comm/coll/bcast/n=2",
		"    coll.go:10: sizes [1 MiB] left out: small device",
		"    coll.go:11: rank 1: Bcast timed out: every rank calls the same collectives (see docs/backend-guide.md#comm-revocation)",
		"        and more",
		"=== RUN   be/comm/coll/bcast/n=3",
		"    coll.go:11: rank 2: Bcast timed out",
		"    --- FAIL: be/comm/coll/bcast/n=2 (0.01s)",
		"    --- FAIL: be/comm/coll/bcast/n=3 (0.01s)",
		"=== RUN   be/comm/coll/reduce",
		"    coll.go:19: a note of the case, logged",
		"    coll.go:20: ",
		"        \tError Trace:\tcoll.go:20",
		"        \tError:      \tNot equal: ",
		"        \t            \texpected: 3",
		"        \t            \tactual  : 4",
		"        \tTest:       \tbe/comm/coll/reduce",
		"        \tMessages:   \tReduce(Sum) on rank 0",
		"    --- FAIL: be/comm/coll/reduce (0.01s)",
		"    --- FAIL: be/comm/coll/bcast (0.01s)",
		"--- FAIL: be (0.02s)",
		"FAIL",
	}
	var rs []result
	for _, l := range log {
		if m := resultLine.FindStringSubmatch(l); m != nil {
			rs = append(rs, result{name: m[2], status: m[1]})
		}
	}
	var out strings.Builder
	printFailures(&out, failures(log, rs))
	assert.Equal(t, "FAIL be/comm/coll/bcast [n=2 n=3]: rank 1: Bcast timed out: every rank calls the same collectives and more"+
		" (and 2 more) (see docs/backend-guide.md#comm-revocation)\n"+
		"FAIL be/comm/coll/reduce: Reduce(Sum) on rank 0: Not equal: expected: 3 actual : 4 (and 1 more) (see docs/backend-guide.md#3-communication-commcomm)\n",
		out.String())
}

// A backend that fails outside any case — here, it does not open — fails
// the command, and its log says why.
func TestConformanceFailsOutsideCases(t *testing.T) {
	t.Parallel()
	code, stdout, stderr := command(t, "conformance", "--backend", "xpucmd-test-unopenable")
	assert.Equal(t, 1, code, "stdout:\n%s\nstderr:\n%s", stdout, stderr)
	assert.Contains(t, stderr, "conformance: xpucmd-test-unopenable open: backend unavailable")
	assert.Contains(t, stderr, "xpu conformance: the conformance run failed outside its cases")
}

func TestConformanceUnknownBackend(t *testing.T) {
	var stdout, stderr strings.Builder
	code := Run(testCtx(t), []string{"conformance", "--backend", "xpucmd-test-none"}, &stdout, &stderr)
	assert.Equal(t, 2, code)
	assert.Contains(t, stderr.String(), `unknown backend "xpucmd-test-none"; known: `)
}

// The command knows the drivers of its program, and extra commands.
func TestRunExtraCommand(t *testing.T) {
	var got []string
	extra := Command{Name: "hello", Summary: "say hello", Run: func(_ context.Context, args []string, stdout, _ io.Writer) error {
		got = args
		return nil
	}}
	var stderr strings.Builder
	assert.Equal(t, 0, Run(testCtx(t), []string{"hello", "a", "b"}, io.Discard, &stderr, extra))
	assert.Equal(t, []string{"a", "b"}, got)

	stderr.Reset()
	assert.Equal(t, 2, Run(testCtx(t), nil, io.Discard, &stderr, extra))
	assert.Contains(t, stderr.String(), "  hello        say hello\n")
	assert.Contains(t, stderr.String(), "  conformance  run the conformance suites")

	stderr.Reset()
	assert.Equal(t, 2, Run(testCtx(t), []string{"nope"}, io.Discard, &stderr))
	assert.Contains(t, stderr.String(), `xpu: unknown command "nope"`)
}

func TestInfoListsRegistered(t *testing.T) {
	var stdout, stderr strings.Builder
	require.Equal(t, 0, Run(testCtx(t), []string{"info"}, &stdout, &stderr), stderr.String())
	assert.Contains(t, stdout.String(), "\ncpu:")
	assert.Contains(t, stdout.String(), "\nxpucmd-test-unopenable:")
	assert.NotContains(t, stdout.String(), "\ntcp:", "a backend the program does not import")
}
