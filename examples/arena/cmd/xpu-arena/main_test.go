package main

import (
	"context"
	"os"
	"regexp"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/xpu-go/xpu/xpucmd/xpucmdtest"
)

// The tests run the command in a child process, as its users run it: the
// test binary again, which runs main instead of the tests.
func TestMain(m *testing.M) {
	xpucmdtest.Main(main) // exits in the child
	os.Exit(m.Run())
}

// xpuArena runs the command with args and returns its exit status and
// output.
func xpuArena(t *testing.T, args ...string) (int, string, string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	return xpucmdtest.Run(ctx, t, args...)
}

// `xpu-arena conformance` runs every suite over the arena backend, through
// the registry, with no options (the arena's default capacity), and
// passes.
func TestConformance(t *testing.T) {
	code, stdout, stderr := xpuArena(t, "conformance", "--backend", "arena")
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
