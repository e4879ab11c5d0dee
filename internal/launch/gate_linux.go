//go:build linux

package launch

import (
	"errors"
	"io"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// A rank starts as a gate: the launcher's binary, executed again through
// /proc/self/exe with argv[0] gateName, then the rank's program's path and
// its argv, gateEnv=1 in its environment, the read end of the go-ahead pipe
// as fd 3 and the write end of the status pipe as fd 4. The package's init
// sees the marks and, before main or TestMain, waits for the go-ahead (one
// byte), which the launcher writes once the watchdog knows the rank's
// process group, and executes the program in its place: same process, same
// group, same parent-death signal. If the exec fails, the gate writes the
// errno to fd 4 (close-on-exec, so that a successful exec closes it
// instead) and exits; if the go-ahead never comes (the launcher is gone),
// it exits without running the program.
const (
	gateEnv  = "XPU_LAUNCH_GATE"
	gateName = "xpu-rank-gate"
	// gateExitNoGo and gateExitExec are its exit statuses when it runs
	// nothing.
	gateExitNoGo = 125
	gateExitExec = 127
)

// gateTimeout bounds the wait for a gate to report its exec: the start of a
// Go program.
const gateTimeout = 30 * time.Second

func init() {
	if os.Getenv(gateEnv) == "" {
		return
	}
	if os.Getenv(gateEnv) != "1" || len(os.Args) < 3 || os.Args[0] != gateName {
		_ = os.Unsetenv(gateEnv) // not started by a launcher: not ours
		return
	}
	runGate(os.Args[1], os.Args[2:])
}

// runGate waits for the go-ahead on fd 3 and executes path with argv and
// this environment less gateEnv; it returns only by exiting.
func runGate(path string, argv []string) {
	syscall.CloseOnExec(4)
	var b [1]byte
	n, _ := syscall.Read(3, b[:])
	_ = syscall.Close(3)
	if n != 1 {
		os.Exit(gateExitNoGo)
	}
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, gateEnv+"=") {
			env = append(env, kv)
		}
	}
	err := syscall.Exec(path, argv, env)
	var errno syscall.Errno
	if !errors.As(err, &errno) {
		errno = syscall.EINVAL
	}
	_, _ = syscall.Write(4, []byte(strconv.Itoa(int(errno))))
	os.Exit(gateExitExec)
}

// gate is the launcher's end of a rank's gate.
type gate struct {
	path          string   // the program the gate executes
	goR, goW      *os.File // go-ahead: the gate reads goR as fd 3
	statR, statW  *os.File // status: the gate writes statW as fd 4
	childEndsOpen bool
}

// gateRank makes cmd start as a gate for the program it names. It returns
// nil, leaving cmd as it is, if the pipes cannot be made.
func gateRank(cmd *exec.Cmd) *gate {
	g := &gate{path: cmd.Path, childEndsOpen: true}
	var err error
	if g.goR, g.goW, err = os.Pipe(); err != nil {
		return nil
	}
	if g.statR, g.statW, err = os.Pipe(); err != nil {
		g.goR.Close()
		g.goW.Close()
		return nil
	}
	cmd.Args = append([]string{gateName, cmd.Path}, cmd.Args...)
	cmd.Path = "/proc/self/exe"
	cmd.Env = append(cmd.Env[:len(cmd.Env):len(cmd.Env)], gateEnv+"=1")
	cmd.ExtraFiles = []*os.File{g.goR, g.statW}
	return g
}

// open registers the started gate's group with wd and lets it execute the
// program; it returns the exec's error, if any (then wd forgets the group
// and the gate exits by itself).
func (g *gate) open(pid int, wd *watchdog) error {
	if g == nil {
		wd.add(pid)
		return nil
	}
	g.closeChildEnds()
	wd.add(pid)
	_, werr := g.goW.Write([]byte{1})
	g.goW.Close()
	_ = g.statR.SetReadDeadline(time.Now().Add(gateTimeout))
	msg, rerr := io.ReadAll(g.statR)
	g.statR.Close()
	var err error
	switch {
	case len(msg) > 0:
		n, _ := strconv.Atoi(string(msg))
		err = &os.PathError{Op: "exec", Path: g.path, Err: syscall.Errno(n)}
	case werr != nil:
		err = werr // the gate is gone already
	case rerr != nil:
		err = rerr // it neither executed the program nor exited
	}
	if err != nil {
		wd.drop(pid)
	}
	return err
}

// closeChildEnds closes the launcher's copies of the gate's ends of the
// pipes, once it has them (or will never have them).
func (g *gate) closeChildEnds() {
	if g.childEndsOpen {
		g.goR.Close()
		g.statW.Close()
		g.childEndsOpen = false
	}
}

// abort closes the pipes of a gate that did not start.
func (g *gate) abort() {
	if g == nil {
		return
	}
	g.closeChildEnds()
	g.goW.Close()
	g.statR.Close()
}
