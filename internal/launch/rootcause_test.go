//go:build linux

package launch

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/xpu-go/xpu"
	"github.com/xpu-go/xpu/comm"
	"github.com/xpu-go/xpu/memspace"

	_ "github.com/xpu-go/xpu/backends/cpu"
	_ "github.com/xpu-go/xpu/backends/procs"
)

// commRole joins a job with the procs communicator, as a user's program
// does (its Close deferred in main), runs an Allreduce, and then rank who
// ends as mode says while the others run a second Allreduce, which fails
// when they lose it:
//
//	panic    panic in main, the deferred Close running first
//	gopanic  panic in a goroutine
//	exit0    os.Exit(0), its communicator left open
//	stop     SIGSTOP itself
//	wrongtag receive tag 7 from rank 0, which sends tag 8 and enters a
//	         Barrier (a hang, for the flight records to explain)
//	mismatch Bcast from rank 0 where the others run the Allreduce (a hang
//	         or a failure)
func commRole(mode string, who int) int {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	b, err := xpu.Open(ctx, "procs", nil)
	if err != nil {
		fmt.Fprintln(os.Stderr, "open:", err)
		return 1
	}
	defer b.Close()
	host, err := xpu.Open(ctx, "cpu", nil)
	if err != nil {
		fmt.Fprintln(os.Stderr, "open:", err)
		return 1
	}
	buf, err := memspace.Alloc[float64](host.Memory, 8)
	if err != nil {
		fmt.Fprintln(os.Stderr, "alloc:", err)
		return 1
	}
	c := b.Comm
	if err := comm.Allreduce(ctx, c, buf, buf, comm.Sum); err != nil {
		fmt.Fprintln(os.Stderr, "allreduce:", err)
		return 1
	}
	fmt.Println("joined")
	if c.Rank() == who {
		switch mode {
		case "panic":
			panic("boom in main")
		case "gopanic":
			go func() { panic("boom in a goroutine") }()
			<-ctx.Done() // unbounded: the rank's role; the panic ends the process, ctx bounds it at a minute
			return 3
		case "exit0":
			os.Exit(0)
		case "wrongtag":
			_, err := comm.Recv(ctx, c, buf.Block(), 0, 7)
			fmt.Fprintln(os.Stderr, "recv:", err)
			return 1
		case "mismatch":
			err := comm.Bcast(ctx, c, buf, 0)
			fmt.Fprintln(os.Stderr, "bcast:", err)
			return 1
		case "stop":
			// The stop may land a moment after kill returns: the rank
			// must not take part in the next collective meanwhile.
			_ = syscall.Kill(os.Getpid(), syscall.SIGSTOP)
			<-ctx.Done() // unbounded: the rank's role, stopped; the job's signal ends it, ctx bounds it at a minute
			return 3
		}
	}
	if mode == "wrongtag" && c.Rank() == 0 {
		if err := comm.Send(ctx, c, buf.Block(), who, 8); err != nil {
			fmt.Fprintln(os.Stderr, "send:", err)
			return 1
		}
		if err := comm.Barrier(ctx, c); err != nil {
			fmt.Fprintln(os.Stderr, "barrier:", err)
			return 1
		}
		return 0
	}
	if err := comm.Allreduce(ctx, c, buf, buf, comm.Sum); err != nil {
		fmt.Fprintln(os.Stderr, "allreduce:", err)
		return 1
	}
	return 0
}

// commJob runs n ranks of commRole under Run as `xpu run` does, and
// returns the error and what was written to stderr, the ranks' and Run's.
func commJob(t *testing.T, n int, role string, edit func(*Spec)) (*Result, error, string) {
	t.Helper()
	var stderr syncBuffer
	spec := roleSpec(n, "comm "+role)
	spec.Stderr = &stderr
	spec.LogPrefix = "xpu run: "
	spec.Env = withEnv(spec.Env, "XPU_JOIN_TIMEOUT=30s")
	if edit != nil {
		edit(&spec)
	}
	res, err := Run(guard(t), spec)
	return res, err, "\n" + stderr.String()
}

// assertConsequences checks that every rank but cause is reported as a
// consequence (a peer lost) or as another failure, and that no other rank
// is named as the cause.
func assertConsequences(t *testing.T, out string, n, cause int) {
	t.Helper()
	for r := range n {
		if r == cause {
			continue
		}
		re := regexp.MustCompile(`(?m)^xpu run: rank ` + strconv.Itoa(r) +
			`(: peer lost: rank \d+ .* \(rank \d+: exit status 1\)| also failed: exit status 1)$`)
		assert.Regexp(t, re, out, "rank %d", r)
	}
	assert.Equal(t, 1, strings.Count(out, "failed first"), out)
}

