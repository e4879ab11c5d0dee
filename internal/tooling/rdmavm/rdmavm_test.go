//go:build linux

package rdmavm

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/xpu-go/xpu/internal/tooling/jointest"
)

// roleEnv makes the test binary a process that runs a guest until it is
// killed, for TestQemuDiesWithParent.
const roleEnv = "XPU_RDMAVM_TEST_ROLE"

func TestMain(m *testing.M) {
	if os.Getenv(roleEnv) == "runner" {
		_, err := Run(context.Background(), Job{Script: "sleep 600"})
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	goleak.VerifyTestMain(m)
}

// needGuest skips the test, saying why, where no guest can run, and
// builds the image first so that it stays out of the test's timings.
func needGuest(t *testing.T, ctx context.Context) {
	t.Helper()
	if err := Available(); err != nil {
		t.Skip(err)
	}
	start := time.Now()
	if err := Prepare(ctx); errors.Is(err, ErrUnavailable) {
		t.Skip(err)
	} else if err != nil {
		t.Fatal(err)
	}
	t.Logf("image ready in %v", time.Since(start).Round(time.Millisecond))
}

// syncBuffer is a buffer safe to read while Run writes to it.
type syncBuffer = jointest.Log

// guestError logs the console of a *GuestError, which the one-line error
// shows only the end of.
func guestError(t *testing.T, err error) {
	t.Helper()
	var ge *GuestError
	if errors.As(err, &ge) {
		t.Logf("console:\n%s\nqemu stderr:\n%s", ge.Console, ge.Stderr)
	}
}

// The references run on the guest's soft-RoCE device: ibv_devinfo sees it
// active, ib_send_lat measures a latency over it (server and client in the
// guest), and rping connects through rdma_cm to Addr. A host binary not
// in the image comes with its libraries, and the job's environment gets
// through quoting intact.
func TestReferences(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	needGuest(t, ctx)
	xz, err := exec.LookPath("xz")
	if err != nil {
		t.Skip(err)
	}
	script := `set -e
# tcplisten PORT: waits until a TCP socket listens on PORT (hex) of 0.0.0.0.
tcplisten() { until grep -q "^ *[0-9]*: 00000000:$1 00000000:0000 0A" /proc/net/tcp; do usleep 20000; done; }
ibv_devinfo -d $XPU_RDMAVM_DEVICE
ib_send_lat -d $XPU_RDMAVM_DEVICE -x $XPU_RDMAVM_GID_INDEX -n 200 >/tmp/lat-server 2>&1 &
tcplisten 4853 # 18515, perftest's port
ib_send_lat -d $XPU_RDMAVM_DEVICE -x $XPU_RDMAVM_GID_INDEX -n 200 $XPU_RDMAVM_ADDR
wait $!
rping -s -a $XPU_RDMAVM_ADDR -C 3 >/tmp/rping-server 2>&1 &
# rdma_cm rejects a client until the server listens; the client retries.
i=0
until rping -c -a $XPU_RDMAVM_ADDR -C 3 -v; do i=$((i+1)); [ $i -lt 50 ]; usleep 100000; done
wait $!
/opt/carried/xz --version
echo "env: $XPU_TEST_WORD"
`
	var out syncBuffer
	res, err := Run(ctx, Job{
		Files:  []File{{Host: xz, Guest: "/opt/carried/xz"}},
		Script: script,
		Env:    []string{"XPU_TEST_WORD=it's $HOME"},
		Output: &out,
	})
	t.Logf("output:\n%s", out.String())
	if err != nil {
		guestError(t, err)
		t.Fatal(err)
	}
	t.Logf("boot %v, run %v", res.Boot.Round(time.Millisecond), res.Run.Round(time.Millisecond))
	if res.ExitCode != 0 {
		t.Fatalf("script exited with %d", res.ExitCode)
	}
	if res.Boot <= 0 || res.Run <= 0 {
		t.Errorf("boot %v, run %v: want both positive", res.Boot, res.Run)
	}
	for _, want := range []*regexp.Regexp{
		regexp.MustCompile(`hca_id:\s+` + Device),
		regexp.MustCompile(`state:\s+PORT_ACTIVE`),
		// "#bytes #iterations t_min t_max t_typical t_avg …"
		regexp.MustCompile(`(?m)^\s*2\s+200\s+\d+\.\d+\s+\d+\.\d+\s+\d+\.\d+\s+\d+\.\d+`),
		regexp.MustCompile(`ping data: rdma-ping-2: `),
		regexp.MustCompile(`xz \(XZ Utils\) `),
		regexp.MustCompile(`env: it's \$HOME\n`),
	} {
		if !want.MatchString(out.String()) {
			t.Errorf("output lacks %q", want)
		}
	}
}

// A failing script is a result, not an error: its exit status comes back.
func TestExitCode(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	needGuest(t, ctx)
	var out syncBuffer
	res, err := Run(ctx, Job{Script: "echo to-stdout; echo to-stderr >&2; exit 7", Output: &out, CPUs: 1, MemoryMiB: 512})
	if err != nil {
		guestError(t, err)
		t.Fatal(err)
	}
	if res.ExitCode != 7 {
		t.Errorf("exit code %d, want 7", res.ExitCode)
	}
	if got := out.String(); got != "to-stdout\nto-stderr\n" {
		t.Errorf("output %q", got)
	}
}

// Cancelling ctx while the script runs kills qemu: Run returns an error
// matching context.Canceled, and leaves no qemu process, temporary
// directory, socket or file behind.
func TestCancel(t *testing.T) {
	tmp := t.TempDir()
	t.Setenv("TMPDIR", tmp)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	needGuest(t, ctx)
	runCtx, stop := context.WithCancel(ctx)
	defer stop()
	var cancelled time.Time
	out := writerFunc(func(p []byte) (int, error) {
		if bytes.Contains(p, []byte("started")) && cancelled.IsZero() {
			cancelled = time.Now()
			stop()
		}
		return len(p), nil
	})
	_, err := Run(runCtx, Job{Script: "echo started; sleep 600", Output: out, CPUs: 1, MemoryMiB: 512})
	if !errors.Is(err, context.Canceled) {
		guestError(t, err)
		t.Fatalf("Run returned %v, want context.Canceled", err)
	}
	if cancelled.IsZero() {
		t.Fatal("the script's output never came")
	}
	if d := time.Since(cancelled); d > 10*time.Second {
		t.Errorf("Run returned %v after the cancel", d)
	}
	if pids := procsWith(tmp); len(pids) > 0 {
		t.Errorf("processes %v of the guest outlived Run", pids)
	}
	if left, _ := os.ReadDir(tmp); len(left) > 0 {
		t.Errorf("Run left %s in the temporary directory", left[0].Name())
	}
}

// qemu dies with the process that runs Run, even one killed by SIGKILL.
func TestQemuDiesWithParent(t *testing.T) {
	tmp := t.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	needGuest(t, ctx)
	cmd := exec.CommandContext(ctx, os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), roleEnv+"=runner", "TMPDIR="+tmp)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	var qemu []int
	for len(qemu) == 0 {
		if ctx.Err() != nil {
			t.Fatalf("no qemu started: %s", stderr.String())
		}
		time.Sleep(50 * time.Millisecond)
		qemu = procsWith(tmp)
	}
	cmd.Process.Kill()
	cmd.Wait()
	deadline := time.Now().Add(10 * time.Second)
	for len(procsWith(tmp)) > 0 {
		if time.Now().After(deadline) {
			t.Fatalf("qemu %v outlived its parent by 10 s", qemu)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// Bad jobs are refused before anything starts.
func TestBadJob(t *testing.T) {
	for _, job := range []Job{
		{MemoryMiB: 64},
		{CPUs: -1},
		{Files: []File{{Host: "/nonexistent"}}},
		{Files: []File{{Host: os.Args[0], Guest: "relative/path"}}},
		{Files: []File{{Host: os.Args[0], Guest: "/init"}}},
		{Files: []File{{Host: "/"}}},
		{Files: []File{{Host: os.Args[0], Guest: "/tmp/x"}}},
		{Env: []string{"NO_EQUALS_SIGN"}},
		{Env: []string{"1X=y"}},
	} {
		if _, err := Run(context.Background(), job); !errors.Is(err, ErrInvalidArgument) {
			t.Errorf("Run(%+v) = %v, want ErrInvalidArgument", job, err)
		}
	}
}

type writerFunc func([]byte) (int, error)

func (f writerFunc) Write(p []byte) (int, error) { return f(p) }

// procsWith returns the live processes whose command line contains s.
func procsWith(s string) []int {
	names, _ := filepath.Glob("/proc/[0-9]*/cmdline")
	var pids []int
	for _, n := range names {
		b, err := os.ReadFile(n)
		if err != nil || !bytes.Contains(b, []byte(s)) {
			continue
		}
		pid, _ := strconv.Atoi(strings.Split(n, "/")[2])
		if pid == os.Getpid() {
			continue
		}
		// A zombie has an empty command line, so a match is alive; still,
		// make sure it is not one whose parent has not reaped it yet.
		if stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid)); err == nil {
			if i := bytes.LastIndexByte(stat, ')'); i >= 0 && len(stat) > i+2 && stat[i+2] == 'Z' {
				continue
			}
		}
		pids = append(pids, pid)
	}
	return pids
}
