package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/xpu-go/xpu"
	"github.com/xpu-go/xpu/comm"
	"github.com/xpu-go/xpu/internal/launch"
	"github.com/xpu-go/xpu/internal/tooling/bench/sweep"
	"github.com/xpu-go/xpu/memspace"
	"github.com/xpu-go/xpu/xpucmd"
)

// The subcommands of xpu bench: sweep measures, compare and plot read
// what sweep wrote; sweep-rank is what every rank of a sweep's job runs
// (not for users: the sweep starts it).
var benchSubcommands = map[string]func(ctx context.Context, args []string, stdout, stderr io.Writer) error{
	"sweep":      runSweep,
	"sweep-rank": runSweepRank,
	"compare":    runCompare,
	"plot":       runPlot,
	"rounds":     runRounds,
}

// refProgram is the Open MPI reference of the sweep, built by make
// refs-mpi from internal/tooling/bench/ref/sweep_mpi_ref.c into the --ref
// directory; named mpi_* so that xpu bench does not run it itself.
const refProgram = "mpi_sweep_ref"

// sweepFlags are the settings of one sweep.
type sweepFlags struct {
	filter     *regexp.Regexp
	sizes      []int64
	ranks      []int
	count      int
	rounds     int
	sampleTime time.Duration
	budget     time.Duration
	refDir     string
}

func runSweep(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	a, err := parseSweepArgs(args, stderr)
	if err != nil {
		return err
	}
	sf, err := a.settings()
	if err != nil {
		return err
	}
	self, err := os.Executable()
	if err != nil {
		return fmt.Errorf("the ranks' program: %w", err)
	}

	doc, runErr := sweepAll(ctx, sf, []string{self, "bench", "sweep-rank"}, stderr)
	doc.Command = append([]string{"xpu", "bench", "sweep"}, args...)
	if len(doc.Points) == 0 && runErr == nil && doc.Stopped == "" {
		return fmt.Errorf("%w: nothing to measure (--filter %q matches no series and operation, or every series failed: %s)",
			xpucmd.ErrUsage, a.filter, strings.Join(doc.Errors, "; "))
	}
	if err := a.write(doc, stdout, stderr); err != nil {
		return err
	}
	return runErr // an interruption, after printing what was measured
}

// sweepArgs are the flags of `xpu bench sweep` as given.
type sweepArgs struct {
	filter, minSize, maxSize, sizeList, ranks string
	count, rounds                             int
	sampleTime, budget                        time.Duration
	asJSON, asBench                           bool
	out, plotDir, refDir                      string
}

// parseSweepArgs parses the flags of `xpu bench sweep`.
func parseSweepArgs(args []string, stderr io.Writer) (*sweepArgs, error) {
	fs := xpucmd.NewFlagSet("bench sweep", stderr)
	fs.Usage = usageFunc(fs, stderr,
		"usage: xpu bench sweep [--filter REGEX] [--min-size SIZE] [--max-size SIZE] [--json] [--plot DIR] [--budget DURATION] [flags]",
		"Measures every available communicator (one process per rank, started as xpu run starts them; in this",
		"process for those that only run there) and the host transfer path over message sizes, OSU-style, beside",
		"Open MPI (the reference make refs-mpi builds, with --ref) and memmove, checking every result it times.",
		"--filter matches \"<series>/<op>\": tcp/latency, shm/allreduce, openmpi.vader/bw, cpu.host-host/copy.",
		"Sizes read as 8, 64KiB, 4MiB.")
	a := &sweepArgs{}
	fs.StringVar(&a.filter, "filter", "", "measure only the series and operations whose \"<series>/<op>\" matches this regular expression (a series' reference follows it)")
	fs.StringVar(&a.minSize, "min-size", "8", "smallest message size")
	fs.StringVar(&a.maxSize, "max-size", "64MiB", "largest message size")
	fs.StringVar(&a.sizeList, "sizes", "", "the message sizes, comma-separated, instead of the powers of two from --min-size to --max-size")
	fs.StringVar(&a.ranks, "n", "2", "rank counts of the communicators, comma-separated (\"2,4\")")
	fs.IntVar(&a.count, "count", 1, "samples per point in each round")
	fs.IntVar(&a.rounds, "rounds", 10, fmt.Sprintf("rounds: the whole sweep runs this many times, interleaved, each in fresh processes, and a point gets --count samples from each "+
		"(compare needs %d samples a side to call a change, %d for a confidence interval)", sweep.MinSamplesToCompare, sweep.MinSamplesForInterval))
	fs.DurationVar(&a.sampleTime, "sample-time", 10*time.Millisecond, "time one sample aims at")
	fs.DurationVar(&a.budget, "budget", 0, "stop after this long, keeping what was measured (0: no limit)")
	fs.BoolVar(&a.asJSON, "json", false, "print the run as a JSON document instead of tables")
	fs.BoolVar(&a.asBench, "benchfmt", false, "print the points in the `go test -bench` format (for benchstat) instead of tables")
	fs.StringVar(&a.out, "o", "", "also write the JSON document to this file")
	fs.StringVar(&a.plotDir, "plot", "", "draw the charts (PNG and SVG) into this directory")
	fs.StringVar(&a.refDir, "ref", "", "directory holding "+refProgram+" (make refs-mpi builds it into .bench); without it Open MPI is not measured")
	if err := xpucmd.ParseFlags(fs, args); err != nil {
		return nil, err
	}
	if fs.NArg() > 0 {
		return nil, fmt.Errorf("%w: unexpected argument %q", xpucmd.ErrUsage, fs.Arg(0))
	}
	if a.asJSON && a.asBench {
		return nil, fmt.Errorf("%w: --json and --benchfmt both print the run: choose one (and -o FILE for the JSON beside)", xpucmd.ErrUsage)
	}
	return a, nil
}

