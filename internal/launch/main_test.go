//go:build unix

package launch

import (
	"bytes"
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"os/signal"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/xpu-go/xpu/internal/jobenv"
)

// The test binary is also the ranks' program: started with roleEnv set, it
// plays that role instead of running the tests.
const roleEnv = "XPU_LAUNCH_TEST_ROLE"

// nap is how long a sleeping rank sleeps: far longer than any test may
// take, so a rank that ends did so because it was stopped.
const nap = 10 * time.Minute

func TestMain(m *testing.M) {
	if role := os.Getenv(roleEnv); role != "" {
		os.Exit(playRole(strings.Fields(role)))
	}
	goleak.VerifyTestMain(m)
}

// playRole runs one role (its name and arguments) and returns the exit
// code. The roles:
//
//	print          a line on stdout and one on stderr, exit 0
//	env            the XPU_ variables, one KEY=VALUE line each, sorted
//	exit R C       rank R exits with code C, the others with 0
//	fail R C       rank R exits with code C, the others sleep
//	killself R     rank R sends itself SIGKILL, the others sleep
//	sleep          "ready", then sleep
//	trap           "ready", then exit 0 on SIGINT or SIGTERM, saying which
//	stubborn       ignore SIGTERM, "ready", then sleep
//	spawn          start a sleeping child, "child PID", "ready", then sleep
//	partial        a line, then text without a newline, on both streams
//	flood L        L numbered lines on each stream, written in random pieces
//	mpienv         the rank and size the launcher gives, and XPU_BACKEND
//	cpus           "cpus LIST gomaxprocs G": its processors (Cpus_allowed_list
//	               of /proc/self/status) and GOMAXPROCS, then "ready", then sleep
//	nap D          sleep for the duration D, exit 0
//	launcher M G   a launcher: Run a job (see launcherRole)
//	comm M R       join a procs job; rank R ends as M says (see commRole)
func playRole(args []string) int {
	rank, _ := strconv.Atoi(os.Getenv(EnvRank))
	arg := func(i int) int {
		n, err := strconv.Atoi(args[i])
		if err != nil {
			panic(err)
		}
		return n
	}
	sleep := func() int {
		fmt.Println("ready")
		time.Sleep(nap)
		return 0
	}
	switch args[0] {
	case "print":
		fmt.Printf("hello from rank %d\n", rank)
		fmt.Fprintf(os.Stderr, "note from rank %d\n", rank)
		return 0
	case "env":
		var lines []string
		for _, kv := range os.Environ() {
			if strings.HasPrefix(kv, "XPU_") && !strings.HasPrefix(kv, roleEnv) {
				lines = append(lines, kv)
			}
		}
		sort.Strings(lines)
		fmt.Println(strings.Join(lines, "\n"))
		return 0
	case "exit":
		if rank == arg(1) {
			fmt.Printf("exiting with %d\n", arg(2))
			return arg(2)
		}
		return 0
	case "fail":
		if rank == arg(1) {
			fmt.Printf("failing with %d\n", arg(2))
			return arg(2)
		}
		return sleep()
	case "killself":
		if rank == arg(1) {
			fmt.Println("killing myself")
			_ = syscall.Kill(os.Getpid(), syscall.SIGKILL)
			time.Sleep(nap)
		}
		return sleep()
	case "sleep":
		return sleep()
	case "trap":
		c := make(chan os.Signal, 1)
		signal.Notify(c, syscall.SIGINT, syscall.SIGTERM)
		fmt.Println("ready")
		fmt.Printf("got %s\n", SignalName(<-c)) // unbounded: the rank's role, waiting for the signal the test sends
		return 0
	case "stubborn":
		signal.Ignore(syscall.SIGTERM)
		return sleep()
	case "spawn":
		cmd := exec.Command(os.Args[0])
		cmd.Env = append(os.Environ(), roleEnv+"=sleep")
		cmd.Stdout = os.Stdout // its "ready" goes through the launcher too
		if err := cmd.Start(); err != nil {
			fmt.Println(err)
			return 1
		}
		fmt.Printf("child %d\n", cmd.Process.Pid)
		return sleep()
	case "partial":
		fmt.Print("first\nno newline")
		fmt.Fprint(os.Stderr, "err first\nerr no newline")
		return 0
	case "flood":
		flood(rank, arg(1))
		return 0
	case "nap":
		d, err := time.ParseDuration(args[1])
		if err != nil {
			panic(err)
		}
		time.Sleep(d)
		return 0
	case "launcher":
		return launcherRole(args[1], args[2])
	case "comm":
		return commRole(args[1], arg(2))
	case "cpus":
		st, err := os.ReadFile("/proc/self/status")
		if err != nil {
			fmt.Println(err)
			return 1
		}
		_, list, _ := strings.Cut(string(st), "Cpus_allowed_list:")
		list, _, _ = strings.Cut(list, "\n")
		fmt.Printf("cpus %s gomaxprocs %d\n", strings.TrimSpace(list), runtime.GOMAXPROCS(0))
		return sleep()
	case "mpienv":
		p, ok, err := jobenv.Find(jobenv.OS)
		if !ok || err != nil {
			fmt.Printf("no place in a job (%v)\n", err)
			return 1
		}
		fmt.Printf("rank %d of %d backend %s\n", p.Rank, p.Size, os.Getenv(EnvBackend))
		return 0
	}
	fmt.Fprintf(os.Stderr, "unknown role %q\n", args)
	return 100
}

