package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"text/tabwriter"

	"github.com/xpu-go/xpu/internal/tooling/bench"
	"github.com/xpu-go/xpu/internal/tooling/bench/stats"
	"github.com/xpu-go/xpu/xpucmd"
)

// xpu bench rounds: the comparisons of the programs that run one process
// per rank (tcpbench against Open MPI and the C ring), read from several
// rounds measured one after the other — each round's figures of ours and
// of the references taken back to back, so that a round's ratio compares
// figures of one moment of the machine. A goal is met when it holds in
// every round: one lucky round cannot pass it, one unlucky round fails it
// and says so.

// roundRow is one comparison over the rounds that have both figures.
type roundRow struct {
	pair          bench.Pair
	unit          string
	ours, theirs  []float64
	ratios        []float64
	median, worst float64
}

func runRounds(_ context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("xpu bench rounds", flag.ContinueOnError)
	fs.SetOutput(stderr)
	filter := fs.String("filter", "", "show only the comparisons whose figure matches this regular expression")
	fs.Usage = func() {
		fmt.Fprintln(stderr, "usage: xpu bench rounds [--filter REGEXP] DIR")
		fmt.Fprintln(stderr, "DIR holds one subdirectory per round, each with the *.out figures of that round")
		fmt.Fprintln(stderr, "(make rounds-shm writes them): each comparison is shown with the median and the worst")
		fmt.Fprintln(stderr, "of its rounds' ratios, and a goal is met when it holds in every round.")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		return fmt.Errorf("%w: %v", xpucmd.ErrUsage, err)
	}
	if fs.NArg() != 1 {
		fs.Usage()
		return fmt.Errorf("%w: want one directory of rounds", xpucmd.ErrUsage)
	}
	var re *regexp.Regexp
	if *filter != "" {
		var err error
		if re, err = regexp.Compile(*filter); err != nil {
			return fmt.Errorf("%w: --filter: %v", xpucmd.ErrUsage, err)
		}
	}
	rounds, err := readRounds(fs.Arg(0))
	if err != nil {
		return err
	}
	rows := roundRows(rounds, re)
	if len(rows) == 0 {
		return fmt.Errorf("%w: no comparison has both its figures in any round of %s", xpucmd.ErrUsage, fs.Arg(0))
	}
	printRounds(stdout, rows, len(rounds))
	return nil
}

// readRounds reads the figures of every round under dir, in name order.
func readRounds(dir string) ([]map[string]bench.RefFigure, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("rounds: %w", err)
	}
	var rounds []map[string]bench.RefFigure
	for _, e := range entries {
		if !e.IsDir() {
			continue
		}
		outs, err := filepath.Glob(filepath.Join(dir, e.Name(), "*.out"))
		if err != nil {
			return nil, err
		}
		figs := map[string]bench.RefFigure{}
		for _, f := range outs {
			data, err := os.ReadFile(f)
			if err != nil {
				return nil, fmt.Errorf("rounds: %w", err)
			}
			for k, v := range bench.ParseRef(string(data)) {
				figs[k] = v
			}
		}
		if len(figs) > 0 {
			rounds = append(rounds, figs)
		}
	}
	if len(rounds) == 0 {
		return nil, fmt.Errorf("%w: no round with figures (*.out) under %s", xpucmd.ErrUsage, dir)
	}
	return rounds, nil
}

// roundRows compares each pair over the rounds that hold both its
// figures: the median of the ratios, and the worst (the highest for
// times, the lowest for rates).
func roundRows(rounds []map[string]bench.RefFigure, re *regexp.Regexp) []*roundRow {
	var rows []*roundRow
	for _, p := range procPairs() {
		if re != nil && !re.MatchString(p.Name) {
			continue
		}
		row := &roundRow{pair: p}
		for _, figs := range rounds {
			ours, ok := figs[p.Name]
			theirs, ok2 := figs[p.Against]
			if !ok || !ok2 {
				continue
			}
			row.unit = ours.Unit
			row.ours = append(row.ours, ours.Value)
			row.theirs = append(row.theirs, theirs.Value)
			row.ratios = append(row.ratios, bench.Ratio(ours.Value, theirs.Value))
		}
		if len(row.ratios) == 0 {
			continue
		}
		row.median = stats.Median(row.ratios)
		row.worst = slices.Min(row.ratios)
		if (bench.Case{Unit: row.unit}).LowerIsBetter() {
			row.worst = slices.Max(row.ratios)
		}
		rows = append(rows, row)
	}
	return rows
}

// printRounds prints one line per comparison.
func printRounds(w io.Writer, rows []*roundRow, rounds int) {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "CASE\tOURS\tAGAINST\tTHEIRS\tRATIO\tWORST\tROUNDS\tGOAL\t\t")
	for _, r := range rows {
		goal, verdict := "", ""
		if r.pair.Goal != 0 {
			c := bench.Case{Unit: r.unit}
			op := "≥"
			if c.LowerIsBetter() {
				op = "≤"
			}
			goal = fmt.Sprintf("%s%.2f", op, r.pair.Goal)
			worst := r.pair.Goal
			if r.pair.Worst != 0 {
				// The median to Goal, every round to Worst.
				worst = r.pair.Worst
				goal += fmt.Sprintf(", worst %s%.2f", op, worst)
			}
			medianMet, worstMet := c.Meets(r.median, 1, r.pair.Goal), c.Meets(r.worst, 1, worst)
			switch {
			case medianMet && worstMet:
				verdict = "met in every round"
			case medianMet:
				// How many rounds missed the bound says whether one round
				// was unlucky or the goal holds only sometimes.
				missed := 0
				for _, q := range r.ratios {
					if !c.Meets(q, 1, worst) {
						missed++
					}
				}
				verdict = fmt.Sprintf("NOT MET in %d of %d rounds", missed, len(r.ratios))
			default:
				verdict = "NOT MET"
			}
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%.2f\t%.2f\t%d\t%s\t%s\t\n", r.pair.Name, figure(stats.Median(r.ours), r.unit),
			r.pair.Against, figure(stats.Median(r.theirs), r.unit), r.median, r.worst, len(r.ratios), goal, verdict)
	}
	tw.Flush()
	fmt.Fprintf(w, "\n%d rounds; OURS and THEIRS are medians; RATIO is the median of the rounds' ratios ours/theirs\n", rounds)
	fmt.Fprintln(w, "(times: lower is better; GB/s: higher is better) and WORST the worst round's; a goal is met when RATIO meets it")
	fmt.Fprintln(w, "and WORST meets it, or the bound for the worst round the goal names.")
	if rounds < 5 {
		fmt.Fprintln(w, strings.TrimSpace("fewer than 5 rounds: the worst round says little; make rounds-shm ROUNDS=10"))
	}
}
