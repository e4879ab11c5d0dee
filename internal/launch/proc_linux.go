//go:build linux

package launch

import (
	"errors"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// deathSignal is the signal the kernel sends a rank when its launcher dies
// (see setDeathSignal): SIGKILL. The kernel sends it again each time the
// rank passes to another thread of the dying launcher, as they exit one by
// one; a program may read a second SIGTERM as "stop now, skip the
// cleanup" (Open MPI's mpirun does). SIGKILL also ends a rank that ignores
// SIGTERM, without a watchdog, and there is no output to save: a rank's
// stdout and stderr were pipes to the dead launcher.
const deathSignal = syscall.SIGKILL

// setDeathSignal has the kernel send cmd deathSignal when the thread that
// starts it exits: when the launcher dies, by whatever signal, SIGKILL
// included. The thread, not the process: start cmd with startTied, which
// keeps the starting goroutine on its thread, and the thread alive, until
// cmd has been reaped.
func setDeathSignal(cmd *exec.Cmd) {
	if cmd.SysProcAttr == nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{}
	}
	cmd.SysProcAttr.Pdeathsig = deathSignal
}

// lockThread wires the calling goroutine to its OS thread for good: it is
// never unlocked, so the thread ends with the goroutine (Go destroys the
// thread of a goroutine that exits locked) and is never handed to another
// goroutine that could exit locked on it while a child of it runs.
func lockThread() { runtime.LockOSThread() }

// liveGroups returns the process groups that have a live process, from
// /proc; ok is false when /proc cannot be read. A group whose members are
// all zombies is not among them: they are dead, waiting for their new
// parent to reap them, which an init that does not reap (PID 1 of some
// containers) never does.
func liveGroups() (groups map[int]bool, ok bool) {
	d, err := os.Open("/proc")
	if err != nil {
		return nil, false
	}
	defer d.Close()
	names, err := d.Readdirnames(-1)
	if err != nil {
		return nil, false
	}
	groups = map[int]bool{}
	for _, name := range names {
		if name[0] < '0' || name[0] > '9' {
			continue
		}
		if state, pgid, ok := procState(name); ok && state != 'Z' && state != 'X' {
			groups[pgid] = true
		}
	}
	return groups, true
}

// procState reads the state and process group of process pid from
// /proc/PID/stat; ok is false when it has gone.
func procState(pid string) (state byte, pgid int, ok bool) {
	b, err := os.ReadFile("/proc/" + pid + "/stat")
	if err != nil {
		return 0, 0, false
	}
	// "pid (comm) S ppid pgrp …": the command may hold spaces and
	// parentheses, so the fields are counted from its last ')'.
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return 0, 0, false
	}
	f := strings.Fields(s[i+1:])
	if len(f) < 3 || len(f[0]) != 1 {
		return 0, 0, false
	}
	pgid, err = strconv.Atoi(f[2])
	return f[0][0], pgid, err == nil
}

// exitedAt waits until process pid, a child, has exited, without reaping
// it (waitid with WNOWAIT), and returns when it saw it: the time of the
// exit itself, before the reader of its output is done. It returns the zero
// time when it cannot tell.
func exitedAt(pid int) time.Time {
	var info unix.Siginfo
	for {
		err := unix.Waitid(unix.P_PID, pid, &info, unix.WEXITED|unix.WNOWAIT, nil)
		if err == nil {
			return time.Now()
		}
		if !errors.Is(err, unix.EINTR) {
			return time.Time{}
		}
	}
}

// procStopped reports whether process pid is stopped by a signal (SIGSTOP,
// SIGTSTP: state T in /proc), or traced.
func procStopped(pid int) bool {
	state, _, ok := procState(strconv.Itoa(pid))
	return ok && (state == 'T' || state == 't')
}
