//go:build linux

package chaos

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/xpu-go/xpu/backends/procs"
)

func (cfg *Config) defaults() error {
	if cfg.N == 0 {
		cfg.N = 100
	}
	if len(cfg.Kinds) == 0 {
		cfg.Kinds = Kinds
	}
	if cfg.Ranks == 0 {
		cfg.Ranks = 4
	}
	if cfg.Ranks < 2 {
		return fmt.Errorf("chaos: %d ranks; a fault needs at least 2", cfg.Ranks)
	}
	def := func(d *time.Duration, v time.Duration) {
		if *d == 0 {
			*d = v
		}
	}
	def(&cfg.Budget, 30*time.Minute)
	def(&cfg.Detect, 2*time.Second)
	def(&cfg.Grace, time.Second)
	def(&cfg.Window, 1500*time.Millisecond)
	def(&cfg.Join, 5*time.Second)
	def(&cfg.Hang, max(cfg.Detect, cfg.Join)+cfg.Grace+10*time.Second)
	def(&cfg.Settle, cfg.Detect+cfg.Grace+2*time.Second)
	def(&cfg.MaxRun, 2*time.Minute)
	if cfg.Count == 0 {
		cfg.Count = 1 << 17
	}
	if cfg.Exe == "" {
		exe, err := os.Executable()
		if err != nil {
			return fmt.Errorf("chaos: the binary to run: %w", err)
		}
		cfg.Exe = exe
	}
	return nil
}

// Run runs the chaos test cfg describes and returns its report. It returns
// an error only when it cannot run at all; what the repetitions find is in
// the report.
func Run(cfg Config) (*Report, error) {
	if err := cfg.defaults(); err != nil {
		return nil, err
	}
	// Processes of a job whose launcher was killed become this process's
	// children, which it reaps (and may count as orphans meanwhile).
	if _, _, e := syscall.RawSyscall(syscall.SYS_PRCTL, prSetChildSubreaper, 1, 0); e != 0 {
		return nil, fmt.Errorf("chaos: becoming a child subreaper: %w", e)
	}
	dir, made := cfg.Dir, false
	if dir == "" {
		d, err := os.MkdirTemp("", "xpu-chaos-")
		if err != nil {
			return nil, err
		}
		dir, made = d, true
	}
	r := &runner{cfg: cfg, dir: dir, rng: rand.New(rand.NewPCG(cfg.Seed, 0x78707563_68616f73))}
	defer func() { r.ns.remove() }() // made at the first cut, if any
	rep := &Report{Seed: cfg.Seed}
	began := time.Now()
	for i := range cfg.N {
		if time.Since(began) > cfg.Budget {
			rep.CutShort = fmt.Sprintf("%d asked; the budget of %v was spent", cfg.N, cfg.Budget)
			break
		}
		o := r.rep(i, cfg.Kinds[i%len(cfg.Kinds)])
		rep.Outcomes = append(rep.Outcomes, o)
		if cfg.Log != nil {
			fmt.Fprintln(cfg.Log, o.String())
		}
	}
	rep.Elapsed = time.Since(began)
	if made && rep.Clean() {
		_ = os.RemoveAll(dir)
	}
	return rep, nil
}

const prSetChildSubreaper = 36

// runner holds what the repetitions share.
type runner struct {
	cfg   Config
	dir   string
	rng   *rand.Rand
	ns    *netns // made at the first cut
	nsErr error  // why none could be
}

