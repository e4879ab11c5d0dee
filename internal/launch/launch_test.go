//go:build unix

package launch

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"regexp"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/xpu-go/xpu/internal/jobenv"
)

func TestRunSuccess(t *testing.T) {
	spec, stdout, stderr := capturedRoleSpec(3, "print")
	res, err := Run(guard(t), spec)
	require.NoError(t, err)
	require.Len(t, res.Ranks, 3)
	for i, st := range res.Ranks {
		assert.Equal(t, i, st.Rank)
		assert.True(t, st.OK(), "rank %d: %s", i, st)
		assert.Equal(t, 0, st.ExitCode)
		assert.Positive(t, st.Pid)
		assert.False(t, st.Stopped)
		assert.Equal(t, "exit status 0", st.String())
	}
	assert.Empty(t, res.Failed())
	assert.ElementsMatch(t, []string{"[0] hello from rank 0", "[1] hello from rank 1", "[2] hello from rank 2"}, stdout.Lines())
	assert.ElementsMatch(t, []string{"[0] note from rank 0", "[1] note from rank 1", "[2] note from rank 2"}, stderr.Lines())
}

func TestRunEnvironment(t *testing.T) {
	parse := func(lines []string) map[int]map[string]string {
		byRank := map[int]map[string]string{}
		re := regexp.MustCompile(`^\[(\d+)\] (XPU_[A-Z_]+)=(.*)$`)
		for _, l := range lines {
			m := re.FindStringSubmatch(l)
			require.NotNil(t, m, "line %q", l)
			r, _ := strconv.Atoi(m[1])
			if byRank[r] == nil {
				byRank[r] = map[string]string{}
			}
			byRank[r][m[2]] = m[3]
		}
		return byRank
	}

	t.Run("defaults", func(t *testing.T) {
		var stdout syncBuffer
		spec := roleSpec(3, "env")
		spec.Stdout = &stdout
		res, err := Run(guard(t), spec)
		require.NoError(t, err)
		assert.Equal(t, DefaultMasterAddr, res.MasterAddr)
		assert.Positive(t, res.MasterPort)
		env := parse(stdout.Lines())
		require.Len(t, env, 3)
		secret := env[0][EnvJobSecret]
		assert.Regexp(t, `^[0-9a-f]{64}$`, secret)
		for r := range 3 {
			assert.Equal(t, strconv.Itoa(r), env[r][EnvRank])
			assert.Equal(t, strconv.Itoa(r), env[r][EnvLocalRank])
			assert.Equal(t, "3", env[r][EnvWorldSize])
			assert.Equal(t, "3", env[r][EnvLocalSize], "every rank runs on this host")
			assert.Equal(t, "127.0.0.1", env[r][EnvMasterAddr])
			// What a rank reads from it, as the backends read it.
			getenv := jobenv.Map(env[r])
			p, ok, err := jobenv.Find(getenv)
			require.NoError(t, err)
			require.True(t, ok)
			assert.Equal(t, jobenv.Place{Launcher: "xpu", Rank: r, Size: 3}, p)
			assert.True(t, jobenv.AllLocal(getenv, 3))
			assert.Equal(t, strconv.Itoa(res.MasterPort), env[r][EnvMasterPort])
			assert.Equal(t, secret, env[r][EnvJobSecret], "every rank shares the secret")
			assert.Equal(t, DefaultBackend, env[r][EnvBackend])
		}

		// A second job gets a secret of its own.
		var again syncBuffer
		spec.Stdout = &again
		_, err = Run(guard(t), spec)
		require.NoError(t, err)
		assert.NotEqual(t, secret, parse(again.Lines())[0][EnvJobSecret])
	})

	t.Run("given", func(t *testing.T) {
		var stdout syncBuffer
		spec := roleSpec(2, "env")
		// Values from the environment are kept, except stale job variables.
		spec.Env = append(spec.Env, EnvJobSecret+"=from-env", EnvBackend+"=cpu", EnvRank+"=99", EnvWorldSize+"=7",
			EnvLocalSize+"=7")
		spec.MasterAddr = "localhost"
		spec.MasterPort = 40123
		spec.Stdout = &stdout
		res, err := Run(guard(t), spec)
		require.NoError(t, err)
		assert.Equal(t, 40123, res.MasterPort)
		env := parse(stdout.Lines())
		for r := range 2 {
			assert.Equal(t, strconv.Itoa(r), env[r][EnvRank])
			assert.Equal(t, "2", env[r][EnvWorldSize])
			assert.Equal(t, "2", env[r][EnvLocalSize])
			assert.Equal(t, "localhost", env[r][EnvMasterAddr])
			assert.Equal(t, "40123", env[r][EnvMasterPort])
			assert.Equal(t, "from-env", env[r][EnvJobSecret])
			assert.Equal(t, "cpu", env[r][EnvBackend])
		}

		// Spec.Secret wins over the environment.
		var out2 syncBuffer
		spec.Secret, spec.Stdout = "from-spec", &out2
		_, err = Run(guard(t), spec)
		require.NoError(t, err)
		assert.Equal(t, "from-spec", parse(out2.Lines())[1][EnvJobSecret])
	})
}

