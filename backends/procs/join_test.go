package procs_test

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/xpu-go/xpu"
	"github.com/xpu-go/xpu/backends/procs"
	"github.com/xpu-go/xpu/comm"
	"github.com/xpu-go/xpu/internal/jobenv"
	"github.com/xpu-go/xpu/internal/launch"
	"github.com/xpu-go/xpu/internal/tooling/jointest"
	"github.com/xpu-go/xpu/internal/tooling/testwait"
)

// joinSlack is what a rank may take past its join timeout to give up: the
// race detector, a loaded machine.
const joinSlack = 3 * time.Second

// quiet is the logger of ranks whose progress a test does not read.
var quiet = slog.New(slog.DiscardHandler)

// dialResult is the outcome of one rank's Dial.
type dialResult struct {
	c    *procs.Comm
	err  error
	took time.Duration
}

// dialAsync dials cfg on a goroutine; the channel gets its outcome.
func dialAsync(ctx context.Context, cfg procs.Config) <-chan dialResult {
	ch := make(chan dialResult, 1)
	go func() {
		start := time.Now()
		c, err := procs.Dial(ctx, cfg)
		ch <- dialResult{c, err, time.Since(start)}
	}()
	return ch
}

// closeOnCleanup closes the ranks a test made.
func closeOnCleanup(t *testing.T, cs ...*procs.Comm) {
	t.Cleanup(func() { closeAll(t, cs) })
}

// TestJoinNoMaster checks a rank whose rank 0 never appears: Dial, and the
// driver's Open with a background context, fail within the join timeout
// (XPU_JOIN_TIMEOUT, the option join_timeout) with ErrJoinTimeout and the
// master's address in the message.
func TestJoinNoMaster(t *testing.T) {
	port := freePort(t)
	master := net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
	const bound = 300 * time.Millisecond
	start := time.Now()
	_, err := procs.Dial(testwait.Ctx(t), procs.Config{Rank: 1, Size: 2, MasterAddr: master, Secret: []byte("s"),
		JoinTimeout: bound, Logger: quiet})
	took := time.Since(start)
	require.ErrorIs(t, err, procs.ErrJoinTimeout)
	require.ErrorIs(t, err, context.DeadlineExceeded)
	require.ErrorIs(t, err, syscall.ECONNREFUSED, "the last attempt")
	require.ErrorContains(t, err, "procs dial: rank 1 of 2: no rank 0 listening at "+master+" after 300ms")
	require.NotContains(t, err.Error(), "\n")
	require.GreaterOrEqual(t, took, bound)
	require.Less(t, took, bound+joinSlack)
	t.Log(err)

	t.Setenv(procs.EnvRank, "1")
	t.Setenv(procs.EnvWorldSize, "2")
	t.Setenv(procs.EnvMasterAddr, "127.0.0.1")
	t.Setenv(procs.EnvMasterPort, strconv.Itoa(port))
	t.Setenv(procs.EnvJobSecret, "s")
	t.Setenv(procs.EnvJoinTimeout, bound.String())
	start = time.Now()
	_, err = xpu.Open(context.Background(), procs.Name, nil)
	require.ErrorIs(t, err, procs.ErrJoinTimeout)
	require.ErrorContains(t, err, "no rank 0 listening at "+master)
	require.Less(t, time.Since(start), bound+joinSlack)

	t.Setenv(procs.EnvJoinTimeout, "1h")
	start = time.Now()
	_, err = xpu.Open(context.Background(), procs.Name, xpu.Options{procs.OptJoinTimeout: bound.String()})
	require.ErrorIs(t, err, procs.ErrJoinTimeout, "the option over the variable")
	require.ErrorContains(t, err, "no rank 0 listening at "+master+" after 300ms")
	require.Less(t, time.Since(start), bound+joinSlack)
}

