//go:build linux

package launch

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"time"
	"unsafe"
)

// The watchdog is the launcher's own binary, executed again through
// /proc/self/exe (which names it even when its file has been replaced or
// removed), with argv[0] watchdogName, its grace period as the only
// argument and watchdogEnv=1 in its environment. Any binary that links
// this package — xpu, a command built on xpucmd, a test binary — therefore
// serves as its own watchdog: the package's init sees the two marks and
// runs the watchdog instead of the program, before main or TestMain.
const (
	watchdogEnv  = "XPU_LAUNCH_WATCHDOG"
	watchdogName = "xpu-watchdog" // also its command name (ps's COMMAND)
)

// watchdogPoll is how often the watchdog looks whether the groups it
// stopped are gone.
const watchdogPoll = 10 * time.Millisecond

func init() {
	if os.Getenv(watchdogEnv) == "" {
		return
	}
	if os.Getenv(watchdogEnv) != "1" || len(os.Args) != 2 || os.Args[0] != watchdogName {
		// Not started by a launcher: the variable means nothing here, and
		// must not reach what this program starts.
		_ = os.Unsetenv(watchdogEnv)
		return
	}
	grace, err := time.ParseDuration(os.Args[1])
	if err != nil || grace < 0 {
		fmt.Fprintf(os.Stderr, "%s: bad grace period %q\n", watchdogName, os.Args[1])
		os.Exit(2)
	}
	// Named for ps and top rather than "exe" (init runs on the main thread,
	// whose name is the process's).
	name := []byte(watchdogName + "\x00")
	_, _, _ = syscall.RawSyscall(syscall.SYS_PRCTL, syscall.PR_SET_NAME, uintptr(unsafe.Pointer(&name[0])), 0)
	// Nothing should stop the watchdog before it has done its work; it has
	// no terminal, but a SIGHUP or SIGINT sent its way is no reason to quit.
	signal.Ignore(syscall.SIGHUP, syscall.SIGINT)
	runWatchdog(os.Stdin, grace)
	os.Exit(0)
}

// startWatchdog starts the watchdog of a job whose ranks have grace to
// exit after SIGTERM.
func startWatchdog(grace time.Duration, logf func(string, ...any)) (*watchdog, error) {
	r, w, err := os.Pipe() // both ends close-on-exec: no rank inherits them
	if err != nil {
		return nil, err
	}
	defer r.Close()
	cmd := &exec.Cmd{
		Path:  "/proc/self/exe",
		Args:  []string{watchdogName, grace.String()},
		Env:   append(os.Environ(), watchdogEnv+"=1", "GORACE="+strings.TrimSpace(os.Getenv("GORACE")+" atexit_sleep_ms=0")),
		Stdin: r,
		// Stdout and Stderr: /dev/null, which outlives any terminal.
		// A session of its own: no terminal's SIGINT or SIGHUP reaches it,
		// nor a signal sent to the launcher's process group.
		SysProcAttr: &syscall.SysProcAttr{Setsid: true},
	}
	if err := cmd.Start(); err != nil {
		w.Close()
		return nil, err
	}
	return &watchdog{cmd: cmd, w: w, logf: logf}, nil
}

// runWatchdog reads the launcher's lines on in until it says wdExit, and
// returns. At end-of-file (or an error) without wdExit, the launcher has
// died: runWatchdog stops every process group registered and not dropped,
// with SIGTERM and, grace later, SIGKILL to those still there, removes the
// files it was told to, and returns once the groups are gone or killed.
func runWatchdog(in io.Reader, grace time.Duration) {
	groups := map[int]bool{}
	var files []string
	sc := bufio.NewScanner(in)
	for sc.Scan() {
		line := sc.Text()
		if line == wdExit {
			return
		}
		if line == "" {
			continue
		}
		if line[0] == wdRemove {
			files = append(files, line)
			continue
		}
		pgid, err := strconv.Atoi(line[1:])
		if err != nil || pgid <= 1 {
			continue
		}
		switch line[0] {
		case wdAdd:
			groups[pgid] = true
		case wdDrop:
			delete(groups, pgid)
		}
	}
	var left []int
	for g := range groups {
		left = append(left, g)
	}
	stopGroups(left, grace)
	for _, f := range files {
		_ = os.RemoveAll(f) // a file, or a directory of the job's own
	}
}

// stopGroups sends SIGTERM to the process groups, waits up to grace for
// them to be gone, and sends SIGKILL to those still there.
func stopGroups(groups []int, grace time.Duration) {
	// A group with a live process keeps its id; one without may have lost
	// it to a stranger's new group since it was registered.
	groups = groupsAlive(groups)
	for _, g := range groups {
		_ = syscall.Kill(-g, syscall.SIGTERM)
	}
	deadline := time.Now().Add(grace)
	for {
		groups = groupsAlive(groups)
		if len(groups) == 0 {
			return
		}
		if !time.Now().Before(deadline) {
			break
		}
		time.Sleep(min(watchdogPoll, time.Until(deadline)))
	}
	for _, g := range groups {
		_ = syscall.Kill(-g, syscall.SIGKILL)
	}
}