func TestRunFailureStopsTheOthers(t *testing.T) {
	spec, stdout, stderr := capturedRoleSpec(4, "fail 2 3")
	spec.LogPrefix = "launcher: "
	spec.FailGrace = -1 // at once
	res, err := Run(guard(t), spec)
	require.Error(t, err)
	require.ErrorIs(t, err, ErrRankFailed)
	var re *RankError
	require.ErrorAs(t, err, &re)
	assert.Equal(t, 2, re.Status.Rank)
	assert.Equal(t, 3, re.Status.ExitCode)
	assert.Equal(t, 3, re.Stopped)
	assert.Zero(t, re.Others)
	assert.Equal(t, "rank 2 failed: exit status 3; stopped the other 3 ranks", err.Error())
	for i, st := range res.Ranks {
		if i == 2 {
			assert.False(t, st.Stopped)
			continue
		}
		// The sleepers would sleep for minutes: they ended because Run
		// sent them SIGTERM.
		assert.True(t, st.Stopped, "rank %d", i)
		assert.Equal(t, syscall.SIGTERM, st.Signal, "rank %d: %s", i, st)
		assert.Less(t, st.Elapsed, nap)
	}
	require.Len(t, res.Failed(), 1)
	assert.Equal(t, 2, res.Failed()[0].Rank)
	assert.Contains(t, stdout.Lines(), "[2] failing with 3")
	assert.Contains(t, stderr.String(), "launcher: rank 2 failed: exit status 3; stopping the other 3 ranks\n")
}

func TestRunExitCode(t *testing.T) {
	res, err := Run(guard(t), roleSpec(3, "exit 1 7"))
	var re *RankError
	require.ErrorAs(t, err, &re)
	assert.Equal(t, 1, re.Status.Rank)
	assert.Equal(t, 7, re.Status.ExitCode)
	assert.Nil(t, re.Status.Signal)
	assert.Contains(t, err.Error(), "rank 1 failed: exit status 7")
	for _, st := range res.Ranks {
		if st.Rank != 1 {
			// Ranks 0 and 2 exit 0 at once; each either did so or was
			// still running when rank 1's failure stopped it.
			assert.True(t, st.OK() || st.Stopped, "rank %d: %s", st.Rank, st)
		}
	}
}

