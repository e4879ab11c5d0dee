package launch

import (
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/xpu-go/xpu/flight"
)

// flightWait bounds how long the launcher waits for the ranks' flight
// records once it has asked for them: a rank writes its own in
// milliseconds, from a goroutine that runs however its program is stuck.
const flightWait = 2 * time.Second

// flightSetup gives the ranks a directory for their flight records
// (flight.EnvDir): the one the job's environment names, which is kept, or
// one of the job's own, removed when the job ends (and by the watchdog,
// should the launcher die). It returns the environment and what removes
// the directory.
func (j *job) flightSetup(env []string) ([]string, func()) {
	if v, ok := lookupEnv(env, flight.EnvDir); ok && v != "" {
		j.flightDir = v
		return env, func() {}
	}
	dir, err := os.MkdirTemp("", "xpu-run-flight-*")
	if err != nil {
		j.logf("no directory for the ranks' flight records (%v): a timeout will not say what they wait for", err)
		return env, func() {}
	}
	j.flightDir = dir
	j.wd.removeOnDeath(dir)
	return withEnv(env, flight.EnvDir+"="+dir), func() { _ = os.RemoveAll(dir) }
}

// flightReport asks the ranks still running (and not stopped by a signal,
// which cannot answer) for their flight records, waits for them at most
// flightWait, and prints what flight.Analyze makes of every record in the
// directory.
func (j *job) flightReport() {
	if j.flightDir == "" || flight.DumpSignal == nil {
		return
	}
	before := dumpTimes(j.flightDir)
	run, stopped := j.live()
	var waiting []int
	for _, i := range run {
		if err := j.ranks[i].cmd.Process.Signal(flight.DumpSignal); err == nil {
			waiting = append(waiting, i)
		}
	}
	deadline := time.Now().Add(flightWait)
	for len(waiting) > 0 && time.Now().Before(deadline) {
		left := waiting[:0]
		for _, i := range waiting {
			if !wroteAgain(j.flightDir, i, before) {
				left = append(left, i)
			}
		}
		waiting = left
		if len(waiting) > 0 {
			time.Sleep(10 * time.Millisecond)
		}
	}
	dumps, err := flight.ReadDir(j.flightDir)
	if len(dumps) == 0 {
		j.logf("no flight record from any rank (%v): the ranks keep none (XPU_FLIGHT_SIZE=0, or no communicator open)", err)
		return
	}
	if err != nil {
		j.logf("some flight records could not be read: %v", err)
	}
	if len(waiting) > 0 {
		j.logf("no fresh flight record from %s within %v", rankList(waiting), flightWait)
	}
	if len(stopped) > 0 {
		j.logf("%s stopped by a signal: not asked for a record (a stopped process cannot write one)", rankList(stopped))
	}
	j.logf("flight records of %d %s say:", len(dumps), plural(len(dumps), "rank"))
	for _, line := range flight.Analyze(dumps) {
		j.logf("  %s", line)
	}
	if j.flightKept() {
		j.logf("the records are in %s; `xpu flight %s` reads them again", j.flightDir, j.flightDir)
	}
}

// flightKept reports whether the records' directory outlives the job: the
// one the job's environment named.
func (j *job) flightKept() bool {
	v, ok := lookupEnv(j.spec.Env, flight.EnvDir)
	return ok && v != ""
}

// dumpTimes returns the modification times of the records in dir.
func dumpTimes(dir string) map[string]time.Time {
	names, _ := filepath.Glob(filepath.Join(dir, "flight.rank*.json"))
	out := make(map[string]time.Time, len(names))
	for _, n := range names {
		if fi, err := os.Stat(n); err == nil {
			out[n] = fi.ModTime()
		}
	}
	return out
}

// wroteAgain reports whether rank wrote a record in dir that was not
// there, as it is, in before (the file system's clock is too coarse to
// compare with the time the records were asked for).
func wroteAgain(dir string, rank int, before map[string]time.Time) bool {
	names, _ := filepath.Glob(filepath.Join(dir, fmt.Sprintf("flight.rank%d.*.json", rank)))
	for _, n := range names {
		fi, err := os.Stat(n)
		if err != nil {
			continue
		}
		if t, ok := before[n]; !ok || !fi.ModTime().Equal(t) {
			return true
		}
	}
	return false
}
