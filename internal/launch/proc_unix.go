//go:build unix

package launch

import (
	"errors"
	"os"
	"os/exec"
	"slices"
	"syscall"
)

// setGroup makes the command the leader of a process group of its own, so
// that a signal sent to the group reaches the children it starts, and a
// terminal's Ctrl-C reaches only the launcher, which forwards it.
func setGroup(cmd *exec.Cmd) {
	if cmd.SysProcAttr == nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{}
	}
	cmd.SysProcAttr.Setpgid = true
}

// signalGroup sends sig to the process group p leads. The group may have
// gone already; that is not an error.
func signalGroup(p *os.Process, sig os.Signal) {
	s, ok := sig.(syscall.Signal)
	if !ok {
		_ = p.Signal(sig)
		return
	}
	if err := syscall.Kill(-p.Pid, s); err != nil {
		_ = p.Signal(sig) // the leader, at least, if the group is not its own
	}
}

// groupsAlive returns those of the process groups that have a live
// process: that can be signalled and, where /proc tells, is not a zombie.
func groupsAlive(groups []int) []int {
	var out []int
	for _, g := range groups {
		if err := syscall.Kill(-g, 0); !errors.Is(err, syscall.ESRCH) && !errors.Is(err, syscall.EPERM) {
			out = append(out, g)
		}
	}
	if len(out) == 0 {
		return nil
	}
	if live, ok := liveGroups(); ok {
		out = slices.DeleteFunc(out, func(g int) bool { return !live[g] })
	}
	return out
}

// exitInfo returns a reaped process's exit code, or -1 and the signal that
// killed it.
func exitInfo(ps *os.ProcessState) (code int, sig os.Signal) {
	if ws, ok := ps.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		return -1, ws.Signal()
	}
	return ps.ExitCode(), nil
}

// continueGroup sends SIGCONT to the process group p leads: a group stopped
// by a signal acts on the signals it was sent only once it runs again.
func continueGroup(p *os.Process) { signalGroup(p, syscall.SIGCONT) }