func TestRunRankKilledBySignal(t *testing.T) {
	var stdout syncBuffer
	spec := roleSpec(2, "killself 0")
	spec.Stdout = &stdout
	spec.FailGrace = -1
	res, err := Run(guard(t), spec)
	var re *RankError
	require.ErrorAs(t, err, &re)
	assert.Equal(t, 0, re.Status.Rank)
	assert.Equal(t, syscall.SIGKILL, re.Status.Signal)
	assert.Equal(t, -1, re.Status.ExitCode)
	assert.Equal(t, "rank 0 failed: killed by signal SIGKILL; stopped the other rank", err.Error())
	assert.True(t, res.Ranks[1].Stopped)
	assert.Contains(t, stdout.Lines(), "[0] killing myself")
}

func TestRunForwardsCancellation(t *testing.T) {
	const n = 3
	ctx, cancel := context.WithCancel(guard(t))
	defer cancel()
	stdout := whenReady(n, cancel)
	spec := roleSpec(n, "trap")
	spec.Stdout = stdout
	res, err := Run(ctx, spec)
	require.ErrorIs(t, err, context.Canceled)
	assert.NotErrorIs(t, err, ErrRankFailed)
	for i, st := range res.Ranks {
		assert.True(t, st.Stopped, "rank %d", i)
		assert.Equal(t, 0, st.ExitCode, "rank %d handled the signal and exited 0", i)
		assert.Contains(t, stdout.Lines(), "["+strconv.Itoa(i)+"] got SIGTERM")
	}
}

// A SIGINT to the launcher, caught by signal.NotifyContext as `xpu run`
// does, reaches every rank as SIGINT.
func TestRunForwardsInterrupt(t *testing.T) {
	if runtime.GOOS == "windows" {
		t.Skip("no SIGINT to send")
	}
	const n = 2
	ctx, stop := signal.NotifyContext(guard(t), os.Interrupt)
	defer stop()
	stdout := whenReady(n, func() { _ = syscall.Kill(os.Getpid(), syscall.SIGINT) })
	spec := roleSpec(n, "trap")
	spec.Stdout = stdout
	spec.LogPrefix = "launcher: "
	var stderr syncBuffer
	spec.Stderr = &stderr
	res, err := Run(ctx, spec)
	require.ErrorIs(t, err, context.Canceled)
	assert.Contains(t, err.Error(), "interrupt signal received")
	for i, st := range res.Ranks {
		assert.True(t, st.OK(), "rank %d: %s", i, st)
		assert.Contains(t, stdout.Lines(), "["+strconv.Itoa(i)+"] got SIGINT")
	}
	assert.Contains(t, stderr.String(), "launcher: interrupted; sending SIGINT to 2 ranks\n")
}

func TestRunKillsAfterGrace(t *testing.T) {
	ctx, cancel := context.WithCancel(guard(t))
	defer cancel()
	spec := roleSpec(2, "stubborn")
	spec.Stdout = whenReady(2, cancel)
	spec.Grace = 200 * time.Millisecond
	res, err := Run(ctx, spec)
	require.ErrorIs(t, err, context.Canceled)
	for i, st := range res.Ranks {
		assert.True(t, st.Stopped)
		assert.Equal(t, syscall.SIGKILL, st.Signal, "rank %d ignores SIGTERM: %s", i, st)
	}
}

func TestRunTimeout(t *testing.T) {
	spec := roleSpec(2, "sleep")
	spec.Timeout = 300 * time.Millisecond
	res, err := Run(guard(t), spec)
	require.ErrorIs(t, err, ErrJobTimeout)
	require.ErrorIs(t, err, context.DeadlineExceeded)
	assert.Equal(t, "job timed out after 300ms; still running: ranks 0, 1", err.Error())
	for i, st := range res.Ranks {
		assert.True(t, st.Stopped)
		assert.Equal(t, syscall.SIGTERM, st.Signal, "rank %d: %s", i, st)
	}
}

