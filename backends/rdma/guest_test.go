package rdma_test

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/xpu-go/xpu/internal/tooling/rdmavm"
)

// TestGuest runs this package's tests and its verbs' on real kernel
// verbs: it builds them with -tags rdma, boots a throw-away qemu guest
// with soft-RoCE (rxe0 on a dummy interface, internal/tooling/rdmavm) and runs
// them there — the conformance suite over ranks in one process and over
// one process per rank, the failure tests, the verbs' own — with their
// output streamed here and their exit status brought back. Then it runs
// examples/pagedcache (built with -tags rdma) as 2 rank processes on this
// backend (XPU_BACKEND=rdma), joined with the launcher's variables as the
// multi-process tests join theirs, and checks both ranks' lines.
func TestGuest(t *testing.T) {
	if testing.Short() {
		t.Skip("boots a qemu guest (a minute or more); skipped in -short mode")
	}
	if err := rdmavm.Available(); err != nil {
		t.Skipf("no RDMA guest here: %v", err)
	}
	dir := t.TempDir()
	files := buildGuestTests(t, dir)
	files = append(files, buildGuestExample(t, dir))
	script := strings.Join([]string{
		"set -e",
		"verbs.test -test.v -test.timeout 5m",
		"rdma.test -test.v -test.timeout 15m -test.run '^(TestVerbs|TestMultiProcess)'",
		exampleScript,
	}, "\n")
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Minute)
	defer cancel()
	w := &lineLog{t: t}
	res, err := rdmavm.Run(ctx, rdmavm.Job{Files: files, Script: script, Output: w})
	w.flush()
	require.NoError(t, err)
	t.Logf("guest: boot %v, tests %v", res.Boot.Round(time.Millisecond), res.Run.Round(time.Millisecond))
	require.Zero(t, res.ExitCode, "the tests failed in the guest (their output is above)")
	require.Contains(t, w.all.String(), "--- PASS: TestVerbsConformance", "the conformance suite did not run in the guest")
	require.Contains(t, w.all.String(), "--- PASS: TestMultiProcessConformance")
	for _, l := range exampleLines {
		require.Contains(t, w.all.String(), l, "examples/pagedcache on 2 rdma ranks")
	}
}

// exampleScript runs examples/pagedcache as the 2 ranks of a job on this
// backend, each with the variables a launcher gives its ranks (xpu run's,
// as the multi-process tests are started), and says how long it took.
// It fails when a rank fails.
const exampleScript = `read t0 _ </proc/uptime
pids=""
for i in 0 1; do
  XPU_BACKEND=rdma XPU_RANK=$i XPU_WORLD_SIZE=2 XPU_MASTER_ADDR=127.0.0.1 XPU_MASTER_PORT=21100 XPU_JOB_SECRET=pagedcache pagedcache & pids="$pids $!"
done
rc=0
for p in $pids; do wait $p || rc=1; done
read t1 _ </proc/uptime
echo "pagedcache: 2 rdma ranks, exit $rc, in $(awk "BEGIN { print $t1 - $t0 }") s"
exit $rc`

// exampleLines are the lines of examples/pagedcache's two ranks.
var exampleLines = []string{
	"rank 0: 32 pages written back into a pool of 256 (host memory): ok",
	"rank 1: 32 pages pulled with one batch of Gets and written back with one batch of Puts, notified: ok",
}

// buildGuestExample builds examples/pagedcache with -tags rdma into dir,
// as a file for the guest.
func buildGuestExample(t *testing.T, dir string) rdmavm.File {
	t.Helper()
	out := filepath.Join(dir, "pagedcache")
	cmd := exec.Command("go", "build", "-tags", "rdma", "-o", out, "./examples/pagedcache")
	cmd.Dir = filepath.Join("..", "..")
	cmd.Env = append(os.Environ(), "CGO_ENABLED=1")
	b, err := cmd.CombinedOutput()
	require.NoError(t, err, "go build ./examples/pagedcache: %s", b)
	return rdmavm.File{Host: out}
}

// lineLog logs a stream line by line.
type lineLog struct {
	t       *testing.T
	partial []byte
	all     strings.Builder
}

func (l *lineLog) Write(p []byte) (int, error) {
	l.all.Write(p)
	l.partial = append(l.partial, p...)
	for {
		i := strings.IndexByte(string(l.partial), '\n')
		if i < 0 {
			break
		}
		l.t.Log("guest: " + string(l.partial[:i]))
		l.partial = l.partial[i+1:]
	}
	return len(p), nil
}

func (l *lineLog) flush() {
	if len(l.partial) > 0 {
		l.t.Log(fmt.Sprintf("guest: %s", l.partial))
		l.partial = nil
	}
}

// buildGuestTests builds this package's tests and its verbs' with -tags
// rdma into dir, as files for the guest.
func buildGuestTests(t *testing.T, dir string) []rdmavm.File {
	t.Helper()
	bins := map[string]string{
		"rdma.test":  ".",
		"verbs.test": "./internal/verbs",
	}
	var files []rdmavm.File
	for name, pkg := range bins {
		out := filepath.Join(dir, name)
		cmd := exec.Command("go", "test", "-c", "-tags", "rdma", "-o", out, pkg)
		cmd.Env = append(os.Environ(), "CGO_ENABLED=1")
		b, err := cmd.CombinedOutput()
		require.NoError(t, err, "go test -c %s: %s", pkg, b)
		files = append(files, rdmavm.File{Host: out})
	}
	return files
}
