package xpucmd

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The test binary is also the program `xpu run` starts in these tests:
// with runRoleEnv set it plays a role instead of running the tests.
const runRoleEnv = "XPU_RUN_TEST_ROLE"

func init() {
	role := os.Getenv(runRoleEnv)
	if role == "" {
		return
	}
	rank, _ := strconv.Atoi(os.Getenv("XPU_RANK"))
	switch role {
	case "hello": // a line, then exit 0
		fmt.Printf("hello %d of %s\n", rank, os.Getenv("XPU_WORLD_SIZE"))
		os.Exit(0)
	case "gomaxprocs": // its GOMAXPROCS, then exit 0
		fmt.Printf("rank %d gomaxprocs %d\n", rank, runtime.GOMAXPROCS(0))
		os.Exit(0)
	case "fail": // rank 1 exits 4; the others sleep until stopped
		if rank == 1 {
			os.Exit(4)
		}
	}
	fmt.Println("ready")
	time.Sleep(10 * time.Minute)
	os.Exit(0)
}

// setRole makes the test binary, started by `xpu run`, play role.
func setRole(t *testing.T, role string) {
	t.Setenv(runRoleEnv, role)
	t.Setenv("GORACE", "atexit_sleep_ms=0") // no second's sleep at exit under -race
}

// lockedBuffer is a bytes.Buffer safe for concurrent writes, which calls
// onWrite after each.
type lockedBuffer struct {
	mu      sync.Mutex
	b       bytes.Buffer
	onWrite func(p []byte)
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	n, err := l.b.Write(p)
	l.mu.Unlock()
	if l.onWrite != nil {
		l.onWrite(p)
	}
	return n, err
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

func testCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	t.Cleanup(cancel)
	return ctx
}

func TestRunUsage(t *testing.T) {
	self := os.Args[0]
	for name, args := range map[string][]string{
		"nothing":             {"run"},
		"zero ranks":          {"run", "-n", "0", self},
		"negative ranks":      {"run", "-n", "-3", self},
		"no program":          {"run", "-n", "2"},
		"no program after --": {"run", "-n", "2", "--"},
		"unknown flag":        {"run", "-n", "2", "--bogus", self},
		"bad duration":        {"run", "-n", "2", "--timeout", "soon", self},
		"port out of range":   {"run", "-n", "2", "--port", "70000", self},
		"mpi with port":       {"run", "-n", "2", "--mpi", "--port", "4000", self},
		"mpi with addr":       {"run", "-n", "2", "--mpi", "--master-addr", "10.0.0.1", self},
		"mpi with bind":       {"run", "-n", "2", "--mpi", "--bind", self},
		"no such program":     {"run", "-n", "2", "xpu-run-test-no-such-program"},
		"no such path":        {"run", "-n", "2", "./xpu-run-test-no-such-program"},
		"a directory":         {"run", "-n", "2", "./"},
		"negative fail grace": {"run", "-n", "2", "--fail-grace", "-1s", self},
	} {
		t.Run(name, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			code := Run(testCtx(t), args, &stdout, &stderr)
			assert.Equal(t, 2, code, "stderr: %s", stderr.String())
			assert.Contains(t, stderr.String(), "xpu run:")
			assert.Empty(t, stdout.String())
		})
	}

	var stderr bytes.Buffer
	assert.Equal(t, 0, Run(testCtx(t), []string{"run", "-h"}, new(bytes.Buffer), &stderr))
	assert.Contains(t, stderr.String(), "usage: xpu run -n N")
	assert.Contains(t, stderr.String(), "-timeout")
	assert.Contains(t, stderr.String(), "with XPU_RANK, XPU_WORLD_SIZE, XPU_LOCAL_RANK, XPU_LOCAL_SIZE,\n"+
		"XPU_MASTER_ADDR, XPU_MASTER_PORT, XPU_JOB_SECRET and XPU_BACKEND (procs unless set) in their\n")
}

func TestRunRanks(t *testing.T) {
	setRole(t, "hello")
	var stdout, stderr lockedBuffer
	code := Run(testCtx(t), []string{"run", "-n", "3", "--", os.Args[0]}, &stdout, &stderr)
	require.Equal(t, 0, code, "stderr: %s", stderr.String())
	lines := strings.Split(strings.TrimSpace(stdout.String()), "\n")
	assert.ElementsMatch(t, []string{"[0] hello 0 of 3", "[1] hello 1 of 3", "[2] hello 2 of 3"}, lines)
}

