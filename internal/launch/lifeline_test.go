//go:build linux

package launch

import (
	"bufio"
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/xpu-go/xpu/internal/tooling/testwait"
)

// tokenEnv marks every process a launcher-death test starts, down to the
// ranks' children (which inherit it), so that the test finds them all.
const tokenEnv = "XPU_LAUNCH_TEST_TOKEN"

// deathBound is how soon after its launcher dies every process of a job must
// be gone (a stubborn job's grace period comes on top). It takes 5 to 30 ms;
// the bound leaves room for a machine starved of the CPU (a 2-core machine
// at a load of 12 took up to 1.7 s).
const deathBound = 3 * time.Second

// rankScript is each rank's program: a shell that starts two sleeping
// children in its process group, writes the file of the job's events to
// $DIR/eventsRANK, the directory of its flight records to $DIR/flightRANK,
// and "PID CHILD CHILD" to $DIR/RANK, and waits. With stubborn, the shell and its children ignore SIGTERM.
func rankScript(dir string, stubborn bool) string {
	s := `sleep 300 & a=$!
sleep 300 & b=$!
echo "$XPU_RUN_EVENTS" > "` + dir + `/events$XPU_RANK"
echo "$XPU_FLIGHT_DIR" > "` + dir + `/flight$XPU_RANK"
echo "$$ $a $b" > "` + dir + `/$XPU_RANK.tmp" && mv "` + dir + `/$XPU_RANK.tmp" "` + dir + `/$XPU_RANK"
wait
`
	if stubborn {
		s = "trap '' TERM\n" + s
	}
	return s
}

// With its watchdog gone, a launcher that dies still takes its ranks with
// it: the kernel sends each rank its parent-death signal, SIGKILL. (Their
// children are the watchdog's to stop; here they are left to the test's
// cleanup.)
func TestLauncherDeathWithoutWatchdog(t *testing.T) {
	j := startLauncher(t, "plain", time.Minute, false)
	require.NoError(t, syscall.Kill(j.watchdog, syscall.SIGKILL))
	require.Eventually(t, func() bool { return !alive(j.watchdog) }, 5*time.Second, time.Millisecond)
	start := time.Now()
	require.NoError(t, syscall.Kill(j.launcher.Process.Pid, syscall.SIGKILL))
	ranks := slices.Clone(j.ranks)
	for len(ranks) > 0 {
		require.Less(t, time.Since(start), deathBound, "ranks %v outlived their launcher\n%s", ranks, j.output.String())
		time.Sleep(2 * time.Millisecond)
		ranks = slices.DeleteFunc(ranks, func(p int) bool { return !alive(p) })
	}
	t.Logf("ranks gone %v after the launcher's SIGKILL", time.Since(start).Round(time.Microsecond))
	for _, c := range j.children {
		assert.True(t, alive(c), "child %d: nothing stops the ranks' children without the watchdog", c)
	}
	_ = j.launcher.Wait()
	// Nor removes the file of the job's events, nor the flight records'
	// directory.
	assert.FileExists(t, j.events)
	_ = os.Remove(j.events)
	assert.DirExists(t, j.flight)
	_ = os.RemoveAll(j.flight)
}