// rep runs repetition i with a fault of kind k.
func (r *runner) rep(i int, k Kind) (o Outcome) {
	cfg := &r.cfg
	// Every draw is made whether or not it is used, so that the draws of
	// a repetition do not depend on what came before it.
	victim := r.rng.IntN(cfg.Ranks)
	at := time.Duration(r.rng.Int64N(int64(cfg.Window) + 1))
	isolate := r.rng.IntN(2) == 0
	peer := (victim + 1 + r.rng.IntN(cfg.Ranks-1)) % cfg.Ranks
	early := r.rng.Float64() < cfg.JoinShare && !cfg.AfterReady
	if earlyAt := time.Duration(r.rng.Int64N(int64(20*time.Millisecond) + 1)); early {
		at = earlyAt
	}
	o = Outcome{Rep: i, Kind: k, Victim: victim}
	if k == LauncherKill {
		o.Victim = -1
	}
	if k == Cut {
		if r.ns == nil && r.nsErr == nil {
			r.ns, r.nsErr = newNetns(cfg.Ranks)
		}
		if r.nsErr != nil {
			o.Skipped = r.nsErr.Error()
			return o
		}
		o.Cut = "all links"
		if !isolate {
			o.Cut = fmt.Sprintf("link to rank %d", peer)
		}
	}

	repDir := filepath.Join(r.dir, fmt.Sprintf("rep-%03d", i))
	tmp, status := filepath.Join(repDir, "tmp"), filepath.Join(repDir, "status")
	for _, d := range []string{tmp, status} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			o.Trouble = err.Error()
			return o
		}
	}
	defer func() {
		if o.OK() {
			_ = os.RemoveAll(repDir)
		} else {
			o.Dir = repDir
		}
	}()
	marker := fmt.Sprintf("%d.%d", os.Getpid(), i)
	env := setEnv(cleanEnv(os.Environ()),
		envRole+"="+roleLauncher, envJob+"="+marker, envStatus+"="+status,
		envRanks+"="+strconv.Itoa(cfg.Ranks), envCount+"="+strconv.Itoa(cfg.Count),
		envGrace+"="+cfg.Grace.String(), envMaxRun+"="+cfg.MaxRun.String(),
		procs.EnvTimeout+"="+cfg.Detect.String(), envJoinTimeout+"="+cfg.Join.String(), "TMPDIR="+tmp)
	if k == Cut {
		env = setEnv(env, envNetns+"="+r.ns.prefix, envMaster+"="+r.ns.addr(0)+":"+strconv.Itoa(21000+i%5000))
		defer r.ns.heal()
	}
	logFile, err := os.Create(filepath.Join(repDir, "launcher.log"))
	if err != nil {
		o.Trouble = err.Error()
		return o
	}
	defer logFile.Close()
	cmd := exec.Command(cfg.Exe)
	cmd.Env, cmd.Stdout, cmd.Stderr = env, logFile, logFile
	began := time.Now()
	if err := cmd.Start(); err != nil {
		o.Trouble = fmt.Sprintf("starting the launcher: %v", err)
		return o
	}
	exited := make(chan struct{})
	go func() {
		_ = cmd.Wait()
		close(exited)
	}()
	shm := watchShm(marker)
	var seen []int // pids of the job's processes, to reap
	defer func() {
		seen = append(seen, r.killJob(marker)...)
		select {
		case <-exited:
		default:
			_ = cmd.Process.Kill()
			<-exited
		}
		used := shm.stop()
		reap(seen)
		st := readStatus(status, cfg.Ranks)
		for rk, lines := range st {
			checked := 0
			for _, l := range lines {
				word, rest, _ := strings.Cut(l, " ")
				switch word {
				case "checked":
					checked, _ = strconv.Atoi(rest)
				case "wrong":
					o.Wrong = append(o.Wrong, fmt.Sprintf("rank %d: %s", rk, rest))
				case "error":
					o.Errors = append(o.Errors, fmt.Sprintf("rank %d: %s", rk, rest))
				case "join":
					o.Joins = append(o.Joins, fmt.Sprintf("rank %d: %s", rk, rest))
				}
			}
			o.Checked += checked
		}
		for _, e := range dirNames(tmp) {
			o.Leftovers = append(o.Leftovers, filepath.Join("$TMPDIR", e))
		}
		for _, e := range used {
			if _, err := os.Stat(e); err == nil {
				o.Leftovers = append(o.Leftovers, e)
			}
		}
		if o.Trouble != "" {
			o.Trouble += "; launcher's output: " + tail(filepath.Join(repDir, "launcher.log"))
		}
	}()

	start := began
	switch {
	case cfg.AfterReady:
		if !waitReady(status, cfg.Ranks, exited, time.Minute) {
			o.Trouble = "the job did not form"
			return o
		}
		start = time.Now()
	case early:
		// From the moment the victim's process (any rank's) exists.
		want := victim
		if k == LauncherKill {
			want = -1
		}
		if r.waitRank(marker, want, exited, 10*time.Second) == 0 {
			o.Trouble = "no rank started"
			return o
		}
		start = time.Now()
	}
	select {
	case <-exited:
		o.Trouble = "the job ended before the fault"
		return o
	case <-time.After(time.Until(start.Add(at))):
	}

	// The fault.
	var pid int
	if k != LauncherKill {
		pid = r.waitRank(marker, victim, exited, 10*time.Second)
		if pid == 0 {
			o.Trouble = fmt.Sprintf("rank %d never started", victim)
			return o
		}
	}
	o.At = time.Since(began)
	if k == LauncherKill {
		o.Joined = waitReady(status, cfg.Ranks, nil, 0)
	} else {
		o.Joined = slices.Contains(readStatus(status, cfg.Ranks)[victim], "ready")
	}
	struck := time.Now()
	switch k {
	case Kill:
		err = syscall.Kill(pid, syscall.SIGKILL)
	case Stop:
		err = syscall.Kill(pid, syscall.SIGSTOP)
	case Cut:
		if isolate {
			err = r.ns.isolate(victim)
		} else {
			err = r.ns.cut(victim, peer)
		}
	case LauncherKill:
		err = cmd.Process.Kill()
	}
	if err != nil {
		o.Trouble = fmt.Sprintf("striking: %v", err)
		return o
	}

	// The outcome.
	select {
	case <-exited:
		o.Ended = time.Since(struck)
	case <-time.After(cfg.Hang):
		o.Hang = true
		return o
	}
	ended := time.Now()
	for deadline := ended.Add(cfg.Settle); ; time.Sleep(10 * time.Millisecond) {
		ps := scan(marker)
		if len(ps) == 0 {
			o.Gone = time.Since(ended)
			break
		}
		if time.Now().After(deadline) {
			for _, p := range ps {
				o.Orphans = append(o.Orphans, p.String())
				seen = append(seen, p.pid)
			}
			break
		}
	}
	return o
}

