package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/xpu-go/xpu/backends/cpu"
	"github.com/xpu-go/xpu/internal/tooling/bench/sweep"
	"github.com/xpu-go/xpu/internal/tooling/jointest"
	"github.com/xpu-go/xpu/memspace"
	"github.com/xpu-go/xpu/xpucmd"
)

// TestMain runs the test binary as a rank of a sweep's job when a test
// starts it so (rankArgs), and the tests otherwise.
func TestMain(m *testing.M) {
	if len(os.Args) > 2 && os.Args[1] == "bench" && os.Args[2] == "sweep-rank" {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
		code := xpucmd.Run(ctx, os.Args[1:], os.Stdout, os.Stderr, benchCommand)
		cancel()
		os.Exit(code)
	}
	goleak.VerifyTestMain(m)
}

// rankProg starts this test binary as a sweep's rank.
func rankProg(t *testing.T) []string {
	t.Helper()
	exe, err := os.Executable()
	require.NoError(t, err)
	return []string{exe, "bench", "sweep-rank"}
}

// quickSweep is a sweep of tiny sizes and short samples.
func quickSweep(filter string) sweepFlags {
	return sweepFlags{filter: regexp.MustCompile(filter), sizes: []int64{8, 1024}, ranks: []int{2},
		count: 1, rounds: 2, sampleTime: time.Millisecond}
}

