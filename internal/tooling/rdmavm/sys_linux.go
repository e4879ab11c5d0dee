package rdmavm

import (
	"context"
	"os"
	"os/exec"
	"runtime"
	"syscall"
	"time"
)

// startTied starts cmd from a goroutine locked to its OS thread for good,
// with SIGKILL as the parent-death signal, and reaps it there: the kernel
// sends the signal when the thread that started the child exits, so the
// thread must live until the child is reaped, and never run another
// goroutine (Go ends the thread of a goroutine that exits locked). qemu
// thus dies with the process that runs it, however that process dies.
// The channel receives the result of cmd.Wait.
func startTied(cmd *exec.Cmd) (<-chan error, error) {
	if cmd.SysProcAttr == nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{}
	}
	cmd.SysProcAttr.Pdeathsig = syscall.SIGKILL
	started := make(chan error, 1)
	done := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		if err := cmd.Start(); err != nil {
			started <- err
			return
		}
		started <- nil
		done <- cmd.Wait()
	}()
	if err := <-started; err != nil {
		return nil, err
	}
	return done, nil
}

// lockFile takes an exclusive flock on the file at path, creating it,
// polling so that it gives up when ctx is done. unlock releases it.
func lockFile(ctx context.Context, path string) (unlock func(), err error) {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return nil, err
	}
	for {
		err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
		if err == nil {
			return func() { f.Close() }, nil
		}
		if err != syscall.EWOULDBLOCK && err != syscall.EINTR {
			f.Close()
			return nil, err
		}
		select {
		case <-ctx.Done():
			f.Close()
			return nil, ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
}
