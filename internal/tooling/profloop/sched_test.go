package main

import (
	"os"
	"runtime"
	"strings"
	"testing"
	"time"
)

// A thread's sched file as Linux 6.1 writes it, cut to the lines around
// the counts.
const schedSample = `profloop (4242, #threads: 7)
-------------------------------------------------------------------
se.exec_start                                :      37229052.495776
se.sum_exec_runtime                          :             0.240206
se.nr_migrations                             :                   12
nr_switches                                  :                  345
nr_voluntary_switches                        :                  300
nr_involuntary_switches                      :                   45
se.load.weight                               :              1048576
`

func TestParseSched(t *testing.T) {
	c, err := parseSched([]byte(schedSample))
	if err != nil {
		t.Fatal(err)
	}
	if want := (schedCounts{switches: 345, involuntary: 45, migrations: 12}); c != want {
		t.Fatalf("parseSched = %+v, want %+v", c, want)
	}
	for _, bad := range []struct{ name, text string }{
		{"a count missing", strings.Replace(schedSample, "se.nr_migrations", "se.nr_moves", 1)},
		{"not a number", strings.Replace(schedSample, "345", "many", 1)},
		{"empty", ""},
	} {
		if _, err := parseSched([]byte(bad.text)); err == nil {
			t.Errorf("%s: parseSched took it", bad.name)
		}
	}
}

// TestReadSchedCounts reads this process's own counts around a sleep of
// the calling thread: its switches must grow, by its own leaving the
// processor at least once.
func TestReadSchedCounts(t *testing.T) {
	if _, err := os.Stat("/proc/self/task"); err != nil || runtime.GOOS != "linux" {
		t.Skip("the scheduler's counts are read from Linux's /proc; parseSched's test covers the reading")
	}
	before, err := readSched()
	if err != nil {
		t.Skipf("this kernel keeps no per-thread scheduler statistics (%v); parseSched's test covers the reading", err)
	}
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	time.Sleep(20 * time.Millisecond)
	after, err := readSched()
	if err != nil {
		t.Fatal(err)
	}
	d := after.minus(before)
	if d.switches < 1 || d.involuntary < 0 || d.migrations < 0 || d.involuntary > d.switches {
		t.Fatalf("counts over a sleep: %+v", d)
	}
}
