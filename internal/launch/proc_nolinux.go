//go:build !linux

package launch

import "os/exec"

// setDeathSignal does nothing where there is no parent-death signal.
func setDeathSignal(*exec.Cmd) {}

// lockThread does nothing where setDeathSignal does nothing.
func lockThread() {}

// liveGroups cannot tell: there is no /proc to read.
func liveGroups() (map[int]bool, bool) { return nil, false }
