package shm

import "golang.org/x/sys/unix"

// schedYield gives the processor to another runnable thread of the
// machine, if any.
func schedYield() { _, _, _ = unix.RawSyscall(unix.SYS_SCHED_YIELD, 0, 0, 0) }
