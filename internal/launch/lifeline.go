package launch

import (
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/xpu-go/xpu/internal/affinity"
)

// A rank must not outlive its launcher, however the launcher dies (ADR 22).
// Two mechanisms see to it, on Linux:
//
//   - the rank's parent-death signal (setDeathSignal), which the kernel
//     sends it when the thread that started it exits: startTied starts the
//     rank from a goroutine locked to its thread, and keeps it there until
//     the rank is reaped;
//   - a watchdog process per job (watchdog_linux.go), which holds the read
//     end of a pipe from the launcher and is told the process group of each
//     rank: when the pipe reads end-of-file without a word of goodbye, the
//     launcher is gone, and the watchdog stops every group still registered
//     — the ranks' own children with them — and exits.
//
// So that no rank can start a child before the watchdog knows its group,
// each rank starts as a gate (gate_linux.go): the launcher's binary again,
// which waits for the launcher's go-ahead, given once the group is
// registered, and only then executes the rank's program, in the same
// process.

// startTied starts cmd from a goroutine of its own, locked to its OS thread
// (lockThread) and, when cpus is not nil, bound to those processors for the
// moment of the start, so that cmd inherits the set (startBound); calls
// release (when not nil) once it has started, and waits for cmd there; done
// gets Wait's error and when the process exited (seen before Wait copied the
// last of its output, where the system tells: zero where it does not), on
// that goroutine. It returns once cmd has started and been released, with
// the time Start returned, or failed to start or be released, with the
// error (cmd is reaped then, and done not called). The thread that forked
// cmd thus lives until cmd is reaped, so its parent-death signal fires when
// the launcher dies and not before.
func startTied(cmd *exec.Cmd, cpus []int, release func() error, done func(err error, exited time.Time)) (time.Time, error) {
	type started struct {
		at  time.Time
		err error
	}
	c := make(chan started, 1)
	go func() {
		lockThread()
		err := startBound(cmd, cpus)
		at := time.Now()
		if err == nil && release != nil {
			if err = release(); err != nil {
				_ = cmd.Wait()
			}
		}
		c <- started{at, err}
		if err == nil {
			exited := exitedAt(cmd.Process.Pid)
			done(cmd.Wait(), exited)
		}
	}()
	s := <-c
	return s.at, s.err
}

// startBound starts cmd from the calling thread, bound to cpus for the
// moment when cpus is not nil. Should the thread fail to get its set back,
// it keeps the rank's: it is locked to its goroutine until the rank is
// reaped, and ends with it.
func startBound(cmd *exec.Cmd, cpus []int) error {
	if cpus == nil {
		return cmd.Start()
	}
	restore, err := affinity.BindThread(cpus)
	if err != nil {
		return err
	}
	err = cmd.Start()
	_ = restore()
	return err
}

// The watchdog's protocol: lines on its standard input.
const (
	wdAdd    = '+'    // "+PGID": stop this process group if the launcher dies
	wdDrop   = '-'    // "-PGID": its leader is reaped; forget it
	wdRemove = '/'    // "/PATH" (an absolute path): remove this file if the launcher dies
	wdExit   = "exit" // the job is over: exit now
)

// watchdog is the launcher's end of a job's watchdog. A nil *watchdog is
// one that could not be started (or a platform without one): its methods
// do nothing.
type watchdog struct {
	mu     sync.Mutex // serializes send
	cmd    *exec.Cmd
	w      *os.File // the write end of the watchdog's standard input
	failed error    // the first error writing to it; nothing is written after one
	logf   func(format string, args ...any)
}

// watchdogExitTimeout is how long the launcher waits for the watchdog to
// exit once told to, before it kills it.
const watchdogExitTimeout = 5 * time.Second

func (w *watchdog) send(line string) {
	if w == nil {
		return
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.failed != nil {
		return
	}
	// No deadline: a line is a few bytes, and the watchdog does nothing but
	// read them (a deadline would expire on a launcher starved of the CPU).
	if _, err := w.w.WriteString(line + "\n"); err != nil {
		w.failed = err
		w.logf("the watchdog (pid %d) stopped listening (%v): should this launcher die, what the ranks start would outlive it",
			w.cmd.Process.Pid, err)
	}
}

// add registers the process group pgid, led by a rank.
func (w *watchdog) add(pgid int) { w.send(string(wdAdd) + strconv.Itoa(pgid)) }

// drop unregisters pgid once its leader, a rank that exited of its own
// accord, has been reaped: what it left in its group is not the job's (Run
// does not stop it either), and once the group is empty its id may be
// reused, by a group the watchdog must never signal.
func (w *watchdog) drop(pgid int) { w.send(string(wdDrop) + strconv.Itoa(pgid)) }

// removeOnDeath has the watchdog remove the file at path, which must be
// absolute, should the launcher die: the launcher removes it itself when
// the job ends.
func (w *watchdog) removeOnDeath(path string) {
	if filepath.IsAbs(path) && !strings.ContainsRune(path, '\n') {
		w.send(path)
	}
}

// stop tells the watchdog the job is over and reaps it. It waits at most
// watchdogExitTimeout for it to exit, then kills it.
func (w *watchdog) stop() {
	if w == nil {
		return
	}
	w.send(wdExit)
	_ = w.w.Close()
	w.mu.Lock()
	failed := w.failed
	w.mu.Unlock()
	t := time.AfterFunc(watchdogExitTimeout, func() { _ = w.cmd.Process.Kill() })
	err := w.cmd.Wait()
	t.Stop()
	if err != nil && failed == nil {
		w.logf("the watchdog (pid %d) ended badly: %v", w.cmd.Process.Pid, err)
	}
}
