//go:build unix

package launch

import (
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/xpu-go/xpu/internal/rankevent"
)

// The rules of the root cause, on the facts Run gathers: how and when each
// rank ended, and the peers the ranks reported lost.
func TestRootCauseRules(t *testing.T) {
	t0 := time.Unix(1_700_000_000, 0)
	at := func(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }
	exited := func(r, code, ms int) RankStatus {
		return RankStatus{Rank: r, Pid: 100 + r, ExitCode: code, Exited: at(ms)}
	}
	stopped := func(r, ms int) RankStatus {
		return RankStatus{Rank: r, Pid: 100 + r, ExitCode: -1, Signal: syscall.SIGTERM, Stopped: true, Exited: at(ms)}
	}
	lost := func(r, peer, ms int, goodbye bool) rankevent.Event {
		kind := rankevent.PeerLost
		if goodbye {
			kind = rankevent.PeerClosed
		}
		return rankevent.Event{Time: at(ms), Rank: r, Peer: peer, Kind: kind, Reason: "EOF"}
	}
	for _, c := range []struct {
		name      string
		ranks     []RankStatus
		events    []rankevent.Event
		first     int // the first rank seen to fail
		stoppedAt int // ms; 0: Run signalled no rank
		cause     int
		leftEarly []int
		lines     []string // expected among the report's lines
	}{{
		// Rank 1 panics in main: its deferred Close says goodbye, its
		// peers fail at once, and it exits only when Close returns.
		name:   "panic in main",
		ranks:  []RankStatus{exited(0, 1, 12), exited(1, 2, 40), exited(2, 1, 11), exited(3, 1, 10)},
		events: []rankevent.Event{lost(0, 1, 6, true), lost(2, 1, 5, true), lost(3, 1, 5, true)},
		first:  3,
		cause:  1,
		lines: []string{
			"rank 1 failed first: exit status 2, 5ms into the job; ranks 0, 2, 3 lost it; nothing on its stderr",
			"rank 0: peer lost: rank 1 exited with status 2 while the job ran (rank 0: exit status 1)",
			"rank 3: peer lost: rank 1 exited with status 2 while the job ran (rank 3: exit status 1)",
		},
	}, {
		// Ranks 0, 1, 3 lose rank 2, which called os.Exit(0) early.
		name:      "exit 0 while the job ran",
		ranks:     []RankStatus{exited(0, 1, 8), exited(1, 1, 9), exited(2, 0, 5), exited(3, 1, 7)},
		events:    []rankevent.Event{lost(0, 2, 6, false), lost(1, 2, 6, false), lost(3, 2, 6, false)},
		first:     3,
		cause:     2,
		leftEarly: []int{2},
		lines: []string{
			"rank 2 failed first: exit status 0 while the job ran, 5ms into the job; ranks 0, 1, 3 lost it; nothing on its stderr",
			"rank 1: peer lost: rank 2 exited with status 0 while the job ran (rank 1: exit status 1)",
		},
	}, {
		// A rank that said goodbye and exited 0 ended normally: rank 0,
		// failing later of its own, is the cause.
		name:   "goodbye then exit 0 is a normal end",
		ranks:  []RankStatus{exited(0, 1, 20), exited(1, 0, 5)},
		events: []rankevent.Event{lost(0, 1, 4, true)},
		first:  0,
		cause:  0,
		lines:  []string{"rank 0 failed first: exit status 1, 20ms into the job; nothing on its stderr"},
	}, {
		// No reports (a program without the procs communicator): the first
		// by its exit, whatever order the exits were reaped in.
		name:  "no reports: first exit",
		ranks: []RankStatus{exited(0, 1, 12), exited(1, 0, 3), exited(2, 3, 10)},
		first: 0,
		cause: 2,
		lines: []string{"rank 2 failed first: exit status 3, 10ms into the job; nothing on its stderr", "rank 0 also failed: exit status 1"},
	}, {
		// Rank 1 was stopped (SIGSTOP) and lost by silence; its peers
		// failed; Run stopped it when the fail grace was over.
		name:      "stopped rank lost before Run signalled it",
		ranks:     []RankStatus{exited(0, 1, 1010), stopped(1, 2020), exited(2, 1, 1011)},
		events:    []rankevent.Event{lost(0, 1, 1000, false), lost(2, 1, 1001, false)},
		first:     0,
		stoppedAt: 2010,
		cause:     1,
		leftEarly: []int{1},
		lines: []string{
			"rank 1 failed first: lost by its peers while the job ran, then stopped: killed by signal SIGTERM, 1s into the job; ranks 0, 2 lost it; nothing on its stderr",
			"rank 0: peer lost: rank 1 vanished while the job ran (rank 0: exit status 1)",
		},
	}, {
		// Rank 2 failed because Run stopped rank 1 after rank 0 failed.
		name:      "a rank lost to Run's stop",
		ranks:     []RankStatus{exited(0, 3, 5), stopped(1, 15), exited(2, 1, 16)},
		events:    []rankevent.Event{lost(2, 1, 15, false)},
		first:     0,
		stoppedAt: 10,
		cause:     0,
		lines: []string{
			"rank 0 failed first: exit status 3, 5ms into the job; nothing on its stderr",
			"rank 1: stopped: killed by signal SIGTERM",
			"rank 2: peer lost: rank 1 was stopped by the launcher (rank 2: exit status 1)",
		},
	}, {
		// Rank 1 said goodbye (a panic's deferred Close); Run stopped
		// every rank at once (no fail grace), rank 2 in its own Close:
		// rank 2's report, made before the stop, still counts.
		name:      "a stopped rank's report before the stop",
		ranks:     []RankStatus{exited(0, 1, 6), stopped(1, 9), stopped(2, 9)},
		events:    []rankevent.Event{lost(2, 1, 4, true), lost(0, 2, 5, true)},
		first:     0,
		stoppedAt: 7,
		cause:     1,
		leftEarly: []int{1, 2},
		lines:     []string{"rank 1 failed first: lost by its peers while the job ran, then stopped: killed by signal SIGTERM, 4ms into the job; rank 2 lost it; nothing on its stderr"},
	}, {
		// Two ranks that lost each other: the first by time.
		name:   "each lost the other",
		ranks:  []RankStatus{exited(0, 1, 9), exited(1, 1, 8)},
		events: []rankevent.Event{lost(0, 1, 7, false), lost(1, 0, 6, false)},
		first:  1,
		cause:  0,
	}, {
		// A report after the rank's own exit is not its (a child of it
		// wrote it): rank 1 is not a consequence of rank 0.
		name:   "report after exit ignored",
		ranks:  []RankStatus{exited(0, 1, 9), exited(1, 1, 5)},
		events: []rankevent.Event{lost(1, 0, 10, false)},
		first:  1,
		cause:  1,
	}} {
		t.Run(c.name, func(t *testing.T) {
			ranks := append([]RankStatus(nil), c.ranks...)
			attachLosses(ranks, append([]rankevent.Event(nil), c.events...))
			var stoppedAt time.Time
			if c.stoppedAt > 0 {
				stoppedAt = at(c.stoppedAt)
			}
			got := rootCause(ranks, c.first, stoppedAt)
			assert.Equal(t, c.cause, got)
			var left []int
			for _, st := range ranks {
				if st.LeftEarly {
					left = append(left, st.Rank)
				}
			}
			assert.Equal(t, c.leftEarly, left)
			j := &job{began: t0, res: &Result{Ranks: ranks}, stoppedAt: stoppedAt}
			lines := j.report(got)
			for _, l := range c.lines {
				assert.Contains(t, lines, l, "report:\n%s", strings.Join(lines, "\n"))
			}
			require.NotEmpty(t, lines)
			assert.True(t, strings.HasPrefix(lines[0], "rank "+strconv.Itoa(c.cause)+" failed first: "), lines[0])
		})
	}
}

// The report shows the cause's last lines of stderr, and its panic line
// when a long trace pushed it out of them.
func TestReportTail(t *testing.T) {
	tl := newTail(3)
	for _, l := range []string{"starting", "panic: boom", "", "goroutine 1 [running]:", "main.main()"} {
		tl.add([]byte(l), nil)
	}
	st := RankStatus{Rank: 0, Pid: 7, ExitCode: 2}
	st.Tail, st.Panic = tl.lines()
	j := &job{began: time.Now(), res: &Result{Ranks: []RankStatus{st}}}
	assert.Equal(t, []string{
		"rank 0 failed first: exit status 2 (panic: boom); the last lines of its stderr:",
		"  [0] panic: boom",
		"  [0] …",
		"  [0] ",
		"  [0] goroutine 1 [running]:",
		"  [0] main.main()",
	}, j.report(0))
}
