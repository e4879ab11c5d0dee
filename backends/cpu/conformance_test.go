package cpu_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/xpu-go/xpu"
	"github.com/xpu-go/xpu/backends/cpu"
	"github.com/xpu-go/xpu/conformance"
	"github.com/xpu-go/xpu/executor"
)

func openCPU(t *testing.T, opts xpu.Options) *xpu.Backend {
	t.Helper()
	b, err := xpu.Open(context.Background(), "cpu", opts)
	require.NoError(t, err)
	t.Cleanup(func() { assert.NoError(t, b.Close(), "closing the backend (a leak is reported here)") })
	return b
}

// The whole backend, as `xpu conformance` runs it.
func TestConformance(t *testing.T) {
	conformance.RunDriver(t, cpu.Name, nil)
}

// The executor and streams again with one worker (no helpers: everything
// on the caller) and with more workers than cores.
func TestConformanceWorkers(t *testing.T) {
	for _, w := range []int{1, 5} {
		newExec := func(t *testing.T) *cpu.Executor {
			e := cpu.NewExecutor(w)
			t.Cleanup(func() { _ = e.Close() })
			return e
		}
		t.Run(fmt.Sprintf("workers=%d", w), func(t *testing.T) {
			conformance.TestExecutor(t, newExec)
			conformance.TestStream(t, func(t *testing.T) executor.Streamer { return newExec(t) })
		})
	}
}

// The space with a limit, and with huge pages.
func TestConformanceSpaceOptions(t *testing.T) {
	for name, opts := range map[string]cpu.SpaceOptions{
		"limit":     {Limit: 1 << 30},
		"hugepages": {HugePages: true},
	} {
		t.Run(name, func(t *testing.T) {
			conformance.TestSpace(t, func(t *testing.T) *cpu.Space {
				s := cpu.NewSpace(opts)
				t.Cleanup(func() { _ = s.Close() })
				return s
			})
		})
	}
}