// TestJoinMissingRank runs ranks 0 and 1 of a job of 3 whose rank 2 never
// starts: rank 0 fails naming rank 2 as never joined, and rank 1, which
// did join, fails too rather than hang, naming rank 2 as well.
func TestJoinMissingRank(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	master := ln.Addr().String()
	const bound = time.Second
	cfg := procs.Config{Size: 3, MasterAddr: master, Secret: []byte(newSecret(t)), JoinTimeout: bound, Logger: quiet}
	cfg0 := cfg
	cfg0.Listener = ln
	r0 := dialAsync(testwait.Ctx(t), cfg0)
	cfg.Rank = 1
	r1 := dialAsync(testwait.Ctx(t), cfg)
	for rank, ch := range []<-chan dialResult{r0, r1} {
		res := testwait.Recv(t, ch, fmt.Sprintf("rank %d's Dial", rank))
		require.Nil(t, res.c)
		t.Logf("rank %d after %v: %v", rank, res.took.Round(time.Millisecond), res.err)
		require.ErrorIs(t, res.err, procs.ErrJoinTimeout, "rank %d", rank)
		require.Less(t, res.took, bound+joinSlack, "rank %d", rank)
		require.NotContains(t, res.err.Error(), "\n")
	}
}

// TestJoinMissingRankNames checks what each rank of a job of 4 says when
// rank 2 never starts: rank 0 that it never joined; rank 3, waiting in
// the store for rank 2's address, that rank 0 gave up on it, as soon as
// rank 0 does; rank 1 that it never connected.
func TestJoinMissingRankNames(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	master := ln.Addr().String()
	cfg := procs.Config{Size: 4, MasterAddr: master, Secret: []byte(newSecret(t)), Logger: quiet}
	start := time.Now()
	rs := map[int]<-chan dialResult{}
	for _, r := range []int{0, 1, 3} {
		c := cfg
		c.Rank = r
		c.JoinTimeout = map[int]time.Duration{0: time.Second, 1: 1500 * time.Millisecond, 3: time.Minute}[r]
		if r == 0 {
			c.Listener = ln
		}
		rs[r] = dialAsync(testwait.Ctx(t), c)
	}
	res := testwait.Recv(t, rs[0], "rank 0's Dial")
	require.ErrorIs(t, res.err, procs.ErrJoinTimeout)
	require.ErrorContains(t, res.err, "procs dial: rank 0 of 4: rank 2 of 4 never joined at "+master+" after 1s: join timed out")

	res = testwait.Recv(t, rs[3], "rank 3's Dial")
	require.ErrorIs(t, res.err, procs.ErrJoinTimeout)
	require.ErrorContains(t, res.err, "rank 3 of 4: address of rank 2: rank 0 gave up: rank 2 of 4 never joined at "+master+" after 1s")
	require.Less(t, time.Since(start), time.Second+joinSlack, "rank 3 is told when rank 0 gives up, long before its own minute")

	res = testwait.Recv(t, rs[1], "rank 1's Dial")
	require.ErrorIs(t, res.err, procs.ErrJoinTimeout)
	require.ErrorContains(t, res.err, "rank 1 of 4: rank 2 of 4 never connected with rank 1 after 1.5s")
}

// TestJoinProgressLogged checks the progress lines of a job of 3 whose
// ranks start one after the other: rank 1 first, waiting for rank 0 to
// listen, then rank 0, waiting for rank 2, then rank 2. Each rank that
// waited says what for, and that it joined.
func TestJoinProgressLogged(t *testing.T) {
	defer procs.SetJoinInterval(20 * time.Millisecond)()
	master := net.JoinHostPort("127.0.0.1", strconv.Itoa(freePort(t)))
	logs := make([]jointest.Log, 3)
	cfg := procs.Config{Size: 3, MasterAddr: master, Secret: []byte(newSecret(t)), JoinTimeout: 20 * time.Second}
	rs := make([]<-chan dialResult, 3)
	dial := func(r int) {
		c := cfg
		c.Rank, c.Logger = r, logs[r].Logger()
		rs[r] = dialAsync(testwait.Ctx(t), c)
	}
	dial(1)
	require.Eventually(t, func() bool { return strings.Contains(logs[1].String(), "waiting for rank 0 to listen at "+master) },
		10*time.Second, 5*time.Millisecond)
	dial(0)
	require.Eventually(t, func() bool {
		return strings.Contains(logs[0].String(), "procs rank 0 of 3: waiting for rank 2 of 3 to join at "+master)
	}, 10*time.Second, 5*time.Millisecond)
	dial(2)
	var cs []*procs.Comm
	for r, ch := range rs {
		res := testwait.Recv(t, ch, fmt.Sprintf("rank %d's Dial", r))
		require.NoError(t, res.err, "rank %d", r)
		cs = append(cs, res.c)
	}
	closeOnCleanup(t, cs...)
	for _, r := range []int{0, 1} {
		out := logs[r].String()
		t.Logf("rank %d logged:\n%s", r, out)
		require.Contains(t, out, "level=INFO")
		require.Contains(t, out, fmt.Sprintf("procs rank %d of 3: joined the job after", r))
		require.Contains(t, out, "master="+master)
		require.Contains(t, out, "timeout=20s")
	}
	each(t, cs, func(ctx context.Context, c *procs.Comm) error { return comm.Barrier(ctx, c) })
}

