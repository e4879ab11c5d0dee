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
	"testing"
	"time"

	"github.com/xpu-go/xpu/backends/mpi"
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
	goCmd, err := exec.LookPath("go")
	if err != nil {
		t.Skip("no go command to build the example")
	}
	tags := "mpi"
	if strings.Contains(mpi.LibraryVersion(), "MPICH") {
		tags = "mpi mpich"
	}
	bin := filepath.Join(t.TempDir(), "pagedcache")
	build := exec.Command(goCmd, "build", "-tags", tags, "-o", bin, "../../examples/pagedcache")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build -tags %q ./examples/pagedcache: %v\n%s", tags, err, out)
	}
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