// The signals go to each rank's process group: a rank's children are
// stopped with it.
func TestRunStopsChildrenOfRanks(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("reads /proc")
	}
	ctx, cancel := context.WithCancel(guard(t))
	defer cancel()
	stdout := whenReady(4, cancel) // two ranks and their two children
	spec := roleSpec(2, "spawn")
	spec.Stdout = stdout
	_, err := Run(ctx, spec)
	require.ErrorIs(t, err, context.Canceled)
	var children []int
	for _, l := range stdout.Lines() {
		if _, pid, ok := strings.Cut(l, "child "); ok {
			p, err := strconv.Atoi(pid)
			require.NoError(t, err)
			children = append(children, p)
		}
	}
	require.Len(t, children, 2)
	for _, pid := range children {
		require.Eventually(t, func() bool { return !alive(pid) }, time.Minute, 10*time.Millisecond,
			"child %d of a rank outlived the job", pid)
	}
}

// alive reports whether a process exists and is not a zombie.
func alive(pid int) bool {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return false
	}
	// pid (comm) S …: the state follows the last ')'.
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	return i < 0 || i+2 >= len(s) || (s[i+2] != 'Z' && s[i+2] != 'X')
}

func TestRunPartialLastLine(t *testing.T) {
	spec, stdout, stderr := capturedRoleSpec(2, "partial")
	_, err := Run(guard(t), spec)
	require.NoError(t, err)
	for _, r := range []string{"[0] ", "[1] "} {
		assert.Equal(t, []string{r + "first", r + "no newline"}, linesOf(stdout.Lines(), r))
		assert.Equal(t, []string{r + "err first", r + "err no newline"}, linesOf(stderr.Lines(), r))
	}
	assert.True(t, strings.HasSuffix(stdout.String(), "\n"))
}

func linesOf(lines []string, prefix string) []string {
	var out []string
	for _, l := range lines {
		if strings.HasPrefix(l, prefix) {
			out = append(out, l)
		}
	}
	return out
}

// Four ranks write thousands of lines to both streams at once, in pieces
// that cut lines anywhere; both streams go to one buffer. Every line must
// arrive whole, with its own rank's prefix, once, in order.
func TestRunLinesStayWhole(t *testing.T) {
	const n, lines = 4, 3000
	var both syncBuffer
	spec := roleSpec(n, "flood "+strconv.Itoa(lines))
	spec.Stdout, spec.Stderr = &both, &both
	_, err := Run(guard(t), spec)
	require.NoError(t, err)
	re := regexp.MustCompile(`^\[(\d+)\] (out|err) rank=(\d+) line=(\d+) [a-z]+$`)
	next := map[string]int{}
	got := both.Lines()
	require.Len(t, got, 2*n*lines)
	for _, l := range got {
		m := re.FindStringSubmatch(l)
		require.NotNil(t, m, "torn line %.120q", l)
		require.Equal(t, m[1], m[3], "line with another rank's prefix: %.120q", l)
		r, _ := strconv.Atoi(m[3])
		i, _ := strconv.Atoi(m[4])
		require.Equal(t, "["+m[1]+"] "+floodLine(m[2], r, i), l)
		key := m[2] + m[3]
		require.Equal(t, next[key], i, "rank %d %s: line out of order", r, m[2])
		next[key]++
	}
	for r := range n {
		assert.Equal(t, lines, next["out"+strconv.Itoa(r)])
		assert.Equal(t, lines, next["err"+strconv.Itoa(r)])
	}
}