// The launcher — a child process running Run as `xpu run` does — gets a
// signal while its 3 ranks and their 6 children run: every one of them,
// and the job's watchdog, must be gone within deathBound, whether the
// signal kills the launcher at once (SIGKILL, or a signal it does not
// handle) or the launcher stops the job itself (SIGINT and SIGTERM, which
// xpu run handles).
func TestLauncherDeathStopsRanks(t *testing.T) {
	const grace = 300 * time.Millisecond
	for _, c := range []struct {
		name     string
		sig      syscall.Signal
		mode     string // launcherRole's: "plain" dies of the signal, "notify" handles it
		stubborn bool
	}{
		{"SIGKILL", syscall.SIGKILL, "plain", false},
		{"SIGTERM", syscall.SIGTERM, "plain", false},
		{"SIGINT", syscall.SIGINT, "plain", false},
		{"SIGHUP", syscall.SIGHUP, "plain", false},
		{"SIGKILL/ranks-ignore-SIGTERM", syscall.SIGKILL, "plain", true},
		{"SIGTERM/handled", syscall.SIGTERM, "notify", false},
		{"SIGINT/handled", syscall.SIGINT, "notify", false},
	} {
		t.Run(c.name, func(t *testing.T) {
			bound := deathBound
			if c.stubborn || c.mode == "notify" {
				// SIGKILL comes a grace period after SIGTERM; a shell's
				// background children ignore SIGINT.
				bound += grace
			}
			j := startLauncher(t, c.mode, grace, c.stubborn)
			start := time.Now()
			require.NoError(t, syscall.Kill(j.launcher.Process.Pid, c.sig))
			gone := j.waitGone(t, start, bound)
			t.Logf("launcher got %s: ranks and their children gone after %v, watchdog after %v",
				SignalName(c.sig), gone.ranks.Round(time.Microsecond), gone.watchdog.Round(time.Microsecond))

			_ = j.launcher.Wait() // its status is checked below
			assert.Empty(t, marked(j.token), "nothing the job started lives on")
			assert.NoFileExists(t, j.events, "the launcher, or its watchdog, removed the file of the job's events")
			assert.NoDirExists(t, j.flight, "the launcher, or its watchdog, removed the directory of the flight records")
			ws := j.launcher.ProcessState.Sys().(syscall.WaitStatus)
			if c.mode == "plain" {
				assert.True(t, ws.Signaled() && ws.Signal() == c.sig, "the launcher died of %s: %v\n%s",
					SignalName(c.sig), ws, j.output.String())
			} else {
				assert.Equal(t, 1, ws.ExitStatus(), "the launcher stopped the job and exited 1\n%s", j.output.String())
			}
		})
	}
}

// launched is a launcher started by startLauncher, and what its job runs.
type launched struct {
	launcher *exec.Cmd
	output   *syncBuffer // the launcher's stdout and stderr
	token    string
	ranks    []int // the ranks' pids, each its process group's id
	children []int // their children's pids
	watchdog int
	events   string // the file of the job's events
	flight   string // the directory of the ranks' flight records
}

// startLauncher starts a launcher (launcherRole, in a process group of its
// own) of 3 ranks running rankScript, and returns once every rank and child
// has written its pid. Every process it started is killed when the test
// ends, even if it fails.
func startLauncher(t *testing.T, mode string, grace time.Duration, stubborn bool) *launched {
	t.Helper()
	dir := t.TempDir()
	j := startMarked(t, "launcher "+mode+" "+grace.String(), scriptEnv+"="+rankScript(dir, stubborn))
	cmd := j.launcher

	deadline := time.Now().Add(time.Minute)
	for r := 0; r < 3; r++ {
		var f []string
		for {
			b, err := os.ReadFile(filepath.Join(dir, strconv.Itoa(r)))
			if err == nil {
				f = strings.Fields(string(b))
				break
			}
			require.True(t, time.Now().Before(deadline), "rank %d did not start\n%s", r, j.output.String())
			time.Sleep(5 * time.Millisecond)
		}
		require.Len(t, f, 3, "rank %d wrote %q", r, f)
		for i, s := range f {
			pid, err := strconv.Atoi(s)
			require.NoError(t, err)
			if i == 0 {
				j.ranks = append(j.ranks, pid)
			} else {
				j.children = append(j.children, pid)
			}
		}
	}
	wds := watchdogsOf(cmd.Process.Pid)
	require.Len(t, wds, 1, "the job has one watchdog")
	j.watchdog = wds[0]
	b, err := os.ReadFile(filepath.Join(dir, "events0"))
	require.NoError(t, err)
	j.events = strings.TrimSpace(string(b))
	require.FileExists(t, j.events, "the launcher made the file of the job's events")
	b, err = os.ReadFile(filepath.Join(dir, "flight0"))
	require.NoError(t, err)
	j.flight = strings.TrimSpace(string(b))
	require.DirExists(t, j.flight, "the launcher made the directory of the ranks' flight records")

	// What the job looks like while its launcher lives.
	launcherSid := statOf(t, cmd.Process.Pid).sid
	for i, pid := range j.ranks {
		st := statOf(t, pid)
		assert.Equal(t, cmd.Process.Pid, st.ppid, "rank %d is the launcher's child", i)
		assert.Equal(t, pid, st.pgid, "rank %d leads a process group of its own", i)
		assert.Equal(t, launcherSid, st.sid, "rank %d is in the launcher's session", i)
		for _, c := range j.children[2*i : 2*i+2] {
			st := statOf(t, c)
			assert.Equal(t, pid, st.ppid, "child %d is rank %d's", c, i)
			assert.Equal(t, pid, st.pgid, "child %d is in rank %d's group", c, i)
		}
	}
	st := statOf(t, j.watchdog)
	assert.Equal(t, j.watchdog, st.sid, "the watchdog has a session of its own")
	require.False(t, t.Failed())
	return j
}

