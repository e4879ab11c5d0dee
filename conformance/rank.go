package conformance

import (
	"context"
	"fmt"
	"runtime/debug"
	"slices"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/xpu-go/xpu/comm"
)

// TestCommRank runs the communicator suite SPMD-style: every process of a
// job calls it with its own rank of the same communicator, the same
// options and the same -test.run filter, and each process checks its part.
// It is the form of TestComm for backends with one rank per process, such
// as MPI under mpirun or a TCP job started by a launcher.
//
// Each requirement is one case, named as in TestComm without the group
// size ("comm/p2p/send-recv", "comm/coll/allreduce"). Collective cases
// and the cases that depend on the communicator's size run on every rank
// (n is Size()); point-to-point cases whose cost grows with the number of
// ranks run on the first min(Size(), MaxRanks) ranks, and cases written
// for a fixed number of ranks (a sender and a receiver) on that many; the
// other ranks take no part in them. A case that needs more ranks than the
// communicator has is skipped, saying so. Cases that must control several
// ranks from one place — closing a rank, watching its peers, counting the
// goroutines of a closed group — cannot run in a job and are skipped with
// the reason; TestComm over in-process endpoints checks them.
//
// After every case the ranks get back in step by a collective that also
// tells each rank which ranks failed the case (an Allgather of verdicts).
// The run stops at the first case that failed on any rank, on every rank,
// so that a failure cannot spill into the cases after it, and each rank
// reports where it stopped and which ranks failed. A rank cannot tell the
// others that it failed in the middle of a case: they wait for what it no
// longer sends until the case's Timeout, and the collective that brings
// them back in step is bounded too, so a failed or hung rank ends the run
// within about Timeout plus the watchdog's grace period.
//
// Declarations (Declare) name cases as above; a declaration of a TestComm
// case of one group size ("comm/coll/allreduce/n=4") is accepted, and
// applies when the case runs with that many ranks, so a backend can pass
// the same options to both suites. MaxRanks bounds the point-to-point
// cases described above; Timeout and the watchdog work as in TestComm.
//
// Buffers are Go memory (memspace.FromSlice). TestCommRank does not close
// c. Every process must call it the same way: a process that runs other
// cases, or other collectives on c meanwhile, breaks the lockstep and the
// run stops with an error.
func TestCommRank(t *testing.T, c comm.Comm, opts ...Option) {
	t.Helper()
	s := newSuite(t, "comm", opts)
	defer s.finish(t)
	if c == nil {
		t.Fatal("conformance: TestCommRank needs this process's rank of a communicator; got nil")
	}
	size, me := c.Size(), c.Rank()
	if size < 1 || me < 0 || me >= size {
		t.Fatalf("conformance: the communicator says it is rank %d of %d", me, size)
	}
	j := &job{s: s, cm: c, me: me, size: size}
	root := s.root()
	for _, sec := range commCases(s.cfg) {
		if sec.name == "" {
			for _, rc := range sec.cases {
				j.runCase(t, root, rc)
			}
			continue
		}
		if j.stopped != "" {
			s.see(root.path+"/"+sec.name, false) // not run: declarations below it cannot be checked
			continue
		}
		root.group(t, sec.name, func(t *testing.T, gn node) {
			for _, rc := range sec.cases {
				j.runCase(t, gn, rc)
			}
		})
	}
	if j.stopped != "" {
		t.Errorf("conformance: rank %d of %d stopped after %s; the cases after it did not run", me, size, j.stopped)
	}
}

// rankCase is one requirement of the communicator suite, checked by a body
// that every rank runs with its own communicator: in a goroutine per rank
// of an in-process group (TestComm), or once per process (TestCommRank).
// In the body, me is the rank and n the number of ranks taking part;
// ranks me >= n do not run it.
type rankCase struct {
	name string // last element of the case's name
	// ns are the group sizes TestComm runs the case with, each a subtest
	// "n=K". The smallest is the fewest ranks the case needs.
	ns []int
	// span is how many ranks take part in TestCommRank: 0 for all of them
	// (n is Size()); k > 0 for ranks 0 to k-1 (n is k).
	span int
	// capped limits a case of span 0 to the first MaxRanks ranks in
	// TestCommRank: point-to-point cases whose cost grows with n.
	capped bool
	body   func(ctx context.Context, me, n int, cm comm.Comm) error
	// needs, when set, says why the case cannot run on a communicator
	// ("" when it can): an optional interface it lacks. The case is then
	// skipped with that reason.
	needs func(comm.Comm) string
	// stall is the rule a rank most likely broke when it is still waiting
	// in the body as the case's context ends: failures that end with the
	// context quote it.
	stall rule

	// A case that must control several ranks from one place has no body.
	// TestComm runs group for each size of ns — or once, with no "n="
	// level in its name, when single is set — and TestCommRank skips the
	// case, giving groupOnly as the reason.
	group     func(c *tcase, g groupFactory, n int)
	single    bool
	groupOnly string
}