// cleanEnv drops from env the variables of an enclosing job and of a
// previous chaos role, so that a run under `xpu run` or from a rank does
// not pass them on.
func cleanEnv(env []string) []string {
	var out []string
	for _, kv := range env {
		if strings.HasPrefix(kv, "XPU_") {
			continue
		}
		out = append(out, kv)
	}
	return out
}

// proc is a process of a job.
type proc struct {
	pid  int
	role string // the chaos role, or the command name of another process
	rank string // XPU_RANK, if set
	stat string // the state letter
}

func (p proc) String() string {
	s := fmt.Sprintf("pid %d (%s", p.pid, p.role)
	if p.rank != "" && p.role == roleRank {
		s += " " + p.rank
	}
	if p.stat != "" {
		s += ", state " + p.stat
	}
	return s + ")"
}

// scan returns the live processes whose environment holds the marker.
// Zombies are dead (and their environment is empty): they are not listed.
func scan(marker string) []proc {
	ents, err := os.ReadDir("/proc")
	if err != nil {
		return nil
	}
	want := []byte(envJob + "=" + marker)
	self := os.Getpid()
	var out []proc
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == self {
			continue
		}
		env, err := os.ReadFile("/proc/" + e.Name() + "/environ")
		if err != nil || len(env) == 0 {
			continue
		}
		vars := bytes.Split(env, []byte{0})
		if !slices.ContainsFunc(vars, func(v []byte) bool { return bytes.Equal(v, want) }) {
			continue
		}
		p := proc{pid: pid, stat: procState(pid)}
		if p.stat == "Z" {
			continue
		}
		for _, v := range vars {
			if k, val, ok := bytes.Cut(v, []byte("=")); ok {
				switch string(k) {
				case envRole:
					p.role = string(val)
				case procs.EnvRank:
					p.rank = string(val)
				}
			}
		}
		if cmdline, err := os.ReadFile("/proc/" + e.Name() + "/cmdline"); err == nil {
			if name, _, _ := bytes.Cut(cmdline, []byte{0}); len(name) > 0 && !bytes.HasPrefix(name, []byte("/")) {
				p.role = string(name) // a helper: the launcher's watchdog, ip netns exec
			}
		}
		out = append(out, p)
	}
	return out
}

