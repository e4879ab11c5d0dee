package conformance

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"runtime"
	"runtime/debug"
	"runtime/pprof"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// caseLabel is the pprof label that marks the goroutines of a case: its
// body's goroutine and every goroutine started from it, the backend's
// included (goroutines inherit their creator's labels). Its value is the
// case's test name.
const caseLabel = "xpu-conformance-case"

// watch runs body as the case c under a watchdog, as
// golang.org/x/net/nettest does, and in three steps:
//
//   - body runs on a goroutine of its own, labelled with the case's name,
//     with a context that expires after the Timeout;
//   - a body still running a grace period after that is hung: the case
//     fails, naming itself and showing the stacks of its goroutines, and
//     the test goes on without waiting for it — its cleanups run (closing
//     what the factory made, which may stop it), and the goroutines of the
//     case still running once they have are reported, as they cannot be
//     stopped;
//   - cleanups that do not finish a grace period after the body returned
//     (or was given up on) hang the test itself, which cannot be given up
//     on: the watchdog then ends the test binary with every goroutine's
//     stack and the case's name, instead of hanging until go test's own
//     timeout.
//
// A panic of the body fails the case with its stack; the suite goes on.
func watch(t *testing.T, c *tcase, body func(c *tcase)) {
	cfg := c.cfg
	start := time.Now()
	ctx, cancel := context.WithTimeout(context.Background(), cfg.timeout)
	c.ctx = ctx
	hung := start.Add(cfg.timeout + cfg.grace)

	done := make(chan struct{})
	var (
		panicked any
		stack    []byte
		given    bool // the body was given up on
		stop     = func() {}
	)
	// Registered first, so it runs last: after the factory's cleanups.
	t.Cleanup(func() {
		stop()
		cancel()
		if given {
			c.late.Load().settle(t, done, hung.Add(cfg.grace/2))
		}
	})
	go func() {
		defer close(done)
		defer func() {
			if v := recover(); v != nil {
				panicked, stack = v, debug.Stack()
				if l := c.late.Load(); l != nil {
					l.add(fmt.Sprintf("panic: %v\n%s", v, stack))
				}
			}
		}()
		pprof.SetGoroutineLabels(pprof.WithLabels(ctx, pprof.Labels(caseLabel, t.Name())))
		c.TestBody(body)
	}()
	timer := time.NewTimer(time.Until(hung))
	defer timer.Stop()
	select {
	case <-done:
		if panicked != nil {
			t.Errorf("conformance: case %s panicked: %v\n%s", t.Name(), panicked, stack)
		}
		stop = exitWatchdog(t.Name(), max(time.Until(hung), cfg.grace), "its body returned, in its cleanups (a Close never returns)")
	case <-timer.C:
		given = true
		c.late.Store(&lateLog{name: t.Name()})
		t.Errorf("conformance: case %s hung: still running %v after it started, %v past its context's deadline "+
			"(a blocking call ignores its context or never returns, or a Close never returns); the suite goes on without it. "+
			"Its goroutines:\n%s",
			t.Name(), time.Since(start).Round(time.Millisecond), cfg.grace, caseGoroutines(t.Name()))
		stop = exitWatchdog(t.Name(), cfg.grace, "it was given up on, in its cleanups (a Close never returns)")
	}
}

// TestBody runs body as the case c. It is named as a test function is so
// that testify's error traces, which stop at the first such function (or
// at testing.tRunner), end here rather than at the bottom of the case's
// goroutine.
func (c *tcase) TestBody(body func(c *tcase)) { body(c) }

// lateLog keeps what a case the watchdog gave up on reports afterwards,
// until the case's last cleanup logs it; then it drops it, as the test has
// ended.
type lateLog struct {
	name   string
	mu     sync.Mutex
	lines  []string
	closed bool
}

// add keeps one report, unless the log is closed.
func (l *lateLog) add(s string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if !l.closed {
		l.lines = append(l.lines, s)
	}
}