// settings checks the flags and returns the sweep they describe.
func (a *sweepArgs) settings() (sweepFlags, error) {
	sf := sweepFlags{count: a.count, rounds: a.rounds, sampleTime: a.sampleTime, budget: a.budget, refDir: a.refDir}
	var err error
	if sf.sizes, err = parseSweepSizes(a.sizeList, a.minSize, a.maxSize); err != nil {
		return sf, fmt.Errorf("%w: %v", xpucmd.ErrUsage, err)
	}
	if sf.ranks, err = parseRanks(a.ranks); err != nil {
		return sf, fmt.Errorf("%w: -n: %v", xpucmd.ErrUsage, err)
	}
	switch {
	case sf.count < 1:
		return sf, fmt.Errorf("%w: --count %d: want at least 1 sample", xpucmd.ErrUsage, sf.count)
	case sf.rounds < 1:
		return sf, fmt.Errorf("%w: --rounds %d: want at least 1 round", xpucmd.ErrUsage, sf.rounds)
	case sf.sampleTime <= 0:
		return sf, fmt.Errorf("%w: --sample-time %v: want a positive duration", xpucmd.ErrUsage, sf.sampleTime)
	case sf.budget < 0:
		return sf, fmt.Errorf("%w: --budget %v: want a positive duration, or 0 for none", xpucmd.ErrUsage, sf.budget)
	}
	if a.filter != "" {
		if sf.filter, err = regexp.Compile(a.filter); err != nil {
			return sf, fmt.Errorf("%w: --filter: %v", xpucmd.ErrUsage, err)
		}
	}
	return sf, nil
}

// write writes doc where the flags say: to -o, as charts to --plot, and to
// stdout as JSON, in the benchfmt, or as tables.
func (a *sweepArgs) write(doc *sweep.Document, stdout, stderr io.Writer) error {
	if a.out != "" {
		if err := doc.WriteFile(a.out); err != nil {
			return err
		}
	}
	if a.plotDir != "" {
		files, err := sweep.Plot(doc, a.plotDir)
		if err != nil {
			return err
		}
		fmt.Fprintf(stderr, "xpu bench sweep: %d charts in %s\n", len(files)/2, a.plotDir)
	}
	switch {
	case a.asJSON:
		return doc.Write(stdout)
	case a.asBench:
		return sweep.WriteBenchfmt(stdout, doc)
	default:
		return sweep.PrintTables(stdout, doc)
	}
}

// parseSweepSizes reads --sizes, or the powers of two from --min-size to
// --max-size.
func parseSweepSizes(list, lo, hi string) ([]int64, error) {
	if list != "" {
		return sweep.ParseSizes(list)
	}
	l, err := sweep.ParseSize(lo)
	if err != nil {
		return nil, fmt.Errorf("--min-size: %w", err)
	}
	h, err := sweep.ParseSize(hi)
	if err != nil {
		return nil, fmt.Errorf("--max-size: %w", err)
	}
	return sweep.Sizes(l, h)
}

// parseRanks reads a comma-separated list of rank counts (1 to 256).
func parseRanks(s string) ([]int, error) {
	var out []int
	for _, f := range strings.Split(s, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n < 1 || n > 256 {
			return nil, fmt.Errorf("%q: want rank counts from 1 to 256, comma-separated", s)
		}
		out = append(out, n)
	}
	slices.Sort(out)
	return slices.Compact(out), nil
}

