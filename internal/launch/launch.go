package launch

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/xpu-go/xpu/internal/jobenv"
	"github.com/xpu-go/xpu/xerr"
)

// The environment variables Run sets in every rank: the names of package
// jobenv, which the ranks read them with.
const (
	EnvRank       = jobenv.Rank       // the rank, 0 … N-1
	EnvWorldSize  = jobenv.WorldSize  // N
	EnvLocalRank  = jobenv.LocalRank  // the rank among those on this host (all of them, here)
	EnvLocalSize  = jobenv.LocalSize  // the number of ranks on this host: N, here
	EnvMasterAddr = jobenv.MasterAddr // host of rank 0's rendezvous store
	EnvMasterPort = jobenv.MasterPort // its port
	EnvJobSecret  = jobenv.JobSecret  // shared key that authenticates the job's ranks to each other
	EnvBackend    = jobenv.Backend    // the backend chain of xpu.OpenDefault
)

// Defaults of Spec.
const (
	DefaultMasterAddr = "127.0.0.1"
	DefaultBackend    = "procs"
	DefaultGrace      = 5 * time.Second
	// DefaultFailGrace is how long the other ranks have to end on their
	// own after the first rank fails, before SIGTERM: twice the 5 s that
	// the procs communicator's Close waits at most for its peers'
	// goodbyes, so that a rank panicking in main, whose deferred Close
	// runs before Go prints the panic, is not killed in between.
	DefaultFailGrace = 10 * time.Second
	// TailLines is how many of the last lines of each rank's stderr Run
	// keeps, to show those of the rank that failed first.
	TailLines = 20
	// MaxLine is the longest line copied whole; a longer one is cut into
	// lines of MaxLine bytes, each with the rank's prefix.
	MaxLine = 1 << 20
	// SecretBytes is the number of random bytes of a fresh job secret (it is
	// passed hex-encoded, twice as many characters).
	SecretBytes = 32
)

// place is the backend name of the package's *xerr.Error values:
// "launch: no program to run: invalid argument".
const place = "launch"

// Errors of the package.
var (
	// ErrInvalidArgument reports a bad Spec; the value of xerr's.
	ErrInvalidArgument = xerr.ErrInvalidArgument
	// ErrRankFailed reports that a rank exited with a non-zero status, was
	// killed by a signal, or could not be started or waited for. The error
	// Run returns is a *RankError that matches it.
	ErrRankFailed = errors.New("rank failed")
	// ErrJobTimeout reports that the job ran past Spec.Timeout. It matches
	// context.DeadlineExceeded.
	ErrJobTimeout = xerr.NewKind("job timed out", context.DeadlineExceeded)
)

// Spec describes a job.
type Spec struct {
	// N is the number of ranks, at least 1.
	N int
	// Prog is the program, found through PATH as exec.Command finds it, and
	// Args its arguments. A Prog of "go" with Args "run", … is built once
	// first (see GoRun) unless NoBuild is set.
	Prog string
	Args []string
	// NoBuild runs `go run` as given in every rank.
	NoBuild bool
	// Dir is the ranks' working directory; empty means the current one.
	Dir string
	// Env is the environment the ranks start from; nil means os.Environ().
	// Run adds the variables of the job to it (replacing any of the same
	// name), and EnvBackend=DefaultBackend when it has no EnvBackend.
	Env []string
	// MasterAddr is the address of rank 0's rendezvous store; empty means
	// DefaultMasterAddr.
	MasterAddr string
	// MasterPort is its port; 0 means a port free on MasterAddr, chosen by
	// Run (it is free when chosen; the ranks bind it a moment later).
	MasterPort int
	// Secret is the job secret; empty means Env's EnvJobSecret when set,
	// else SecretBytes fresh random bytes, hex-encoded.
	Secret string
	// Timeout, when positive, stops the job after that long, counted from
	// the start of the ranks (a build for `go run` is not counted).
	Timeout time.Duration
	// Grace is how long ranks have to exit after SIGTERM before SIGKILL,
	// and how long a rank's output is read after it exits when something
	// else keeps it open; zero means DefaultGrace.
	Grace time.Duration
	// FailGrace is how long, after the first rank fails, the others have
	// to end on their own before Run sends them SIGTERM: long enough for
	// a panicking rank to finish its deferred calls and print its panic,
	// for the others to see their peer lost and say so. The wait ends as
	// soon as every rank has ended. Zero means DefaultFailGrace; a
	// negative value, none (SIGTERM at once).
	FailGrace time.Duration
	// Stdout and Stderr receive the ranks' output, each line prefixed with
	// "[rank] "; nil discards it.
	Stdout, Stderr io.Writer
	// LogPrefix, when not empty, makes Run report the job's events (a rank
	// failed, the job is being stopped) on Stderr, as lines beginning with
	// it ("xpu run: ").
	LogPrefix string
	// Bind binds each rank, from its start, to its share of the processors
	// this process may run on (Linux; elsewhere Run fails with an error
	// matching xerr.ErrNotSupported). With at least as many processors as
	// ranks, each rank takes an equal run of them, a core's hardware
	// threads together; with fewer, rank i takes processor i mod their
	// number. A Go rank's GOMAXPROCS follows its set. RankStatus.CPUs says
	// where each went. RunMPI refuses it: mpirun binds (--bind-to).
	Bind bool
}

