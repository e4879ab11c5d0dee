package shm

import "golang.org/x/sys/unix"

// Yield gives the processor to another runnable thread of the
// machine, if any.
func Yield() { _, _, _ = unix.RawSyscall(unix.SYS_SCHED_YIELD, 0, 0, 0) }