// TestJoinContextWins checks that the caller's context still bounds
// joining: when it ends before the join timeout, Dial returns its error
// (not ErrJoinTimeout), saying what the rank waited for.
func TestJoinContextWins(t *testing.T) {
	master := net.JoinHostPort("127.0.0.1", strconv.Itoa(freePort(t)))
	cfg := procs.Config{Rank: 1, Size: 2, MasterAddr: master, Secret: []byte("s"), JoinTimeout: time.Hour, Logger: quiet}

	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	start := time.Now()
	_, err := procs.Dial(ctx, cfg)
	require.ErrorIs(t, err, context.DeadlineExceeded)
	require.NotErrorIs(t, err, procs.ErrJoinTimeout)
	require.ErrorContains(t, err, "waiting for rank 0 to listen at "+master)
	require.Less(t, time.Since(start), joinSlack)

	ctx, cancel = context.WithCancel(context.Background())
	time.AfterFunc(100*time.Millisecond, cancel)
	_, err = procs.Dial(ctx, cfg)
	require.ErrorIs(t, err, context.Canceled)
	require.NotErrorIs(t, err, procs.ErrJoinTimeout)

	// Rank 0 waiting for a rank.
	ctx, cancel = context.WithCancel(context.Background())
	time.AfterFunc(100*time.Millisecond, cancel)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	_, err = procs.Dial(ctx, procs.Config{Rank: 0, Size: 2, Listener: ln, Secret: []byte("s"), JoinTimeout: time.Hour, Logger: quiet})
	require.ErrorIs(t, err, context.Canceled)
	require.ErrorContains(t, err, "waiting for rank 1 of 2 to join at")
}

// TestJoinForeignMaster checks a rank whose master address is held by
// rank 0 of another job (another secret): it keeps trying, says so in its
// progress lines, and fails at its join timeout saying that the process
// there belongs to another job.
func TestJoinForeignMaster(t *testing.T) {
	defer procs.SetJoinInterval(20 * time.Millisecond)()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	master := ln.Addr().String()
	ctx, cancel := context.WithCancel(context.Background())
	other := dialAsync(ctx, procs.Config{Rank: 0, Size: 2, Listener: ln, Secret: []byte("job A"), Logger: quiet})
	defer func() {
		cancel()
		require.ErrorIs(t, (testwait.Recv(t, other, "job A's canceled Dial")).err, context.Canceled)
	}()

	var log jointest.Log
	start := time.Now()
	_, err = procs.Dial(testwait.Ctx(t), procs.Config{Rank: 1, Size: 2, MasterAddr: master, Secret: []byte("job B"),
		JoinTimeout: 800 * time.Millisecond, Logger: log.Logger()})
	require.Less(t, time.Since(start), 800*time.Millisecond+joinSlack)
	t.Log(err)
	require.ErrorIs(t, err, procs.ErrJoinTimeout)
	require.ErrorIs(t, err, procs.ErrAuth, "the last attempt")
	require.ErrorContains(t, err, "no rank 0 of this job at "+master+" after 800ms: the process listening there belongs to another job")
	require.ErrorContains(t, err, procs.EnvMasterPort)
	require.Contains(t, log.String(), "waiting for rank 0 at "+master+": the process listening there is not this job's rank 0")
}