// RankStatus is how one rank ended.
type RankStatus struct {
	Rank int
	// Pid is the rank's process id; 0 when it was never started.
	Pid int
	// ExitCode is the rank's exit status, or -1 when it was killed by a
	// signal or never ran.
	ExitCode int
	// Signal is the signal that killed it, or nil.
	Signal os.Signal
	// Stopped is true when Run signalled the rank to stop (another rank
	// failed, ctx was cancelled, the job timed out) before it exited.
	Stopped bool
	// Err is an error other than the exit status: the rank could not be
	// started or waited for.
	Err error
	// Elapsed is the time from its start to its exit.
	Elapsed time.Duration
	// Exited is when it exited; zero when it never ran.
	Exited time.Time
	// Lost is the first peer the rank reported lost before it exited
	// (package rankevent: the procs communicator reports it), or nil.
	Lost *PeerLoss
	// LeftEarly is true for a rank that did not fail of its own accord
	// (it exited 0, or Run stopped it) but that the ranks which failed had
	// lost while the job ran: a rank whose early os.Exit(0), or whose
	// Close before a hang, took a peer from them (see docs/adr/0038).
	LeftEarly bool
	// CPUs are the processors it was bound to (Spec.Bind); nil when it
	// was not.
	CPUs []int
	// Tail holds the last lines of its stderr, at most TailLines, each cut
	// to tailLineMax bytes; Panic the first line of its stderr that began
	// a Go panic or fatal error ("panic: …", "fatal error: …"), or "".
	Tail  []string
	Panic string
}

// PeerLoss is a rank's report that it lost a peer.
type PeerLoss struct {
	// Peer is the rank lost.
	Peer int
	// Goodbye is true when the peer closed its communicator; false when it
	// vanished (its connection ended or failed, or it fell silent).
	Goodbye bool
	// At is when the reporting rank saw the loss.
	At time.Time
	// Reason is the error its link failed with.
	Reason string
}

// OK reports whether the rank exited with status 0.
func (s RankStatus) OK() bool { return s.Err == nil && s.Signal == nil && s.ExitCode == 0 }

// failed reports whether the rank counts as failed: of its own accord, or
// by leaving the job while its peers still needed it.
func (s RankStatus) failed() bool { return (!s.OK() && !s.Stopped) || s.LeftEarly }

// String describes how the rank ended: "exit status 3", "killed by signal
// SIGKILL", "not started: …", "exit status 0 while the job ran".
func (s RankStatus) String() string {
	var end string
	switch {
	case s.Pid == 0 && s.Err != nil:
		return "not started: " + s.Err.Error()
	case s.Err != nil:
		end = s.Err.Error()
	case s.Signal != nil:
		end = "killed by signal " + SignalName(s.Signal)
	default:
		end = "exit status " + strconv.Itoa(s.ExitCode)
	}
	switch {
	case s.LeftEarly && s.Stopped:
		return "lost by its peers while the job ran, then stopped: " + end
	case s.LeftEarly:
		return end + " while the job ran"
	}
	return end
}