func TestRunBadSpec(t *testing.T) {
	ctx := guard(t)
	for name, spec := range map[string]Spec{
		"no ranks":       {N: 0, Prog: os.Args[0]},
		"negative ranks": {N: -2, Prog: os.Args[0]},
		"no program":     {N: 2},
		"port too big":   {N: 1, Prog: os.Args[0], MasterPort: 70000},
		"port negative":  {N: 1, Prog: os.Args[0], MasterPort: -1},
		"timeout":        {N: 1, Prog: os.Args[0], Timeout: -time.Second},
		"grace":          {N: 1, Prog: os.Args[0], Grace: -time.Second},
		"not found":      {N: 1, Prog: "xpu-launch-test-no-such-program"},
	} {
		t.Run(name, func(t *testing.T) {
			res, err := Run(ctx, spec)
			require.ErrorIs(t, err, ErrInvalidArgument)
			assert.Nil(t, res)
			msg := err.Error()
			assert.True(t, strings.HasPrefix(msg, "launch: ") && strings.HasSuffix(msg, ": invalid argument"), msg)
			assert.NotContains(t, msg, "\n")
		})
	}
	_, err := Run(ctx, Spec{N: 0, Prog: os.Args[0]})
	assert.Equal(t, "launch: the number of ranks is 0; want at least 1: invalid argument", err.Error())
}

func TestRunCancelledBeforeStart(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	res, err := Run(ctx, roleSpec(2, "print"))
	require.ErrorIs(t, err, context.Canceled)
	assert.Nil(t, res)
}

// A rank that cannot be started fails the job; the ranks after it are not
// started.
func TestRunStartFailure(t *testing.T) {
	spec := roleSpec(3, "print")
	spec.Dir = filepath.Join(t.TempDir(), "missing")
	res, err := Run(guard(t), spec)
	var re *RankError
	require.ErrorAs(t, err, &re)
	assert.Equal(t, 0, re.Status.Rank)
	assert.Zero(t, re.Status.Pid)
	require.Error(t, re.Status.Err)
	assert.Contains(t, err.Error(), "rank 0 failed: not started: start ")
	for _, st := range res.Ranks[1:] {
		assert.Zero(t, st.Pid)
		assert.True(t, st.Stopped)
		assert.False(t, st.OK())
	}
}

func TestRunGoRunBuildsOnce(t *testing.T) {
	goCmd := goCommand(t, "builds a program")
	var stdout, stderr syncBuffer
	spec := Spec{N: 3, Prog: goCmd, Args: []string{"run", "-trimpath", "./testdata/rankecho", "a", "b c"},
		Stdout: &stdout, Stderr: &stderr}
	_, err := Run(guard(t), spec)
	require.NoError(t, err, "stderr: %s", stderr.String())
	re := regexp.MustCompile(`^\[(\d)\] rank (\d) of 3 args \["a" "b c"\] exe (.*)$`)
	exes := map[string]bool{}
	for _, l := range stdout.Lines() {
		m := re.FindStringSubmatch(l)
		require.NotNil(t, m, "line %q", l)
		assert.Equal(t, m[1], m[2])
		exes[m[3]] = true
	}
	require.Len(t, stdout.Lines(), 3)
	require.Len(t, exes, 1, "every rank runs the same binary")
	for exe := range exes {
		assert.Equal(t, "rankecho", filepath.Base(exe))
		assert.True(t, strings.HasPrefix(filepath.Base(filepath.Dir(exe)), "xpu-run-"), exe)
		_, err := os.Stat(filepath.Dir(exe))
		assert.True(t, errors.Is(err, os.ErrNotExist), "the build directory is removed after the job: %v", err)
	}
}

func TestRunGoRunBuildFailure(t *testing.T) {
	goCmd := goCommand(t, "runs go build")
	var stderr syncBuffer
	spec := Spec{N: 2, Prog: goCmd, Args: []string{"run", "./testdata/no-such-dir"}, Stderr: &stderr}
	res, err := Run(guard(t), spec)
	require.Error(t, err)
	assert.Nil(t, res, "no rank started")
	assert.Contains(t, err.Error(), "build")
	assert.NotEmpty(t, stderr.String(), "go build says why")
}

// goCommand returns the path of the go command, skipping the test (saying why it needs go) in short mode or where there is none.
func goCommand(t *testing.T, why string) string {
	t.Helper()
	if testing.Short() {
		t.Skip(why)
	}
	goCmd, err := exec.LookPath("go")
	if err != nil {
		t.Skip("no go command")
	}
	return goCmd
}