// sweepJob is one series to run at one rank count.
type sweepJob struct {
	series sweep.Series
	// how the series runs: inGroup (ranks as goroutines of this process),
	// inJob (one process per rank, started by package launch), inMPIJob
	// (the same under mpirun, for the mpi backend), openMPI (the C
	// reference under mpirun) or inCopy (a transfer path).
	how    int
	driver string
	env    []string // for inJob: what the ranks' environment adds
	btl    []string // for openMPI: the transport's mpirun arguments
	ranks  int
	plan   sweep.Plan
	cp     copyJob
}

// points returns the number of points j measures.
func (j sweepJob) points() int {
	if j.how == inCopy {
		return len(j.plan.Sizes)
	}
	return len(j.plan.Points(j.ranks))
}

const (
	inGroup = iota
	inJob
	inMPIJob
	openMPI
	inCopy
)

// copyJob is a transfer path to sweep.
type copyJob struct {
	dst, src memspace.Space
	copier   sweep.Copier
}

// The Open MPI references: its TCP transport on loopback, for the
// communicator's TCP links, and its shared-memory transport, for the
// shared-memory links.
var (
	refTCP = sweep.Series{Name: "openmpi.tcp", Reference: true,
		Doc: "Open MPI, mpirun --mca pml ob1 --mca btl self,tcp --mca btl_tcp_if_include lo"}
	refVader = sweep.Series{Name: "openmpi.vader", Reference: true,
		Doc: "Open MPI, mpirun --mca pml ob1 --mca btl self,vader (shared memory)"}
	refArgs = map[string][]string{
		refTCP.Name:   {"--mca", "pml", "ob1", "--mca", "btl", "self,tcp", "--mca", "btl_tcp_if_include", "lo"},
		refVader.Name: {"--mca", "pml", "ob1", "--mca", "btl", "self,vader"},
	}
	memmove = sweep.Series{Name: "memmove", Reference: true, Doc: "Go's copy() between the same host blocks"}
)

// commSeries returns the communicator series of the backends available
// here: a backend whose ranks are processes runs as a job (the procs
// backend twice: links over TCP, and over shared memory when it has them),
// one that only makes groups in a process runs there.
func commSeries(infos []xpu.Info) []sweepJob {
	var out []sweepJob
	for _, in := range infos {
		if !in.Available || !slices.Contains(in.Concepts, "comm") {
			continue
		}
		switch {
		case in.Name == "procs":
			out = append(out, sweepJob{how: inJob, driver: in.Name, env: []string{"XPU_LINKS=tcp"},
				series: sweep.Series{Name: "tcp", Against: refTCP.Name, Doc: "xpu run -n N, backend procs, links over loopback TCP (XPU_LINKS=tcp)"}})
			if slices.Contains(in.Capabilities, xpu.CapSharedMemory) {
				out = append(out, sweepJob{how: inJob, driver: in.Name, env: []string{"XPU_LINKS=shm"},
					series: sweep.Series{Name: "shm", Against: refVader.Name, Doc: "xpu run -n N, backend procs, links through shared memory (XPU_LINKS=shm)"}})
			}
		case in.Name == "mpi":
			out = append(out, sweepJob{how: inMPIJob, driver: in.Name,
				series: sweep.Series{Name: "mpi", Doc: "xpu run --mpi -n N, backend mpi (" + in.Library + ")"}})
		case slices.Contains(in.Capabilities, xpu.CapMultiprocess):
			out = append(out, sweepJob{how: inJob, driver: in.Name,
				series: sweep.Series{Name: in.Name, Doc: "xpu run -n N, backend " + in.Name}})
		case slices.Contains(in.Capabilities, xpu.CapGroup):
			out = append(out, sweepJob{how: inGroup, driver: in.Name,
				series: sweep.Series{Name: in.Name, Doc: "backend " + in.Name + ", N ranks as goroutines of one process"}})
		}
	}
	return out
}