// Result is the outcome of a job, one RankStatus per rank.
type Result struct {
	Ranks []RankStatus
	// MasterAddr and MasterPort are the rendezvous address the ranks got.
	MasterAddr string
	MasterPort int
	// Elapsed is the job's wall time.
	Elapsed time.Duration
	// Cause is the rank whose failure is the job's root cause (see
	// RankError), or -1 when no rank failed.
	Cause int
}

// Failed returns the ranks that failed of their own accord (not after Run
// signalled them to stop), and those that left the job while their peers
// still needed it (LeftEarly), in rank order.
func (r *Result) Failed() []RankStatus {
	var out []RankStatus
	for _, s := range r.Ranks {
		if s.failed() {
			out = append(out, s)
		}
	}
	return out
}

// RankError reports the root cause of a failed job: the first rank to end
// abnormally, by time, whose failure is not explained by a peer it lost
// (docs/adr/0038-root-cause-first.md). It matches ErrRankFailed.
type RankError struct {
	// Status is the failed rank's.
	Status RankStatus
	// Others counts the other ranks that failed of their own accord.
	Others int
	// Stopped counts the ranks Run stopped because of the failure.
	Stopped int
}

func (e *RankError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "rank %d failed: %s", e.Status.Rank, e.Status)
	if e.Others > 0 {
		fmt.Fprintf(&b, " (and %d other %s failed)", e.Others, plural(e.Others, "rank"))
	}
	switch {
	case e.Stopped > 0 && e.Others == 0:
		fmt.Fprintf(&b, "; stopped %s", theOthers(e.Stopped))
	case e.Stopped > 0:
		fmt.Fprintf(&b, "; stopped %d %s", e.Stopped, plural(e.Stopped, "rank"))
	}
	return b.String()
}

// Is reports whether target is ErrRankFailed.
func (e *RankError) Is(target error) bool { return target == ErrRankFailed }

// theOthers names the n ranks other than one: "the other rank", "the
// other 3 ranks".
func theOthers(n int) string {
	if n == 1 {
		return "the other rank"
	}
	return fmt.Sprintf("the other %d ranks", n)
}

func plural(n int, s string) string {
	if n == 1 {
		return s
	}
	return s + "s"
}

// SignalName names a signal the way kill(1) does ("SIGTERM"), falling back
// to its description.
func SignalName(sig os.Signal) string {
	if s, ok := sig.(syscall.Signal); ok {
		if n, ok := signalNames[s]; ok {
			return n
		}
	}
	return sig.String()
}

var signalNames = map[syscall.Signal]string{
	syscall.SIGHUP: "SIGHUP", syscall.SIGINT: "SIGINT", syscall.SIGQUIT: "SIGQUIT",
	syscall.SIGILL: "SIGILL", syscall.SIGTRAP: "SIGTRAP", syscall.SIGABRT: "SIGABRT",
	syscall.SIGBUS: "SIGBUS", syscall.SIGFPE: "SIGFPE", syscall.SIGKILL: "SIGKILL",
	syscall.SIGSEGV: "SIGSEGV", syscall.SIGPIPE: "SIGPIPE", syscall.SIGALRM: "SIGALRM",
	syscall.SIGTERM: "SIGTERM",
}

// normalize checks s and fills in its defaults.
func (s *Spec) normalize() error {
	bad := func(format string, args ...any) error {
		return xerr.Errorf(place, "", ErrInvalidArgument, format, args...)
	}
	switch {
	case s.N < 1:
		return bad("the number of ranks is %d; want at least 1", s.N)
	case s.Prog == "":
		return bad("no program to run")
	case s.MasterPort < 0 || s.MasterPort > 65535:
		return bad("master port %d out of range [0, 65535]", s.MasterPort)
	case s.Timeout < 0:
		return bad("negative timeout %v", s.Timeout)
	case s.Grace < 0:
		return bad("negative grace period %v", s.Grace)
	}
	if s.FailGrace == 0 {
		s.FailGrace = DefaultFailGrace
	}
	if s.Env == nil {
		s.Env = os.Environ()
	}
	if s.MasterAddr == "" {
		s.MasterAddr = DefaultMasterAddr
	}
	if s.Grace == 0 {
		s.Grace = DefaultGrace
	}
	if s.Stdout == nil {
		s.Stdout = io.Discard
	}
	if s.Stderr == nil {
		s.Stderr = io.Discard
	}
	return nil
}