func TestRunRankFailure(t *testing.T) {
	setRole(t, "fail")
	var stdout, stderr lockedBuffer
	code := Run(testCtx(t), []string{"run", "-n", "3", "--fail-grace", "100ms", os.Args[0]}, &stdout, &stderr)
	assert.Equal(t, 1, code)
	// The launcher says so when it happens, gives the others the fail
	// grace, stops them, names the cause, and says it again as its error.
	assert.Regexp(t, "^"+regexp.QuoteMeta("xpu run: rank 1 failed: exit status 4; the other 2 ranks have 100ms to end before SIGTERM\n"+
		"xpu run: ranks 0, 2 still running 100ms after rank 1 failed; sending SIGTERM\n"+
		"xpu run: rank 1 failed first: exit status 4, ")+`\d+ms`+regexp.QuoteMeta(" into the job; nothing on its stderr\n"+
		"xpu run: rank 0: stopped: killed by signal SIGTERM\n"+
		"xpu run: rank 2: stopped: killed by signal SIGTERM\n"+
		"xpu run: rank 1 failed: exit status 4; stopped the other 2 ranks\n")+"$", stderr.String())

	// One other rank: the line agrees with it.
	stderr = lockedBuffer{}
	code = Run(testCtx(t), []string{"run", "-n", "2", "--fail-grace", "100ms", os.Args[0]}, &stdout, &stderr)
	assert.Equal(t, 1, code)
	assert.Contains(t, stderr.String(), "xpu run: rank 1 failed: exit status 4; the other rank has 100ms to end before SIGTERM\n")

	// --fail-grace 0: at once.
	stderr = lockedBuffer{}
	code = Run(testCtx(t), []string{"run", "-n", "3", "--fail-grace", "0", os.Args[0]}, &stdout, &stderr)
	assert.Equal(t, 1, code)
	assert.Contains(t, stderr.String(), "xpu run: rank 1 failed: exit status 4; stopping the other 2 ranks\n")
	assert.Contains(t, stderr.String(), "xpu run: rank 1 failed: exit status 4; stopped the other 2 ranks\n")
}

func TestRunTimeoutFlag(t *testing.T) {
	setRole(t, "sleep")
	var stderr lockedBuffer
	code := Run(testCtx(t), []string{"run", "-n", "2", "--timeout", "300ms", os.Args[0]}, new(lockedBuffer), &stderr)
	assert.Equal(t, 1, code)
	assert.Contains(t, stderr.String(), "xpu run: job timed out after 300ms; still running: ranks 0, 1\n")
}

func TestRunInterrupted(t *testing.T) {
	setRole(t, "sleep")
	ctx, cancel := context.WithCancel(testCtx(t))
	defer cancel()
	var mu sync.Mutex
	ready := 0
	stdout := &lockedBuffer{onWrite: func(p []byte) {
		mu.Lock()
		defer mu.Unlock()
		if ready += strings.Count(string(p), "] ready\n"); ready == 2 {
			cancel()
		}
	}}
	var stderr lockedBuffer
	code := Run(ctx, []string{"run", "-n", "2", "--grace", "1m", os.Args[0]}, stdout, &stderr)
	assert.Equal(t, 1, code)
	assert.Contains(t, stderr.String(), "xpu run: interrupted; sending SIGTERM to 2 ranks\n")
	assert.Contains(t, stderr.String(), "xpu run: job interrupted: context canceled\n")
}

// --mpi hands the job to mpirun (a fake one here, which prints its
// arguments).
func TestRunMPIFlag(t *testing.T) {
	if _, err := exec.LookPath("sh"); err != nil {
		t.Skip("no sh")
	}
	dir := t.TempDir()
	script := "#!/bin/sh\nif [ \"$1\" = --version ]; then echo 'mpirun (Open MPI) 4.1.4'; exit 0; fi\necho \"mpirun $*\"\n"
	require.NoError(t, os.WriteFile(filepath.Join(dir, "mpirun"), []byte(script), 0o755))
	t.Setenv("PATH", dir+string(os.PathListSeparator)+os.Getenv("PATH"))
	var stdout, stderr lockedBuffer
	code := Run(testCtx(t), []string{"run", "-n", "2", "--mpi", "--", "prog", "-v"}, &stdout, &stderr)
	require.Equal(t, 0, code, "stderr: %s", stderr.String())
	assert.Contains(t, stdout.String(), "--oversubscribe -np 2 prog -v\n")

	t.Setenv("PATH", t.TempDir())
	stderr = lockedBuffer{}
	code = Run(testCtx(t), []string{"run", "-n", "2", "--mpi", "prog"}, new(lockedBuffer), &stderr)
	assert.Equal(t, 1, code)
	assert.Contains(t, stderr.String(), "mpirun not found on PATH")
}