// planJobs lists the jobs of a sweep: for each rank count, the
// communicator series, each reference right after the last series compared
// with it (so that both see the same moments of the machine); then the
// transfer paths. A series measures the operations whose "<series>/<op>"
// the filter matches; a reference those of the series compared with it,
// and those the filter names for it.
func planJobs(sf sweepFlags, comms []sweepJob, copies []sweepJob, deadline time.Time) []sweepJob {
	base := sweep.Plan{Sizes: sf.sizes, Count: sf.count, SampleTime: sf.sampleTime, Deadline: deadline}
	opsOf := func(series string, transfer bool) []string {
		var ops []string
		for _, op := range sweep.Ops {
			if op.Transfer == transfer && (sf.filter == nil || sf.filter.MatchString(series+"/"+op.Name)) {
				ops = append(ops, op.Name)
			}
		}
		return ops
	}
	var jobs []sweepJob
	for _, n := range sf.ranks {
		var row []sweepJob
		refOps := map[string][]string{}
		refAt := map[string]int{} // a reference runs before row[refAt]
		for _, j := range comms {
			j.ranks, j.plan = n, base
			j.plan.Ops = opsOf(j.series.Name, false)
			if len(j.plan.Ops) > 0 && len(j.plan.Points(n)) > 0 {
				row = append(row, j)
			}
			if ref := j.series.Against; ref != "" {
				for _, op := range slices.Concat(j.plan.Ops, opsOf(ref, false)) {
					if !slices.Contains(refOps[ref], op) {
						refOps[ref] = append(refOps[ref], op)
					}
				}
				refAt[ref] = len(row)
			}
		}
		for i := 0; i <= len(row); i++ {
			for _, ref := range []sweep.Series{refTCP, refVader} {
				if at, ok := refAt[ref.Name]; ok && at == i {
					r := sweepJob{how: openMPI, series: ref, btl: refArgs[ref.Name], ranks: n, plan: base}
					r.plan.Ops = sortedOps(refOps[ref.Name])
					if len(r.plan.Ops) > 0 && len(r.plan.Points(n)) > 0 {
						jobs = append(jobs, r)
					}
				}
			}
			if i < len(row) {
				jobs = append(jobs, row[i])
			}
		}
	}
	// A transfer path's reference (memmove) runs when the filter names it
	// or a path compared with it.
	wanted := map[string]bool{}
	for _, j := range copies {
		if len(opsOf(j.series.Name, true)) > 0 {
			wanted[j.series.Name], wanted[j.series.Against] = true, true
		}
	}
	for _, j := range copies {
		j.ranks, j.plan = 1, base
		j.plan.Ops = []string{"copy"}
		if wanted[j.series.Name] {
			jobs = append(jobs, j)
		}
	}
	return jobs
}

// sortedOps returns ops in the order of sweep.Ops.
func sortedOps(ops []string) []string {
	var out []string
	for _, op := range sweep.Ops {
		if slices.Contains(ops, op.Name) {
			out = append(out, op.Name)
		}
	}
	return out
}

// copySeries returns the transfer paths to sweep: host to host through
// package transfer, beside memmove, and the paths among the host and the
// spaces of every other available backend (copyPairs). close releases the
// backends opened.
func copySeries(ctx context.Context, infos []xpu.Info) (jobs []sweepJob, errs []string, close func()) {
	var opened []*xpu.Backend
	close = func() {
		for _, b := range slices.Backward(opened) {
			_ = b.Close()
		}
	}
	host, err := xpu.Open(ctx, "cpu", nil)
	if err != nil {
		return nil, []string{"copy: the cpu backend: " + err.Error()}, close
	}
	opened = append(opened, host)
	h := host.Memory
	jobs = append(jobs,
		sweepJob{how: inCopy, series: sweep.Series{Name: "cpu.host-host", Against: memmove.Name,
			Doc: "transfer.Copy between two blocks of the cpu backend's host space"},
			cp: copyJob{dst: h, src: h, copier: sweep.TransferCopier}},
		sweepJob{how: inCopy, series: memmove, cp: copyJob{dst: h, src: h, copier: sweep.MemmoveCopier}})
	for _, in := range infos {
		if !in.Available || in.Name == "cpu" || !slices.Contains(in.Concepts, "memory") {
			continue
		}
		b, err := xpu.Open(ctx, in.Name, nil)
		if err != nil {
			errs = append(errs, fmt.Sprintf("copy: backend %s: %v", in.Name, err))
			continue
		}
		opened = append(opened, b)
		jobs = append(jobs, copyPairs(in.Name, h, b.Spaces)...)
	}
	return jobs, errs, close
}

// copyPairs returns the transfer paths of a backend named name whose
// spaces are spaces: between each of them and the host space h, both
// ways, and between any two of them, a space and itself included (device
// to device), all through package transfer. A series is named
// "<backend>.<from kind>-<to kind>": "cuda.host-cuda-device",
// "cuda.cuda-pinned-cuda-device".
func copyPairs(name string, h memspace.Space, spaces []memspace.Space) []sweepJob {
	all := []memspace.Space{h}
	for _, s := range spaces {
		if s.Properties().Kind != "host" {
			all = append(all, s)
		}
	}
	var jobs []sweepJob
	for i, src := range all {
		for j, dst := range all {
			if i == 0 && j == 0 {
				continue // host to host is the cpu backend's series
			}
			from, to := src.Properties().Kind, dst.Properties().Kind
			jobs = append(jobs, sweepJob{how: inCopy,
				series: sweep.Series{Name: name + "." + from + "-" + to,
					Doc: "transfer.Copy from " + src.Name() + " to " + dst.Name()},
				cp: copyJob{dst: dst, src: src, copier: sweep.TransferCopier}})
		}
	}
	return jobs
}