// TestSweepEveryKindOfSeries sweeps a communicator in this process
// (local), both kinds of link of the procs backend with one process per
// rank, and the host transfer path beside memmove; checks every point is
// there and valid, and that the document survives JSON, the tables, the
// benchstat format and the plots.
func TestSweepEveryKindOfSeries(t *testing.T) {
	if testing.Short() {
		t.Skip("starts jobs of processes: not in -short mode")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	var log bytes.Buffer
	sf := quickSweep(`^(local|tcp|shm)/(latency|bw|barrier|allreduce|alltoall)$|/copy$`)
	doc, err := sweepAll(ctx, sf, rankProg(t), &log)
	require.NoError(t, err, log.String())
	require.Empty(t, doc.Stopped)

	got := map[sweep.Key]sweep.Point{}
	for _, p := range doc.Points {
		require.Empty(t, p.Invalid, "%s", p.Key())
		require.Len(t, p.Samples, 2, "%s: a sample from each round", p.Key())
		got[p.Key()] = p
	}
	for _, series := range []string{"local", "tcp", "shm"} {
		for _, op := range []string{"latency", "bw", "allreduce", "alltoall"} {
			for _, size := range sf.sizes {
				require.Contains(t, got, sweep.Key{Series: series, Op: op, Ranks: 2, Size: size})
			}
		}
		require.Contains(t, got, sweep.Key{Series: series, Op: "barrier", Ranks: 2})
	}
	for _, series := range []string{"cpu.host-host", "memmove"} {
		require.Contains(t, got, sweep.Key{Series: series, Op: "copy", Ranks: 1, Size: 1024})
	}
	require.Len(t, doc.Points, 3*(4*2+1)+2*2, "nothing else measured")
	require.Contains(t, strings.Join(doc.Errors, "\n"), "Open MPI references not run", "no --ref: said so")

	// JSON round trip.
	path := filepath.Join(t.TempDir(), "run.json")
	require.NoError(t, doc.WriteFile(path))
	back, err := sweep.ReadFile(path)
	require.NoError(t, err)
	require.Equal(t, len(doc.Points), len(back.Points))

	var out bytes.Buffer
	require.NoError(t, sweep.PrintTables(&out, back))
	require.Contains(t, out.String(), "## allreduce · 2 ranks · shm")
	require.Contains(t, out.String(), "## copy · cpu.host-host against memmove")

	// The commands that read a document.
	var stdout, stderr bytes.Buffer
	plots := filepath.Join(t.TempDir(), "plots")
	require.NoError(t, runPlot(ctx, []string{"-o", plots, path}, &stdout, &stderr))
	require.Contains(t, stdout.String(), filepath.Join(plots, "allreduce.np2.png"))
	stdout.Reset()
	require.NoError(t, runCompare(ctx, []string{path, path}, &stdout, &stderr))
	require.Contains(t, stdout.String(), "~", "a run compared with itself changes nothing")
}

// TestSweepBudget stops a sweep at its budget and keeps what it measured.
func TestSweepBudget(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	sf := quickSweep(`^local/`)
	sf.sizes, _ = sweep.Sizes(8, 1<<20)
	sf.sampleTime = 5 * time.Millisecond
	sf.budget = 300 * time.Millisecond
	start := time.Now()
	var log bytes.Buffer
	doc, err := sweepAll(ctx, sf, rankProg(t), &log)
	require.NoError(t, err)
	require.Equal(t, sweep.StopBudget, doc.Stopped)
	require.NotEmpty(t, doc.Points, "the points before the budget ran out are kept")
	require.Less(t, len(doc.Points), 8*21, "not everything was measured")
	require.Less(t, time.Since(start), 10*time.Second, "the sweep stopped soon after its budget")
}

// TestSweepInterrupted cancels a sweep of processes midway, as Ctrl-C
// does: the points measured before are kept and the error says so.
func TestSweepInterrupted(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a job of processes: not in -short mode")
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	sf := quickSweep(`^tcp/`)
	sf.sizes, _ = sweep.Sizes(8, 1<<20)
	sf.sampleTime = 10 * time.Millisecond
	var log syncBuffer
	go func() {
		// Cancel once a few points are in.
		for !strings.Contains(log.String(), "tcp np2") {
			time.Sleep(10 * time.Millisecond)
		}
		time.Sleep(1500 * time.Millisecond)
		cancel()
	}()
	doc, err := sweepAll(ctx, sf, rankProg(t), &log)
	require.ErrorIs(t, err, context.Canceled)
	require.Equal(t, sweep.StopInterrupted, doc.Stopped)
	require.NotEmpty(t, doc.Points, "points measured before the interruption are kept")
	var out bytes.Buffer
	require.NoError(t, sweep.PrintTables(&out, doc))
	require.Contains(t, out.String(), "stopped early (interrupted)")
}

func TestSweepUsage(t *testing.T) {
	ctx := context.Background()
	for _, args := range [][]string{
		{"--min-size", "1x"},
		{"--max-size", "4GiB"},
		{"--min-size", "9", "--max-size", "15"},
		{"--sizes", ",,"},
		{"--sizes", "8,x"},
		{"-n", "0"},
		{"-n", "2,x"},
		{"--count", "0"},
		{"--rounds", "0"},
		{"--sample-time", "0s"},
		{"--budget", "-1s"},
		{"--json", "--benchfmt"},
		{"--filter", "("},
		{"--filter", "^nothing-matches$"},
		{"extra"},
	} {
		var stdout, stderr bytes.Buffer
		err := runSweep(ctx, args, &stdout, &stderr)
		require.ErrorIs(t, err, xpucmd.ErrUsage, "%v", args)
		require.NotContains(t, err.Error(), "\n", "one line: %v", args)
	}
	for _, args := range [][]string{{}, {"a.json"}, {"--alpha", "2", "a", "b"}} {
		var stdout, stderr bytes.Buffer
		require.ErrorIs(t, runCompare(ctx, args, &stdout, &stderr), xpucmd.ErrUsage, "%v", args)
	}
	var stdout, stderr bytes.Buffer
	err := runCompare(ctx, []string{"/nonexistent/a.json", "/nonexistent/b.json"}, &stdout, &stderr)
	require.ErrorIs(t, err, os.ErrNotExist)
	bad := filepath.Join(t.TempDir(), "bad.json")
	require.NoError(t, os.WriteFile(bad, []byte(`{"schema":"other"}`), 0o600))
	require.ErrorIs(t, runPlot(ctx, []string{bad}, &stdout, &stderr), sweep.ErrFormat)
	require.ErrorIs(t, runSweepRank(ctx, []string{"--out", "x"}, &stdout, &stderr), xpucmd.ErrUsage)
}

// syncBuffer is a buffer safe for the sweep's writes and a test's reads
// at once.
type syncBuffer = jointest.Log

// kindSpace is a host space that says it is of another kind, as a
// device's spaces do.
type kindSpace struct {
	memspace.Space
	kind string
}

func (k kindSpace) Properties() memspace.Properties {
	p := k.Space.Properties()
	p.Kind = k.kind
	return p
}

// TestCopyPairs lists a backend's transfer paths: to and from the host,
// and among its own spaces (pinned to device, device to device), each
// copying what it should.
func TestCopyPairs(t *testing.T) {
	h := cpu.NewSpace(cpu.SpaceOptions{})
	defer h.Close()
	dev, pin := kindSpace{h, "fake-device"}, kindSpace{h, "fake-pinned"}
	jobs := copyPairs("fake", h, []memspace.Space{dev, h, pin})
	var names []string
	for _, j := range jobs {
		names = append(names, j.series.Name)
	}
	require.ElementsMatch(t, []string{
		"fake.host-fake-device", "fake.host-fake-pinned",
		"fake.fake-device-host", "fake.fake-device-fake-device", "fake.fake-device-fake-pinned",
		"fake.fake-pinned-host", "fake.fake-pinned-fake-device", "fake.fake-pinned-fake-pinned",
	}, names)
	plan := sweep.Plan{Sizes: []int64{64}, Count: 1, SampleTime: time.Millisecond}
	for _, j := range jobs {
		var points []sweep.Point
		end, err := sweep.RunCopy(context.Background(), j.cp.dst, j.cp.src, j.cp.copier, plan, func(p sweep.Point) { points = append(points, p) })
		require.NoError(t, err, j.series.Name)
		require.Equal(t, sweep.EndComplete, end)
		require.Len(t, points, 1)
		require.Empty(t, points[0].Invalid, j.series.Name)
	}
}