// section is a group of cases ("p2p", "coll"); the section named "" holds
// cases directly under the suite.
type section struct {
	name  string
	cases []rankCase
}

// least returns the fewest ranks rc needs.
func (rc rankCase) least() int {
	if len(rc.ns) == 0 {
		return 1
	}
	return slices.Min(rc.ns)
}

// groupMode runs the cases as TestComm does: one subtest per group size,
// each rank of a fresh group in its own goroutine.
func groupMode(t *testing.T, s *suite, g groupFactory, secs []section) {
	t.Helper()
	root := s.root()
	for _, sec := range secs {
		if sec.name == "" {
			for _, rc := range sec.cases {
				groupCase(t, root, g, rc)
			}
			continue
		}
		root.group(t, sec.name, func(t *testing.T, gn node) {
			for _, rc := range sec.cases {
				groupCase(t, gn, g, rc)
			}
		})
	}
}

func groupCase(t *testing.T, parent node, g groupFactory, rc rankCase) {
	t.Helper()
	if rc.single {
		parent.run(t, rc.name, func(c *tcase) { rc.group(c, g, 0) })
		return
	}
	parent.group(t, rc.name, func(t *testing.T, gn node) {
		for _, n := range rc.ns {
			gn.run(t, fmt.Sprintf("n=%d", n), func(c *tcase) {
				if rc.body == nil {
					rc.group(c, g, n)
					return
				}
				ranks := g.open(c, n)
				if rc.needs != nil {
					if why := rc.needs(ranks[0]); why != "" {
						c.Skip(why)
					}
				}
				runBody(c, ranks, rc.stall, rc.body)
			})
		}
	})
}

// runBody runs body on every rank of an in-process group; stall is the
// rule a rank still waiting when the case's context ends most likely broke.
func runBody(c *tcase, ranks []comm.Comm, stall rule, body func(ctx context.Context, me, n int, cm comm.Comm) error) bool {
	c.Helper()
	n := len(ranks)
	return runRanks(c, ranks, stall, func(ctx context.Context, me int, cm comm.Comm) error { return body(ctx, me, n, cm) })
}

// callBody runs body, turning a panic into an error.
func callBody(ctx context.Context, body func(ctx context.Context, me, n int, cm comm.Comm) error, me, n int, cm comm.Comm) (err error) {
	defer func() {
		if v := recover(); v != nil {
			err = fmt.Errorf("panic: %v\n%s", v, debug.Stack())
		}
	}()
	return body(ctx, me, n, cm)
}

// job is the state of one rank's TestCommRank.
type job struct {
	s        *suite
	cm       comm.Comm
	me, size int
	// stopped says which case the run stopped after, and why; "" while
	// it goes on.
	stopped string
}

// width returns the n a case runs with in this job, or why it cannot run.
func (j *job) width(rc rankCase) (int, string) {
	n := rc.span
	switch {
	case n > 0:
		if j.size < n {
			return 0, fmt.Sprintf("needs %d ranks; the communicator has %d", n, j.size)
		}
		return n, ""
	case rc.capped:
		n = min(j.size, j.s.cfg.maxRanks)
	default:
		n = j.size
	}
	if least := rc.least(); n < least {
		if n < j.size {
			return 0, fmt.Sprintf("needs %d ranks; MaxRanks(%d) lets it use %d", least, j.s.cfg.maxRanks, n)
		}
		return 0, fmt.Sprintf("needs at least %d ranks; the communicator has %d", least, j.size)
	}
	return n, ""
}