// TestJoinWaitsOutForeignMaster runs two jobs of 2 ranks that share a
// master port, as two jobs given the same port do: job B's rank 1 finds
// job A's rank 0 there and keeps trying; job A forms, which closes its
// listener; job B's rank 0 then takes the port, and job B forms too.
func TestJoinWaitsOutForeignMaster(t *testing.T) {
	defer procs.SetJoinInterval(20 * time.Millisecond)()
	master := net.JoinHostPort("127.0.0.1", strconv.Itoa(freePort(t)))
	ctx := testwait.Ctx(t)
	a := procs.Config{Size: 2, MasterAddr: master, Secret: []byte("job A"), JoinTimeout: 20 * time.Second, Logger: quiet}
	b := a
	b.Secret = []byte("job B")
	a0 := dialAsync(ctx, a)
	var logB1 jointest.Log
	b1cfg := b
	b1cfg.Rank, b1cfg.Logger = 1, logB1.Logger()
	b1 := dialAsync(ctx, b1cfg)
	require.Eventually(t, func() bool { return strings.Contains(logB1.String(), "not this job's rank 0") },
		10*time.Second, 5*time.Millisecond)
	a.Rank = 1
	a1 := dialAsync(ctx, a)
	var job [2][]*procs.Comm
	for _, ch := range []<-chan dialResult{a0, a1} {
		res := testwait.Recv(t, ch, "a Dial of job A")
		require.NoError(t, res.err)
		job[0] = append(job[0], res.c)
	}
	closeOnCleanup(t, job[0]...)
	b0 := dialAsync(ctx, b)
	for _, ch := range []<-chan dialResult{b0, b1} {
		res := testwait.Recv(t, ch, "a Dial of job B")
		require.NoError(t, res.err)
		job[1] = append(job[1], res.c)
	}
	closeOnCleanup(t, job[1]...)
	for _, cs := range job {
		each(t, cs, func(ctx context.Context, c *procs.Comm) error { return checkedAllreduce(ctx, c, 1000, 0) })
	}
}

// TestMasterPortInUse checks rank 0 of a job whose master port another
// process holds: it fails at once, naming the port, where the port came
// from and XPU_MASTER_PORT.
func TestMasterPortInUse(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer ln.Close()
	port := ln.Addr().(*net.TCPAddr).Port
	start := time.Now()
	_, err = procs.Dial(testwait.Ctx(t), procs.Config{Rank: 0, Size: 2, MasterAddr: ln.Addr().String(), Secret: []byte("s")})
	require.Less(t, time.Since(start), time.Second)
	require.ErrorIs(t, err, syscall.EADDRINUSE)
	require.NotErrorIs(t, err, procs.ErrJoinTimeout)
	require.ErrorContains(t, err, fmt.Sprintf("rank 0 of 2: master port %d is in use on 127.0.0.1", port))
	require.ErrorContains(t, err, "set XPU_MASTER_PORT to a free port")

	// A port derived from the Slurm step says so.
	job, derived := freeSlurmJob(t, 0)
	hold, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(derived)))
	require.NoError(t, err)
	defer hold.Close()
	for k, v := range slurmEnv(job, "0", 0, 2) {
		t.Setenv(k, v)
	}
	_, err = procs.FromEnv(context.Background())
	require.ErrorIs(t, err, syscall.EADDRINUSE)
	require.ErrorContains(t, err, fmt.Sprintf("master port %d is in use on 127.0.0.1 (by another job's rank 0 or another program; "+
		"the port was derived from SLURM_JOB_ID=%s SLURM_STEP_ID=0): set XPU_MASTER_PORT to a free port", derived, job))
	t.Log(err)
}

// jobVars are the variables of the launchers a rank could take its place
// from: slurmEnv clears those it does not set.
var jobVars = []string{procs.EnvRank, procs.EnvWorldSize, procs.EnvMasterAddr, procs.EnvMasterPort, procs.EnvJobSecret,
	"XPU_LOCAL_RANK", "XPU_LOCAL_SIZE", procs.EnvJoinTimeout, "MASTER_ADDR", "MASTER_PORT",
	"OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_LOCAL_SIZE", "OMPI_MCA_ess_base_jobid",
	"OMPI_MCA_orte_ess_jobid", "PMIX_RANK", "PMIX_SIZE", "PMIX_NAMESPACE", "PMI_RANK", "PMI_SIZE", "PMI_KVSNAME",
	"MPI_LOCALNRANKS", "SLURM_PROCID", "SLURM_NTASKS", "SLURM_NNODES", "SLURM_NODELIST", "SLURM_LAUNCH_NODE_IPADDR",
	"SLURM_NTASKS_PER_NODE", "SLURM_JOB_ID", "SLURM_STEP_ID"}

// slurmEnv is the environment srun gives rank of a step of size tasks on
// one node, with no master address, port or secret set.
func slurmEnv(job, step string, rank, size int) map[string]string {
	env := map[string]string{}
	for _, v := range jobVars {
		env[v] = ""
	}
	env["SLURM_PROCID"] = strconv.Itoa(rank)
	env["SLURM_NTASKS"] = strconv.Itoa(size)
	env["SLURM_NNODES"] = "1"
	env["SLURM_JOB_ID"] = job
	env["SLURM_STEP_ID"] = step
	return env
}