// procState returns the state letter of pid ("R", "S", "T", "Z", …), or ""
// when it is gone.
func procState(pid int) string {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return ""
	}
	i := bytes.LastIndexByte(b, ')')
	if i < 0 || i+2 >= len(b) {
		return ""
	}
	return string(b[i+2])
}

// shmWatch records the /dev/shm entries that the processes of a job map or
// hold open. Other jobs on the machine (MPI's shared-memory segments, say)
// create and remove entries there too: only the job's own count as its
// leftovers.
type shmWatch struct {
	done chan struct{}
	out  chan []string
}

// shmPoll is how often a shmWatch looks; a segment made and unmapped
// between two looks escapes it.
const shmPoll = 20 * time.Millisecond

func watchShm(marker string) *shmWatch {
	w := &shmWatch{done: make(chan struct{}), out: make(chan []string, 1)}
	go func() {
		seen := map[string]bool{}
		tick := time.NewTicker(shmPoll)
		defer tick.Stop()
		for {
			for _, p := range scan(marker) {
				for _, f := range shmUsed(p.pid) {
					seen[f] = true
				}
			}
			select {
			case <-w.done:
				var out []string
				for f := range seen {
					out = append(out, f)
				}
				slices.Sort(out)
				w.out <- out
				return
			case <-tick.C:
			}
		}
	}()
	return w
}

// stop ends the watch and returns the entries seen.
func (w *shmWatch) stop() []string {
	close(w.done)
	return <-w.out
}

// shmUsed returns the /dev/shm files that pid maps or holds open.
func shmUsed(pid int) []string {
	var out []string
	dir := "/proc/" + strconv.Itoa(pid)
	if maps, err := os.ReadFile(dir + "/maps"); err == nil {
		for _, l := range strings.Split(string(maps), "\n") {
			if i := strings.Index(l, "/dev/shm/"); i >= 0 {
				out = append(out, strings.TrimSuffix(l[i:], " (deleted)"))
			}
		}
	}
	if fds, err := os.ReadDir(dir + "/fd"); err == nil {
		for _, fd := range fds {
			if t, err := os.Readlink(dir + "/fd/" + fd.Name()); err == nil && strings.HasPrefix(t, "/dev/shm/") {
				out = append(out, strings.TrimSuffix(t, " (deleted)"))
			}
		}
	}
	return out
}

// waitRank waits until rank's process (any rank's, for rank -1) exists and
// returns its pid; 0 if it does not within d or the launcher ends.
func (r *runner) waitRank(marker string, rank int, exited <-chan struct{}, d time.Duration) int {
	want := strconv.Itoa(rank)
	for end := time.Now().Add(d); time.Now().Before(end); time.Sleep(time.Millisecond) {
		for _, p := range scan(marker) {
			if (p.rank == want || rank < 0 && p.rank != "") && (p.role == roleRank || p.role == "ip") {
				return p.pid
			}
		}
		select {
		case <-exited:
			return 0
		default:
		}
	}
	return 0
}

