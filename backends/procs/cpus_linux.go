package procs

import (
	"os"

	"golang.org/x/sys/unix"
)

// affinity returns the processors process pid may run on (its main
// thread's; 0 means this process); ok is false when the system does not
// say (the process is gone, or out of this one's sight).
func affinity(pid int) (s cpuSet, ok bool) {
	if pid == 0 {
		pid = os.Getpid()
	}
	var u unix.CPUSet
	if err := unix.SchedGetaffinity(pid, &u); err != nil {
		return s, false
	}
	for i := 0; i < len(s)*64; i++ {
		if u.IsSet(i) {
			s[i/64] |= 1 << (i % 64)
		}
	}
	return s, s.count() > 0
}
