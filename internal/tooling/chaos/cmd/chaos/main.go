// Command chaos is the chaos runner of make chaos; tooling, not shipped by
// the library. It runs the chaos test of the procs backend and of xpu run's
// launcher (package internal/tooling/chaos): -n repetitions of a 4-rank
// allreduce job struck by a fault (a rank killed or frozen, its links cut, the
// launcher killed), counting hangs, wrong results, errors, orphaned
// processes and leftover files, and printing them as a table. It exits 1
// when any repetition found one. make chaos runs it (scripts/chaos.sh).
package main

import (
	"flag"
	"fmt"
	"os"
	"time"

	"github.com/xpu-go/xpu/internal/tooling/chaos"
)

func main() {
	if chaos.IsRole() {
		os.Exit(chaos.RunRole())
	}
	var cfg chaos.Config
	flag.IntVar(&cfg.N, "n", 100, "repetitions")
	flag.Uint64Var(&cfg.Seed, "seed", 1, "seed of the victims, moments and cuts (the same seed repeats a run)")
	kinds := flag.String("kinds", "all", "faults, taken in turn: kill, stop, cut, launcher-kill, or all")
	flag.IntVar(&cfg.Ranks, "ranks", 4, "ranks per job")
	flag.DurationVar(&cfg.Budget, "timeout", 30*time.Minute, "total time bound: no repetition starts after it")
	flag.DurationVar(&cfg.Detect, "detect", 2*time.Second, "the ranks' failure-detection bound (XPU_TCP_TIMEOUT)")
	flag.DurationVar(&cfg.Join, "join", 5*time.Second, "the ranks' join timeout (XPU_JOIN_TIMEOUT)")
	flag.DurationVar(&cfg.Grace, "grace", time.Second, "the launcher's grace period between SIGTERM and SIGKILL")
	flag.DurationVar(&cfg.Window, "window", 1500*time.Millisecond, "the fault strikes at a moment drawn uniformly from this span")
	flag.Float64Var(&cfg.JoinShare, "join-share", 0.2, "share of the faults that strike while the job forms")
	flag.BoolVar(&cfg.AfterReady, "after-ready", false, "count the moment from when every rank has joined, not from the launcher's start")
	flag.DurationVar(&cfg.Hang, "hang", 0, "how long the launcher may take to end after the fault (default max(detect, join)+grace+10s)")
	flag.DurationVar(&cfg.Settle, "settle", 0, "how long the job's processes have to end after the launcher (default detect+grace+2s)")
	flag.IntVar(&cfg.Count, "count", 1<<17, "float64 elements of the large allreduce")
	flag.StringVar(&cfg.Dir, "dir", "", "where to keep the files of repetitions that go wrong (default a temporary directory)")
	quiet := flag.Bool("q", false, "print only the table, not a line per repetition")
	flag.Parse()
	var err error
	if cfg.Kinds, err = chaos.ParseKinds(*kinds); err != nil {
		fmt.Fprintln(os.Stderr, "chaos:", err)
		os.Exit(2)
	}
	if !*quiet {
		cfg.Log = os.Stdout
	}
	rep, err := chaos.Run(cfg)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	fmt.Print("\n" + rep.Table())
	if !rep.Clean() {
		os.Exit(1)
	}
}