// startMarked starts this binary playing role (launcherRole), in a process
// group of its own, with extra in its environment and tokenEnv set to a
// token of its own. Every process of it still there when the test ends is
// killed then, by process group and by token, even if the test fails.
func startMarked(t *testing.T, role string, extra ...string) *launched {
	j := &launched{output: &syncBuffer{}, token: NewSecret()[:16]}
	cmd := exec.Command(os.Args[0])
	cmd.Env = roleEnviron(role, append(extra, tokenEnv+"="+j.token)...)
	cmd.Stdout, cmd.Stderr = j.output, j.output
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.WaitDelay = 5 * time.Second
	j.launcher = cmd
	require.NoError(t, cmd.Start())
	t.Cleanup(func() {
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		for _, g := range j.ranks {
			_ = syscall.Kill(-g, syscall.SIGKILL)
		}
		for _, p := range marked(j.token) {
			_ = syscall.Kill(-p, syscall.SIGKILL)
			_ = syscall.Kill(p, syscall.SIGKILL)
		}
		if cmd.ProcessState == nil {
			_ = cmd.Wait()
		}
	})
	return j
}

// Under `xpu run --mpi`, mpirun is registered with the watchdog: when the
// launcher dies, mpirun gets SIGTERM, once, and stops its ranks (they are
// mpirun's to stop), well within the grace period after which it would get
// SIGKILL.
func TestLauncherDeathStopsMPIRun(t *testing.T) {
	run := func(t *testing.T, ready func(out []string) bool, bound time.Duration) {
		j := startMarked(t, "launcher mpi 5s") // Open MPI takes a second
		require.Eventually(t, func() bool { return ready(j.output.Lines()) }, time.Minute, 5*time.Millisecond,
			"the job did not start:\n%s", j.output.String())
		before := marked(j.token)
		start := time.Now()
		require.NoError(t, syscall.Kill(j.launcher.Process.Pid, syscall.SIGKILL))
		_ = j.launcher.Wait()
		var left []int
		for {
			if left = marked(j.token); len(left) == 0 {
				break
			}
			require.Less(t, time.Since(start), bound, "processes %v outlived the launcher (of %v)", left, before)
			time.Sleep(2 * time.Millisecond)
		}
		t.Logf("%d processes (the watchdog, mpirun, its ranks) gone %v after the launcher's SIGKILL", len(before)-1,
			time.Since(start).Round(time.Microsecond))
	}
	t.Run("fake mpirun", func(t *testing.T) {
		fakeMPI(t)
		t.Setenv("FAKE_MPIRUN_SLEEP", "1")
		run(t, func(out []string) bool { return slices.Contains(out, "backend: mpi") }, deathBound)
	})
	t.Run("mpirun", func(t *testing.T) {
		if testing.Short() {
			t.Skip("starts mpirun")
		}
		if _, err := exec.LookPath("mpirun"); err != nil {
			t.Skip("no mpirun")
		}
		// mpirun stops its ranks in its own time.
		run(t, func(out []string) bool {
			return len(slices.DeleteFunc(slices.Clone(out), func(l string) bool { return l != "ready" })) == 2
		}, 10*time.Second)
	})
}

// goneTimes are how long after its launcher's signal a job's processes were
// gone: the last of the ranks and their children, and the watchdog.
type goneTimes struct{ ranks, watchdog time.Duration }

// waitGone waits until every process of the job is gone (or a zombie), and
// fails the test if one is still alive bound after start.
func (j *launched) waitGone(t *testing.T, start time.Time, bound time.Duration) goneTimes {
	t.Helper()
	var g goneTimes
	ranks := append(slices.Clone(j.ranks), j.children...)
	for {
		now := time.Since(start)
		ranks = slices.DeleteFunc(ranks, func(p int) bool { return !alive(p) })
		if len(ranks) == 0 && g.ranks == 0 {
			g.ranks = now
		}
		if g.watchdog == 0 && !alive(j.watchdog) {
			g.watchdog = now
		}
		if g.ranks != 0 && g.watchdog != 0 {
			break
		}
		if now > bound {
			t.Fatalf("still alive %v after the launcher's signal: ranks and children %v, watchdog %v\n%s",
				now, ranks, alive(j.watchdog), j.output.String())
		}
		time.Sleep(2 * time.Millisecond)
	}
	return g
}

