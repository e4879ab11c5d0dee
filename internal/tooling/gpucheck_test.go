package tooling_test

import (
	"os/exec"
	"regexp"
	"strconv"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/xpu-go/xpu/internal/tooling/testwait"
)

// scripts/gpu-check.sh fits the device time a task is lent: its steps'
// bounds add up to at most 8 minutes, and it runs the suite on the real
// driver, the GPU example, device buffers between two ranks and the cuda
// benchmarks.
func TestGPUCheckFits(t *testing.T) {
	cmd := exec.CommandContext(testwait.Ctx(t), "sh", "../../scripts/gpu-check.sh")
	cmd.Env = append(cmd.Environ(), "GPU_CHECK_DRY=1")
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "%s", out)
	steps := regexp.MustCompile(`(?m)^step ([^:]+): bound (\d+)s: (.*)$`).FindAllStringSubmatch(string(out), -1)
	require.NotEmpty(t, steps, "%s", out)
	total := 0
	var cmds []string
	for _, s := range steps {
		n, err := strconv.Atoi(s[2])
		require.NoError(t, err)
		total += n
		cmds = append(cmds, s[3])
	}
	assert.LessOrEqual(t, total, 8*60, "the steps' bounds add up to %ds: %v", total, steps)
	assert.Contains(t, cmds, "env XPU_CUDA_TEST_REAL=1 go test -count=1 ./backends/cuda/...")
	assert.Contains(t, cmds, "go run ./examples/gpu -require")
	assert.Contains(t, cmds, "./bin/xpu run -n 2 --timeout 40s go run ./examples/gpuipc -require")
}