// NewSecret returns SecretBytes fresh random bytes, hex-encoded.
func NewSecret() string {
	b := make([]byte, SecretBytes)
	_, _ = rand.Read(b) // crypto/rand.Read never fails (it crashes the program instead)
	return hex.EncodeToString(b)
}

// FreePort returns a TCP port that is free on addr now. Another process can
// take it before the job binds it; pass a port explicitly where that matters.
func FreePort(addr string) (int, error) {
	l, err := net.Listen("tcp", net.JoinHostPort(addr, "0"))
	if err != nil {
		return 0, xerr.Op(place, "", fmt.Errorf("no free port on %s (give one explicitly): %w", addr, err))
	}
	port := l.Addr().(*net.TCPAddr).Port
	return port, l.Close()
}

// lookupEnv returns the last value of key in env (the one exec would use).
func lookupEnv(env []string, key string) (string, bool) {
	for i := len(env) - 1; i >= 0; i-- {
		if k, v, ok := strings.Cut(env[i], "="); ok && k == key {
			return v, true
		}
	}
	return "", false
}

// withEnv returns env without the keys of set, followed by set.
func withEnv(env []string, set ...string) []string {
	keys := make(map[string]bool, len(set))
	for _, kv := range set {
		k, _, _ := strings.Cut(kv, "=")
		keys[k] = true
	}
	out := make([]string, 0, len(env)+len(set))
	for _, kv := range env {
		if k, _, _ := strings.Cut(kv, "="); !keys[k] {
			out = append(out, kv)
		}
	}
	return append(out, set...)
}

// jobEnv returns the environment every rank shares (all but its rank).
func (s *Spec) jobEnv() []string {
	set := []string{
		EnvWorldSize + "=" + strconv.Itoa(s.N),
		EnvLocalSize + "=" + strconv.Itoa(s.N), // every rank runs on this host
		EnvMasterAddr + "=" + s.MasterAddr,
		EnvMasterPort + "=" + strconv.Itoa(s.MasterPort),
		EnvJobSecret + "=" + s.Secret,
	}
	if v, ok := lookupEnv(s.Env, EnvBackend); !ok || strings.TrimSpace(v) == "" {
		set = append(set, EnvBackend+"="+DefaultBackend)
	}
	return withEnv(s.Env, set...)
}

