package conformance

import (
	"context"
	"fmt"
	"os"
	"runtime"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/xpu-go/xpu/executor"
)

// DefaultTimeout is the time a case may run before its context expires.
// A case still running a grace period after that (DefaultGrace, or a
// quarter of a shorter Timeout) is taken to be hung: the watchdog prints
// every goroutine's stack and ends the test binary, naming the case.
const (
	DefaultTimeout = 60 * time.Second
	DefaultGrace   = 15 * time.Second
)

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
// Names are the suite-relative case names printed by `go test -v`, such as
// "space/free/sub-slice" or "comm/coll/allreduce/n=7". A declaration that
// names no case of a suite that ran fails that suite, so a typo cannot
// silently keep a case running (or a stale declaration linger). An empty
// reason fails the suite.
func Declare(name, reason string) Option {
	return Option{func(c *config) {
		c.declared[strings.Trim(name, "/")] = reason
	}}
}

// Timeout sets how long one case may run before its context expires; the
// watchdog ends the binary a grace period later (a quarter of d, at least a
// second and at most DefaultGrace). The default is DefaultTimeout; raise it
// for slow devices, never to hide a hang.
func Timeout(d time.Duration) Option {
	return Option{func(c *config) {
		if d > 0 {
			c.timeout = d
			c.grace = min(max(d/4, time.Second), DefaultGrace)
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

type config struct {
	declared map[string]string
	timeout  time.Duration
	grace    time.Duration
	maxRanks int
	streams  func(t *testing.T) executor.Streamer
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

// suite runs the cases of one area ("space", "comm", …) and keeps track of
// the case names it saw, to check the declarations against them.
type suite struct {
	cfg  *config
	area string

	mu   sync.Mutex
	seen map[string]bool // case or group name -> its body ran (groups) / true (cases)
}

func newSuite(t *testing.T, area string, opts []Option) *suite {
	t.Helper()
	s := &suite{cfg: newConfig(opts), area: area, seen: map[string]bool{}}
	for name, reason := range s.cfg.declared {
		if s.owns(name) && strings.TrimSpace(reason) == "" {
			t.Errorf("conformance: Declare(%q) has no reason; say why the implementation cannot do it", name)
		}
	}
	return s
}

// owns reports whether a declared name belongs to this suite's area.
func (s *suite) owns(name string) bool {
	return name == s.area || strings.HasPrefix(name, s.area+"/")
}

func (s *suite) see(name string, ran bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if ran || !s.seen[name] {
		s.seen[name] = ran
	}
}

// declared returns the reason of the declaration covering name.
func (s *suite) declared(name string) (string, bool) {
	for d := name; d != ""; {
		if r, ok := s.cfg.declared[d]; ok {
			return r, true
		}
		i := strings.LastIndexByte(d, '/')
		if i < 0 {
			break
		}
		d = d[:i]
	}
	return "", false
}

// finish fails t for every declaration of this area that names no case.
// A declaration below a group that did not run (filtered by -run, or itself
// declared) cannot be checked and passes.
func (s *suite) finish(t *testing.T) {
	t.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	var unknown []string
	for d := range s.cfg.declared {
		if !s.owns(d) || s.known(d) {
			continue
		}
		unknown = append(unknown, d)
	}
	sort.Strings(unknown)
	for _, d := range unknown {
		t.Errorf("conformance: Declare(%q) names no case of the %s suite (cases are named as `go test -v` prints them, e.g. %q)",
			d, s.area, s.example())
	}
}

func (s *suite) known(d string) bool {
	if _, ok := s.seen[d]; ok {
		return true
	}
	for name, ran := range s.seen {
		if strings.HasPrefix(name, d+"/") {
			return true // d is a group of cases
		}
		if !ran && strings.HasPrefix(d, name+"/") {
			return true // below a group whose cases were not listed
		}
	}
	return false
}

func (s *suite) example() string {
	names := make([]string, 0, len(s.seen))
	for n := range s.seen {
		names = append(names, n)
	}
	sort.Strings(names)
	if len(names) == 0 {
		return s.area + "/…"
	}
	return names[0]
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
	t.Run(n.runName(name), func(t *testing.T) {
		if reason, ok := n.s.declared(full); ok {
			t.Skipf("declared by the implementation: %s", reason)
		}
		n.s.see(full, true)
		body(t, node{s: n.s, path: full})
	})
}

// tcase is a running case: its *testing.T, a context that expires at the
// case's timeout, and its full suite-relative name.
type tcase struct {
	*testing.T
	ctx  context.Context
	name string
	cfg  *config
}

// run runs body as the case name, under a watchdog: body's context expires
// at the configured timeout, and a case (cleanups included) still running a
// grace period later ends the test binary with every goroutine's stack. It
// returns whether the case passed (or was skipped).
func (n node) run(t *testing.T, name string, body func(c *tcase)) bool {
	t.Helper()
	full := n.path + "/" + name
	n.s.see(full, true)
	return t.Run(n.runName(name), func(t *testing.T) {
		if reason, ok := n.s.declared(full); ok {
			t.Skipf("declared by the implementation: %s", reason)
		}
		cfg := n.s.cfg
		ctx, cancel := context.WithTimeout(context.Background(), cfg.timeout)
		stop := watchdog(t.Name(), cfg.timeout+cfg.grace)
		// Registered first, so it runs last: after the factory's cleanups.
		t.Cleanup(func() {
			stop()
			cancel()
		})
		body(&tcase{T: t, ctx: ctx, name: full, cfg: cfg})
	})
}

// watchdog ends the process when stop has not been called within d: a
// backend that ignores its context would otherwise hang the test binary
// until `go test -timeout`, with no word of which case hung.
func watchdog(name string, d time.Duration) (stop func()) {
	timer := time.AfterFunc(d, func() {
		buf := make([]byte, 1<<20)
		buf = buf[:runtime.Stack(buf, true)]
		msg := fmt.Sprintf("conformance: case %s hung: still running %v after it started, past its context's deadline "+
			"(a blocking call ignores its context, or a Close never returns)\n\ngoroutines:\n%s", name, d, buf)
		fmt.Fprintln(os.Stderr, msg)
		os.Exit(2)
	})
	return func() { timer.Stop() }
}

// within returns a context for a bounded wait inside a case: it expires
// after d or with the case.
func (c *tcase) within(d time.Duration) (context.Context, context.CancelFunc) {
	return context.WithTimeout(c.ctx, d)
}
