package conformance

import (
	"bytes"
	"fmt"
	"maps"
	"runtime/pprof"
	"slices"
	"strconv"
	"strings"
	"testing"

	"go.uber.org/goleak"
)

// Goroutine leaks are checked two ways. A few cases ("stream/close/no-leak",
// "comm/close/no-leak") exercise a fresh component and check that nothing
// it started outlives it (noLeak). And every suite — TestSpace, TestPool,
// TestExecutor, TestStream, TestTransfer, TestComm — notes the goroutines
// running when it starts and ends with the case "<area>/no-leak", which
// fails when goroutines started during the suite are still running after
// every other case has ended and closed what it opened (watchLeaks). So a
// goroutine leaked by a space, an executor, a stream, a transfer path or a
// communicator, on whatever path of its cases, is caught by the suite of
// that concept called on its own, not only by Run.

// noLeak checks, after every cleanup of the case (the factory's included),
// that no goroutine started during the case is left.
func noLeak(c *tcase) {
	c.Helper()
	opt := goleak.IgnoreCurrent()
	c.Cleanup(func() {
		if err := goleak.Find(opt); err != nil {
			c.Errorf("goroutines left after every component of the case was closed: %v", err)
		}
	})
}

// leakCase is the name of the case that ends every suite.
const leakCase = "no-leak"

// watchLeaks notes the goroutines running as a suite starts and returns the
// function the suite defers (after its finish, so that it runs first): it
// runs the case "<area>/no-leak", which fails when a goroutine started
// during the suite is still running once every other case has ended and its
// cleanups have closed what the factory made. The goroutines of what was
// opened before the suite (Run's probe backend, a caller's own) are not
// counted. A suite calls it in one line, after deferring its finish:
//
//	defer s.watchLeaks(t)()
func (s *suite) watchLeaks(t *testing.T) func() {
	t.Helper()
	start := goleak.IgnoreCurrent()
	return func() {
		t.Helper()
		s.root().run(t, leakCase, func(c *tcase) {
			// Checked in a cleanup, on the case's test goroutine, once the
			// body's own goroutine has ended.
			c.Cleanup(func() {
				err := goleak.Find(start)
				if err == nil {
					return
				}
				msg := fmt.Sprintf("goroutines started during the %s suite are still running after every case ended and "+
					"closed the components it opened: a component leaks them (its Close does not stop them, or a call "+
					"starts one that never ends)", s.area)
				switch cases := casesOf(c.T.Name()); len(cases) {
				case 0:
				case 1:
					msg += "; they were started by the case " + cases[0]
				default:
					msg += "; they were started by the cases " + strings.Join(cases, ", ")
				}
				if t.Failed() {
					msg += ". Another case has failed: these may be goroutines it left blocked, so fix it first"
				}
				c.Errorf("%s. Their stacks show where each was created:\n%v", msg, err)
			})
		})
	}
}

// casesOf lists the cases, other than skip, that started a goroutine still
// running: the goroutines a case's body starts, and those they start, carry
// its name in the pprof label caseLabel.
func casesOf(skip string) []string {
	var buf bytes.Buffer
	if err := pprof.Lookup("goroutine").WriteTo(&buf, 1); err != nil {
		return nil
	}
	key := strconv.Quote(caseLabel) + ":"
	seen := map[string]bool{}
	for _, line := range strings.Split(buf.String(), "\n") {
		_, labels, ok := strings.Cut(line, "# labels: ")
		if !ok {
			continue
		}
		_, v, ok := strings.Cut(labels, key)
		if !ok {
			continue
		}
		q, err := strconv.QuotedPrefix(v)
		if err != nil {
			continue
		}
		if name, err := strconv.Unquote(q); err == nil && name != skip {
			seen[name] = true
		}
	}
	return slices.Sorted(maps.Keys(seen))
}