// Run runs the job spec describes and waits for it; see the package doc.
// It returns nil only when every rank exited with status 0; otherwise a
// *RankError, an error matching ctx.Err(), or one matching ErrJobTimeout. The
// Result is returned whenever ranks were started, with or without an error.
func Run(ctx context.Context, spec Spec) (*Result, error) {
	if err := spec.normalize(); err != nil {
		return nil, err
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if spec.Secret == "" {
		if v, ok := lookupEnv(spec.Env, EnvJobSecret); ok && v != "" {
			spec.Secret = v
		} else {
			spec.Secret = NewSecret()
		}
	}
	if spec.MasterPort == 0 {
		p, err := FreePort(spec.MasterAddr)
		if err != nil {
			return nil, err
		}
		spec.MasterPort = p
	}
	var cpus [][]int
	if spec.Bind {
		all, err := processors()
		if err != nil {
			return nil, xerr.Op(place, "bind", err)
		}
		cpus = placement(all, spec.N)
	}
	out := newOutput(spec.Stdout, spec.Stderr)
	if !spec.NoBuild {
		prog, args, cleanup, err := buildGoRun(ctx, &spec, out)
		if err != nil {
			return nil, err
		}
		defer cleanup()
		spec.Prog, spec.Args = prog, args
	}
	if err := checkProg(spec.Prog, spec.Dir); err != nil {
		return nil, err
	}
	j := &job{spec: spec, out: out, parent: ctx, cpus: cpus}
	return j.run()
}

// checkProg reports a program that cannot be run: not found on PATH, or,
// for a path, missing, a directory or not executable (relative to dir when
// the path is relative and dir is set, as the ranks will find it).
func checkProg(prog, dir string) error {
	c := exec.Command(prog)
	err := c.Err
	if err == nil && strings.ContainsRune(prog, filepath.Separator) {
		p := prog
		if dir != "" && !filepath.IsAbs(p) {
			p = filepath.Join(dir, p)
		}
		_, err = exec.LookPath(p)
	}
	if err != nil {
		return xerr.Errorf(place, "", ErrInvalidArgument, "cannot run %s: %w", prog, err)
	}
	return nil
}

// job is one call of Run.
type job struct {
	spec   Spec
	out    *output
	parent context.Context
	ranks  []*rank
	began  time.Time
	events string // the file the ranks report events to; "" without one
	// flightDir is where the ranks write their flight records; "" without one.
	flightDir string
	// cpus are the processors of each rank (Spec.Bind); nil when unbound.
	cpus [][]int

	// The state of the run, the main loop's.
	res        *Result
	exits      chan exit // never blocks a waiter
	running    int       // ranks started and not yet reaped
	failure    error     // why the job is being stopped; nil while it is not
	first      int       // the first rank seen to fail, when failure is a *RankError
	wd         *watchdog // nil without one
	stopping   bool      // the ranks have been signalled to stop
	stoppedAt  time.Time // when
	failTimer  *time.Timer
	failWait   <-chan time.Time // fires when the fail grace is over; nil when not armed or spent
	graceTimer *time.Timer
	grace      <-chan time.Time // fires when the grace period is over; nil when not armed or spent
}

type rank struct {
	cmd     *exec.Cmd
	gate    *gate // nil when it starts as itself
	stdout  *lineWriter
	stderr  *lineWriter
	start   time.Time
	done    bool // reaped (main loop's view)
	stopped bool // signalled by Run before it exited
}

type exit struct {
	i      int
	err    error
	exited time.Time // when it exited, seen before it was reaped; zero when not known
	at     time.Time // when it was reaped
}

func (j *job) logf(format string, args ...any) {
	if j.spec.LogPrefix != "" {
		j.out.line(j.out.stderr, j.spec.LogPrefix+fmt.Sprintf(format, args...))
	}
}

func (j *job) run() (*Result, error) {
	s := &j.spec
	began := time.Now()
	j.began = began
	ctx := j.parent
	if s.Timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeoutCause(ctx, s.Timeout, ErrJobTimeout)
		defer cancel()
	}
	j.res = &Result{Ranks: make([]RankStatus, s.N), MasterAddr: s.MasterAddr, MasterPort: s.MasterPort, Cause: -1}
	for i := range j.res.Ranks {
		j.res.Ranks[i] = RankStatus{Rank: i, ExitCode: -1}
	}
	j.exits = make(chan exit, s.N)
	// The watchdog stops the ranks' process groups should this process die
	// before they end; it is told each rank's group, and that the job is
	// over once every rank has been reaped (the deferred stop).
	wd, err := startWatchdog(s.Grace, j.logf)
	if err != nil {
		j.logf("no watchdog (%v): should this launcher die, what the ranks start would outlive it", err)
	}
	j.wd = wd
	defer wd.stop()
	env := s.jobEnv()
	if f, err := os.CreateTemp("", "xpu-run-events-*"); err != nil {
		j.logf("no file for the ranks' events (%v): a failure's cause will be told by the order of exits alone", err)
	} else {
		j.events = f.Name()
		_ = f.Close()
		defer os.Remove(j.events)
		wd.removeOnDeath(j.events)
		env = withEnv(env, jobenv.Events+"="+j.events)
	}
	env, rmFlight := j.flightSetup(env)
	defer rmFlight()
	j.startRanks(env)
	defer func() {
		if j.graceTimer != nil {
			j.graceTimer.Stop()
		}
		if j.failTimer != nil {
			j.failTimer.Stop()
		}
	}()
	if j.failure != nil && j.running > 0 {
		j.stop(syscall.SIGTERM)
	}
	j.reapAll(ctx)
	if j.grace != nil {
		// The job was stopped and every rank has exited within the grace
		// period; what they started and left in their groups gets the rest
		// of it.
		j.awaitLeftovers(j.grace)
	}
	j.res.Elapsed = time.Since(began)
	if re, ok := j.failure.(*RankError); ok {
		j.explain(re)
	}
	return j.res, j.failure
}