// killJob sends SIGKILL to every process of the job until none is left, and
// returns their pids.
func (r *runner) killJob(marker string) []int {
	var pids []int
	for end := time.Now().Add(10 * time.Second); time.Now().Before(end); time.Sleep(10 * time.Millisecond) {
		ps := scan(marker)
		if len(ps) == 0 {
			break
		}
		for _, p := range ps {
			_ = syscall.Kill(p.pid, syscall.SIGKILL)
			pids = append(pids, p.pid)
		}
		reap(pids)
	}
	return pids
}

// reap waits for those of pids that are this process's children and have
// ended (orphans it adopted as a subreaper), and for any other zombie child
// it adopted.
func reap(pids []int) {
	self := strconv.Itoa(os.Getpid())
	if ents, err := os.ReadDir("/proc"); err == nil {
		for _, e := range ents {
			b, err := os.ReadFile("/proc/" + e.Name() + "/stat")
			if err != nil {
				continue
			}
			// pid (comm) state ppid …
			i := bytes.LastIndexByte(b, ')')
			if f := strings.Fields(string(b[i+1:])); len(f) > 2 && f[0] == "Z" && f[1] == self {
				if pid, err := strconv.Atoi(e.Name()); err == nil {
					pids = append(pids, pid)
				}
			}
		}
	}
	for _, pid := range pids {
		var ws syscall.WaitStatus
		_, _ = syscall.Wait4(pid, &ws, syscall.WNOHANG, nil)
	}
}

// readStatus returns the lines of each rank's status file.
func readStatus(dir string, ranks int) [][]string {
	out := make([][]string, ranks)
	for rk := range ranks {
		f, err := os.Open(filepath.Join(dir, "rank-"+strconv.Itoa(rk)))
		if err != nil {
			continue
		}
		sc := bufio.NewScanner(f)
		for sc.Scan() {
			out[rk] = append(out[rk], sc.Text())
		}
		_ = f.Close()
	}
	return out
}

// waitReady waits at most d until every rank has reported "ready"; false
// when the launcher ends (exited closes) or d passes first.
func waitReady(dir string, ranks int, exited <-chan struct{}, d time.Duration) bool {
	end := time.Now().Add(d)
	for {
		n := 0
		for _, lines := range readStatus(dir, ranks) {
			if slices.Contains(lines, "ready") {
				n++
			}
		}
		if n == ranks {
			return true
		}
		if !time.Now().Before(end) {
			return false
		}
		select {
		case <-exited:
			return false
		case <-time.After(10 * time.Millisecond):
		}
	}
}

// dirNames returns the names in dir, none if it cannot be read.
func dirNames(dir string) []string {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil
	}
	out := make([]string, len(ents))
	for i, e := range ents {
		out[i] = e.Name()
	}
	return out
}

// tail returns the last lines of a file, on one line.
func tail(path string) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return err.Error()
	}
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	lines = lines[max(0, len(lines)-4):]
	return strings.Join(lines, " | ")
}

// netns is a set of network namespaces for the ranks of a job, one per
// rank, joined by a bridge in a hub namespace, with an address each in a
// /24 of 198.18.0.0/15 (the range set aside for network tests).
type netns struct {
	prefix string // rank i's namespace is prefix+i
	hub    string
	net    string // the first three bytes of the addresses
	ranks  int
	veths  []string // each rank's end of its link to the bridge
}