// sweepAll runs the sweep sf describes and returns what it measured, and
// an error when it was interrupted (the document then holds the points
// measured before).
func sweepAll(ctx context.Context, sf sweepFlags, rankProg []string, stderr io.Writer) (*sweep.Document, error) {
	start := time.Now()
	doc, infos := newSweepDoc(ctx, sf, start)
	var deadline time.Time
	if sf.budget > 0 {
		deadline = start.Add(sf.budget)
	}
	copies, errs, closeCopies := copySeries(ctx, infos)
	defer closeCopies()
	doc.Errors = append(doc.Errors, errs...)
	jobs := planJobs(sf, commSeries(infos), copies, deadline)

	refBin, refErr := findRef(ctx, sf.refDir, doc)
	pr := newProgress(stderr, pointsPlanned(jobs, sf.rounds, refErr == nil), sf.rounds, start, deadline)
	defer pr.finish()
	s := &sweeper{doc: doc, pr: pr, rankProg: rankProg, refBin: refBin, stderr: stderr,
		at: map[sweep.Key]int{}, failed: map[int]bool{}}
	listed := map[string]bool{}
	// The rounds run every job in turn, so that a point's samples come from
	// several processes and moments, as its reference's do.
	for round := range sf.rounds * len(jobs) {
		ji := round % len(jobs)
		j := jobs[ji]
		if s.failed[ji] {
			continue // said in its first round
		}
		if doc.Stopped = stopBefore(ctx, deadline); doc.Stopped != "" {
			break
		}
		if j.how == openMPI && refErr != nil {
			continue // said once, in doc.Errors
		}
		if !listed[j.series.Name] {
			doc.Series = append(doc.Series, j.series)
			listed[j.series.Name] = true
		}
		pr.begin(j, round/len(jobs)+1)
		end, err := s.run(ctx, j)
		s.record(ctx, ji, j, end, err)
		if doc.Stopped != "" {
			break
		}
	}
	doc.Finished = time.Now()
	if doc.Stopped == sweep.StopInterrupted {
		return doc, fmt.Errorf("interrupted: %d points measured before are printed (%w)", len(doc.Points), context.Cause(ctx))
	}
	return doc, nil
}

// newSweepDoc returns the document of the sweep sf describes, started at
// start, before anything is measured, and the backends it describes.
func newSweepDoc(ctx context.Context, sf sweepFlags, start time.Time) (*sweep.Document, []xpu.Info) {
	doc := &sweep.Document{Schema: sweep.Schema, Started: start, Machine: sweep.DescribeMachine(),
		Config: sweep.Config{Sizes: sf.sizes, Ranks: sf.ranks, Count: sf.count, Rounds: sf.rounds,
			SampleTime: sweep.Duration(sf.sampleTime), Budget: sweep.Duration(sf.budget)}}
	if sf.filter != nil {
		doc.Config.Filter = sf.filter.String()
	}
	for _, op := range sweep.Ops {
		doc.Config.Ops = append(doc.Config.Ops, op.Name)
	}
	infos := xpu.DescribeAll(ctx)
	for _, in := range infos {
		doc.Machine.Backends = append(doc.Machine.Backends,
			sweep.Component{Name: in.Name, Version: in.Library, Available: in.Available, Reason: in.Reason})
	}
	return doc, infos
}

// stopBefore returns why the sweep stops before its next job: ctx ended,
// or the deadline (if not zero) passed; "" when it goes on.
func stopBefore(ctx context.Context, deadline time.Time) string {
	if ctx.Err() != nil {
		return sweep.StopInterrupted
	}
	if !deadline.IsZero() && time.Now().After(deadline) {
		return sweep.StopBudget
	}
	return ""
}

// sweeper runs the jobs of one sweep, gathering their points in doc.
type sweeper struct {
	doc      *sweep.Document
	pr       *progress
	rankProg []string // the program every rank of an inJob job runs
	refBin   string   // the Open MPI reference, "" without one
	stderr   io.Writer

	mu     sync.Mutex        // guards doc.Points and at while a job emits
	at     map[sweep.Key]int // where doc.Points holds a point measured in an earlier round
	failed map[int]bool      // jobs that failed, not run again
}

