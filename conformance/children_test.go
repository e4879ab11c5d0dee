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
)

// This file holds what the self-tests that run a test in a child process
// share: the parents (TestSuiteCatches…, TestRankMode…) start each child
// with brokenEnv set, and check from its verbose output that the suite
// failed the broken implementation it runs, naming the case that caught
// it, or passed what it should.

// brokenEnv enables the TestBroken… tests. They run the suites over
// deliberately broken implementations and are expected to fail: they run
// only in a child process started by a parent test, which checks that they
// do, and how.
const brokenEnv = "XPU_CONFORMANCE_BROKEN"

// onlyInChild skips a test that runs in a child process only.
func onlyInChild(t *testing.T) {
	t.Helper()
	if os.Getenv(brokenEnv) != "1" {
		t.Skip("run (and expected to fail) in a child process of TestSuiteCatchesBrokenImplementations")
	}
}

// onlyInParent skips a parent test in a child process.
func onlyInParent(t *testing.T) {
	t.Helper()
	if os.Getenv(brokenEnv) != "" {
		t.Skip("in the child process")
	}
}

// hung is what a child says when the watchdog had to end one of its cases.
const hung = "hung: still running"

// childCase is a test run in a child process, and what its output must
// show.
type childCase struct {
	test string // the test function, with an optional -run suffix for its subtests
	// name is the parent's subtest, when not the test function (several
	// cases run one function).
	name   string
	ok     bool     // the child must pass (declarations), not fail
	want   []string // what the child's output must say
	absent []string // what the child's output must not say
	// fast is a case that must fail within bound of its start.
	fast  string
	bound time.Duration
}

// runChildren runs each case in a child process, from a parallel subtest
// of t named after it, and checks its output; no child's output may say
// any of absent.
func runChildren(t *testing.T, cases []childCase, absent ...string) {
	t.Helper()
	onlyInParent(t)
	// A child that waits out a case's timeout mostly sleeps: it starts
	// now, beside the others, rather than in a slot of its own.
	early := map[int]*child{}
	for i, tc := range cases {
		if tc.fast != "" {
			early[i] = startChild(t, tc.test)
		}
	}
	for i, tc := range cases {
		tc.absent = append(tc.absent[:len(tc.absent):len(tc.absent)], absent...)
		name := tc.name
		if name == "" {
			name, _, _ = strings.Cut(tc.test, "/")
		}
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			ch := early[i]
			if ch == nil {
				ch = startChild(t, tc.test)
			}
			tc.check(t, ch)
		})
	}
}

// check waits for ch, tc's child, and checks its exit and its output.
func (tc childCase) check(t *testing.T, ch *child) {
	t.Helper()
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
}

// child is a test running in a child process with brokenEnv set: the test
// function, matched exactly, with an optional -run suffix for its
// subtests.
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
