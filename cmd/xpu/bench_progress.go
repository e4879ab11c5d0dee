package main

import (
	"fmt"
	"io"
	"time"
)

// benchProgress tells, on stderr, where xpu bench is and about how long
// is left, so that a run of a minute is never silent: on a terminal a
// line that rewrites itself at every run and is cleared at the end;
// elsewhere (a log, a pipe) one line per case begun, which stays. The
// time left is the time per run so far times the runs left.
type benchProgress struct {
	w     io.Writer
	tty   bool
	now   func() time.Time
	start time.Time
	total int // runs planned, a baseline's beside a case's counted
	done  int
	dirty bool // a rewritable line is on the terminal
}

func newBenchProgress(w io.Writer, tty bool, now func() time.Time, total int) *benchProgress {
	return &benchProgress{w: w, tty: tty, now: now, start: now(), total: total}
}

// estimate says the time elapsed and, once a run is done, the time left.
func (p *benchProgress) estimate() string {
	elapsed := p.now().Sub(p.start)
	s := elapsed.Round(time.Second).String() + " elapsed"
	if p.done > 0 {
		left := elapsed / time.Duration(p.done) * time.Duration(p.total-p.done)
		s += ", about " + left.Round(time.Second).String() + " left"
	}
	return s
}

// caseBegins says that case name, the i-th of n, begins its runs.
func (p *benchProgress) caseBegins(i, n int, name string, runs int) {
	if p.tty {
		return // the run lines say it
	}
	fmt.Fprintf(p.w, "xpu bench: [%d/%d] %s: %d runs (%s)\n", i, n, name, runs, p.estimate())
}

// run says that run r of count of case name, the i-th of n, begins.
func (p *benchProgress) run(i, n int, name string, r, count int) {
	if !p.tty {
		return
	}
	fmt.Fprintf(p.w, "\r\033[K[%d/%d] %s run %d/%d · %s", i, n, name, r, count, p.estimate())
	p.dirty = true
}

// ran counts runs done.
func (p *benchProgress) ran(runs int) { p.done += runs }

// finish clears the terminal's line.
func (p *benchProgress) finish() {
	if p.dirty {
		fmt.Fprint(p.w, "\r\033[K")
		p.dirty = false
	}
}