// A rank panics in main: its deferred Close says goodbye before Go prints
// the panic, and its peers, losing it, exit first. The panic reaches the
// terminal, the rank is named first with it, and the others follow.
func TestRootCausePanicInMain(t *testing.T) {
	res, err, out := commJob(t, 4, "panic 1", nil)
	var re *RankError
	require.ErrorAs(t, err, &re, out)
	assert.Equal(t, "rank 1 failed: exit status 2 (and 3 other ranks failed)", err.Error())
	assert.Equal(t, 1, res.Cause)
	assert.Contains(t, out, "\n[1] panic: boom in main\n", "the panic reached the terminal")
	assert.Regexp(t, `(?m)^xpu run: rank 1 failed first: exit status 2 \(panic: boom in main\), \d+ms into the job; `+
		`(rank|ranks) [\d, ]+ lost it; the last lines of its stderr:$`, out)
	assert.Contains(t, out, "\nxpu run:   [1] panic: boom in main\n")
	assert.Contains(t, out, ": peer lost: rank 1 exited with status 2 while the job ran (rank ")
	assertConsequences(t, out, 4, 1)
	for _, st := range res.Ranks {
		assert.False(t, st.Stopped, "rank %d ended on its own: %s", st.Rank, st)
	}
}

// A rank panics in a goroutine: it dies at once with its trace, and is
// named first whichever exit Run reaps first.
func TestRootCausePanicInGoroutine(t *testing.T) {
	res, err, out := commJob(t, 4, "gopanic 2", nil)
	require.ErrorIs(t, err, ErrRankFailed, out)
	assert.Equal(t, "rank 2 failed: exit status 2 (and 3 other ranks failed)", err.Error())
	assert.Equal(t, 2, res.Cause)
	assert.Contains(t, out, "\n[2] panic: boom in a goroutine\n")
	assert.Regexp(t, `(?m)^xpu run: rank 2 failed first: exit status 2 \(panic: boom in a goroutine\), \d+ms into the job; `, out)
	assert.Contains(t, out, "\nxpu run:   [2] panic: boom in a goroutine\n")
	assert.Contains(t, out, ": peer lost: rank 2 exited with status 2 while the job ran (rank ")
	assertConsequences(t, out, 4, 2)
}

// A rank exits 0 early, its communicator left open: the ranks that needed
// it fail, and it is named first, for its exit while the job ran.
func TestRootCauseEarlyExit(t *testing.T) {
	res, err, out := commJob(t, 4, "exit0 2", nil)
	require.ErrorIs(t, err, ErrRankFailed, out)
	assert.Equal(t, "rank 2 failed: exit status 0 while the job ran (and 3 other ranks failed)", err.Error())
	assert.Equal(t, 2, res.Cause)
	assert.True(t, res.Ranks[2].LeftEarly)
	assert.Regexp(t, `(?m)^xpu run: rank 2 failed first: exit status 0 while the job ran, \d+ms into the job; `+
		`(rank|ranks) [\d, ]+ lost it; nothing on its stderr$`, out)
	assert.Contains(t, out, ": peer lost: rank 2 exited with status 0 while the job ran (rank ")
	assertConsequences(t, out, 4, 2)
}

// A rank stops (SIGSTOP) and the job times out: the message names the
// ranks still running and the stopped one apart, and blames none.
func TestRootCauseStoppedRankTimeout(t *testing.T) {
	res, err, out := commJob(t, 4, "stop 1", func(s *Spec) { s.Timeout = 3 * time.Second })
	require.ErrorIs(t, err, ErrJobTimeout, out)
	assert.Equal(t, "job timed out after 3s; still running: ranks 0, 2, 3 and rank 1 (stopped by a signal)", err.Error())
	assert.Contains(t, out, "\nxpu run: job timed out after 3s; still running: ranks 0, 2, 3 and rank 1 (stopped by a signal); "+
		"sending SIGTERM to 4 ranks\n")
	assert.NotContains(t, out, "failed first")
	assert.Equal(t, -1, res.Cause)
	// The flight records: the stopped rank cannot write one and is not
	// asked; the others wait in the Allreduce it never entered.
	assert.Contains(t, out, "\nxpu run: rank 1 stopped by a signal: not asked for a record (a stopped process cannot write one)\n")
	assert.Contains(t, out, "\nxpu run:   no record from rank 1 (")
	assert.Regexp(t, `(?m)^xpu run:   rank 0 waits in Allreduce #2 \(float64 × 8, sum\) for [\d.]+m?s$`, out)
	// The stopped rank got SIGCONT after SIGTERM, and ended of it.
	assert.Equal(t, syscall.SIGTERM, res.Ranks[1].Signal, "%s", res.Ranks[1])
}