// A rank Run stops is stopped with its group: a child that ignores the
// signal its rank dies of (a shell's background command, SIGINT) gets
// SIGKILL at the end of the grace period though its rank has exited.
func TestRunStopsLeftoversOfStoppedRanks(t *testing.T) {
	const n, grace = 2, 300 * time.Millisecond
	ctx, cancel := context.WithCancelCause(guard(t))
	defer cancel(nil)
	var stderr syncBuffer
	stdout := whenReady(n, func() { cancel(errors.New("interrupt signal received")) })
	// The child ignores SIGINT from the start (a disposition inherited at
	// the fork), holds no output, and its rank dies of SIGINT.
	script := `trap '' INT; sleep 300 >/dev/null 2>&1 & trap - INT; echo "child $!"; echo ready; wait`
	spec := Spec{N: n, Prog: "sh", Args: []string{"-c", script},
		Grace: grace, Stdout: stdout, Stderr: &stderr, LogPrefix: "launcher: "}
	var children []int
	t.Cleanup(func() {
		for _, c := range children {
			_ = syscall.Kill(c, syscall.SIGKILL)
		}
	})
	res, err := Run(ctx, spec)
	for _, l := range stdout.Lines() {
		if _, pid, ok := strings.Cut(l, "child "); ok {
			p, err := strconv.Atoi(pid)
			require.NoError(t, err)
			children = append(children, p)
		}
	}
	require.ErrorIs(t, err, context.Canceled)
	require.Len(t, children, n)
	for i, st := range res.Ranks {
		assert.Equal(t, syscall.SIGINT, st.Signal, "rank %d: %s", i, st)
	}
	assert.GreaterOrEqual(t, res.Elapsed, grace, "Run waited for the leftovers")
	for _, c := range children {
		assert.Eventually(t, func() bool { return !alive(c) }, deathBound, time.Millisecond, "child %d outlived the job", c)
	}
	// The ranks die of SIGINT at once, and their leftovers get SIGKILL at
	// the end of the grace period; a rank still there then (on a machine
	// starved of the CPU) gets it, with its group, as any other.
	assert.Contains(t, stderr.String(), "300ms after being told to stop; sent SIGKILL\n")
	if !strings.Contains(stderr.String(), "launcher: processes started by 2 stopped ranks still running 300ms") {
		t.Logf("not every rank had exited by the end of the grace period:\n%s", stderr.String())
	}
}

// TestWatchdogEndsWithJob: however a job ends, Run reaps its watchdog
// before it returns.
func TestWatchdogEndsWithJob(t *testing.T) {
	self := os.Getpid()
	for name, spec := range map[string]Spec{
		"success":     roleSpec(3, "print"),
		"failure":     func() Spec { s := roleSpec(3, "fail 1 3"); s.FailGrace = -1; return s }(),
		"not started": func() Spec { s := roleSpec(2, "print"); s.Dir = filepath.Join(t.TempDir(), "missing"); return s }(),
	} {
		t.Run(name, func(t *testing.T) {
			_, _ = Run(guard(t), spec)
			assert.Empty(t, watchdogsOf(self), "a watchdog left, or not reaped")
		})
	}
	t.Run("interrupted", func(t *testing.T) {
		ctx, cancel := context.WithCancel(guard(t))
		defer cancel()
		var during []int
		spec := roleSpec(3, "sleep")
		spec.Stdout = whenReady(3, func() {
			during = watchdogsOf(self)
			cancel()
		})
		_, err := Run(ctx, spec)
		require.ErrorIs(t, err, context.Canceled)
		assert.Len(t, during, 1, "the job had a watchdog")
		assert.Empty(t, watchdogsOf(self), "a watchdog left, or not reaped")
	})
}

