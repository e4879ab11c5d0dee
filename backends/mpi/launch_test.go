//go:build mpi

package mpi_test

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/xpu-go/xpu/backends/mpi"
	"github.com/xpu-go/xpu/flight"
)

// launcher is an mpirun matching the MPI library this binary is linked
// with, and the arguments it needs on one machine.
type launcher struct {
	path string
	args func(np int) []string
}

// findLauncher looks for the mpirun of the linked MPI library (an Open MPI
// binary must be launched by Open MPI's mpirun, an MPICH one by Hydra).
func findLauncher() (launcher, error) {
	lib := mpi.LibraryVersion()
	var names []string
	var marker string
	var args func(np int) []string
	switch {
	case strings.Contains(lib, "Open MPI"):
		names = []string{"mpirun.openmpi", "mpiexec.openmpi", "mpirun", "mpiexec"}
		marker = "Open MPI"
		args = func(np int) []string {
			// --oversubscribe: more ranks than cores; --tag-output: each line
			// names its rank; -x: pass the thread level on.
			return []string{"--allow-run-as-root", "--oversubscribe", "--tag-output", "-x", envLevel, "-np", fmt.Sprint(np)}
		}
	case strings.Contains(lib, "MPICH"):
		names = []string{"mpirun.mpich", "mpiexec.mpich", "mpiexec.hydra", "mpirun", "mpiexec"}
		marker = "HYDRA"
		args = func(np int) []string { return []string{"-prepend-rank", "-np", fmt.Sprint(np)} }
	default:
		return launcher{}, fmt.Errorf("unknown MPI library %q: no known launcher", lib)
	}
	for _, n := range names {
		p, err := exec.LookPath(n)
		if err != nil {
			continue
		}
		out, _ := exec.Command(p, "--version").CombinedOutput()
		if strings.Contains(string(out), marker) {
			return launcher{path: p, args: args}, nil
		}
	}
	return launcher{}, fmt.Errorf("no launcher of %s found in PATH (tried %s): install it (scripts/setup-mpi.sh)",
		strings.SplitN(lib, ",", 2)[0], strings.Join(names, ", "))
}

// launcherOutside skips the test inside an MPI job (what runs outside
// mpirun) or where no launcher is found, and returns the launcher.
func launcherOutside(t *testing.T, what string) launcher {
	t.Helper()
	if world != nil {
		t.Skip("running as a rank: " + what + " runs outside mpirun")
	}
	l, err := findLauncher()
	if err != nil {
		t.Skip(err.Error())
	}
	return l
}

// envRun, when set, is the -test.run pattern of the ranks TestRanks
// launches, in place of every TestSPMD test (the Makefile's short MPICH
// run: the one-sided and conformance tests).
const envRun = "XPU_MPI_TEST_RUN"

// TestRanks runs this test binary as every rank of MPI jobs of 1 to 4
// processes (and of 2 and 3 at the serialized thread level), each running
// the TestSPMD tests (or those $XPU_MPI_TEST_RUN names), and fails with
// every rank's output when a rank fails. With -short it runs the job of
// 2 ranks only.
func TestRanks(t *testing.T) {
	l := launcherOutside(t, "the launcher test")
	exe, err := os.Executable()
	if err != nil {
		t.Fatalf("finding the test binary: %v", err)
	}
	jobs := []struct {
		np    int
		level string
	}{{1, "multiple"}, {2, "multiple"}, {3, "multiple"}, {4, "multiple"}, {2, "serialized"}, {3, "serialized"}}
	if testing.Short() {
		jobs = jobs[1:2]
	}
	for _, j := range jobs {
		t.Run(fmt.Sprintf("np=%d/%s", j.np, j.level), func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
			defer cancel()
			run := "^TestSPMD"
			if v := os.Getenv(envRun); v != "" {
				run = v
			}
			args := append(l.args(j.np), exe, "-test.run="+run, "-test.timeout=3m", "-test.count=1")
			cmd := exec.CommandContext(ctx, l.path, args...)
			cmd.Env = append(os.Environ(), envLevel+"="+j.level)
			var out bytes.Buffer
			cmd.Stdout, cmd.Stderr = &out, &out
			start := time.Now()
			err := cmd.Run()
			if err != nil {
				t.Fatalf("%s %s: %v after %v; the ranks' output:\n%s", l.path, strings.Join(args, " "), err, time.Since(start).Round(time.Millisecond), out.String())
			}
			if !strings.Contains(out.String(), "PASS") {
				t.Fatalf("no rank reported PASS; output:\n%s", out.String())
			}
			t.Logf("%d ranks passed in %v", j.np, time.Since(start).Round(time.Millisecond))
		})
	}
}

// TestExamplePagedCache builds examples/pagedcache with this backend and
// runs it under the launcher as 2 ranks of XPU_BACKEND=mpi: one rank
// pulls pages of the other's exposed pool with a batch of Gets and writes
// them back with a batch of Puts posted with a notification.
func TestExamplePagedCache(t *testing.T) {
	l := launcherOutside(t, "the example")
	bin := buildExample(t, "pagedcache")
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, l.path, append(l.args(2), bin)...)
	cmd.Env = append(os.Environ(), "XPU_BACKEND=mpi")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("%s … pagedcache: %v\n%s", l.path, err, out)
	}
	for _, want := range []string{
		"rank 0: 32 pages written back into a pool of 256 (host memory): ok",
		"rank 1: 32 pages pulled with one batch of Gets and written back with one batch of Puts, notified: ok",
	} {
		if !strings.Contains(string(out), want) {
			t.Errorf("the ranks did not print %q; output:\n%s", want, out)
		}
	}
}

