package main

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// argsEnv makes the test binary run main with the arguments it holds (a
// JSON list) instead of the tests: the command, as its users run it.
const argsEnv = "XPU_ARENA_TEST_ARGS"

func TestMain(m *testing.M) {
	if args := os.Getenv(argsEnv); args != "" {
		var argv []string
		if err := json.Unmarshal([]byte(args), &argv); err != nil {
			panic(err)
		}
		os.Args = append([]string{"xpu-arena"}, argv...)
		main() // exits
	}
	os.Exit(m.Run())
}

// xpuArena runs the command with args and returns its exit status and
// output.
func xpuArena(t *testing.T, args ...string) (int, string, string) {
	t.Helper()
	enc, err := json.Marshal(args)
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), argsEnv+"="+string(enc), "GORACE=atexit_sleep_ms=0")
	var stdout, stderr strings.Builder
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err = cmd.Run()
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else {
		require.NoError(t, err)
	}
	return code, stdout.String(), stderr.String()
}

// `xpu-arena conformance` runs every suite over the arena backend, through
// the registry, and passes.
func TestConformance(t *testing.T) {
	code, stdout, stderr := xpuArena(t, "conformance", "--backend", "arena", "-o", "capacity=256MiB")
	require.Equal(t, 0, code, "stdout:\n%s\nstderr:\n%s", stdout, stderr)
	m := regexp.MustCompile(`(?m)^arena: (\d+) passed, 0 failed, \d+ skipped$`).FindStringSubmatch(stdout)
	require.NotNil(t, m, "no summary line for arena:\n%s", stdout)
	assert.NotEqual(t, "0", m[1], "no case passed")
	for _, area := range []string{"backend/capabilities", "arena/space", "arena/pool", "executor/parallel", "transfer/copy"} {
		assert.Contains(t, stdout, area, "the matrix has no row %s", area)
	}
}

// The command knows the backends its program imports: arena, and none of
// the repository's.
func TestInfo(t *testing.T) {
	code, stdout, stderr := xpuArena(t, "info")
	require.Equal(t, 0, code, "stderr:\n%s", stderr)
	assert.Contains(t, stdout, "\narena:")
	assert.NotContains(t, stdout, "\ncpu:")
}
