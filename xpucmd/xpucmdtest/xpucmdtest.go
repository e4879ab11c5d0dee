// Package xpucmdtest tests an xpu command — a main package over package
// xpucmd, such as a backend's own cmd/xpu-mybackend — as its users run it:
// in a process of its own, the test binary started again, which runs the
// command instead of the tests.
//
//	func TestMain(m *testing.M) {
//		xpucmdtest.Main(main) // in the child: runs the command, and exits
//		os.Exit(m.Run())
//	}
//
//	func TestInfo(t *testing.T) {
//		code, stdout, stderr := xpucmdtest.Run(t.Context(), t, "info")
//		…
//	}
//
// The conformance command in particular runs the suites through package
// testing's global state, which a test binary has already taken: it must
// run in a process of its own.
package xpucmdtest

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"strings"
	"testing"
)

// argsEnv carries the command's arguments, as a JSON list, from Run to the
// child's Main.
const argsEnv = "XPUCMD_TEST_ARGS"

// Main, in the child process Run starts, runs main with the arguments Run
// was given in os.Args[1:] and then exits (with status 0 if main returns);
// in any other process it returns at once. Call it first in TestMain, or in
// an init function of a test file when the command needs no flags parsed.
func Main(main func()) {
	args := os.Getenv(argsEnv)
	if args == "" {
		return
	}
	var argv []string
	if err := json.Unmarshal([]byte(args), &argv); err != nil {
		panic(err)
	}
	os.Args = append(os.Args[:1:1], argv...)
	main()
	os.Exit(0)
}

// Run runs the command with args in a child process — the test binary
// again, whose Main runs the command — and returns its exit status, its
// standard output and its standard error. The child is killed when ctx
// ends; a child that cannot be started, or that fails other than by
// exiting, fails t.
func Run(ctx context.Context, t testing.TB, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	enc, err := json.Marshal(args)
	if err != nil {
		t.Fatalf("xpucmdtest: arguments %q: %v", args, err)
	}
	cmd := exec.CommandContext(ctx, os.Args[0], "-test.run=^$")
	// GORACE: no second's sleep at the child's exit under -race.
	cmd.Env = append(os.Environ(), argsEnv+"="+string(enc), "GORACE=atexit_sleep_ms=0")
	var out, errOut strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &errOut
	err = cmd.Run()
	if ee := (*exec.ExitError)(nil); errors.As(err, &ee) {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatalf("xpucmdtest: running the command %q: %v", args, err)
	}
	return code, out.String(), errOut.String()
}
