package xpucmd

import (
	"context"
	"io"
	"os"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/xpu-go/xpu"
	"github.com/xpu-go/xpu/backends/cpu"
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

// A backend that fails a case: the matrix says where, the case's log says
// why, and the status is 1.
func TestConformanceFails(t *testing.T) {
	t.Parallel()
	code, stdout, stderr := command(t, "conformance", "--backend", "xpucmd-test-forgetful", "--run", "//space/free/double$")
	assert.Equal(t, 1, code, "stdout:\n%s\nstderr:\n%s", stdout, stderr)
	assert.Contains(t, stdout, "FAIL 1/1")
	assert.Contains(t, stdout, "xpucmd-test-forgetful: 0 passed, 1 failed, 0 skipped")
	assert.Contains(t, stderr, "Free #2 of a freed block")
	assert.Contains(t, stderr, "xpu conformance: 1 conformance case(s) failed")
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