// newNetns makes the namespaces, or says why it cannot.
func newNetns(ranks int) (*netns, error) {
	if os.Geteuid() != 0 {
		return nil, errors.New("network namespaces need root (ip netns add); not root")
	}
	for _, tool := range []string{"ip", "iptables"} {
		if _, err := exec.LookPath(tool); err != nil {
			return nil, fmt.Errorf("%s not found (Debian packages iproute2 and iptables): %w", tool, err)
		}
	}
	id := os.Getpid() % 100000
	n := &netns{prefix: fmt.Sprintf("xpuchaos%d-", id), hub: fmt.Sprintf("xpuchaos%dh", id),
		net: fmt.Sprintf("198.19.%d", os.Getpid()%250+1), ranks: ranks}
	if out, err := exec.Command("ip", "netns", "add", n.hub).CombinedOutput(); err != nil {
		return nil, fmt.Errorf("cannot make a network namespace here: %v: %s", err, bytes.TrimSpace(out))
	}
	fail := func(err error) (*netns, error) {
		n.remove()
		return nil, err
	}
	if err := ip("-n", n.hub, "link", "add", "br0", "type", "bridge"); err != nil {
		return fail(err)
	}
	if err := ip("-n", n.hub, "link", "set", "br0", "up"); err != nil {
		return fail(err)
	}
	for rk := range ranks {
		ns, veth, hubEnd := n.name(rk), fmt.Sprintf("xc%dr%d", id, rk), fmt.Sprintf("xc%dh%d", id, rk)
		if err := ip("netns", "add", ns); err != nil {
			return fail(err)
		}
		n.veths = append(n.veths, veth)
		for _, args := range [][]string{
			{"link", "add", veth, "netns", ns, "type", "veth", "peer", "name", hubEnd, "netns", n.hub},
			{"-n", ns, "addr", "add", n.addr(rk) + "/24", "dev", veth},
			{"-n", ns, "link", "set", veth, "up"},
			{"-n", ns, "link", "set", "lo", "up"},
			{"-n", n.hub, "link", "set", hubEnd, "master", "br0"},
			{"-n", n.hub, "link", "set", hubEnd, "up"},
		} {
			if err := ip(args...); err != nil {
				return fail(err)
			}
		}
	}
	if out, err := exec.Command("ip", "netns", "exec", n.name(0), "iptables", "-L", "INPUT").CombinedOutput(); err != nil {
		return fail(fmt.Errorf("iptables does not work in a network namespace here: %v: %s", err, bytes.TrimSpace(out)))
	}
	return n, nil
}

func (n *netns) name(rank int) string { return n.prefix + strconv.Itoa(rank) }
func (n *netns) addr(rank int) string { return n.net + "." + strconv.Itoa(rank+1) }

// isolate drops every packet to and from rank's namespace but its own.
func (n *netns) isolate(rank int) error {
	v := n.veths[rank]
	if err := n.iptables(rank, "-A", "INPUT", "-i", v, "-j", "DROP"); err != nil {
		return err
	}
	return n.iptables(rank, "-A", "OUTPUT", "-o", v, "-j", "DROP")
}

// cut drops every packet between rank and peer, in rank's namespace.
func (n *netns) cut(rank, peer int) error {
	if err := n.iptables(rank, "-A", "INPUT", "-s", n.addr(peer), "-j", "DROP"); err != nil {
		return err
	}
	return n.iptables(rank, "-A", "OUTPUT", "-d", n.addr(peer), "-j", "DROP")
}

// heal removes every rule.
func (n *netns) heal() {
	for rk := range n.ranks {
		_ = n.iptables(rk, "-F")
	}
}

func (n *netns) iptables(rank int, args ...string) error {
	return ip(append([]string{"netns", "exec", n.name(rank), "iptables"}, args...)...)
}

// remove deletes the namespaces (and with them the links).
func (n *netns) remove() {
	if n == nil {
		return
	}
	for rk := range n.ranks {
		_ = exec.Command("ip", "netns", "del", n.name(rk)).Run()
	}
	_ = exec.Command("ip", "netns", "del", n.hub).Run()
}

func ip(args ...string) error {
	out, err := exec.Command("ip", args...).CombinedOutput()
	if err != nil {
		return fmt.Errorf("ip %s: %v: %s", strings.Join(args, " "), err, bytes.TrimSpace(out))
	}
	return nil
}
