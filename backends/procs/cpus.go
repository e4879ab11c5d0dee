package procs

import (
	"math/bits"
	"os"
	"runtime"

	"github.com/xpu-go/xpu/internal/affinity"
)

// cpuSet is a set of processors, as the system's affinity calls give it:
// bit i of word i/64 is processor i.
type cpuSet [16]uint64

// cpusUpTo returns the set of processors 0 … n-1.
func cpusUpTo(n int) cpuSet {
	var s cpuSet
	for i := 0; i < n && i < len(s)*64; i++ {
		s[i/64] |= 1 << (i % 64)
	}
	return s
}

// count returns the number of processors in s.
func (s cpuSet) count() int {
	n := 0
	for _, w := range s {
		n += bits.OnesCount64(w)
	}
	return n
}

// overlaps reports whether s and t share a processor.
func (s *cpuSet) overlaps(t *cpuSet) bool {
	for i := range s {
		if s[i]&t[i] != 0 {
			return true
		}
	}
	return false
}

// crowded reports whether the ranks that may run on this process's
// processors (mine) outnumber them, with the ranks of peers, the other ranks
// of the node, in their sets: those that share a processor with mine count,
// and their processors with mine. Ranks that are not bound have the same
// set, and it reduces to "more ranks on the node than processors"; ranks
// bound one to a processor each (taskset, numactl, a launcher's binding)
// are not crowded, though each sees one processor; two bound to one are.
func crowded(mine cpuSet, peers []cpuSet) bool {
	all, n := mine, 1
	for i := range peers {
		if peers[i].overlaps(&mine) {
			n++
			for w := range all {
				all[w] |= peers[i][w]
			}
		}
	}
	return n > all.count()
}

// nodeCrowded says whether this rank shares its processors with more ranks
// than they number (crowded), given the process ids of the node's other
// ranks. A set the system does not give (another platform, a process gone
// or out of sight) counts as this process's own; this process's own, when
// not given, as the processors Go runs on: with no sets at all, the node is
// crowded when it has more ranks than runtime.NumCPU.
func nodeCrowded(peerPIDs []int) bool {
	mine, ok := affinityOf(0)
	if !ok {
		mine = cpusUpTo(runtime.NumCPU())
	}
	peers := make([]cpuSet, len(peerPIDs))
	for i, pid := range peerPIDs {
		s, ok := cpuSet{}, false
		if pid > 0 {
			s, ok = affinityOf(pid)
		}
		if !ok {
			s = mine
		}
		peers[i] = s
	}
	return crowded(mine, peers)
}

// affinityOf returns the processors process pid may run on (its main
// thread's; 0 means this process); ok is false when the system does not
// say (another platform, the process gone or out of this one's sight).
func affinityOf(pid int) (s cpuSet, ok bool) {
	if pid == 0 {
		pid = os.Getpid()
	}
	ids, err := affinity.Of(pid)
	if err != nil {
		return s, false
	}
	for _, i := range ids {
		if i < len(s)*64 {
			s[i/64] |= 1 << (i % 64)
		}
	}
	return s, s.count() > 0
}
