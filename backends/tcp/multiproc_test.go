package tcp_test

import (
	"context"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/xpu-go/xpu/backends/tcp"
	"github.com/xpu-go/xpu/conformance"
)

// envSPMD makes TestSPMDRank run: set only in the rank processes of
// TestMultiProcessConformance.
const envSPMD = "XPU_TCP_TEST_SPMD"

// detectTimeout is the failure-detection bound the multi-process tests
// give their ranks (XPU_TCP_TIMEOUT), and detectSlack what a survivor may
// take beyond it (scheduling on a loaded machine, the race detector).
const (
	detectTimeout = 3 * time.Second
	detectSlack   = 5 * time.Second
)

// TestMultiProcessKill runs a job of 4 rank processes doing allreduces of
// 4 MiB, SIGKILLs rank 2 in the middle of them, and checks that every
// survivor's allreduce fails with ErrPeerLost within the bound — not a
// hang, not another error.
func TestMultiProcessKill(t *testing.T) {
	if testing.Short() {
		t.Skip("starts 4 processes; skipped in -short mode")
	}
	const victim = 2
	j := job{size: 4, master: "127.0.0.1", port: freePort(t), secret: newSecret(t),
		env: []string{"XPU_TCP_TIMEOUT=" + detectTimeout.String()}}
	procs := j.start(t, roleUntilLost)
	for _, p := range procs {
		p.expect(t, "READY", time.Minute)
	}
	killed := time.Now()
	require.NoError(t, procs[victim].cmd.Process.Kill())
	for _, p := range procs {
		if p.rank == victim {
			continue
		}
		l := p.expect(t, "LOST", detectTimeout+detectSlack)
		took := l.at.Sub(killed)
		t.Logf("rank %d saw the loss %v after the kill", p.rank, took.Round(time.Millisecond))
		require.LessOrEqual(t, took, detectTimeout+detectSlack)
		select {
		case <-p.exited:
			require.NoError(t, p.wait(), "rank %d exit", p.rank)
		case <-time.After(detectTimeout + detectSlack):
			t.Fatalf("rank %d did not exit after reporting the loss (Close must return)", p.rank)
		}
	}
}

// TestMultiProcessJob runs a job of 3 rank processes through checked
// allreduces (ring and small), ring exchanges and a barrier.
func TestMultiProcessJob(t *testing.T) {
	if testing.Short() {
		t.Skip("starts 3 processes; skipped in -short mode")
	}
	j := job{size: 3, master: "127.0.0.1", port: freePort(t), secret: newSecret(t),
		env: []string{envIters + "=5", envCount + "=300000"}}
	procs := j.start(t, roleChecked)
	for _, p := range procs {
		p.expect(t, "OK", time.Minute)
		require.NoError(t, p.wait(), "rank %d exit", p.rank)
	}
}

// TestMultiProcessConformance runs the communicator suite SPMD-style
// (conformance.TestCommRank) in a job of 3 rank processes: each runs
// TestSPMDRank with its own rank.
func TestMultiProcessConformance(t *testing.T) {
	if testing.Short() {
		t.Skip("starts 3 processes; skipped in -short mode")
	}
	j := job{size: 3, master: "127.0.0.1", port: freePort(t), secret: newSecret(t),
		env: []string{envSPMD + "=1"}, args: []string{"-test.run=^TestSPMDRank$", "-test.v"}}
	procs := j.start(t, "")
	for _, p := range procs {
		var out []string
		for l := range p.lines {
			out = append(out, l.text)
			if l.text == "PASS" || l.text == "FAIL" || strings.HasPrefix(l.text, "--- ") {
				t.Logf("rank %d: %s", p.rank, l.text)
			}
		}
		if err := p.wait(); err != nil {
			t.Logf("rank %d: its whole output:\n%s", p.rank, strings.Join(out, "\n"))
			t.Fatalf("rank %d: the suite failed: %v", p.rank, err)
		}
	}
}

// TestSPMDRank is one rank of TestMultiProcessConformance; on its own it
// skips.
func TestSPMDRank(t *testing.T) {
	if os.Getenv(envSPMD) == "" {
		t.Skip("runs only as a rank process of TestMultiProcessConformance")
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	c, err := tcp.FromEnv(ctx)
	require.NoError(t, err)
	defer c.Close()
	conformance.TestCommRank(t, c)
}
