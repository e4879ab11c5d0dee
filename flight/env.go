package flight

import (
	"fmt"
	"os"
	"strconv"
	"sync"
)

// The environment a job sets for its ranks' recorders.
const (
	// EnvDir names the directory a rank writes its records into: on
	// SIGQUIT, when a collective is revoked, and when asked (WriteAll).
	// `xpu run` sets it to a directory of the job's own.
	EnvDir = "XPU_FLIGHT_DIR"
	// EnvSize sets the size of the recorders the backends make, in
	// entries: "0" turns them off. DefaultSize when unset.
	EnvSize = "XPU_FLIGHT_SIZE"
)

// SizeFromEnv returns the recorder size EnvSize asks for, DefaultSize
// when it is unset or not a number (a bad value must not stop a job; `xpu
// run` checks it before it starts one).
func SizeFromEnv() int {
	v, ok := os.LookupEnv(EnvSize)
	if !ok {
		return DefaultSize
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 0 {
		return DefaultSize
	}
	return n
}

// DumpDir returns the directory EnvDir names, "" when unset.
func DumpDir() string { return os.Getenv(EnvDir) }

// live is the set of open recorders, which DumpSignal and SIGQUIT write
// while DumpDir names a directory and a closable recorder (New's) is open:
// the watcher of the signals lives as long as they do.
var live struct {
	mu       sync.Mutex
	recs     map[*Recorder]bool // whether it is closable
	closable int
	watch    *watcher
}

func register(r *Recorder, closable bool) {
	live.mu.Lock()
	defer live.mu.Unlock()
	if live.recs == nil {
		live.recs = map[*Recorder]bool{}
	}
	live.recs[r] = closable
	if !closable {
		return
	}
	live.closable++
	if live.watch == nil && DumpDir() != "" {
		live.watch = startWatch()
	}
}

func unregister(r *Recorder) {
	live.mu.Lock()
	closable, ok := live.recs[r]
	delete(live.recs, r)
	var w *watcher
	if ok && closable {
		live.closable--
		if live.closable == 0 {
			w, live.watch = live.watch, nil
		}
	}
	live.mu.Unlock()
	w.stop()
}

// WriteAll writes the record of every open recorder of the process into
// dir, with reason, and returns the files' paths.
func WriteAll(dir, reason string) ([]string, error) {
	live.mu.Lock()
	recs := make([]*Recorder, 0, len(live.recs))
	for r := range live.recs {
		recs = append(recs, r)
	}
	live.mu.Unlock()
	var paths []string
	var first error
	for _, r := range recs {
		p, err := r.WriteFile(dir, reason)
		if err != nil {
			if first == nil {
				first = err
			}
			continue
		}
		paths = append(paths, p)
	}
	return paths, first
}

// DumpOnce writes the record into DumpDir, with reason, the first time it
// is called on r; later calls, and calls without a DumpDir, do nothing.
// A failure is reported on standard error: a diagnostic must not change
// what the program sees.
func (r *Recorder) DumpOnce(reason string) {
	dir := DumpDir()
	if r == nil || dir == "" {
		return
	}
	r.mu.Lock()
	first := !r.dumped
	r.dumped = true
	r.mu.Unlock()
	if !first {
		return
	}
	if _, err := r.WriteFile(dir, reason); err != nil {
		fmt.Fprintf(os.Stderr, "xpu: flight record of rank %d: %v\n", r.context.Rank, err)
	}
}
