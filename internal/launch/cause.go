package launch

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/xpu-go/xpu/internal/rankevent"
)

// The root cause of a failed job (docs/adr/0038-root-cause-first.md).
//
// Once every rank has been reaped, Run reads what the ranks reported (a
// peer lost, when, and whether it said goodbye: package rankevent) and
// decides, from these facts and the ranks' exits alone:
//
//   - a rank failed of its own accord when it exited non-zero, was killed
//     by a signal Run did not send, or could not be started;
//   - a rank left early when it did not fail so (it exited 0, or Run
//     stopped it) but a witness had lost it: vanished without a goodbye,
//     for one that exited 0 (a goodbye before exit 0 is a normal end);
//     either way before Run signalled anyone, for one Run stopped. A
//     witness is a rank that failed, or one Run stopped that had reported
//     the loss before Run signalled anyone;
//   - a rank that failed is a consequence when the first peer it lost
//     failed, left early, or was stopped by Run;
//   - the root cause is, of the ranks that failed or left early and are
//     not consequences, the first by time: the earliest of its exit (for
//     a rank Run did not stop) and the first report of its loss. When
//     every one of them is a consequence (ranks that lost each other), it
//     is the first of them all by the same time.
//
// A rank is never blamed on a guess: without reports (a program that does
// not use the procs communicator) the root cause is the first rank to fail
// by its exit, which Linux tells to the moment (waitid), not to the moment
// its last output was read.

// explain decides the root cause of the failed job, fills re and j.res
// with it, and reports it: the cause with its last lines of stderr, then
// the other ranks that failed, as consequences where a report shows it,
// and the ranks Run stopped.
func (j *job) explain(re *RankError) {
	ranks := j.res.Ranks
	if j.events != "" {
		evs, _ := rankevent.Read(j.events) // what could be read; a rank that could not write falls back on its exit
		attachLosses(ranks, evs)
	}
	cause := rootCause(ranks, j.first, j.stoppedAt)
	j.res.Cause = cause
	re.Status = ranks[cause]
	re.Others, re.Stopped = 0, 0
	for _, st := range ranks {
		switch {
		case st.Rank == cause:
		case st.failed():
			re.Others++
		case st.Stopped:
			re.Stopped++
		}
	}
	if j.spec.LogPrefix != "" {
		for _, l := range j.report(cause) {
			j.logf("%s", l)
		}
	}
}

// attachLosses records in each rank's status the first peer it reported
// lost before it exited.
func attachLosses(ranks []RankStatus, evs []rankevent.Event) {
	slices.SortStableFunc(evs, func(a, b rankevent.Event) int { return a.Time.Compare(b.Time) })
	for _, e := range evs {
		if e.Rank >= len(ranks) || e.Peer >= len(ranks) || e.Rank == e.Peer {
			continue
		}
		st := &ranks[e.Rank]
		if st.Lost != nil || (!st.Exited.IsZero() && e.Time.After(st.Exited)) {
			continue
		}
		st.Lost = &PeerLoss{Peer: e.Peer, Goodbye: e.Kind == rankevent.PeerClosed, At: e.Time, Reason: e.Reason}
	}
}

// ownFailure reports whether a rank failed of its own accord.
func ownFailure(st RankStatus) bool { return !st.OK() && !st.Stopped }

// witness reports whether a rank's report of a lost peer counts: it failed
// of its own accord, or it reported the loss before Run signalled anyone
// (a rank stopped while it ended of the loss, in its deferred Close).
func witness(q RankStatus, stoppedAt time.Time) bool {
	return q.Lost != nil && (ownFailure(q) || (q.Stopped && !stoppedAt.IsZero() && q.Lost.At.Before(stoppedAt)))
}