// startRanks starts the ranks in order, each tied to this process and, with
// a watchdog, gated until the watchdog knows its group. Should one fail to
// start, it records why as the job's failure, and the ranks after it as
// skipped.
func (j *job) startRanks(env []string) {
	s := &j.spec
	for i := 0; i < s.N; i++ {
		r := j.newRank(i, env)
		j.ranks = append(j.ranks, r)
		if j.wd != nil {
			// It runs its program once the watchdog knows its group.
			r.gate = gateRank(r.cmd)
		}
		release := func() error { return r.gate.open(r.cmd.Process.Pid, j.wd) }
		var cpus []int
		if j.cpus != nil {
			cpus = j.cpus[i]
		}
		at, err := startTied(r.cmd, cpus, release, func(err error, exited time.Time) {
			r.stdout.flush()
			r.stderr.flush()
			j.exits <- exit{i: i, err: err, exited: exited, at: time.Now()}
		})
		if err != nil {
			r.gate.abort()
			r.done = true
			j.res.Ranks[i].Err = fmt.Errorf("start %s: %w", s.Prog, err)
			j.failure = &RankError{Status: j.res.Ranks[i]}
			j.first = i
			j.logf("rank %d could not be started: %v", i, err)
			for k := i + 1; k < s.N; k++ {
				j.res.Ranks[k].Err, j.res.Ranks[k].Stopped = errSkipped, true
			}
			return
		}
		r.start = at
		j.res.Ranks[i].Pid = r.cmd.Process.Pid
		j.res.Ranks[i].CPUs = cpus
		j.running++
	}
}

// stop signals every rank still running, and arms the grace period after
// which the survivors get SIGKILL. A rank stopped by a signal (SIGSTOP,
// Ctrl-Z) gets SIGCONT after it, so that it can act on it.
func (j *job) stop(sig os.Signal) {
	if !j.stopping {
		j.stopping, j.stoppedAt = true, time.Now()
	}
	j.failWait = nil
	for _, r := range j.ranks {
		if !r.done {
			r.stopped = true
			signalGroup(r.cmd.Process, sig)
			if sig != syscall.SIGKILL && procStopped(r.cmd.Process.Pid) {
				continueGroup(r.cmd.Process)
			}
		}
	}
	if j.graceTimer == nil {
		j.graceTimer = time.NewTimer(j.spec.Grace)
		j.grace = j.graceTimer.C
	}
}

// reapAll waits until every running rank has exited, stopping the job on
// the first failure or when ctx ends, and killing what is left once the
// grace period is over.
func (j *job) reapAll(ctx context.Context) {
	done := ctx.Done()
	for j.running > 0 {
		select {
		case e := <-j.exits:
			j.reaped(e)
		case <-done:
			done = nil
			switch {
			case j.failure == nil:
				j.failure = j.interrupted(ctx, j.running)
				if j.timedOut(ctx) {
					j.flightReport()
				}
				j.stop(signalOf(context.Cause(ctx)))
			case !j.stopping:
				// A rank failed and the others had the fail grace to
				// end: an interrupt or the timeout ends it.
				sig := signalOf(context.Cause(ctx))
				j.logf("%s during the fail grace; sending %s to %s", j.why(ctx), SignalName(sig), j.runningRanks())
				if j.timedOut(ctx) {
					j.flightReport()
				}
				j.stop(sig)
			}
		case <-j.failWait:
			j.failWait = nil
			j.logf("%s still running %v after rank %d failed; sending SIGTERM",
				j.runningRanks(), j.spec.FailGrace, j.first)
			j.stop(syscall.SIGTERM)
		case <-j.grace:
			j.grace = nil
			j.killSurvivors()
		}
	}
}

