// Package join forms a multi-process job for any transport: it reads the
// launcher's variables (FromEnv: xpu run's, Open MPI's, PMIx's, PMI's,
// Slurm's), meets the other ranks at rank 0's rendezvous store,
// authenticates every connection with the job's secret, and returns one
// connection per peer (Dial), which the transport then runs its engine
// over — the procs engine its links (after moving them onto shared memory
// through Config.Upgrade), rdma the exchange of its queue pairs'
// addresses. It bounds joining alike for every transport, and words its
// failures alike.
//
// Dial waits within a deadline, saying what it waits for while it waits,
// and naming who is missing when it gives up. Its wait is a Wait, which a
// transport may also use alone:
//
//	w, ctx := join.Start(ctx, join.Params{Backend: "tcp", Rank: r, Size: n, Master: addr})
//	registered := join.NewRoster(n, 0)
//	w.Await(join.Step{Ranks: registered, Waiting: "to join", Failed: "never joined"})
//	… // registered.Arrive(rank) as ranks show up
//	return w.End(err)
//
// The context Start returns ends at the earlier of the caller's context and
// the join deadline (Params.Timeout, DefaultTimeout by default). While the
// Wait lasts, a line goes to the log every ProgressInterval saying what the
// rank waits for and how long it has waited. End turns the transport's
// error into the one the caller sees: when the join deadline ended the wait,
// an error matching ErrTimeout whose message names what was missing — "no
// rank 0 listening at 10.0.0.1:29500 after 1m0s", "ranks 2, 5 of 8 never
// joined at 10.0.0.1:29500 after 1m0s" — and when the caller's context
// ended it, that context's error with the same description.
//
// What a rank waits for is either rank 0 (Reaching, NoAnswer, Foreign: a
// rank other than 0 trying to reach the master address) or other ranks
// (Await, with a Roster per step of joining that records who has arrived).
package join

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/xpu-go/xpu/internal/jobenv"
	"github.com/xpu-go/xpu/xerr"
)

const (
	// DefaultTimeout bounds joining when nothing else does: the time from
	// the start of a rank's join until it gives up on ranks that have not
	// appeared. Launchers start every rank of a job within seconds, so a
	// minute is ample for a job that can form, and short enough that one
	// that cannot (a mistyped master address, a rank that died at start)
	// fails while someone still watches. See
	// docs/adr/0023-bounded-join-and-a-port-per-job.md.
	DefaultTimeout = 60 * time.Second
	// ProgressInterval is how often a rank that is still waiting logs what
	// it waits for. A job that forms within it logs nothing.
	ProgressInterval = 5 * time.Second
	// EnvTimeout sets the join timeout of every transport that joins
	// through this package: a positive Go duration ("90s", "10m").
	EnvTimeout = jobenv.JoinTimeout
	// OptTimeout is the Open option that sets it; it takes precedence over
	// EnvTimeout.
	OptTimeout = "join_timeout"
)

// ErrTimeout reports that a job did not form within the join timeout. It
// matches context.DeadlineExceeded: it is a deadline that passed, and code
// that tested for that when only the caller's context bounded joining goes
// on working. An error of the caller's own context ending does not match
// it.
var ErrTimeout = xerr.NewKind("join timed out", context.DeadlineExceeded)

// TimeoutFromEnv reads EnvTimeout through getenv: 0 when it is not set, an
// error matching xerr.ErrInvalidArgument when it is not a positive
// duration.
func TimeoutFromEnv(getenv jobenv.Getenv) (time.Duration, error) {
	v := strings.TrimSpace(getenv(EnvTimeout))
	if v == "" {
		return 0, nil
	}
	d, err := time.ParseDuration(v)
	if err != nil || d <= 0 {
		return 0, xerr.Detail(xerr.ErrInvalidArgument, "%s=%q is not a positive duration", EnvTimeout, v)
	}
	return d, nil
}