// run runs one round of job j, and returns how it ended.
func (s *sweeper) run(ctx context.Context, j sweepJob) (end string, err error) {
	emit := func(p sweep.Point) { s.emit(j, p) }
	switch j.how {
	case inGroup:
		end, err = sweepGroup(ctx, j, emit)
	case inJob, inMPIJob:
		end, err = sweepJobProcs(ctx, j, s.rankProg, s.stderr, emit)
	case openMPI:
		end, err = sweepOpenMPI(ctx, j, s.refBin, s.stderr, emit)
	case inCopy:
		end, err = sweep.RunCopy(ctx, j.cp.dst, j.cp.src, j.cp.copier, j.plan, emit)
	}
	return end, err
}

// emit adds point p of job j to the document, its samples to those of the
// same point in earlier rounds.
func (s *sweeper) emit(j sweepJob, p sweep.Point) {
	p.Series = j.series.Name
	s.mu.Lock()
	if i, ok := s.at[p.Key()]; ok {
		q := &s.doc.Points[i]
		q.Samples = append(q.Samples, p.Samples...)
		if q.Invalid == "" {
			q.Invalid = p.Invalid
		}
		q.Fill()
	} else {
		s.at[p.Key()] = len(s.doc.Points)
		s.doc.Points = append(s.doc.Points, p)
	}
	s.mu.Unlock()
	s.pr.point(p)
}

// record records how a round of job ji, j, ended: in doc.Stopped when the
// sweep stops, and as a failure, not to run again, when it failed.
func (s *sweeper) record(ctx context.Context, ji int, j sweepJob, end string, err error) {
	switch {
	case ctx.Err() != nil:
		s.doc.Stopped = sweep.StopInterrupted
	case err != nil:
		s.failed[ji] = true
		s.doc.Errors = append(s.doc.Errors, fmt.Sprintf("%s np%d: %v", j.series.Name, j.ranks, err))
		s.pr.say("%s np%d failed: %v", j.series.Name, j.ranks, err)
	case end == sweep.EndBudget:
		s.doc.Stopped = sweep.StopBudget
	}
}

// findRef returns the path of the Open MPI reference in dir and records
// Open MPI in doc's references, or says in doc why the references will
// not run.
func findRef(ctx context.Context, dir string, doc *sweep.Document) (string, error) {
	c := sweep.Component{Name: "Open MPI"}
	defer func() { doc.Machine.References = append(doc.Machine.References, c) }()
	fail := func(why string) (string, error) {
		c.Reason = why
		doc.Errors = append(doc.Errors, "Open MPI references not run: "+why)
		return "", errors.New(why)
	}
	v, err := sweep.OpenMPIVersion(ctx)
	if err != nil {
		return fail("no mpirun here (" + err.Error() + "); make refs-mpi installs Open MPI")
	}
	c.Version = v
	if dir == "" {
		return fail("no --ref directory: make refs-mpi builds " + refProgram + " into .bench; pass --ref .bench")
	}
	path := filepath.Join(dir, refProgram)
	if st, err := os.Stat(path); err != nil || st.Mode()&0o111 == 0 {
		return fail(path + " is not an executable: build it with make refs")
	}
	c.Available = true
	return path, nil
}

// sweepGroup runs j's sweep on a group of ranks in this process.
func sweepGroup(ctx context.Context, j sweepJob, emit func(sweep.Point)) (string, error) {
	b, err := xpu.Open(ctx, j.driver, nil)
	if err != nil {
		return "", err
	}
	defer b.Close()
	comms, err := b.Group(ctx, j.ranks)
	if err != nil {
		return "", err
	}
	ends, errs := sweep.RunGroup(ctx, comms, j.plan, emit)
	for _, c := range comms {
		_ = c.Close()
	}
	return ends[0], errors.Join(errs...)
}

// rankPlan is the plan a sweep hands its ranks on their command line.
type rankPlan struct {
	Ops        []string      `json:"ops"`
	Sizes      []int64       `json:"sizes"`
	Count      int           `json:"count"`
	SampleTime time.Duration `json:"sample_time"`
	Deadline   time.Time     `json:"deadline,omitzero"`
}