// reaped records how a rank ended; should it be the first to fail, it
// stops the others.
func (j *job) reaped(e exit) {
	j.running--
	r := j.ranks[e.i]
	r.done = true
	if !r.stopped {
		// Its group is the job's no more (that of a stopped rank is,
		// until its leftovers are gone: see killLeftovers).
		j.wd.drop(r.cmd.Process.Pid)
	}
	st := &j.res.Ranks[e.i]
	st.Exited = e.exited
	if st.Exited.IsZero() {
		st.Exited = e.at
	}
	st.Elapsed = st.Exited.Sub(r.start)
	st.Stopped = r.stopped
	fillStatus(st, r.cmd.ProcessState, e.err)
	st.Tail, st.Panic = r.stderr.tail.lines()
	if st.OK() || j.failure != nil {
		return
	}
	j.failure = &RankError{Status: *st}
	j.first = e.i
	if j.running == 0 {
		return
	}
	others := theOthers(j.running)
	if j.spec.FailGrace < 0 {
		j.logf("rank %d failed: %s; stopping %s", e.i, st, others)
		j.stop(syscall.SIGTERM)
		return
	}
	// The others end on their own, as a rank that lost its peer does, or
	// are stopped when the fail grace is over.
	have := "have"
	if j.running == 1 {
		have = "has"
	}
	j.logf("rank %d failed: %s; %s %s %v to end before SIGTERM", e.i, st, others, have, j.spec.FailGrace)
	j.failTimer = time.NewTimer(j.spec.FailGrace)
	j.failWait = j.failTimer.C
}

// killSurvivors sends SIGKILL to the ranks still running once the grace
// period is over, and to what stopped ranks left behind.
func (j *job) killSurvivors() {
	n := 0
	for _, r := range j.ranks {
		if !r.done {
			n++
			r.stopped = true
			signalGroup(r.cmd.Process, syscall.SIGKILL)
		}
	}
	if n > 0 {
		j.logf("%d %s still running %v after being told to stop; sent SIGKILL", n, plural(n, "rank"), j.spec.Grace)
	}
	j.killLeftovers()
}

// leftoverPoll is how often Run looks whether the leftovers of stopped ranks
// are gone.
const leftoverPoll = 10 * time.Millisecond

// leftovers returns the ranks that were stopped and have exited, leaving
// live processes in their groups: children that ignored the signal the
// rank died of (a shell's background commands ignore SIGINT).
func (j *job) leftovers() []*rank {
	var cand []int
	byPid := map[int]*rank{}
	for _, r := range j.ranks {
		if r.done && r.stopped && r.cmd.Process != nil {
			cand = append(cand, r.cmd.Process.Pid)
			byPid[r.cmd.Process.Pid] = r
		}
	}
	var out []*rank
	// A group's id is not reused while a process holds it.
	for _, g := range groupsAlive(cand) {
		out = append(out, byPid[g])
	}
	return out
}

// killLeftovers sends SIGKILL to the groups of stopped ranks that exited
// leaving processes behind.
func (j *job) killLeftovers() {
	left := j.leftovers()
	for _, r := range left {
		signalGroup(r.cmd.Process, syscall.SIGKILL)
	}
	if len(left) > 0 {
		j.logf("processes started by %d stopped %s still running %v after being told to stop; sent SIGKILL",
			len(left), plural(len(left), "rank"), j.spec.Grace)
	}
}

// awaitLeftovers waits until the leftovers of stopped ranks are gone, or
// grace fires, when it kills them.
func (j *job) awaitLeftovers(grace <-chan time.Time) {
	tick := time.NewTicker(leftoverPoll)
	defer tick.Stop()
	for len(j.leftovers()) > 0 {
		select {
		case <-tick.C:
		case <-grace:
			j.killLeftovers()
			return
		}
	}
}

// interrupted reports why ctx ended the job, and returns the error Run
// returns for it.
func (j *job) interrupted(ctx context.Context, running int) error {
	s := &j.spec
	cause := context.Cause(ctx)
	sig := SignalName(signalOf(cause))
	if j.timedOut(ctx) {
		// Whom it waited for, without blaming any: a rank still running
		// may be the one that hangs or one that waits for it.
		left := j.runningRanks()
		j.logf("job timed out after %v; still running: %s; sending %s to %d %s",
			s.Timeout, left, sig, running, plural(running, "rank"))
		return fmt.Errorf("%w after %v; still running: %s", ErrJobTimeout, s.Timeout, left)
	}
	j.logf("interrupted; sending %s to %d %s", sig, running, plural(running, "rank"))
	if cause != nil && cause != ctx.Err() {
		return fmt.Errorf("job interrupted (%w): %w", cause, ctx.Err())
	}
	return fmt.Errorf("job interrupted: %w", ctx.Err())
}