// TestExampleHangUnderMPIRun runs examples/hang, which hangs on a wrong
// tag, as 2 ranks under the launcher with the mpi backend and with procs
// (over TCP, as under mpirun on several nodes), sends the job SIGUSR2
// (mpirun passes it to the ranks) once both ranks say where they wait, and
// checks what their flight records, read as `xpu flight` reads them, say.
func TestExampleHangUnderMPIRun(t *testing.T) {
	l := launcherOutside(t, "the example")
	bin := buildExample(t, "hang")
	for _, c := range []struct {
		backend, mode string
		args          []string
		ready, want   []string
	}{
		{backend: "mpi", mode: "wrongtag", ready: hangReady, want: hangSays},
		{backend: "procs", mode: "wrongtag", ready: hangReady, want: hangSays},
		{backend: "mpi", mode: "mismatch", args: []string{"-mismatch"}, ready: mismatchReady, want: mismatchSays},
		{backend: "procs", mode: "mismatch", args: []string{"-mismatch"}, ready: mismatchReady, want: mismatchSays},
	} {
		t.Run(c.backend+"/"+c.mode, func(t *testing.T) {
			dir := t.TempDir()
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			defer cancel()
			cmd := exec.CommandContext(ctx, l.path, append(append(l.args(2), bin), c.args...)...)
			cmd.Env = append(os.Environ(), "XPU_BACKEND="+c.backend, "XPU_FLIGHT_DIR="+dir, "XPU_LINKS=tcp")
			var out syncBuffer
			cmd.Stdout, cmd.Stderr = &out, &out
			// The launcher and its ranks in a group of their own: a
			// launcher killed outright leaves its ranks running.
			cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			defer stopJob(t, cmd)
			waitFor(t, ctx, &out, c.ready...)
			var got string
			// The ranks print before they post: ask until the records show
			// both waiting, at most 20 times.
			for range 20 {
				if err := cmd.Process.Signal(flight.DumpSignal); err != nil {
					t.Fatalf("signal the launcher: %v", err)
				}
				got = analysis(t, dir, 2)
				if containsAll(got, c.want) {
					return
				}
				time.Sleep(250 * time.Millisecond)
			}
			t.Errorf("the flight records of %s ranks under %s do not say %q; they say:\n%s\nthe job's output:\n%s",
				c.backend, l.path, c.want, got, out.String())
		})
	}
}

// What examples/hang prints once its ranks are about to wait, and what
// their records must say then: with a wrong tag, and with -mismatch.
var (
	hangReady = []string{"rank 0: sent tag 8; entering the barrier", "rank 1: receiving tag 7"}
	hangSays  = []string{
		"rank 1 waits in Recv(src 0, tag 7, 64 bytes) for ",
		"; rank 0 sent tag 8 (1 message) to rank 1, unmatched",
		"rank 1 never entered Barrier #2, which rank 0 waits in for ",
	}
	mismatchReady = []string{"rank 0: calling Allreduce", "rank 1: calling Bcast"}
	mismatchSays  = []string{
		"mismatched collectives at #2: rank 0 in Allreduce #2 (float64 × 8, sum); rank 1 in Bcast #2 (root 0, byte × 64)",
	}
)

// stopJob stops a launcher and its ranks: SIGTERM, which the launcher
// passes on, then SIGKILL to the whole group after 10 s.
func stopJob(t *testing.T, cmd *exec.Cmd) {
	t.Helper()
	_ = cmd.Process.Signal(syscall.SIGTERM)
	done := make(chan struct{})
	go func() {
		_ = cmd.Wait()
		close(done)
	}()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Logf("%s still running 10s after SIGTERM: SIGKILL to its group", cmd.Path)
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		<-done // unbounded: the group was killed
	}
	// What the ranks started and left in the group goes too.
	_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
}

// buildExample builds examples/name with this backend (the tags of the
// linked MPI library) and returns the binary; it skips without a go
// command.
func buildExample(t *testing.T, name string) string {
	t.Helper()
	goCmd, err := exec.LookPath("go")
	if err != nil {
		t.Skip("no go command to build the example")
	}
	tags := "mpi"
	if strings.Contains(mpi.LibraryVersion(), "MPICH") {
		tags = "mpi mpich"
	}
	bin := filepath.Join(t.TempDir(), name)
	build := exec.Command(goCmd, "build", "-tags", tags, "-o", bin, "../../examples/"+name)
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build -tags %q ./examples/%s: %v\n%s", tags, name, err, out)
	}
	return bin
}

// analysis reads the records of n ranks in dir, once every rank has
// written one, and returns what flight.Analyze makes of them ("" while a
// rank's is missing).
func analysis(t *testing.T, dir string, n int) string {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		ds, err := flight.ReadDir(dir)
		if err == nil && len(ds) == n {
			return strings.Join(flight.Analyze(ds), "\n")
		}
		time.Sleep(50 * time.Millisecond)
	}
	return ""
}

func containsAll(s string, subs []string) bool {
	for _, sub := range subs {
		if !strings.Contains(s, sub) {
			return false
		}
	}
	return true
}

// waitFor waits until out holds every line of want, at most until ctx
// ends.
func waitFor(t *testing.T, ctx context.Context, out *syncBuffer, want ...string) {
	t.Helper()
	for !containsAll(out.String(), want) {
		select {
		case <-ctx.Done():
			t.Fatalf("waiting for %q: %v; the job's output:\n%s", want, ctx.Err(), out.String())
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// syncBuffer is a bytes.Buffer safe for a process's output and the test.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.String()
}
