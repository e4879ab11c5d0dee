//go:build linux

package chaos

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/xpu-go/xpu/backends/procs"
	"github.com/xpu-go/xpu/comm"
	"github.com/xpu-go/xpu/internal/launch"
	"github.com/xpu-go/xpu/memspace"
)

// The variables by which Run tells the launcher and the ranks what to do.
const (
	envRole   = "XPU_CHAOS_ROLE"   // "launcher" or "rank"
	envJob    = "XPU_CHAOS_JOB"    // the marker of the job's processes
	envStatus = "XPU_CHAOS_STATUS" // the directory of the ranks' status files
	envRanks  = "XPU_CHAOS_RANKS"  // the number of ranks
	envCount  = "XPU_CHAOS_COUNT"  // float64 elements of the large allreduce
	envGrace  = "XPU_CHAOS_GRACE"  // the launcher's Spec.Grace
	envMaxRun = "XPU_CHAOS_MAXRUN" // how long a rank loops at most
	envNetns  = "XPU_CHAOS_NETNS"  // the prefix of the ranks' network namespaces
	envInNS   = "XPU_CHAOS_IN_NS"  // set once a rank has entered its namespace
	envMaster = "XPU_CHAOS_MASTER" // rank 0's address (host:port) in namespaces

	// envJoinTimeout bounds how long a rank waits for the job to form
	// (package join's EnvTimeout, which procs.FromEnv reads).
	envJoinTimeout = "XPU_JOIN_TIMEOUT"
)

const (
	roleLauncher = "launcher"
	roleRank     = "rank"
)

// smallCount is the element count of the small allreduce, which travels
// eagerly; the large one (Config.Count) goes by rendezvous around the ring.
const smallCount = 1000

// IsRole reports whether this process was started by Run as a launcher or a
// rank; RunRole then plays it.
func IsRole() bool {
	r := os.Getenv(envRole)
	return r == roleLauncher || r == roleRank
}

// RunRole plays the role this process was started for and returns its exit
// status.
func RunRole() int {
	switch os.Getenv(envRole) {
	case roleLauncher:
		return launcherMain()
	case roleRank:
		return rankMain()
	}
	fmt.Fprintf(os.Stderr, "chaos: %s=%q is no role\n", envRole, os.Getenv(envRole))
	return 2
}

// launcherMain is `xpu run` for the job: launch.Run with this binary as the
// ranks' program, interrupted by SIGINT and SIGTERM as xpu run is.
func launcherMain() int {
	n, _ := strconv.Atoi(os.Getenv(envRanks))
	grace, _ := time.ParseDuration(os.Getenv(envGrace))
	exe, err := os.Executable()
	if err != nil {
		fmt.Fprintln(os.Stderr, "chaos launcher:", err)
		return 2
	}
	spec := launch.Spec{N: n, Prog: exe, Env: setEnv(os.Environ(), envRole+"="+roleRank), NoBuild: true,
		Grace: grace, Stdout: os.Stdout, Stderr: os.Stderr, LogPrefix: "xpu run: "}
	if m := os.Getenv(envMaster); m != "" {
		host, port, _ := strings.Cut(m, ":")
		spec.MasterAddr = host
		spec.MasterPort, _ = strconv.Atoi(port)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if _, err := launch.Run(ctx, spec); err != nil {
		fmt.Fprintln(os.Stderr, "xpu run:", err)
		return 1
	}
	return 0
}

// rankMain is a rank: it joins the job and runs checked allreduces until
// one fails or it has run for its time. It reports to its status file, not
// to its output (a rank that writes to the pipe of a dead launcher dies of
// SIGPIPE, which would hide an orphan), one line per event: "ready" once
// joined, "wrong …" for a wrong result, "lost …" when an allreduce failed
// with comm.ErrPeerLost, "error …" when it failed otherwise, "join …" when
// joining failed, "checked N" after every 16 allreduces checked, "done" at
// the end of its time.
func rankMain() int {
	rank, _ := strconv.Atoi(os.Getenv(procs.EnvRank))
	if ns := os.Getenv(envNetns); ns != "" && os.Getenv(envInNS) == "" {
		// Enter this rank's network namespace: ip netns exec runs this
		// binary again there, in this same process.
		ip, err := exec.LookPath("ip")
		if err == nil {
			exe, _ := os.Executable()
			err = syscall.Exec(ip, []string{"ip", "netns", "exec", ns + strconv.Itoa(rank), exe},
				setEnv(os.Environ(), envInNS+"=1"))
		}
		fmt.Fprintln(os.Stderr, "chaos rank: entering the network namespace:", err)
		return 2
	}
	f, err := os.OpenFile(filepath.Join(os.Getenv(envStatus), "rank-"+strconv.Itoa(rank)),
		os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o644)
	if err != nil {
		fmt.Fprintln(os.Stderr, "chaos rank:", err)
		return 2
	}
	defer f.Close()
	report := func(format string, args ...any) { fmt.Fprintf(f, format+"\n", args...) }
	count, _ := strconv.Atoi(os.Getenv(envCount))
	maxRun, _ := time.ParseDuration(os.Getenv(envMaxRun))

	// No deadline of its own: how long a join or an operation may take is
	// the backend's to bound (the chaos run counts a hang otherwise).
	ctx := context.Background()
	c, err := procs.FromEnv(ctx)
	if err != nil {
		report("join %v", err)
		return 3
	}
	defer c.Close()
	report("ready")
	end := time.Now().Add(maxRun)
	for i := 0; time.Now().Before(end); i++ {
		n := smallCount
		if i%2 == 1 {
			n = count
		}
		wrong, err := checkedAllreduce(ctx, c, n, i)
		switch {
		case wrong != "":
			report("wrong %s", wrong)
			return 4
		case errors.Is(err, comm.ErrPeerLost):
			report("lost at allreduce #%d: %v", i, err)
			return 1
		case err != nil:
			report("error at allreduce #%d: %v", i, err)
			return 2
		}
		if (i+1)%16 == 0 {
			report("checked %d", i+1)
		}
	}
	report("done")
	return 0
}

// checkedAllreduce sums count float64 over every rank, in place, and checks
// the result: element j of rank r is r+1+j%1000+iter%1000, so the sum is
// p(p+1)/2 + p(j%1000+iter%1000), exact in float64. It returns what is
// wrong, or the allreduce's error.
func checkedAllreduce(ctx context.Context, c comm.Comm, count, iter int) (wrong string, err error) {
	p, r := c.Size(), c.Rank()
	v := make([]float64, count)
	for j := range v {
		v[j] = float64(r + 1 + j%1000 + iter%1000)
	}
	b, err := memspace.FromSlice(v)
	if err != nil {
		return "", err
	}
	if err := comm.Allreduce(ctx, c, b, b, comm.Sum); err != nil {
		return "", err
	}
	for j, x := range v {
		if want := float64(p*(p+1)/2 + p*(j%1000+iter%1000)); x != want {
			return fmt.Sprintf("allreduce #%d of %d elements: element %d is %v, want %v", iter, count, j, x, want), nil
		}
	}
	return "", nil
}

// setEnv returns env with the variables of set (KEY=VALUE) replacing those
// of the same name.
func setEnv(env []string, set ...string) []string {
	out := make([]string, 0, len(env)+len(set))
	for _, kv := range env {
		k, _, _ := strings.Cut(kv, "=")
		keep := true
		for _, s := range set {
			if sk, _, _ := strings.Cut(s, "="); sk == k {
				keep = false
			}
		}
		if keep {
			out = append(out, kv)
		}
	}
	return append(out, set...)
}