// While its launcher lives, no rank is stopped by the mechanisms that stop
// them when it dies: not by the parent-death signal, which fires when the
// thread that started the rank exits, while threads come and go (a
// goroutine that exits locked to its thread ends the thread) and
// GOMAXPROCS changes, and other jobs start and end; nor by the watchdog.
func TestRanksLiveWhileLauncherLives(t *testing.T) {
	const jobs, n = 4, 3
	const napFor = 3 * time.Second
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(0))
	ctx := guard(t)
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(2)
	go func() { // thread churn
		defer wg.Done()
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			var inner sync.WaitGroup
			for range 8 {
				inner.Add(1)
				go func() {
					defer inner.Done()
					runtime.LockOSThread() // and exit locked: the thread ends
					time.Sleep(time.Millisecond)
				}()
			}
			inner.Wait()
			runtime.GOMAXPROCS(1 + i%(2*runtime.NumCPU()))
		}
	}()
	short := 0
	go func() { // short jobs, whose starting threads end while the long ones run
		defer wg.Done()
		for {
			select {
			case <-stop:
				return
			default:
			}
			_, err := Run(ctx, roleSpec(2, "print"))
			assert.NoError(t, err)
			short++
		}
	}()

	results := make([]*Result, jobs)
	errs := make([]error, jobs)
	var long sync.WaitGroup
	for k := range jobs {
		long.Add(1)
		go func() {
			defer long.Done()
			results[k], errs[k] = Run(ctx, roleSpec(n, "nap "+napFor.String()))
		}()
	}
	testwait.Group(t, &long, "the long jobs")
	close(stop)
	testwait.Group(t, &wg, "the short jobs' loop")
	t.Logf("%d short jobs ran meanwhile", short)
	for k := range jobs {
		require.NoError(t, errs[k], "job %d", k)
		for _, st := range results[k].Ranks {
			assert.True(t, st.OK(), "job %d rank %d: %s", k, st.Rank, st)
		}
	}
}

// The watchdog's side of the protocol, in this process: at end-of-file it
// stops the groups registered and not dropped, and nothing else; "exit"
// makes it return at once; ids it must never signal (0, 1, -1 mean this
// group, init, everyone) and garbage are ignored.
func TestWatchdogProtocol(t *testing.T) {
	group := func() (leader *exec.Cmd, child int) {
		cmd := exec.Command("sh", "-c", "sleep 300 & echo $!; wait")
		cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
		out, err := cmd.StdoutPipe()
		require.NoError(t, err)
		require.NoError(t, cmd.Start())
		t.Cleanup(func() {
			_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
			_ = cmd.Wait()
		})
		line, err := bufio.NewReader(out).ReadString('\n')
		require.NoError(t, err)
		child, err = strconv.Atoi(strings.TrimSpace(line))
		require.NoError(t, err)
		return cmd, child
	}
	a, aChild := group()
	b, bChild := group()
	pa, pb := strconv.Itoa(a.Process.Pid), strconv.Itoa(b.Process.Pid)

	runWatchdog(strings.NewReader("+"+pb+"\nexit\n+"+pa+"\n"), time.Minute)
	runWatchdog(strings.NewReader("+"+pa+"\n+"+pb+"\n-"+pb+"\n+0\n+1\n+-1\n+x\n\nnonsense\n"), time.Minute)
	err := a.Wait()
	var ee *exec.ExitError
	require.True(t, errors.As(err, &ee), "%v", err)
	assert.Equal(t, syscall.SIGTERM, ee.Sys().(syscall.WaitStatus).Signal())
	assert.Eventually(t, func() bool { return !alive(aChild) }, time.Second, 2*time.Millisecond, "the child in a's group")
	assert.True(t, alive(b.Process.Pid) && alive(bChild), "b was dropped, and not signalled")
	assert.True(t, alive(os.Getpid()))
}

// A rank's gate runs its program only on the launcher's go-ahead, in its
// own process, without the gate's marks or pipes; with no go-ahead it runs
// nothing.
func TestRankGate(t *testing.T) {
	start := func(t *testing.T, script string) (*exec.Cmd, *gate, *syncBuffer) {
		sh, err := exec.LookPath("sh")
		require.NoError(t, err)
		cmd := exec.Command(sh, "-c", script)
		cmd.Env = append(os.Environ(), "GORACE=atexit_sleep_ms=0")
		g := gateRank(cmd)
		require.NotNil(t, g)
		out := &syncBuffer{}
		cmd.Stdout, cmd.Stderr = out, out
		require.NoError(t, cmd.Start())
		t.Cleanup(func() {
			_ = cmd.Process.Kill()
			_ = cmd.Wait()
		})
		return cmd, g, out
	}
	t.Run("go-ahead", func(t *testing.T) {
		cmd, g, out := start(t, `echo "pid $$ gate[${XPU_LAUNCH_GATE-}]"; ls -l /proc/self/fd`)
		var pipes []string
		for _, f := range []*os.File{g.goW, g.statR} {
			fi, err := f.Stat()
			require.NoError(t, err)
			pipes = append(pipes, "pipe:["+strconv.FormatUint(fi.Sys().(*syscall.Stat_t).Ino, 10)+"]")
		}
		require.NoError(t, g.open(cmd.Process.Pid, nil))
		require.NoError(t, cmd.Wait())
		lines := out.Lines()
		require.NotEmpty(t, lines)
		assert.Equal(t, "pid "+strconv.Itoa(cmd.Process.Pid)+" gate[]", lines[0], "the program runs in the gate's process, without its mark")
		for _, l := range lines[1:] {
			for _, p := range pipes {
				assert.NotContains(t, l, p, "the program got a pipe of the gate")
			}
		}
	})
	t.Run("no go-ahead", func(t *testing.T) {
		dir := t.TempDir()
		cmd, g, _ := start(t, `touch `+dir+`/ran`)
		g.abort() // the launcher's ends closed without a word: as if it died
		err := cmd.Wait()
		var ee *exec.ExitError
		require.ErrorAs(t, err, &ee)
		assert.Equal(t, gateExitNoGo, ee.ExitCode())
		assert.NoFileExists(t, filepath.Join(dir, "ran"))
	})
}

