package xpucmd

import (
	"fmt"
	"os"
	"runtime"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// With --bind and more ranks than processors, each rank has one processor,
// and Go's GOMAXPROCS follows; without it, each has them all.
func TestRunBind(t *testing.T) {
	setRole(t, "gomaxprocs")
	n := runtime.NumCPU() + 1
	for _, bind := range []bool{true, false} {
		args := []string{"run", "-n", fmt.Sprint(n)}
		want := runtime.NumCPU()
		if bind {
			args, want = append(args, "--bind"), 1
		}
		var stdout, stderr lockedBuffer
		code := Run(testCtx(t), append(args, "--", os.Args[0]), &stdout, &stderr)
		require.Equal(t, 0, code, "stderr: %s", stderr.String())
		lines := strings.Split(strings.TrimSpace(stdout.String()), "\n")
		require.Len(t, lines, n)
		for _, l := range lines {
			assert.True(t, strings.HasSuffix(l, fmt.Sprintf(" gomaxprocs %d", want)), "bind %v: %s", bind, l)
		}
	}
}
