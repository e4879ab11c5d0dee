package conformance_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/xpu-go/xpu/backends/cpu"
	"github.com/xpu-go/xpu/comm"
	"github.com/xpu-go/xpu/conformance"
	"github.com/xpu-go/xpu/memspace"
)

// hangComm is a local rank whose first receive with a user tag — the first
// of all the ranks sharing hung — never completes: its Wait ignores its
// context, Test says it is pending and Cancel does nothing. The receives
// after it, and those of the collectives (reserved tags), work.
type hangComm struct {
	comm.Comm
	hung *atomic.Bool
}

// Unwrap returns the communicator underneath.
func (c hangComm) Unwrap() comm.Comm { return c.Comm }

func (c hangComm) Irecv(buf memspace.Block, source, tag int) (comm.Request, error) {
	if tag >= 0 && tag <= comm.MaxTag && c.hung.CompareAndSwap(false, true) {
		return hangRequest{}, nil
	}
	return c.Comm.Irecv(buf, source, tag)
}

// hangRequest never completes, whatever is asked of it.
type hangRequest struct{}

func (hangRequest) Wait(context.Context) (comm.Status, error) {
	<-never
	return comm.Status{}, nil
}

func (hangRequest) Test() (comm.Status, bool, error) { return comm.Status{}, false, nil }

func (hangRequest) Cancel() error { return nil }

// TestBrokenHangComm runs the suite with the default Timeout over ranks
// whose first receive hangs: the case it hangs must fail within
// DefaultTimeout plus DefaultGrace, naming itself, and the cases after it
// must still run.
func TestBrokenHangComm(t *testing.T) {
	onlyInChild(t)
	var hung atomic.Bool
	conformance.TestComm(t, wrappedGroup(func(c comm.Comm) comm.Comm { return hangComm{Comm: c, hung: &hung} }))
}

// TestBrokenPanic: a case whose implementation panics fails with the
// panic's stack, and the suite goes on.
func TestBrokenPanic(t *testing.T) {
	onlyInChild(t)
	conformance.TestExecutor(t, func(t *testing.T) panicExec { return panicExec{newCPUExec(t)} })
}

// panicExec is the CPU executor, except that Name panics.
type panicExec struct{ *cpu.Executor }

func (panicExec) Name() string { panic("panicExec has no name") }

// stuckSpace is a correct fakeSpace whose Close never returns.
type stuckSpace struct{ *fakeSpace }

func (stuckSpace) Close() error {
	<-never
	return nil
}

// TestBrokenHangClose: a Close that never returns, in a case's cleanup,
// cannot be given up on: the watchdog ends the binary, naming the case.
func TestBrokenHangClose(t *testing.T) {
	onlyInChild(t)
	conformance.TestSpace(t, func(t *testing.T) stuckSpace {
		s := stuckSpace{newFakeSpace(correct)}
		t.Cleanup(func() { _ = s.Close() })
		return s
	}, conformance.Timeout(2*time.Second))
}