// A program that cannot be executed fails to start, through the gate as
// without it: its rank is not started, and the ranks after it are skipped.
func TestRunExecFailure(t *testing.T) {
	prog := filepath.Join(t.TempDir(), "garbage")
	require.NoError(t, os.WriteFile(prog, []byte("\x00\x01 not a program"), 0o755))
	res, err := Run(guard(t), Spec{N: 3, Prog: prog})
	var re *RankError
	require.ErrorAs(t, err, &re)
	assert.Equal(t, 0, re.Status.Rank)
	assert.Zero(t, re.Status.Pid)
	assert.ErrorIs(t, re.Status.Err, syscall.ENOEXEC)
	assert.Contains(t, err.Error(), "rank 0 failed: not started: start "+prog+": ")
	assert.Contains(t, err.Error(), "exec format error")
	for _, st := range res.Ranks[1:] {
		assert.True(t, st.Stopped)
		assert.Zero(t, st.Pid)
	}
	assert.Empty(t, watchdogsOf(os.Getpid()))
}

// procStat is what /proc/PID/stat says of a process.
type procStat struct {
	state           byte
	ppid, pgid, sid int
	comm            string
}

func statOf(t *testing.T, pid int) procStat {
	t.Helper()
	st, ok := readStat(pid)
	require.True(t, ok, "process %d is gone", pid)
	return st
}

func readStat(pid int) (procStat, bool) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return procStat{}, false
	}
	s := string(b)
	open, end := strings.IndexByte(s, '('), strings.LastIndexByte(s, ')')
	if open < 0 || end < open {
		return procStat{}, false
	}
	f := strings.Fields(s[end+1:])
	if len(f) < 4 {
		return procStat{}, false
	}
	st := procStat{state: f[0][0], comm: s[open+1 : end]}
	st.ppid, _ = strconv.Atoi(f[1])
	st.pgid, _ = strconv.Atoi(f[2])
	st.sid, _ = strconv.Atoi(f[3])
	return st, true
}

// pids lists the processes in /proc.
func pids() []int {
	ents, _ := os.ReadDir("/proc")
	var out []int
	for _, e := range ents {
		if p, err := strconv.Atoi(e.Name()); err == nil {
			out = append(out, p)
		}
	}
	return out
}

// watchdogsOf returns the watchdogs whose parent is ppid, zombies included:
// processes named watchdogName by their argv[0] (from the moment they are
// started) or their command name (which outlives their argv).
func watchdogsOf(ppid int) []int {
	var out []int
	for _, p := range pids() {
		st, ok := readStat(p)
		if !ok || st.ppid != ppid {
			continue
		}
		argv, _ := os.ReadFile("/proc/" + strconv.Itoa(p) + "/cmdline")
		if st.comm == watchdogName || strings.HasPrefix(string(argv), watchdogName+"\x00") {
			out = append(out, p)
		}
	}
	return out
}

// marked returns the live processes whose environment holds tokenEnv=token.
func marked(token string) []int {
	var out []int
	for _, p := range pids() {
		env, err := os.ReadFile("/proc/" + strconv.Itoa(p) + "/environ")
		if err == nil && alive(p) && slices.Contains(strings.Split(string(env), "\x00"), tokenEnv+"="+token) {
			out = append(out, p)
		}
	}
	return out
}
