//go:build !unix

package launch

import (
	"os"
	"os/exec"
)

// setGroup does nothing where there are no process groups.
func setGroup(*exec.Cmd) {}

// signalGroup signals the process itself; where only os.Kill can be sent
// (Windows), any other signal kills it too.
func signalGroup(p *os.Process, sig os.Signal) {
	if err := p.Signal(sig); err != nil {
		_ = p.Kill()
	}
}

// groupsAlive returns none: there are no process groups.
func groupsAlive([]int) []int { return nil }

// exitInfo returns a reaped process's exit code.
func exitInfo(ps *os.ProcessState) (code int, sig os.Signal) { return ps.ExitCode(), nil }

// continueGroup does nothing where processes are not stopped by signals.
func continueGroup(*os.Process) {}
