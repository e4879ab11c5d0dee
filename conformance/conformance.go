package conformance

import (
	"context"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/xpu-go/xpu/executor"
	"github.com/xpu-go/xpu/memspace"
)

// DefaultTimeout is the time a case may run before its context expires,
// and DefaultGrace the time it then has to return: a case still running
// DefaultTimeout+DefaultGrace after it started is hung. The watchdog fails
// it then, naming it and showing its goroutines, and the suite goes on with
// the next case (see Timeout). The slowest case of the repository's
// backends takes about a second under the race detector.
const (
	DefaultTimeout = 10 * time.Second
	DefaultGrace   = DefaultTimeout / 4
)

// maxGrace bounds the grace period of a long Timeout.
const maxGrace = 15 * time.Second

// DefaultMaxRanks is the largest group TestComm asks the factory for.
const DefaultMaxRanks = 9

// Option configures a suite: what the implementation declares it cannot
// do, and the suite's limits. Options are made by Declare, Timeout,
// MaxRanks and Streams.
type Option struct {
	apply func(*config)
}

// Declare states that the implementation does not do what case name (or,
// when name is a prefix such as "comm/p2p", every case under it) checks,
// for reason. The case is skipped with the reason, so it shows in the test
// output; nothing else changes: what the implementation does claim — an
// interface it implements, a path it registers — is tested in full.
//
// A name is either suite-relative, such as "space/free/sub-slice" or
// "comm/coll/allreduce/n=7", and then applies wherever that case runs (for
// every space of a backend under Run), or the whole name `go test -v`
// prints, such as "TestConformance/host/space/free/sub-slice", which
// applies there only. Either is compared as go test prints names, with
// spaces as underscores.
//
// A declaration that names no case of a suite that ran — a name outside
// every suite ("bogus/name"), a typo, a stale declaration, a whole name of
// another test — fails the suite (Run, or the suite called alone), with the
// nearest case names; so does an empty reason. A suite-relative name of a
// suite that did not run (a "comm/…" name given to TestSpace) is not
// checked, so one set of options can serve several suites.
func Declare(name, reason string) Option {
	return Option{func(c *config) {
		c.declared[normName(name)] = reason
	}}
}

// Timeout sets how long one case may run before its context expires
// (default DefaultTimeout). A case that has not returned a grace period
// later — a quarter of d, at least a second and at most 15 s — is hung:
// the watchdog fails it, with its name and its goroutines' stacks, and the
// suite goes on without it. Raise it for slow devices, never to hide a
// hang.
func Timeout(d time.Duration) Option {
	return Option{func(c *config) {
		if d > 0 {
			c.timeout = d
			c.grace = min(max(d/4, time.Second), maxGrace)
		}
	}}
}

// MaxRanks sets the largest group TestComm asks for (default
// DefaultMaxRanks). Groups of 1 to n ranks are tested.
func MaxRanks(n int) Option {
	return Option{func(c *config) {
		if n > 0 {
			c.maxRanks = n
		}
	}}
}

// Streams gives TestTransfer a streamer for the stream-ordered copies
// (transfer.CopyBlockAsync). Without it those cases are skipped, with that
// reason. Run passes the backend's executor when it is a Streamer.
func Streams(newStreamer func(t *testing.T) executor.Streamer) Option {
	return Option{func(c *config) { c.streams = newStreamer }}
}

// sharedRecord shares one record of case names between the suites Run
// calls, which Run checks the declarations against once they have all run.
func sharedRecord(r *record) Option {
	return Option{func(c *config) { c.record = r }}
}

type config struct {
	declared map[string]string // normalized name -> reason
	timeout  time.Duration
	grace    time.Duration
	maxRanks int
	streams  func(t *testing.T) executor.Streamer
	// regionSpaces are the spaces of "comm/onesided/regions" (RegionSpaces).
	regionSpaces []memspace.Space
	// deviceSpaces are the spaces of "comm/device" (DeviceSpaces).
	deviceSpaces []memspace.Space
	record       *record // shared with the other suites of a Run; nil for a suite alone
}

func newConfig(opts []Option) *config {
	c := &config{declared: map[string]string{}, timeout: DefaultTimeout, grace: DefaultGrace, maxRanks: DefaultMaxRanks}
	for _, o := range opts {
		if o.apply != nil {
			o.apply(c)
		}
	}
	return c
}

// suite runs the cases of one area ("space", "comm", …) and records the
// case names it sees, to check the declarations against them.
type suite struct {
	cfg  *config
	area string
	rec  *record
	// owner is set when this suite checks the declarations when it
	// finishes: a suite called alone, or Run's own.
	owner bool
}