// timedOut reports whether ctx ended because the job ran past its
// Timeout.
func (j *job) timedOut(ctx context.Context) bool {
	return errors.Is(context.Cause(ctx), ErrJobTimeout) && j.parent.Err() == nil
}

// why names what ended ctx, for a log line.
func (j *job) why(ctx context.Context) string {
	if j.timedOut(ctx) {
		return fmt.Sprintf("job timed out after %v", j.spec.Timeout)
	}
	return "interrupted"
}

// live returns the ranks not yet reaped, those stopped by a signal
// (SIGSTOP, Ctrl-Z) in held and the others in run.
func (j *job) live() (run, held []int) {
	for i, r := range j.ranks {
		if r.done {
			continue
		}
		if procStopped(r.cmd.Process.Pid) {
			held = append(held, i)
		} else {
			run = append(run, i)
		}
	}
	return run, held
}

// runningRanks names the ranks not yet reaped, and those of them stopped
// by a signal (SIGSTOP, Ctrl-Z) apart: "ranks 0, 2, 3 (rank 1 stopped by
// a signal)".
func (j *job) runningRanks() string {
	run, held := j.live()
	switch {
	case len(held) == 0:
		return rankList(run)
	case len(run) == 0:
		return rankList(held) + " (stopped by a signal)"
	}
	return rankList(run) + " and " + rankList(held) + " (stopped by a signal)"
}

// rankList names ranks: "rank 3", "ranks 0, 2, 5", "no rank".
func rankList(rs []int) string {
	switch len(rs) {
	case 0:
		return "no rank"
	case 1:
		return "rank " + strconv.Itoa(rs[0])
	}
	s := make([]string, len(rs))
	for i, r := range rs {
		s[i] = strconv.Itoa(r)
	}
	return "ranks " + strings.Join(s, ", ")
}

// errSkipped is the Err of the ranks not started because an earlier one
// could not be.
var errSkipped = errors.New("an earlier rank could not be started")

func (j *job) newRank(i int, env []string) *rank {
	s := &j.spec
	cmd := exec.Command(s.Prog, s.Args...)
	cmd.Dir = s.Dir
	cmd.Env = append(env[:len(env):len(env)],
		EnvRank+"="+strconv.Itoa(i), EnvLocalRank+"="+strconv.Itoa(i))
	prefix := "[" + strconv.Itoa(i) + "] "
	r := &rank{
		cmd:    cmd,
		stdout: newLineWriter(j.out, j.out.stdout, prefix),
		stderr: newLineWriter(j.out, j.out.stderr, prefix),
	}
	r.stderr.tail = newTail(TailLines)
	cmd.Stdout = r.stdout
	cmd.Stderr = r.stderr
	// Output still held open by a rank's children after it exits is cut
	// off after the grace period, so that Wait returns.
	cmd.WaitDelay = s.Grace
	setGroup(cmd)
	setDeathSignal(cmd) // so it is started with startTied
	return r
}

// fillStatus records how a reaped rank ended.
func fillStatus(st *RankStatus, ps *os.ProcessState, err error) {
	if ps != nil {
		st.ExitCode, st.Signal = exitInfo(ps)
	}
	var ee *exec.ExitError
	switch {
	case err == nil, errors.As(err, &ee):
	case errors.Is(err, exec.ErrWaitDelay):
		// The rank exited 0 but something it started kept its output
		// open past the grace period: its own exit status stands.
	default:
		st.Err = err
	}
}

// signalOf returns the signal to forward for a context's cause: the one
// signal.NotifyContext reports ("interrupt signal received"), else SIGTERM.
func signalOf(cause error) os.Signal {
	if cause != nil {
		msg := cause.Error()
		for _, sig := range []syscall.Signal{syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP, syscall.SIGQUIT} {
			if msg == sig.String()+" signal received" {
				return sig
			}
		}
	}
	return syscall.SIGTERM
}
