//go:build cgo

package cuda_test

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/xpu-go/xpu/backends/cuda"
	"github.com/xpu-go/xpu/internal/launch"
)

// The jobs below run examples/gpuipc as real processes under the
// launcher of xpu run, every rank loading the fake driver: device buffers
// between processes, through CUDA IPC where the ranks share a machine
// (docs/adr/0040-cuda-ipc.md), and staged through host memory where the
// links are forced to TCP.

// buildGPUIPC builds examples/gpuipc into a directory of t's.
func buildGPUIPC(t *testing.T) string {
	t.Helper()
	if testing.Short() {
		t.Skip("builds examples/gpuipc and runs it as a job of processes")
	}
	if _, err := exec.LookPath("go"); err != nil {
		t.Skip("no go command to build examples/gpuipc with")
	}
	prog := filepath.Join(t.TempDir(), "gpuipc")
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	out, err := exec.CommandContext(ctx, "go", "build", "-o", prog, "../../examples/gpuipc").CombinedOutput()
	require.NoError(t, err, "go build examples/gpuipc:\n%s", out)
	return prog
}

// runGPUIPC runs examples/gpuipc as a job of n ranks with the extra
// environment and returns each rank's lines of output.
func runGPUIPC(t *testing.T, prog string, n int, env ...string) map[int][]string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var stdout, stderr bytes.Buffer
	res, err := launch.Run(ctx, launch.Spec{
		N:       n,
		Prog:    prog,
		Args:    []string{"-n", "1200000", "-require"},
		Env:     append(os.Environ(), env...),
		Timeout: 90 * time.Second,
		Stdout:  &stdout,
		Stderr:  &stderr,
	})
	require.NoError(t, err, "stderr:\n%s", stderr.String())
	require.Empty(t, res.Failed(), "stdout:\n%s\nstderr:\n%s", stdout.String(), stderr.String())
	lines := map[int][]string{}
	for _, l := range strings.Split(strings.TrimSpace(stdout.String()), "\n") {
		var r int
		if _, err := fmt.Sscanf(l, "[%d] ", &r); err == nil {
			lines[r] = append(lines[r], l[strings.Index(l, "] ")+2:])
		}
	}
	return lines
}

func TestJobDeviceBuffers(t *testing.T) {
	if fake == nil {
		t.Skip("runs the job on the fake driver; scripts/gpu-check.sh runs examples/gpuipc on a GPU")
	}
	prog := buildGPUIPC(t)
	for _, tc := range []struct {
		name    string
		n       int
		devices int
		path    string // the path the device messages take
		env     []string
	}{
		{"2 ranks on one device", 2, 1, "ipc", nil},
		{"4 ranks on 2 devices", 4, 2, "ipc", nil},
		{"4 ranks on 2 devices without peer access", 4, 2, "staged", []string{"FAKECUDA_NO_PEER=1"}},
		{"2 ranks over TCP links", 2, 1, "staged", []string{"XPU_LINKS=tcp"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			env := append([]string{
				cuda.EnvLibrary + "=" + fakePath,
				fmt.Sprintf("FAKECUDA_DEVICES=%d", tc.devices),
			}, tc.env...)
			lines := runGPUIPC(t, prog, tc.n, env...)
			var ranks []int
			for r := range lines {
				ranks = append(ranks, r)
			}
			sort.Ints(ranks)
			require.Len(t, ranks, tc.n, "every rank prints its line: %v", lines)
			for r := range tc.n {
				want := fmt.Sprintf("rank %d of %d: device %d: ring of 1024 and 1200000 float32 and allreduce of 1200000: ok", r, tc.n, r%tc.devices)
				assert.Contains(t, lines[r], want, "rank %d", r)
				next, prev := (r+1)%tc.n, (r+tc.n-1)%tc.n
				assert.Contains(t, lines[r], fmt.Sprintf("rank %d: device messages to rank %d: %s; from rank %d: %s", r, next, tc.path, prev, tc.path), "rank %d", r)
			}
		})
	}
}
