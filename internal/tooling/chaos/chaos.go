package chaos

import (
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"
)

// Kind is a kind of fault.
type Kind string

// The kinds of fault.
const (
	Kill         Kind = "kill"          // SIGKILL to a random rank
	Stop         Kind = "stop"          // SIGSTOP to a random rank
	Cut          Kind = "cut"           // a random rank's packets dropped, to one peer or all
	LauncherKill Kind = "launcher-kill" // SIGKILL to the launcher
)

// Kinds lists every kind, in the order Run takes them in turn.
var Kinds = []Kind{Kill, Stop, Cut, LauncherKill}

// ParseKinds parses a comma-separated list of kinds; "all" is Kinds.
func ParseKinds(s string) ([]Kind, error) {
	if s == "" || s == "all" {
		return Kinds, nil
	}
	var out []Kind
	for _, f := range strings.Split(s, ",") {
		k := Kind(strings.TrimSpace(f))
		found := false
		for _, known := range Kinds {
			found = found || k == known
		}
		if !found {
			return nil, fmt.Errorf("unknown fault kind %q (want %s or all)", k, kindList())
		}
		out = append(out, k)
	}
	return out, nil
}

func kindList() string {
	s := make([]string, len(Kinds))
	for i, k := range Kinds {
		s[i] = string(k)
	}
	return strings.Join(s, ", ")
}

// Config describes a chaos run. Zero fields take the defaults named.
type Config struct {
	// N is the number of repetitions (default 100).
	N int
	// Seed seeds the draws: the same seed gives the same victims, moments
	// and cuts.
	Seed uint64
	// Kinds are the faults, taken in turn (default Kinds).
	Kinds []Kind
	// Ranks is the number of ranks of each job (default 4).
	Ranks int
	// Budget bounds the whole run: no repetition starts after it (default
	// 30 minutes).
	Budget time.Duration
	// Detect is the ranks' failure-detection bound, XPU_TCP_TIMEOUT
	// (default 2s).
	Detect time.Duration
	// Join is the ranks' join timeout, XPU_JOIN_TIMEOUT: how long a
	// rank waits for the job to form (default 5s).
	Join time.Duration
	// Grace is the launcher's grace period, Spec.Grace (default 1s).
	Grace time.Duration
	// AfterReady makes the moment of the fault count from the time every
	// rank has joined, rather than from the start of the launcher, so that
	// no fault strikes while the job is still forming.
	AfterReady bool
	// Window is the span the moment of the fault is drawn from, uniformly
	// (default 1.5s).
	Window time.Duration
	// JoinShare is the share of the repetitions whose fault strikes while
	// the job forms instead: as soon as the victim's process exists (any
	// rank's, for launcher-kill), plus up to 20ms. A job forms within tens
	// of milliseconds on loopback, which a moment drawn from Window seldom
	// hits. Ignored with AfterReady.
	JoinShare float64
	// Hang is how long the launcher may take to end after the fault
	// before the repetition counts a hang (default the longer of Detect
	// and Join, plus Grace, plus 10s).
	Hang time.Duration
	// Settle is how long the processes of the job have to end after the
	// launcher did before they count as orphans (default Detect + Grace +
	// 2s).
	Settle time.Duration
	// Count is the element count of the large allreduce (default 1<<17,
	// a MiB of float64).
	Count int
	// MaxRun is how long a rank runs allreduces at most (default 2
	// minutes): a bound on orphans that no one kills.
	MaxRun time.Duration
	// Exe is the binary that plays the launcher and the ranks (default
	// os.Executable()); it must call IsRole and RunRole first thing.
	Exe string
	// Dir is where the repetitions keep their files; those of a repetition
	// that went wrong are kept, the rest removed (default a new temporary
	// directory, removed at the end when nothing went wrong).
	Dir string
	// Log, when not nil, gets a line per repetition.
	Log io.Writer
}

// Outcome is what one repetition found.
type Outcome struct {
	Rep    int
	Kind   Kind
	Victim int    // the rank struck; -1 for the launcher
	Cut    string // for a cut: which links
	// At is when the fault struck, counted from the start of the launcher;
	// Joined says whether the victim (every rank, for launcher-kill) had
	// joined the job by then.
	At     time.Duration
	Joined bool
	// Checked is the number of allreduces the ranks checked, in all
	// (counted in sixteens: a rank reports every sixteenth).
	Checked int
	// Ended is how long the launcher took to end after the fault.
	Ended time.Duration
	// Gone is how long the other processes of the job took to end after
	// the launcher (the orphans did not).
	Gone time.Duration
	// Hang says that the launcher had not ended Config.Hang after the fault.
	Hang bool
	// Wrong holds the wrong results the ranks reported, Errors the errors
	// other than a lost peer, Joins the ranks' failures to join (expected
	// when the fault strikes while the job forms).
	Wrong, Errors, Joins []string
	// Orphans describes the processes of the job alive Config.Settle after
	// the launcher ended; Leftovers the files and /dev/shm entries it left.
	Orphans, Leftovers []string
	// Trouble says what kept the repetition from running as planned (the
	// job ended before the fault, a rank never started), Skipped why it did
	// not run at all.
	Trouble, Skipped string
	// Dir holds the repetition's files when it went wrong.
	Dir string
}