// sweepJobProcs runs j's sweep with one process per rank, each running
// rankProg (this command's sweep-rank), started by package launch as xpu
// run starts them (under mpirun for the mpi backend). Rank 0 appends its
// points to a file, read as they come.
func sweepJobProcs(ctx context.Context, j sweepJob, rankProg []string, stderr io.Writer, emit func(sweep.Point)) (string, error) {
	dir, err := os.MkdirTemp("", "xpu-sweep-")
	if err != nil {
		return "", err
	}
	defer os.RemoveAll(dir)
	file := filepath.Join(dir, "points")
	plan, err := json.Marshal(rankPlan{j.plan.Ops, j.plan.Sizes, j.plan.Count, j.plan.SampleTime, j.plan.Deadline})
	if err != nil {
		return "", err
	}
	spec := launch.Spec{
		N:         j.ranks,
		Prog:      rankProg[0],
		Args:      append(slices.Clone(rankProg[1:]), "--out", file, "--plan", string(plan)),
		Env:       append(os.Environ(), append(j.env, launch.EnvBackend+"="+j.driver)...),
		Stdout:    stderr,
		Stderr:    stderr,
		LogPrefix: "xpu bench sweep: ",
	}
	if !j.plan.Deadline.IsZero() {
		// A point may outlast the deadline by a few samples of the
		// largest size; past that the job is stopped.
		spec.Timeout = time.Until(j.plan.Deadline) + 2*time.Minute
	}
	return followPoints(ctx, file, j.series.Name, emit, func(ctx context.Context) error {
		if j.how == inMPIJob {
			return launch.RunMPI(ctx, spec)
		}
		_, err := launch.Run(ctx, spec)
		return err
	})
}

// sweepOpenMPI runs the Open MPI reference for j under mpirun with j's
// transport.
func sweepOpenMPI(ctx context.Context, j sweepJob, bin string, stderr io.Writer, emit func(sweep.Point)) (string, error) {
	dir, err := os.MkdirTemp("", "xpu-sweep-")
	if err != nil {
		return "", err
	}
	defer os.RemoveAll(dir)
	file := filepath.Join(dir, "points")
	sizes := make([]string, len(j.plan.Sizes))
	for i, s := range j.plan.Sizes {
		sizes[i] = strconv.FormatInt(s, 10)
	}
	var deadline int64
	if !j.plan.Deadline.IsZero() {
		deadline = j.plan.Deadline.UnixNano()
	}
	args := append([]string{"--allow-run-as-root", "--oversubscribe"}, j.btl...)
	args = append(args, "-np", strconv.Itoa(j.ranks), bin,
		"-ops", strings.Join(j.plan.Ops, ","), "-sizes", strings.Join(sizes, ","),
		"-count", strconv.Itoa(j.plan.Count),
		"-sample-ms", strconv.FormatFloat(float64(j.plan.SampleTime)/float64(time.Millisecond), 'f', -1, 64),
		"-deadline", strconv.FormatInt(deadline, 10), "-o", file)
	return followPoints(ctx, file, j.series.Name, emit, func(ctx context.Context) error {
		if !j.plan.Deadline.IsZero() {
			var cancel context.CancelFunc
			ctx, cancel = context.WithDeadline(ctx, j.plan.Deadline.Add(2*time.Minute))
			defer cancel()
		}
		cmd := exec.CommandContext(ctx, "mpirun", args...)
		cmd.Stdout, cmd.Stderr = stderr, stderr
		// mpirun gets SIGTERM, which it passes to its ranks, and its whole
		// process group SIGKILL if it has not ended 10 s later.
		cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
		cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGTERM) }
		cmd.WaitDelay = 10 * time.Second
		err := cmd.Run()
		if cmd.Process != nil {
			_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) // stragglers of the group, if any
		}
		if err != nil {
			return fmt.Errorf("mpirun %s: %w", strings.Join(j.btl, " "), err)
		}
		return nil
	})
}

// followPoints runs job, which makes a rank 0 append point lines to file,
// emits each point as its line appears, and returns the run's end ("end"
// line) and job's error. Points read before an error are emitted and kept.
func followPoints(ctx context.Context, file, series string, emit func(sweep.Point), job func(context.Context) error) (string, error) {
	var seen int
	var end string
	read := func() error {
		data, err := os.ReadFile(file)
		if errors.Is(err, os.ErrNotExist) {
			return nil
		}
		if err != nil {
			return err
		}
		// Only whole lines: the last may be half written.
		whole := data[:strings.LastIndexByte(string(data), '\n')+1]
		points, e, err := sweep.ParseLines(string(whole), series)
		if e != "" {
			end = e
		}
		for _, p := range points[min(seen, len(points)):] {
			emit(p)
		}
		seen = max(seen, len(points))
		return err
	}
	done := make(chan error, 1)
	go func() { done <- job(ctx) }()
	tick := time.NewTicker(250 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case err := <-done:
			if rerr := read(); err == nil {
				err = rerr
			}
			if err == nil && end == "" {
				err = errors.New("the ranks ended without saying the sweep was over")
			}
			return end, err
		case <-tick.C:
			if err := read(); err != nil {
				// A line that does not parse is a bug of the writer: say it
				// when the job ends, with its own error if it has one.
				<-done
				return end, err
			}
		}
	}
}

