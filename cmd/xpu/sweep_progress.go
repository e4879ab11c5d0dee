package main

import (
	"fmt"
	"io"
	"sync"
	"time"

	"github.com/xpu-go/xpu/internal/tooling/bench/sweep"
)

// progress tells where a sweep is and how long is left: on a terminal, a
// line that rewrites itself at every point; elsewhere (a log), a line per
// series begun. The time left is the time per point so far times the
// points left, bounded by the budget.
type progress struct {
	mu       sync.Mutex
	w        io.Writer
	tty      bool
	start    time.Time
	deadline time.Time
	total    int // points planned
	done     int // points measured
	job      string
	rounds   int
	dirty    bool // a rewritable line is on the terminal
}

func newProgress(w io.Writer, total, rounds int, start, deadline time.Time) *progress {
	return &progress{w: w, tty: isTerminal(w), start: start, deadline: deadline, rounds: rounds, total: total}
}

// pointsPlanned counts the points rounds rounds of jobs measure: without
// the Open MPI references' when they cannot run (withRefs false), for
// the sweep skips them.
func pointsPlanned(jobs []sweepJob, rounds int, withRefs bool) int {
	n := 0
	for _, j := range jobs {
		if j.how != openMPI || withRefs {
			n += rounds * j.points()
		}
	}
	return n
}

// left estimates the time the sweep has left.
func (p *progress) left() time.Duration {
	elapsed := time.Since(p.start)
	var left time.Duration
	if p.done > 0 {
		left = elapsed / time.Duration(p.done) * time.Duration(p.total-p.done)
	}
	if !p.deadline.IsZero() {
		left = min(left, max(0, time.Until(p.deadline)))
	}
	return left.Round(time.Second)
}

// begin says that job j starts its round.
func (p *progress) begin(j sweepJob, round int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.job = fmt.Sprintf("%s np%d", j.series.Name, j.ranks)
	if j.how == inCopy {
		p.job = j.series.Name
	}
	if p.rounds > 1 {
		p.job += fmt.Sprintf(" (round %d/%d)", round, p.rounds)
	}
	if p.tty {
		p.line("")
		return
	}
	n := j.points()
	left := "unknown yet"
	if p.done > 0 {
		left = "about " + p.left().String()
	}
	fmt.Fprintf(p.w, "xpu bench sweep: %s: %d points (%d/%d done, %s elapsed, %s left)\n",
		p.job, n, p.done, p.total, time.Since(p.start).Round(time.Second), left)
}

// point counts a point measured.
func (p *progress) point(pt sweep.Point) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.done++
	if p.tty {
		p.line(fmt.Sprintf("%s %s", pt.Op, sweep.FormatSize(pt.Size)))
	}
}

// line rewrites the terminal's progress line.
func (p *progress) line(what string) {
	fmt.Fprintf(p.w, "\r\033[K[%d/%d] %s %s · %s elapsed, about %s left",
		p.done, p.total, p.job, what, time.Since(p.start).Round(time.Second), p.left())
	p.dirty = true
}

// say prints a line of its own.
func (p *progress) say(format string, args ...any) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.dirty {
		fmt.Fprint(p.w, "\r\033[K")
		p.dirty = false
	}
	fmt.Fprintf(p.w, "xpu bench sweep: "+format+"\n", args...)
}

// finish clears the progress line.
func (p *progress) finish() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.dirty {
		fmt.Fprint(p.w, "\r\033[K")
		p.dirty = false
	}
}
