package affinity

import (
	"fmt"

	"golang.org/x/sys/unix"
)

// Of returns the processors that process pid may run on, in increasing
// order: its main thread's set, or, for a thread id, that thread's; pid 0
// means the calling thread.
func Of(pid int) ([]int, error) {
	var set unix.CPUSet
	if err := unix.SchedGetaffinity(pid, &set); err != nil {
		return nil, fmt.Errorf("the processors of %d: %w", pid, err)
	}
	var ids []int
	for id := 0; id < len(set)*64; id++ {
		if set.IsSet(id) {
			ids = append(ids, id)
		}
	}
	return ids, nil
}

// BindThread binds the calling thread, which its goroutine must hold
// locked (runtime.LockOSThread), to cpus, and returns the function that
// gives it back the set it had.
func BindThread(cpus []int) (restore func() error, err error) {
	var was, set unix.CPUSet
	if err := unix.SchedGetaffinity(0, &was); err != nil {
		return nil, fmt.Errorf("the processors of this thread: %w", err)
	}
	for _, c := range cpus {
		set.Set(c)
	}
	if err := unix.SchedSetaffinity(0, &set); err != nil {
		return nil, fmt.Errorf("bind this thread to processors %v: %w", cpus, err)
	}
	return func() error { return unix.SchedSetaffinity(0, &was) }, nil
}
