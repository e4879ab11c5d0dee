package procs_test

import (
	"context"
	"os"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/xpu-go/xpu/backends/procs"
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
// hang, not another error — over shared-memory links (the kernel closes
// the dead rank's doorbells) and over TCP links; and that nothing is left
// in /dev/shm.
func TestMultiProcessKill(t *testing.T) {
	if testing.Short() {
		t.Skip("starts 4 processes; skipped in -short mode")
	}
	for _, links := range []string{"shm", "tcp"} {
		t.Run(links, func(t *testing.T) {
			shmBefore := devShm(t)
			const victim = 2
			j := job{size: 4, master: "127.0.0.1", port: freePort(t), secret: newSecret(t),
				env: []string{"XPU_TCP_TIMEOUT=" + detectTimeout.String(), procs.EnvLinks + "=" + links}}
			procs := j.start(t, roleUntilLost)
			for _, p := range procs {
				p.expect(t, "READY", time.Minute)
			}
			killed := time.Now()
			require.NoError(t, procs[victim].cmd.Process.Kill())
			for _, p := range procs {
				if p.rank != victim {
					expectLoss(t, p, killed, "the kill")
				}
			}
			_ = procs[victim].wait()
			require.Equal(t, shmBefore, devShm(t), "entries in /dev/shm")
		})
	}
}

// TestMultiProcessTornMessage kills a rank while the ring of its
// shared-memory link holds part of a frame: rank 1 sends a 60 KiB eager
// message through 4 KiB rings while rank 0 is stopped (SIGSTOP), so the
// frame can never be finished; rank 1 is SIGKILLed, rank 0 resumed. Rank
// 0's posted receive must fail with ErrPeerLost — the part in the ring is
// never delivered as a message.
func TestMultiProcessTornMessage(t *testing.T) {
	if testing.Short() {
		t.Skip("starts 2 processes; skipped in -short mode")
	}
	shmBefore := devShm(t)
	j := job{size: 2, master: "127.0.0.1", port: freePort(t), secret: newSecret(t),
		env: []string{"XPU_TCP_TIMEOUT=" + detectTimeout.String(), procs.EnvShmRing + "=4K"}}
	procs := j.start(t, roleTorn)
	for _, p := range procs {
		p.expect(t, "READY", time.Minute)
	}
	time.Sleep(50 * time.Millisecond) // rank 0 posts its receive
	require.NoError(t, procs[0].cmd.Process.Signal(syscall.SIGSTOP))
	require.NoError(t, procs[1].cmd.Process.Signal(syscall.SIGUSR1))
	procs[1].expect(t, "SENDING", time.Minute)
	require.NoError(t, procs[1].cmd.Process.Kill())
	_ = procs[1].wait()
	killed := time.Now()
	require.NoError(t, procs[0].cmd.Process.Signal(syscall.SIGCONT))
	l := procs[0].expect(t, "LOST", detectTimeout+detectSlack)
	t.Logf("rank 0 saw the loss %v after the kill: %s", l.at.Sub(killed).Round(time.Millisecond), l.text)
	require.NoError(t, procs[0].wait())
	require.Equal(t, shmBefore, devShm(t), "entries in /dev/shm")
}

// expectLoss checks that rank process p reports a lost peer within the
// bound after since (the moment of what), then exits cleanly: Close
// returns.
func expectLoss(t *testing.T, p *rankProc, since time.Time, what string) {
	t.Helper()
	l := p.expect(t, "LOST", detectTimeout+detectSlack)
	took := l.at.Sub(since)
	t.Logf("rank %d saw the loss %v after %s", p.rank, took.Round(time.Millisecond), what)
	require.LessOrEqual(t, took, detectTimeout+detectSlack)
	select {
	case <-p.exited:
		require.NoError(t, p.wait(), "rank %d exit", p.rank)
	case <-time.After(detectTimeout + detectSlack):
		t.Fatalf("rank %d did not exit after reporting the loss (Close must return)", p.rank)
	}
}

// devShm lists /dev/shm (empty where there is none).
func devShm(t *testing.T) []string {
	t.Helper()
	d, _ := os.ReadDir("/dev/shm")
	var names []string
	for _, e := range d {
		// Only this project's: other programs of the machine (an MPI
		// job's segments) come and go meanwhile.
		if strings.Contains(strings.ToLower(e.Name()), "xpu") {
			names = append(names, e.Name())
		}
	}
	return names
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
// TestSPMDRank with its own rank. The ranks link through shared memory
// (the default on one machine), through TCP, and mixed: ranks 0 and 2 on
// one node, rank 1 on another (XPU_NODE).
func TestMultiProcessConformance(t *testing.T) {
	if testing.Short() {
		t.Skip("starts 3 processes; skipped in -short mode")
	}
	for _, links := range []string{"shm", "tcp", "mixed"} {
		t.Run(links, func(t *testing.T) {
			j := job{size: 3, master: "127.0.0.1", port: freePort(t), secret: newSecret(t),
				env: []string{envSPMD + "=" + links}, args: []string{"-test.run=^TestSPMDRank$", "-test.v"}}
			switch links {
			case "tcp":
				j.env = append(j.env, procs.EnvLinks+"=tcp")
			case "mixed":
				j.rankEnv = func(r int) []string { return []string{procs.EnvNode + "=" + strconv.Itoa(r%2)} }
			}
			procs := j.start(t, "")
			outs := make([][]string, len(procs))
			for _, p := range procs {
				for l := range p.lines {
					outs[p.rank] = append(outs[p.rank], l.text)
					if l.text == "PASS" || l.text == "FAIL" || strings.HasPrefix(l.text, "--- ") {
						t.Logf("rank %d: %s", p.rank, l.text)
					}
				}
			}
			for _, p := range procs {
				if err := p.wait(); err != nil {
					t.Errorf("rank %d: the suite failed: %v; its whole output:\n%s", p.rank, err, strings.Join(outs[p.rank], "\n"))
				}
			}
		})
	}
}

// TestSPMDRank is one rank of TestMultiProcessConformance; on its own it
// skips. It checks that its links are of the kind the job asked for
// before it runs the suite.
func TestSPMDRank(t *testing.T) {
	links := os.Getenv(envSPMD)
	if links == "" {
		t.Skip("runs only as a rank process of TestMultiProcessConformance")
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	c, err := procs.FromEnv(ctx)
	require.NoError(t, err)
	defer c.Close()
	for j := range c.Size() {
		want := links
		switch {
		case j == c.Rank():
			want = procs.TransportSelf
		case links == "mixed" && j%2 == c.Rank()%2:
			want = procs.TransportShm
		case links == "mixed":
			want = procs.TransportTCP
		}
		require.Equal(t, want, c.Transport(j), "link from rank %d to rank %d", c.Rank(), j)
	}
	conformance.TestCommRank(t, c)
}