func newSuite(t *testing.T, area string, opts []Option) *suite {
	t.Helper()
	s := &suite{cfg: newConfig(opts), area: area}
	s.rec = s.cfg.record
	if s.rec == nil {
		s.rec = newRecord()
		s.owner = true
		for _, name := range sortedKeys(s.cfg.declared) {
			if strings.TrimSpace(s.cfg.declared[name]) == "" {
				t.Errorf("conformance: Declare(%q) has no reason; say why the implementation cannot do it", name)
			}
		}
	}
	s.rec.ran(area)
	return s
}

// see records a name of the suite: a case, or a group whose body ran (or
// did not: filtered out by -run, or declared).
func (s *suite) see(name string, ran bool) { s.rec.see(normName(name), ran) }

// known reports whether the declared name d names something seen.
func (s *suite) known(d string) bool { return s.rec.known(d) }

// declared returns the reason of the declaration covering name, a
// suite-relative name.
func (s *suite) declared(name string) (string, bool) {
	return s.declaredAt(name, "")
}

// declaredAt returns the reason of the declaration covering a case or
// group by its suite-relative name or by its test's whole name.
func (s *suite) declaredAt(name, testName string) (string, bool) {
	for _, n := range []string{normName(name), testName} {
		for d := n; d != ""; {
			if r, ok := s.cfg.declared[d]; ok {
				return r, true
			}
			i := strings.LastIndexByte(d, '/')
			if i < 0 {
				break
			}
			d = d[:i]
		}
	}
	return "", false
}

// finish fails t for every declaration that names no case, when this suite
// is the one that checks them (see Declare).
func (s *suite) finish(t *testing.T) {
	t.Helper()
	if !s.owner {
		return
	}
	for _, d := range sortedKeys(s.cfg.declared) {
		if msg := s.rec.unknown(d); msg != "" {
			t.Errorf("conformance: Declare(%q) %s", d, msg)
		}
	}
}

// node is a point of the case hierarchy: the suite's area, or a group.
type node struct {
	s    *suite
	path string
}

func (s *suite) root() node { return node{s: s, path: s.area} }

// runName is the name given to t.Run: the full name at the root, so that
// `go test -v` prints "TestX/space/alloc/alignment", and the last element
// below a group (whose own t already carries the group's name).
func (n node) runName(name string) string {
	if n.path == n.s.area {
		return n.path + "/" + name
	}
	return name
}

// group runs body as a subtest named name, whose cases are nested. It has
// no watchdog of its own: each case below has one.
func (n node) group(t *testing.T, name string, body func(t *testing.T, g node)) {
	t.Helper()
	full := n.path + "/" + name
	n.s.see(full, false)
	n.s.see(subtestName(t, n.runName(name)), false)
	t.Run(n.runName(name), func(t *testing.T) {
		if reason, ok := n.s.declaredAt(full, t.Name()); ok {
			t.Skipf("declared by the implementation: %s", reason)
		}
		n.s.see(full, true)
		n.s.see(t.Name(), true)
		body(t, node{s: n.s, path: full})
	})
}

// tcase is a running case: its *testing.T, a context that expires at the
// case's timeout, and its full suite-relative name. Its methods that
// report (Errorf, FailNow, Skip, …) stay safe to call from a case the
// watchdog has given up on (see watch).
type tcase struct {
	*testing.T
	ctx  context.Context
	name string
	cfg  *config
	late atomic.Pointer[lateLog] // set once the watchdog has given up on the case
}

// run runs body as the case name, under a watchdog (see watch). It returns
// whether the case passed (or was skipped).
func (n node) run(t *testing.T, name string, body func(c *tcase)) bool {
	t.Helper()
	full := n.path + "/" + name
	n.s.see(full, true)
	n.s.see(subtestName(t, n.runName(name)), true)
	return t.Run(n.runName(name), func(t *testing.T) {
		if reason, ok := n.s.declaredAt(full, t.Name()); ok {
			t.Skipf("declared by the implementation: %s", reason)
		}
		n.s.see(t.Name(), true)
		watch(t, &tcase{T: t, name: full, cfg: n.s.cfg}, body)
	})
}

// within returns a context for a bounded wait inside a case: it expires
// after d or with the case.
func (c *tcase) within(d time.Duration) (context.Context, context.CancelFunc) {
	return context.WithTimeout(c.ctx, d)
}