// OK reports whether the repetition ran and found nothing wrong.
func (o *Outcome) OK() bool {
	return o.Skipped == "" && o.Trouble == "" && !o.Hang && len(o.Wrong) == 0 && len(o.Errors) == 0 &&
		len(o.Orphans) == 0 && len(o.Leftovers) == 0
}

func (o *Outcome) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "#%d %s", o.Rep, o.Kind)
	if o.Skipped != "" {
		fmt.Fprintf(&b, ": skipped: %s", o.Skipped)
		return b.String()
	}
	if o.Victim >= 0 {
		fmt.Fprintf(&b, " rank %d", o.Victim)
	}
	if o.Cut != "" {
		fmt.Fprintf(&b, " (%s)", o.Cut)
	}
	phase := "joining"
	if o.Joined {
		phase = "running"
	}
	fmt.Fprintf(&b, " at %v (%s)", o.At.Round(time.Millisecond), phase)
	switch {
	case o.Trouble != "":
		fmt.Fprintf(&b, ": %s", o.Trouble)
	case o.Hang:
		b.WriteString(": HANG")
	default:
		fmt.Fprintf(&b, ": ended %v later", o.Ended.Round(time.Millisecond))
		if o.Gone > 0 {
			fmt.Fprintf(&b, ", the rest of the job %v after it", o.Gone.Round(time.Millisecond))
		}
	}
	fmt.Fprintf(&b, ", %d allreduces checked", o.Checked)
	for _, l := range []struct {
		name string
		v    []string
	}{{"wrong", o.Wrong}, {"errors", o.Errors}, {"orphans", o.Orphans}, {"leftovers", o.Leftovers}, {"joins failed", o.Joins}} {
		if len(l.v) > 0 {
			fmt.Fprintf(&b, "; %s: %s", l.name, strings.Join(l.v, "; "))
		}
	}
	if o.Dir != "" {
		fmt.Fprintf(&b, " [files in %s]", o.Dir)
	}
	return b.String()
}

// Report is what a run found.
type Report struct {
	Seed     uint64
	Outcomes []Outcome
	Elapsed  time.Duration
	// Cut short says why fewer repetitions ran than asked (the budget).
	CutShort string
}

// Totals counts the repetitions with each outcome.
type Totals struct {
	Reps, OK, Hang, Wrong, Errors, Orphans, Leftovers, Trouble, Skipped int
	// Checked is the number of allreduces checked (see Outcome.Checked).
	Checked int
}

// Totals returns the counts of the repetitions of kind k, or of all when k
// is "".
func (r *Report) Totals(k Kind) Totals {
	var t Totals
	for i := range r.Outcomes {
		o := &r.Outcomes[i]
		if k != "" && o.Kind != k {
			continue
		}
		t.Reps++
		t.Checked += o.Checked
		if o.Skipped != "" {
			t.Skipped++
			continue
		}
		count := func(n *int, yes bool) {
			if yes {
				*n++
			}
		}
		count(&t.OK, o.OK())
		count(&t.Hang, o.Hang)
		count(&t.Wrong, len(o.Wrong) > 0)
		count(&t.Errors, len(o.Errors) > 0)
		count(&t.Orphans, len(o.Orphans) > 0)
		count(&t.Leftovers, len(o.Leftovers) > 0)
		count(&t.Trouble, o.Trouble != "")
	}
	return t
}

// Clean reports whether every repetition that ran found nothing wrong.
func (r *Report) Clean() bool {
	t := r.Totals("")
	return t.OK == t.Reps-t.Skipped
}

// Table returns the kinds against the outcomes: for each, the number of
// repetitions that had it.
func (r *Report) Table() string {
	var b strings.Builder
	tw := tabwriter.NewWriter(&b, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "fault\treps\tok\thang\twrong\terror\torphans\tleftovers\ttrouble\tskipped\t")
	row := func(name string, t Totals) {
		fmt.Fprintf(tw, "%s\t%d\t%d\t%d\t%d\t%d\t%d\t%d\t%d\t%d\t\n", name, t.Reps, t.OK, t.Hang, t.Wrong, t.Errors,
			t.Orphans, t.Leftovers, t.Trouble, t.Skipped)
	}
	for _, k := range Kinds {
		if t := r.Totals(k); t.Reps > 0 {
			row(string(k), t)
		}
	}
	row("all", r.Totals(""))
	_ = tw.Flush()
	fmt.Fprintf(&b, "seed %d, %d repetitions in %v, %d allreduces checked", r.Seed, len(r.Outcomes),
		r.Elapsed.Round(time.Second), r.Totals("").Checked)
	if r.CutShort != "" {
		fmt.Fprintf(&b, " (%s)", r.CutShort)
	}
	b.WriteString("\n")
	skipped := map[string]bool{}
	for i := range r.Outcomes {
		o := &r.Outcomes[i]
		switch {
		case o.Skipped != "":
			if !skipped[o.Skipped] {
				skipped[o.Skipped] = true
				fmt.Fprintf(&b, "skipped %s: %s\n", o.Kind, o.Skipped)
			}
		case !o.OK():
			fmt.Fprintf(&b, "%s\n", o)
		}
	}
	return b.String()
}