// Params describe one rank's join.
type Params struct {
	// Backend names the transport in log lines ("tcp").
	Backend string
	// Rank and Size place this rank in its job.
	Rank, Size int
	// Master is the address of rank 0, host:port, as the ranks know it.
	Master string
	// Timeout bounds the join: zero means DefaultTimeout, negative no
	// bound but the caller's context.
	Timeout time.Duration
	// Logger receives the progress lines; nil means slog.Default().
	Logger *slog.Logger
	// Interval is how often progress is logged; zero means
	// ProgressInterval.
	Interval time.Duration
}

// Wait is one rank's wait for its job to form. Its methods are safe for
// concurrent use.
type Wait struct {
	p      Params
	start  time.Time
	parent context.Context
	ctx    context.Context
	cancel context.CancelFunc
	cause  error // the cause of ctx when the join deadline ends it

	stop     chan struct{}
	loopDone chan struct{}
	endOnce  sync.Once

	mu      sync.Mutex
	phase   phase
	lastErr error // the last failed attempt to reach rank 0
	steps   []Step
	logged  bool // a progress line went out
}

type phase uint8

const (
	phaseForming phase = iota // nothing more specific said
	phaseReach                // trying to reach rank 0, nothing answered yet
	phaseForeign              // something answers at the master address, not this job's rank 0
	phaseAwait                // waiting for the ranks of steps
)

// Step is one step of joining that ranks have to take: Ranks records who
// has taken it; Waiting and Failed say what taking it means, following the
// ranks that have not: "ranks 2, 5 of 8 " + Waiting ("to join at
// 10.0.0.1:29500") in progress lines, "ranks 2, 5 of 8 " + Failed ("never
// joined at 10.0.0.1:29500") when the deadline passes.
type Step struct {
	Ranks   *Roster
	Waiting string
	Failed  string
}

// Start begins a rank's join and returns the context the join runs under:
// it ends at the earlier of ctx and the join deadline. End the Wait with
// End, whatever happens.
func Start(ctx context.Context, p Params) (*Wait, context.Context) {
	if p.Timeout == 0 {
		p.Timeout = DefaultTimeout
	}
	if p.Interval <= 0 {
		p.Interval = ProgressInterval
	}
	if p.Logger == nil {
		p.Logger = slog.Default()
	}
	w := &Wait{p: p, start: time.Now(), parent: ctx, stop: make(chan struct{}), loopDone: make(chan struct{})}
	// A cause of its own, so that the deadline of an enclosing Wait is
	// never taken for this one's.
	w.cause = fmt.Errorf("join deadline: %w", ErrTimeout)
	if p.Timeout > 0 {
		w.ctx, w.cancel = context.WithDeadlineCause(ctx, w.start.Add(p.Timeout), w.cause)
	} else {
		w.ctx, w.cancel = context.WithCancel(ctx)
	}
	go w.loop()
	return w, w.ctx
}

// Reaching says that this rank is trying to reach rank 0 at the master
// address, and has had no answer yet.
func (w *Wait) Reaching() {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.phase, w.lastErr = phaseReach, nil
}

// NoAnswer records an attempt to reach rank 0 that nothing answered:
// refused, unreachable, timed out.
func (w *Wait) NoAnswer(err error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.phase, w.lastErr = phaseReach, err
}

// Foreign records an attempt to reach rank 0 answered by a process that
// is not this job's rank 0: another job's, whose port this job's happens
// to share, or one that holds another job secret.
func (w *Wait) Foreign(err error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.phase, w.lastErr = phaseForeign, err
}

// Await says that this rank now waits for the ranks that have not taken
// steps: the first step some rank has not taken is the one reported.
func (w *Wait) Await(steps ...Step) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.phase, w.lastErr, w.steps = phaseAwait, nil, steps
}

// TimedOut reports whether the join deadline has passed and ended the
// wait (and not the caller's context first).
func (w *Wait) TimedOut() bool { return context.Cause(w.ctx) == w.cause }

// Summary says what this rank has waited for in vain, for another rank to
// read: "rank 2 of 3 never joined at 10.0.0.1:29500 after 1m0s".
func (w *Wait) Summary() string {
	msg, _ := w.failed()
	return msg
}

