//go:build !linux

package launch

import (
	"os/exec"
	"time"
)

// setDeathSignal does nothing where there is no parent-death signal.
func setDeathSignal(*exec.Cmd) {}

// lockThread does nothing where setDeathSignal does nothing.
func lockThread() {}

// liveGroups cannot tell: there is no /proc to read.
func liveGroups() (map[int]bool, bool) { return nil, false }

// exitedAt cannot tell without waitid: the time Wait returns stands.
func exitedAt(int) time.Time { return time.Time{} }

// procStopped cannot tell without /proc.
func procStopped(int) bool { return false }