// runCase runs rc as a case below parent, unless the run has stopped.
func (j *job) runCase(t *testing.T, parent node, rc rankCase) {
	t.Helper()
	full := parent.path + "/" + rc.name
	if !rc.single {
		// TestComm's names for this requirement are known, so that one
		// set of declarations serves both suites.
		for _, k := range rc.ns {
			j.s.see(fmt.Sprintf("%s/n=%d", full, k), true)
		}
		if n, why := j.width(rc); rc.body != nil && why == "" {
			j.s.see(fmt.Sprintf("%s/n=%d", full, n), true)
		}
	}
	if j.stopped != "" {
		j.s.see(full, true) // not run, but a case of the suite
		return
	}
	var ran atomic.Pointer[tcase]
	parent.run(t, rc.name, func(c *tcase) {
		ran.Store(c)
		j.step(c, rc)
	})
	// A case the watchdog gave up on may still be exchanging messages: the
	// ranks are out of step, so the cases after it would fail for no fault
	// of their own.
	if c := ran.Load(); c != nil && c.late.Load() != nil && j.stopped == "" {
		j.stopped = full + ", which hung"
	}
}

// step is one case on this rank: its part of the body, then the
// collective that brings the ranks back in step.
func (j *job) step(c *tcase, rc rankCase) {
	if rc.body == nil {
		c.Skipf("runs in TestComm only: %s", rc.groupOnly)
	}
	n, why := j.width(rc)
	if why == "" && rc.needs != nil {
		why = rc.needs(j.cm)
	}
	if why != "" {
		c.Skip(why)
	}
	if reason, ok := j.s.declared(fmt.Sprintf("%s/n=%d", c.name, n)); ok {
		c.Skipf("declared by the implementation: %s", reason)
	}
	expired := false
	if j.me < n {
		if err := callBody(c.ctx, rc.body, j.me, n, j.cm); err != nil {
			hint := ""
			if isCtxErr(err) {
				expired = true
				hint = " (the case's context expired: if another rank failed this case, its output says how"
				if rc.stall.text != "" {
					hint += "; otherwise, what this rank waited for never came: " + rc.stall.String()
				}
				hint += ")"
			}
			c.Errorf("rank %d of %d: %v%s", j.me, j.size, err, hint)
		}
	}
	j.inStep(c, expired)
}

// Verdicts of a rank on a case, exchanged by inStep.
const (
	passed   int32 = iota
	failed         // the case failed on the rank
	timedOut       // it failed only because its context expired: often, waiting for a rank that failed
)

// inStep brings the ranks back in step after a case and learns which of
// them failed it: every rank contributes its verdict to an Allgather. It
// is bounded by the case's deadline plus three quarters of the grace
// period, so that a rank that waited out the case's timeout for a failed
// peer still meets it, and the watchdog does not fire first.
func (j *job) inStep(c *tcase, expired bool) {
	deadline, _ := c.ctx.Deadline()
	ctx, cancel := context.WithDeadline(context.Background(), deadline.Add(c.cfg.grace*3/4))
	defer cancel()
	verdict := []int32{passed}
	switch {
	case expired:
		verdict[0] = timedOut
	case c.Failed():
		verdict[0] = failed
	}
	all := make([]int32, j.size)
	for i := range all {
		all[i] = -1
	}
	err := comm.Allgather(ctx, j.cm, view(verdict), view(all))
	if err == nil && all[j.me] != verdict[0] {
		err = fmt.Errorf("it gave %d as this rank's verdict, which is %d", all[j.me], verdict[0])
	}
	var bad, late []int
	for r, v := range all {
		if err != nil {
			break
		}
		switch v {
		case passed:
		case failed:
			bad = append(bad, r)
		case timedOut:
			late = append(late, r)
		default:
			err = fmt.Errorf("it gave %d as the verdict of rank %d", v, r)
		}
	}
	switch {
	case err != nil:
		j.stopped = c.name + ", out of step with the other ranks"
		c.Errorf("rank %d of %d: could not get back in step with the other ranks after this case (Allgather of the ranks' verdicts: %v): "+
			"another rank failed or hung in this case (its output says how), or the collectives are broken; "+
			"every rank stops at the first failed case", j.me, j.size, err)
	case len(bad) > 0 || len(late) > 0:
		var who []string
		if len(bad) > 0 {
			who = append(who, fmt.Sprintf("failed on rank(s) %v", bad))
		}
		if len(late) > 0 {
			who = append(who, fmt.Sprintf("timed out on rank(s) %v", late))
		}
		j.stopped = fmt.Sprintf("%s, which %s", c.name, strings.Join(who, " and "))
		if verdict[0] == passed {
			c.Logf("rank %d of %d passed this case; it %s, and every rank stops here", j.me, j.size, strings.Join(who, " and "))
		}
	}
}
