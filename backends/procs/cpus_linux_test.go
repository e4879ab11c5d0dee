package procs

import (
	"os"
	"os/exec"
	"runtime"
	"testing"

	"github.com/xpu-go/xpu/internal/affinity"
	"github.com/xpu-go/xpu/internal/tooling/testwait"
)

// startBound starts a process that sleeps, bound to processor cpu: it is
// forked from a thread bound there for the moment, whose set it inherits.
func startBound(t *testing.T, cpu int) int {
	t.Helper()
	type started struct {
		cmd *exec.Cmd
		err error
	}
	c := make(chan started, 1)
	go func() {
		runtime.LockOSThread()
		restore, err := affinity.BindThread([]int{cpu})
		if err != nil {
			c <- started{err: err}
			return
		}
		cmd := exec.Command("sleep", "60")
		err = cmd.Start()
		if restore() == nil {
			runtime.UnlockOSThread()
		} // else the thread ends with this goroutine, and its set with it
		c <- started{cmd, err}
	}()
	s := testwait.Recv(t, c, "the start of a process bound to a processor")
	if s.err != nil {
		t.Fatalf("start a process bound to processor %d: %v", cpu, s.err)
	}
	t.Cleanup(func() {
		_ = s.cmd.Process.Kill()
		_ = s.cmd.Wait()
	})
	return s.cmd.Process.Pid
}

// allowed returns the processors this process may run on.
func allowed(t *testing.T) []int {
	t.Helper()
	ps, err := affinity.Of(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	return ps
}

func TestAffinity(t *testing.T) {
	ps := allowed(t)
	mine, ok := affinityOf(0)
	if !ok || mine != cpus(ps...) {
		t.Fatalf("affinityOf(0) = %v, %v; want %v", mine, ok, cpus(ps...))
	}
	last := ps[len(ps)-1]
	got, ok := affinityOf(startBound(t, last))
	if !ok || got != cpus(last) {
		t.Errorf("affinity of a process bound to %d = %v, %v", last, got, ok)
	}
	// A process that is gone has no set: it counts as this one's.
	cmd := exec.Command("true")
	if err := cmd.Run(); err != nil {
		t.Fatal(err)
	}
	if _, ok := affinityOf(cmd.Process.Pid); ok {
		t.Errorf("affinity of reaped process %d: ok", cmd.Process.Pid)
	}
}

// TestNodeCrowded reads real processes' sets: peers bound to one processor
// crowd this (unbound) process only when they and it outnumber its
// processors.
func TestNodeCrowded(t *testing.T) {
	ps := allowed(t)
	if len(ps) < 2 || len(ps) > 64 {
		t.Skipf("binds a process per processor, for 2 to 64 of them (here %d); TestCrowded covers the rule", len(ps))
	}
	first := ps[0]
	var pids []int
	for range len(ps) - 1 {
		pids = append(pids, startBound(t, first))
	}
	// len(ps)-1 peers and this process on len(ps) processors.
	if nodeCrowded(pids) {
		t.Errorf("%d peers bound to processor %d and this process on %d processors: crowded", len(pids), first, len(ps))
	}
	pids = append(pids, startBound(t, first))
	if !nodeCrowded(pids) {
		t.Errorf("%d peers and this process on %d processors: not crowded", len(pids), len(ps))
	}
	// Peers whose sets cannot be read count as sharing this process's.
	if !nodeCrowded(make([]int, len(ps))) {
		t.Errorf("%d unknown peers and this process on %d processors: not crowded", len(ps), len(ps))
	}
	if nodeCrowded(make([]int, len(ps)-1)) {
		t.Errorf("%d unknown peers and this process on %d processors: crowded", len(ps)-1, len(ps))
	}
}