// A stopped rank that its peers lose by its silence is named, on that
// evidence, as the cause when they fail.
func TestRootCauseStoppedRankLost(t *testing.T) {
	res, err, out := commJob(t, 3, "stop 1", func(s *Spec) {
		s.Env = withEnv(s.Env, "XPU_TCP_TIMEOUT=500ms")
		// Longer than the peers' Close waits for the stopped rank's
		// goodbye (their timeout, 500ms): they end on their own.
		s.FailGrace = 2 * time.Second
		s.Timeout = 20 * time.Second
	})
	require.ErrorIs(t, err, ErrRankFailed, out)
	assert.Equal(t, 1, res.Cause)
	assert.Equal(t, "rank 1 failed: lost by its peers while the job ran, then stopped: killed by signal SIGTERM "+
		"(and 2 other ranks failed)", err.Error())
	assert.Contains(t, out, "\nxpu run: rank 1 (stopped by a signal) still running 2s after rank ")
	assert.Contains(t, out, ": peer lost: rank 1 vanished while the job ran (rank ")
}

// A receive waits for a tag its peer never sends: when the timeout
// expires, the ranks' flight records say which receive waits, for what,
// and which message nothing received; and that the peer waits in a
// Barrier the receiver never entered.
func TestTimeoutExplainsWrongTag(t *testing.T) {
	_, err, out := commJob(t, 2, "wrongtag 1", func(s *Spec) { s.Timeout = 3 * time.Second })
	require.ErrorIs(t, err, ErrJobTimeout, out)
	assert.Contains(t, out, "\nxpu run: flight records of 2 ranks say:\n")
	assert.Regexp(t, `(?m)^xpu run:   rank 1 waits in Recv\(src 0, tag 7, 64 bytes\) for [\d.]+m?s; `+
		`rank 0 sent tag 8 \(1 message\) to rank 1, unmatched$`, out)
	assert.Regexp(t, `(?m)^xpu run:   rank 1 never entered Barrier #2, which rank 0 waits in for [\d.]+m?s; `+
		`its last collective was Allreduce #1 \(float64 × 8, sum\) \(done\); it waits in Recv\(src 0, tag 7, 64 bytes\)`, out)
}

// The job's own directory of flight records is removed when it ends; one
// the environment names is the user's, and kept.
func TestFlightDirectory(t *testing.T) {
	j := &job{spec: Spec{LogPrefix: ""}}
	env, rm := j.flightSetup([]string{"A=1"})
	require.NotEmpty(t, j.flightDir)
	assert.Contains(t, env, "XPU_FLIGHT_DIR="+j.flightDir)
	assert.DirExists(t, j.flightDir)
	require.NoError(t, os.WriteFile(filepath.Join(j.flightDir, "flight.rank0.1.json"), []byte("{}"), 0o600))
	rm()
	assert.NoDirExists(t, j.flightDir)

	mine := t.TempDir()
	j = &job{spec: Spec{Env: []string{"XPU_FLIGHT_DIR=" + mine}}}
	env, rm = j.flightSetup(j.spec.Env)
	assert.Equal(t, mine, j.flightDir)
	assert.Equal(t, []string{"XPU_FLIGHT_DIR=" + mine}, env)
	assert.True(t, j.flightKept())
	rm()
	assert.DirExists(t, mine)
}

// Ranks call different collectives, over links that carry the shared
// algorithms' messages (shared memory finds the mismatch itself): the
// records name the first collective where they differ, and who called
// what.
func TestTimeoutExplainsMismatch(t *testing.T) {
	_, err, out := commJob(t, 3, "mismatch 1", func(s *Spec) {
		s.Timeout = 3 * time.Second
		s.Env = withEnv(s.Env, "XPU_LINKS=tcp")
	})
	require.ErrorIs(t, err, ErrJobTimeout, out)
	assert.Contains(t, out, "\nxpu run:   mismatched collectives at #2: ranks 0, 2 in Allreduce #2 (float64 × 8, sum); "+
		"rank 1 in Bcast #2 (root 0, byte × 64)\n")
}