// rootCause marks the ranks that left early and returns the root cause;
// first is the first rank seen to fail, stoppedAt when Run first signalled
// the ranks (zero when it did not).
func rootCause(ranks []RankStatus, first int, stoppedAt time.Time) int {
	// lostAt[p] is when a rank that failed first reported p lost.
	lostAt := make([]time.Time, len(ranks))
	for _, q := range ranks {
		if !witness(q, stoppedAt) {
			continue
		}
		p := &ranks[q.Lost.Peer]
		if lostAt[p.Rank].IsZero() || q.Lost.At.Before(lostAt[p.Rank]) {
			lostAt[p.Rank] = q.Lost.At
		}
		switch {
		case ownFailure(*p) || p.Pid == 0:
		case p.Stopped:
			p.LeftEarly = p.LeftEarly || (!stoppedAt.IsZero() && q.Lost.At.Before(stoppedAt))
		case !q.Lost.Goodbye:
			p.LeftEarly = true
		}
	}
	consequence := func(q RankStatus) bool {
		if !ownFailure(q) || q.Lost == nil {
			return false
		}
		p := ranks[q.Lost.Peer]
		return p.failed() || p.Stopped
	}
	// sign is when a rank's end first showed.
	sign := func(p RankStatus) time.Time {
		t := lostAt[p.Rank]
		if !p.Stopped && (t.IsZero() || p.Exited.Before(t)) {
			t = p.Exited // zero for a rank never started: the first
		}
		return t
	}
	best := func(keep func(RankStatus) bool) int {
		cause := -1
		for _, p := range ranks {
			if !p.failed() || !keep(p) {
				continue
			}
			if cause < 0 || sign(p).Before(sign(ranks[cause])) {
				cause = p.Rank
			}
		}
		return cause
	}
	if c := best(func(p RankStatus) bool { return !consequence(p) }); c >= 0 {
		return c
	}
	if c := best(func(RankStatus) bool { return true }); c >= 0 {
		return c
	}
	return first
}

// report returns the lines that explain the failure whose root cause is
// rank cause.
func (j *job) report(cause int) []string {
	ranks := j.res.Ranks
	st := ranks[cause]
	var b strings.Builder
	fmt.Fprintf(&b, "rank %d failed first: %s", cause, st)
	if st.Panic != "" {
		fmt.Fprintf(&b, " (%s)", st.Panic)
	}
	var by []int
	var at time.Time
	for _, q := range ranks {
		if witness(q, j.stoppedAt) && q.Lost.Peer == cause {
			by = append(by, q.Rank)
			if at.IsZero() || q.Lost.At.Before(at) {
				at = q.Lost.At
			}
		}
	}
	if at.IsZero() || (!st.Stopped && !st.Exited.IsZero() && st.Exited.Before(at)) {
		at = st.Exited
	}
	if !at.IsZero() {
		fmt.Fprintf(&b, ", %v into the job", at.Sub(j.began).Round(time.Millisecond))
	}
	if len(by) > 0 {
		fmt.Fprintf(&b, "; %s lost it", rankList(by))
	}
	prefix := fmt.Sprintf("  [%d] ", cause)
	var lines []string
	switch {
	case st.Pid == 0:
		lines = append(lines, b.String())
	case len(st.Tail) == 0:
		lines = append(lines, b.String()+"; nothing on its stderr")
	default:
		lines = append(lines, b.String()+"; the last lines of its stderr:")
		if st.Panic != "" && !slices.Contains(st.Tail, st.Panic) {
			lines = append(lines, prefix+st.Panic, prefix+"…")
		}
		for _, l := range st.Tail {
			lines = append(lines, prefix+l)
		}
	}
	for _, q := range ranks {
		switch {
		case q.Rank == cause:
		case q.failed() && q.Lost != nil && (ranks[q.Lost.Peer].failed() || ranks[q.Lost.Peer].Stopped):
			lines = append(lines, fmt.Sprintf("rank %d: peer lost: rank %d %s (rank %d: %s)",
				q.Rank, q.Lost.Peer, ended(ranks[q.Lost.Peer], q.Lost), q.Rank, q))
		case q.failed():
			lines = append(lines, fmt.Sprintf("rank %d also failed: %s", q.Rank, q))
		case q.Stopped:
			lines = append(lines, fmt.Sprintf("rank %d: stopped: %s", q.Rank, q))
		}
	}
	return lines
}

// ended says how rank p ended, as a rank that lost it by loss saw it.
func ended(p RankStatus, loss *PeerLoss) string {
	how := "vanished"
	if loss.Goodbye {
		how = "closed its communicator"
	}
	switch {
	case p.LeftEarly && p.Stopped:
		return how + " while the job ran"
	case p.Stopped:
		return "was stopped by the launcher"
	case p.Err != nil:
		return "ended (" + p.Err.Error() + ") while the job ran"
	case p.Signal != nil:
		return "was killed by signal " + SignalName(p.Signal) + " while the job ran"
	}
	return fmt.Sprintf("exited with status %d while the job ran", p.ExitCode)
}
