//go:build !linux

package procs

// affinity does not know where a process may run on this platform.
func affinity(int) (cpuSet, bool) { return cpuSet{}, false }