// End ends the wait, stops the progress lines and returns the error the
// caller should see for err, the transport's outcome: nil stays nil;
// when the join deadline ended the wait, an error matching ErrTimeout (and
// the last failed attempt's error, when this rank was reaching rank 0)
// that says what was missing; when the caller's context ended it, err with
// what this rank was waiting for; any other error as it is. A rank that
// logged progress logs that it joined when it did. End returns the same
// error when called again.
func (w *Wait) End(err error) error {
	out := w.outcome(err)
	w.endOnce.Do(func() {
		close(w.stop)
		<-w.loopDone
		w.cancel()
		w.mu.Lock()
		logged := w.logged
		w.mu.Unlock()
		if logged && out == nil {
			w.p.Logger.Info(w.prefix()+"joined the job after "+round(time.Since(w.start)).String(), w.attrs(nil)...)
		}
	})
	return out
}

func (w *Wait) outcome(err error) error {
	if err == nil {
		return nil
	}
	if w.TimedOut() {
		msg, last := w.failed()
		if last != nil {
			return xerr.Detail(ErrTimeout, "%s (last attempt: %w)", msg, last)
		}
		return xerr.Detail(ErrTimeout, "%s", msg)
	}
	if perr := w.parent.Err(); perr != nil && errors.Is(err, perr) {
		what, last := w.waiting()
		if last != nil {
			return fmt.Errorf("waiting for %s (last attempt: %w) for %v: %w", what, last, round(time.Since(w.start)), perr)
		}
		return fmt.Errorf("waiting for %s for %v: %w", what, round(time.Since(w.start)), perr)
	}
	return err
}

// loop logs progress every Interval until End or the context ends.
func (w *Wait) loop() {
	defer close(w.loopDone)
	t := time.NewTicker(w.p.Interval)
	defer t.Stop()
	for {
		select {
		case <-w.stop:
			return
		case <-w.ctx.Done():
			return
		case <-t.C:
		}
		what, last := w.waiting()
		msg := w.prefix() + "waiting for " + what
		if last != nil {
			msg += " (last attempt: " + last.Error() + ")"
		}
		w.mu.Lock()
		w.logged = true
		missing := w.missingLocked()
		w.mu.Unlock()
		w.p.Logger.Info(msg, w.attrs(missing)...)
	}
}

func (w *Wait) prefix() string {
	return fmt.Sprintf("%s rank %d of %d: ", w.p.Backend, w.p.Rank, w.p.Size)
}

// attrs are the structured attributes of a progress line.
func (w *Wait) attrs(missing []int) []any {
	a := []any{
		slog.String("backend", w.p.Backend), slog.Int("rank", w.p.Rank), slog.Int("size", w.p.Size),
		slog.String("master", w.p.Master), slog.Duration("waited", round(time.Since(w.start))),
	}
	if w.p.Timeout > 0 {
		a = append(a, slog.Duration("timeout", w.p.Timeout))
	}
	if missing != nil {
		a = append(a, slog.Int("missing", len(missing)))
	}
	return a
}

// missingLocked returns the ranks of the first step not complete, nil when
// this rank waits for no ranks.
func (w *Wait) missingLocked() []int {
	if w.phase != phaseAwait {
		return nil
	}
	for _, s := range w.steps {
		if m := s.Ranks.Missing(); len(m) > 0 {
			return m
		}
	}
	return nil
}

// waiting says what this rank waits for, to follow "waiting for ".
func (w *Wait) waiting() (string, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	switch w.phase {
	case phaseReach:
		return fmt.Sprintf("rank 0 to listen at %s", w.p.Master), w.lastErr
	case phaseForeign:
		return fmt.Sprintf("rank 0 at %s: the process listening there is not this job's rank 0 "+
			"(another job's on the same port, or one with another %s); retrying", w.p.Master, jobenv.JobSecret), w.lastErr
	case phaseAwait:
		for _, s := range w.steps {
			if m := s.Ranks.Missing(); len(m) > 0 {
				return FormatRanks(m, w.p.Size) + " " + s.Waiting, nil
			}
		}
	}
	return "the job to form", nil
}