// The command of docs/launching.md: four ranks of the example, built once,
// joined by the procs backend.
func TestRunExampleAllreduce(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs examples/allreduce")
	}
	if _, err := exec.LookPath("go"); err != nil {
		t.Skip("no go command")
	}
	t.Setenv("XPU_BACKEND", "")
	var stdout, stderr lockedBuffer
	code := Run(testCtx(t), []string{"run", "-n", "4", "--timeout", "2m", "go", "run", "../examples/allreduce"}, &stdout, &stderr)
	require.Equal(t, 0, code, "stderr: %s", stderr.String())
	var want []string
	for r := range 4 {
		want = append(want, fmt.Sprintf("[%d] rank %d of 4: allreduce of 65536 float64: ok (last element 655360)", r, r))
	}
	assert.ElementsMatch(t, want, strings.Split(strings.TrimSpace(stdout.String()), "\n"))
}

// The one-sided example: two ranks under xpu run, the pool's pages pulled
// and written back by batches, over shared memory and over TCP.
func TestRunExamplePagedCache(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs examples/pagedcache")
	}
	if _, err := exec.LookPath("go"); err != nil {
		t.Skip("no go command")
	}
	t.Setenv("XPU_BACKEND", "")
	for name, links := range map[string]string{"default-links": "", "tcp-links": "tcp"} {
		t.Run(name, func(t *testing.T) {
			t.Setenv("XPU_LINKS", links)
			var stdout, stderr lockedBuffer
			code := Run(testCtx(t), []string{"run", "-n", "2", "--timeout", "2m", "go", "run", "../examples/pagedcache"}, &stdout, &stderr)
			require.Equal(t, 0, code, "stderr: %s", stderr.String())
			assert.ElementsMatch(t, []string{
				"[0] rank 0: 32 pages written back into a pool of 256 (host memory): ok",
				"[1] rank 1: 32 pages pulled with one batch of Gets and written back with one batch of Puts, notified: ok",
			}, strings.Split(strings.TrimSpace(stdout.String()), "\n"))
		})
	}
}

// The hanging example of docs/failure-semantics.md: when --timeout
// expires, xpu run prints what the ranks' flight records say.
func TestRunExampleHang(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs examples/hang")
	}
	if _, err := exec.LookPath("go"); err != nil {
		t.Skip("no go command")
	}
	t.Setenv("XPU_BACKEND", "")
	prog := filepath.Join(t.TempDir(), "hang")
	build := exec.CommandContext(testCtx(t), "go", "build", "-o", prog, "../examples/hang")
	out, err := build.CombinedOutput()
	require.NoError(t, err, "%s", out)
	var stdout, stderr lockedBuffer
	code := Run(testCtx(t), []string{"run", "-n", "2", "--timeout", "3s", prog}, &stdout, &stderr)
	require.Equal(t, 1, code, "stderr: %s", stderr.String())
	got := stderr.String()
	assert.Contains(t, got, "xpu run: job timed out after 3s; still running: ranks 0, 1")
	assert.Contains(t, got, "xpu run: flight records of 2 ranks say:\n")
	assert.Regexp(t, `(?m)^xpu run:   rank 1 waits in Recv\(src 0, tag 7, 64 bytes\) for [\d.]+s; rank 0 sent tag 8 \(1 message\) to rank 1, unmatched$`, got)
	assert.Regexp(t, `(?m)^xpu run:   rank 1 never entered Barrier #2, which rank 0 waits in for [\d.]+s; its last collective was Allreduce #1 \(float64 × 8, sum\) \(done\); it waits in Recv\(src 0, tag 7, 64 bytes\) for [\d.]+s$`, got)
}