// settle waits until the body has returned or until the deadline, logs
// what it reported after it was given up on, and fails t with the case's
// goroutines that are still running.
func (l *lateLog) settle(t *testing.T, done <-chan struct{}, deadline time.Time) {
	timer := time.NewTimer(time.Until(deadline))
	defer timer.Stop()
	select {
	case <-done:
	case <-timer.C:
	}
	l.mu.Lock()
	lines := l.lines
	l.closed = true
	l.mu.Unlock()
	if len(lines) > 0 {
		t.Logf("after it was given up on, the case reported:\n%s", strings.Join(lines, "\n"))
	}
	if left := caseGoroutines(l.name); left != "" {
		t.Errorf("conformance: case %s left goroutines running after its cleanups; they cannot be stopped, "+
			"and may disturb the cases after it:\n%s", l.name, left)
	}
}

// The methods of tcase that report. Once the watchdog has given up on the
// case, its test may have ended: they keep the report for the case's last
// cleanup, and those that stop the case end the calling goroutine.

func (c *tcase) Errorf(format string, args ...any) {
	c.T.Helper()
	if l := c.late.Load(); l != nil {
		l.add(fmt.Sprintf(format, args...))
		return
	}
	c.T.Errorf(format, args...)
}

func (c *tcase) Error(args ...any) {
	c.T.Helper()
	if l := c.late.Load(); l != nil {
		l.add(fmt.Sprint(args...))
		return
	}
	c.T.Error(args...)
}

func (c *tcase) Logf(format string, args ...any) {
	c.T.Helper()
	if l := c.late.Load(); l != nil {
		l.add(fmt.Sprintf(format, args...))
		return
	}
	c.T.Logf(format, args...)
}

func (c *tcase) Log(args ...any) {
	c.T.Helper()
	if l := c.late.Load(); l != nil {
		l.add(fmt.Sprint(args...))
		return
	}
	c.T.Log(args...)
}

func (c *tcase) Fail() {
	if c.late.Load() != nil {
		return
	}
	c.T.Fail()
}

func (c *tcase) FailNow() {
	if c.late.Load() != nil {
		runtime.Goexit()
	}
	c.T.FailNow()
}

func (c *tcase) Fatalf(format string, args ...any) {
	c.T.Helper()
	c.Errorf(format, args...)
	c.FailNow()
}

func (c *tcase) Fatal(args ...any) {
	c.T.Helper()
	c.Error(args...)
	c.FailNow()
}

func (c *tcase) SkipNow() {
	if c.late.Load() != nil {
		runtime.Goexit()
	}
	c.T.SkipNow()
}

func (c *tcase) Skipf(format string, args ...any) {
	c.T.Helper()
	c.Logf(format, args...)
	c.SkipNow()
}

func (c *tcase) Skip(args ...any) {
	c.T.Helper()
	c.Log(args...)
	c.SkipNow()
}

// caseGoroutines returns the stacks of the running goroutines labelled as
// the case's, or "" when there are none.
func caseGoroutines(name string) string {
	var buf bytes.Buffer
	if err := pprof.Lookup("goroutine").WriteTo(&buf, 1); err != nil {
		return fmt.Sprintf("(no goroutine profile: %v)", err)
	}
	want := strconv.Quote(caseLabel) + ":" + strconv.Quote(name)
	var out []string
	// Records of the debug=1 profile are separated by blank lines; each has
	// a line "# labels: {…}" when its goroutines carry labels.
	for _, rec := range strings.Split(buf.String(), "\n\n") {
		if strings.HasPrefix(rec, "goroutine profile:") {
			_, rec, _ = strings.Cut(rec, "\n") // the header
		}
		if strings.Contains(rec, "# labels: ") && strings.Contains(rec, want) {
			out = append(out, strings.TrimSpace(rec))
		}
	}
	return strings.Join(out, "\n\n")
}

// exitWatchdog ends the process when stop has not been called within d: a
// test whose cleanups hang cannot go on.
func exitWatchdog(name string, d time.Duration, what string) (stop func()) {
	timer := time.AfterFunc(d, func() {
		buf := make([]byte, 1<<20)
		for {
			n := runtime.Stack(buf, true)
			if n < len(buf) || len(buf) >= 64<<20 {
				buf = buf[:n]
				break
			}
			buf = make([]byte, 2*len(buf))
		}
		fmt.Fprintf(os.Stderr, "conformance: case %s hung: still running %v after %s; "+
			"a test cannot go on past its cleanups, so this ends the test binary\n\ngoroutines:\n%s\n", name, d, what, buf)
		os.Exit(2)
	})
	return func() { timer.Stop() }
}
