//go:build !linux

package launch

import (
	"os/exec"
	"time"
)

// startWatchdog starts no watchdog where there is none (see ADR 22): the
// ranks' fate when the launcher dies is left to the system.
func startWatchdog(time.Duration, func(string, ...any)) (*watchdog, error) { return nil, nil }

// gate is nothing where there is no watchdog to wait for.
type gate struct{}

// gateRank leaves cmd as it is.
func gateRank(*exec.Cmd) *gate { return nil }

func (g *gate) open(pid int, wd *watchdog) error { wd.add(pid); return nil }

func (g *gate) abort() {}