// runSweepRank is one rank of a sweep's job: it opens the backend the
// launcher names, runs the plan and, on rank 0, appends the points to the
// file --out names.
func runSweepRank(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := xpucmd.NewFlagSet("bench sweep-rank", stderr)
	out := fs.String("out", "", "file rank 0 appends its points to")
	planJSON := fs.String("plan", "", "the plan, as JSON")
	if err := xpucmd.ParseFlags(fs, args); err != nil {
		return err
	}
	var rp rankPlan
	if err := json.Unmarshal([]byte(*planJSON), &rp); err != nil || *out == "" {
		return fmt.Errorf("%w: sweep-rank is started by xpu bench sweep, with --out FILE and --plan JSON", xpucmd.ErrUsage)
	}
	b, reasons, err := xpu.OpenDefault(ctx, nil)
	if err != nil {
		return fmt.Errorf("%w (%v)", err, reasons)
	}
	defer b.Close()
	if b.Comm == nil {
		return fmt.Errorf("backend %s has no communicator across processes", b.Name)
	}
	var w io.Writer = io.Discard
	if b.Comm.Rank() == 0 {
		f, err := os.OpenFile(*out, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
		if err != nil {
			return err
		}
		defer f.Close()
		w = f
	}
	var werr error
	plan := sweep.Plan{Ops: rp.Ops, Sizes: rp.Sizes, Count: rp.Count, SampleTime: rp.SampleTime, Deadline: rp.Deadline}
	end, err := sweep.RunRank(ctx, b.Comm, plan, func(p sweep.Point) {
		if _, err := fmt.Fprintln(w, sweep.FormatLine(p)); err != nil && werr == nil {
			werr = err
		}
	})
	if err != nil {
		return err
	}
	if _, err := fmt.Fprintln(w, "end", end); err != nil || werr != nil {
		return errors.Join(err, werr)
	}
	return comm.Barrier(ctx, b.Comm) // no rank leaves while another still reads
}

func runCompare(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := xpucmd.NewFlagSet("bench compare", stderr)
	fs.Usage = usageFunc(fs, stderr,
		"usage: xpu bench compare [--alpha A] [-v] old.json new.json",
		"Compares the points of two sweeps (xpu bench sweep -o FILE) sample by sample with the Mann-Whitney U test",
		"(golang.org/x/perf/benchmath): ~ means no significant difference at the level alpha.")
	alpha := fs.Float64("alpha", 0.05, "significance level")
	verbose := fs.Bool("v", false, "list every point, those in one document only too, one row each (without -v they are counted)")
	if err := parseWithArgs(fs, args); err != nil {
		return err
	}
	if fs.NArg() != 2 {
		return fmt.Errorf("%w: want two documents: xpu bench compare old.json new.json", xpucmd.ErrUsage)
	}
	if !(*alpha > 0 && *alpha < 1) {
		return fmt.Errorf("%w: --alpha %v: want a level between 0 and 1", xpucmd.ErrUsage, *alpha)
	}
	old, err := sweep.ReadFile(fs.Arg(0))
	if err != nil {
		return err
	}
	cur, err := sweep.ReadFile(fs.Arg(1))
	if err != nil {
		return err
	}
	return sweep.PrintCompare(stdout, sweep.Compare(old, cur, *alpha), *verbose)
}

func runPlot(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := xpucmd.NewFlagSet("bench plot", stderr)
	out := fs.String("o", "plots", "directory the charts are written to")
	if err := parseWithArgs(fs, args); err != nil {
		return err
	}
	if fs.NArg() != 1 {
		return fmt.Errorf("%w: want one document: xpu bench plot [-o DIR] run.json", xpucmd.ErrUsage)
	}
	doc, err := sweep.ReadFile(fs.Arg(0))
	if err != nil {
		return err
	}
	files, err := sweep.Plot(doc, *out)
	if err != nil {
		return err
	}
	for _, f := range files {
		fmt.Fprintln(stdout, f)
	}
	return nil
}

// usageFunc returns a Usage for fs that writes to w the usage line, a
// blank line, the lines of text, a blank line, then fs's flags.
func usageFunc(fs *flag.FlagSet, w io.Writer, usage string, text ...string) func() {
	return func() {
		fmt.Fprintln(w, usage)
		fmt.Fprintln(w)
		for _, l := range text {
			fmt.Fprintln(w, l)
		}
		fmt.Fprintln(w)
		fs.PrintDefaults()
	}
}

// parseWithArgs parses args with fs as xpucmd.ParseFlags does, but leaves
// the arguments after the flags in fs.Args() (the documents of compare
// and plot).
func parseWithArgs(fs *flag.FlagSet, args []string) error {
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return err
		}
		return fmt.Errorf("%w: %v", xpucmd.ErrUsage, err)
	}
	return nil
}