// freeSlurmJob returns a Slurm job id whose step 0 gets a port that is
// free on 127.0.0.1 now, and not avoid.
func freeSlurmJob(t *testing.T, avoid int) (string, int) {
	t.Helper()
	for range 100 {
		job := strconv.Itoa(100000 + rand.IntN(900000))
		port, _ := jobenv.JobPort(jobenv.Map(slurmEnv(job, "0", 0, 2)))
		if port == avoid {
			continue
		}
		if ln, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port))); err == nil {
			require.NoError(t, ln.Close())
			return job, port
		}
	}
	t.Fatal("no Slurm job id with a free port")
	return "", 0
}

// baseEnv is this process's environment without any launcher's variables.
func baseEnv() []string {
	drop := map[string]bool{}
	for _, v := range jobVars {
		drop[v] = true
	}
	var out []string
	for _, kv := range os.Environ() {
		if k, _, _ := strings.Cut(kv, "="); !drop[k] {
			out = append(out, kv)
		}
	}
	return out
}

// TestTwoSlurmStepsOneNode runs two simulated Slurm steps of 3 tasks side
// by side on this node, as two srun of one batch job would, with nothing
// but Slurm's variables: each derives a master port of its own from its
// job and step, and both complete their allreduces.
func TestTwoSlurmStepsOneNode(t *testing.T) {
	if testing.Short() {
		t.Skip("starts 6 processes; skipped in -short mode")
	}
	job1, port1 := freeSlurmJob(t, 0)
	job2, port2 := freeSlurmJob(t, port1)
	t.Logf("job %s step 0 on port %d, job %s step 0 on port %d", job1, port1, job2, port2)
	exe, err := os.Executable()
	require.NoError(t, err)
	var procs []*rankProc
	for _, job := range []string{job1, job2} {
		for r := range 3 {
			env := baseEnv()
			for k, v := range slurmEnv(job, "0", r, 3) {
				if v != "" {
					env = append(env, k+"="+v)
				}
			}
			env = append(env, envRole+"="+roleChecked, envIters+"=3", envCount+"=100000")
			procs = append(procs, startRank(t, exe, r, fmt.Sprintf("job %s rank %d", job, r), env))
		}
	}
	for _, p := range procs {
		p.expect(t, "OK", time.Minute)
		require.NoError(t, p.wait(), "rank %d", p.rank)
	}
}

// startRank starts the test binary as a rank process with env; the test's
// cleanup kills it if it still runs.
func startRank(t *testing.T, exe string, rank int, name string, env []string) *rankProc {
	t.Helper()
	cmd := exec.Command(exe, "-test.run=^$")
	cmd.Env = env
	p := spawnRank(t, cmd, rank, name)
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		for range p.lines {
		}
		_ = p.wait()
	})
	return p
}

// TestTwoXpuRunJobs runs two jobs of 3 ranks at once through the launcher
// behind `xpu run` (launch.Run): each gets a port of its own, and both
// complete their allreduces.
func TestTwoXpuRunJobs(t *testing.T) {
	if testing.Short() {
		t.Skip("starts 6 processes; skipped in -short mode")
	}
	exe, err := os.Executable()
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	env := append(baseEnv(), envRole+"="+roleChecked, envIters+"=3", envCount+"=100000")
	type outcome struct {
		res    *launch.Result
		err    error
		stdout string
	}
	var wg sync.WaitGroup
	outs := make([]outcome, 2)
	for k := range outs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var stdout bytes.Buffer
			res, err := launch.Run(ctx, launch.Spec{N: 3, Prog: exe, Args: []string{"-test.run=^$"}, NoBuild: true,
				Env: env, Stdout: &stdout, Stderr: &prefixWriter{t: t, prefix: fmt.Sprintf("job %d stderr: ", k)}})
			outs[k] = outcome{res, err, stdout.String()}
		}()
	}
	testwait.Group(t, &wg, "the jobs' launches")
	for k, o := range outs {
		require.NoError(t, o.err, "job %d: %s", k, o.stdout)
		require.Equal(t, 3, strings.Count(o.stdout, "] OK\n"), "job %d: %s", k, o.stdout)
	}
	require.NotEqual(t, outs[0].res.MasterPort, outs[1].res.MasterPort)
}
