package procs

import (
	"testing"
)

func cpus(ps ...int) cpuSet {
	var s cpuSet
	for _, p := range ps {
		s[p/64] |= 1 << (p % 64)
	}
	return s
}

func TestCrowded(t *testing.T) {
	for _, tc := range []struct {
		name  string
		mine  cpuSet
		peers []cpuSet
		want  bool
	}{
		{"alone", cpus(0), nil, false},
		{"two unbound on two", cpus(0, 1), []cpuSet{cpus(0, 1)}, false},
		{"four unbound on two", cpus(0, 1), []cpuSet{cpus(0, 1), cpus(0, 1), cpus(0, 1)}, true},
		{"four unbound on sixteen", cpusUpTo(16), []cpuSet{cpusUpTo(16), cpusUpTo(16), cpusUpTo(16)}, false},
		{"two bound one to each", cpus(0), []cpuSet{cpus(1)}, false},
		{"four bound two to each", cpus(0), []cpuSet{cpus(0), cpus(1), cpus(1)}, true},
		{"four bound two to each, from the other", cpus(1), []cpuSet{cpus(0), cpus(0), cpus(1)}, true},
		{"three on two, one unbound", cpus(0, 1), []cpuSet{cpus(0), cpus(1)}, true},
		{"two bound apart on a high processor", cpus(700), []cpuSet{cpus(701)}, false},
		{"two bound together on a high processor", cpus(700), []cpuSet{cpus(700)}, true},
		{"blocks of two each", cpus(0, 1), []cpuSet{cpus(2, 3), cpus(4, 5), cpus(6, 7)}, false},
	} {
		if got := crowded(tc.mine, tc.peers); got != tc.want {
			t.Errorf("%s: crowded = %v, want %v", tc.name, got, tc.want)
		}
	}
}

func TestCPUSet(t *testing.T) {
	if n := cpusUpTo(70).count(); n != 70 {
		t.Errorf("cpusUpTo(70).count() = %d", n)
	}
	if n := cpusUpTo(5000).count(); n != 1024 {
		t.Errorf("cpusUpTo(5000).count() = %d, want the set's 1024", n)
	}
	a, b := cpus(3, 64), cpus(65)
	if a.overlaps(&b) {
		t.Error("{3,64} overlaps {65}")
	}
	if c := cpus(65, 900); !b.overlaps(&c) {
		t.Error("{65} does not overlap {65,900}")
	}
}