// failed says what this rank waited for in vain, and the last failed
// attempt to reach rank 0.
func (w *Wait) failed() (string, error) {
	after := "after " + round(w.p.Timeout).String()
	if w.p.Timeout < 0 {
		after = "after " + round(time.Since(w.start)).String()
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	switch w.phase {
	case phaseReach:
		return fmt.Sprintf("no rank 0 listening at %s %s", w.p.Master, after), w.lastErr
	case phaseForeign:
		return fmt.Sprintf("no rank 0 of this job at %s %s: the process listening there belongs to another job "+
			"or holds another %s (give each job a port of its own with %s)",
			w.p.Master, after, jobenv.JobSecret, jobenv.MasterPort), w.lastErr
	case phaseAwait:
		for _, s := range w.steps {
			if m := s.Ranks.Missing(); len(m) > 0 {
				return FormatRanks(m, w.p.Size) + " " + s.Failed + " " + after, nil
			}
		}
	}
	return "the job did not form " + after, nil
}

// round shortens d for messages: to the second from 10 s, to the tenth of
// a second from 1 s, else to the millisecond.
func round(d time.Duration) time.Duration {
	switch {
	case d >= 10*time.Second:
		return d.Round(time.Second)
	case d >= time.Second:
		return d.Round(100 * time.Millisecond)
	}
	return d.Round(time.Millisecond)
}

// Roster records which ranks of a job have taken one step of joining. It
// is safe for concurrent use.
type Roster struct {
	mu      sync.Mutex
	here    []bool
	missing int
}

// NewRoster returns a roster of a job of size ranks where only present
// have arrived.
func NewRoster(size int, present ...int) *Roster {
	r := &Roster{here: make([]bool, size), missing: size}
	for _, p := range present {
		r.Arrive(p)
	}
	return r
}

// Awaiting returns a roster of a job of size ranks where every rank but
// absent has arrived.
func Awaiting(size int, absent ...int) *Roster {
	r := &Roster{here: make([]bool, size)}
	for i := range r.here {
		r.here[i] = true
	}
	for _, a := range absent {
		if a >= 0 && a < size && r.here[a] {
			r.here[a] = false
			r.missing++
		}
	}
	return r
}

// Arrive records that rank has arrived; a rank outside the job, or one
// already here, changes nothing.
func (r *Roster) Arrive(rank int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if rank >= 0 && rank < len(r.here) && !r.here[rank] {
		r.here[rank] = true
		r.missing--
	}
}

// Missing returns the ranks that have not arrived, in order; nil when
// every rank has.
func (r *Roster) Missing() []int {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.missing == 0 {
		return nil
	}
	out := make([]int, 0, r.missing)
	for i, h := range r.here {
		if !h {
			out = append(out, i)
		}
	}
	return out
}

// maxRuns is how many runs of ranks FormatRanks writes out.
const maxRuns = 8

// FormatRanks names ranks of a job of size ranks, in increasing order, for
// a message: "rank 2 of 8", "ranks 2, 5 of 8", "ranks 1-6 of 8"; past
// eight runs it ends with the count: "ranks 1, 3, …, 15, … (40 ranks) of
// 128".
func FormatRanks(ranks []int, size int) string {
	var b strings.Builder
	if len(ranks) == 1 {
		b.WriteString("rank ")
	} else {
		b.WriteString("ranks ")
	}
	runs := 0
	for i := 0; i < len(ranks); {
		j := i
		for j+1 < len(ranks) && ranks[j+1] == ranks[j]+1 {
			j++
		}
		if runs == maxRuns {
			fmt.Fprintf(&b, ", … (%d ranks)", len(ranks))
			break
		}
		if runs > 0 {
			b.WriteString(", ")
		}
		b.WriteString(strconv.Itoa(ranks[i]))
		switch {
		case j == i+1:
			b.WriteString(", " + strconv.Itoa(ranks[j]))
		case j > i+1:
			b.WriteString("-" + strconv.Itoa(ranks[j]))
		}
		runs++
		i = j + 1
	}
	b.WriteString(" of " + strconv.Itoa(size))
	return b.String()
}