// scriptEnv holds the shell script the ranks of launcherRole run.
const scriptEnv = "XPU_LAUNCH_TEST_SCRIPT"

// launcherRole is a launcher, as `xpu run -n 3 --grace G -- sh -c
// "$XPU_LAUNCH_TEST_SCRIPT"` is: it runs the job and returns 0 when it
// succeeds. In mode "notify" it stops the job on SIGINT and SIGTERM as xpu
// run does; in mode "plain" those signals kill it. Mode "mpi" is `xpu run
// --mpi -n 2` of this binary playing "sleep", signals killing it.
func launcherRole(mode, g string) int {
	grace, err := time.ParseDuration(g)
	if err != nil {
		panic(err)
	}
	ctx := context.Background()
	if mode == "notify" {
		var stop context.CancelFunc
		ctx, stop = signal.NotifyContext(ctx, os.Interrupt, syscall.SIGTERM)
		defer stop()
	}
	spec := Spec{N: 3, Prog: "sh", Args: []string{"-c", os.Getenv(scriptEnv)}, Grace: grace,
		Timeout: 2 * time.Minute, // a net under a test that fails
		Stdout:  os.Stdout, Stderr: os.Stderr, LogPrefix: "launcher: "}
	if mode == "mpi" {
		spec.N, spec.Prog, spec.Args, spec.Env = 2, os.Args[0], nil, roleEnviron("sleep")
		err = RunMPI(ctx, spec)
	} else {
		_, err = Run(ctx, spec)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "launcher:", err)
		return 1
	}
	return 0
}

// floodLine is line i of a rank's stream: its payload is a function of
// both, so a torn or mixed line cannot pass for a whole one.
func floodLine(stream string, rank, i int) string {
	return fmt.Sprintf("%s rank=%d line=%d %s", stream, rank, i,
		strings.Repeat(string(rune('a'+(i+rank)%26)), 20+i%150))
}

// flood writes n lines to stdout and to stderr, alternating between the
// two and cutting the text into writes of random sizes.
func flood(rank, n int) {
	rng := rand.New(rand.NewPCG(uint64(rank), 7))
	var out, errb bytes.Buffer
	for i := range n {
		out.WriteString(floodLine("out", rank, i) + "\n")
		errb.WriteString(floodLine("err", rank, i) + "\n")
	}
	o, e := out.Bytes(), errb.Bytes()
	for len(o) > 0 || len(e) > 0 {
		for _, s := range []struct {
			f *os.File
			b *[]byte
		}{{os.Stdout, &o}, {os.Stderr, &e}} {
			k := min(len(*s.b), 1+rng.IntN(300))
			if _, err := s.f.Write((*s.b)[:k]); err != nil {
				os.Exit(3)
			}
			*s.b = (*s.b)[k:]
		}
	}
}

// roleSpec returns a spec of n ranks of the test binary playing role.
func roleSpec(n int, role string) Spec {
	return Spec{N: n, Prog: os.Args[0], Env: roleEnviron(role)}
}

// capturedRoleSpec is roleSpec with the ranks' stdout and stderr captured in the buffers it returns.
func capturedRoleSpec(n int, role string) (spec Spec, stdout, stderr *syncBuffer) {
	stdout, stderr = &syncBuffer{}, &syncBuffer{}
	spec = roleSpec(n, role)
	spec.Stdout, spec.Stderr = stdout, stderr
	return spec, stdout, stderr
}

func roleEnviron(role string, extra ...string) []string {
	// A program built with -race sleeps a second before it exits, unless
	// told not to.
	gorace := strings.TrimSpace(os.Getenv("GORACE") + " atexit_sleep_ms=0")
	env := withEnv(os.Environ(), roleEnv+"="+role, "GORACE="+gorace)
	var out []string
	for _, kv := range env {
		// Start from an environment without the variables Run sets.
		if k, _, _ := strings.Cut(kv, "="); k == EnvBackend || k == EnvJobSecret {
			continue
		}
		out = append(out, kv)
	}
	return append(out, extra...)
}

// guard returns a context that ends a test that hangs: generous, and never
// what a passing test waits for.
func guard(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)
	return ctx
}

// syncBuffer is a bytes.Buffer safe for concurrent use; it calls onLine
// with every line written.
type syncBuffer struct {
	mu     sync.Mutex
	buf    bytes.Buffer
	onLine func(line string)
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	n, err := b.buf.Write(p)
	onLine := b.onLine
	b.mu.Unlock()
	if onLine != nil {
		for _, l := range strings.SplitAfter(string(p), "\n") {
			if l != "" {
				onLine(l)
			}
		}
	}
	return n, err
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

func (b *syncBuffer) Lines() []string {
	s := strings.TrimSuffix(b.String(), "\n")
	if s == "" {
		return nil
	}
	return strings.Split(s, "\n")
}

// whenReady returns a buffer that calls f once n lines "[i] ready" have
// been written to it.
func whenReady(n int, f func()) *syncBuffer {
	var mu sync.Mutex
	count := 0
	return &syncBuffer{onLine: func(l string) {
		if strings.HasSuffix(l, "] ready\n") {
			mu.Lock()
			count++
			fire := count == n
			mu.Unlock()
			if fire {
				f()
			}
		}
	}}
}
