package main

import (
	"bytes"
	"regexp"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/xpu-go/xpu/internal/tooling/bench"
)

// TestProcRows compares figures of one-process-per-rank programs: each
// pair whose two figures are present becomes a comparison, with the
// verdict its unit calls for; a pair with a figure missing is left out.
func TestProcRows(t *testing.T) {
	refs := bench.ParseRef(`tcp.np2.pingpong.8B 20000 ns/op
rawtcp.np2.pingpong.8B 16000 ns/op
mpi.np2.pingpong.8B 10000 ns/op
tcp.np2.bw.4MiB 3.6 GB/s
mpi.np2.bw.4MiB 3.0 GB/s
tcp.np4.allreduce.8B 5000 ns/op
`)
	rows := procRows(refs, nil)
	require.Len(t, rows, 2, "np4.allreduce.8B has no Open MPI figure")
	pp, bw := rows[0], rows[1]
	require.Equal(t, "tcp.np2.pingpong.8B", pp.Name)
	require.Len(t, pp.Against, 2)
	require.InDelta(t, 1.25, pp.Against[0].Ratio, 1e-9)
	require.False(t, *pp.Against[0].Met, "1.25x raw misses the goal of 1.1x")
	require.Nil(t, pp.Against[1].Met, "against Open MPI the ping-pong has no goal")
	require.Equal(t, "tcp.np2.bw.4MiB", bw.Name)
	require.True(t, *bw.Against[0].Met, "3.6 GB/s against 3.0 reaches a rate goal of 1.0")

	require.Len(t, procRows(refs, regexp.MustCompile(`bw`)), 1)

	var out bytes.Buffer
	printTable(&out, rows)
	require.Contains(t, out.String(), "NOT MET")
	require.Contains(t, out.String(), "rawtcp.np2.pingpong.8B")
}

// TestComparePaired checks the baseline comparison of alternated runs: the
// ratio is the median of the pairs' ratios, not the ratio of the medians,
// and the goal is judged on it in the direction of the unit.
func TestComparePaired(t *testing.T) {
	ours := []float64{110, 300, 121}   // the second run drew a slow moment
	theirs := []float64{100, 250, 100} // and so did its baseline run
	a := comparePaired(bench.Case{Unit: bench.NsPerOp}, "baseline x", ours, theirs, 1.1)
	require.InDelta(t, 1.2, a.Ratio, 1e-9, "pairs 1.1, 1.2, 1.21")
	require.InDelta(t, 100, a.Value, 1e-9)
	require.False(t, *a.Met, "a time at 1.2x misses a goal of 1.1x")

	rate := comparePaired(bench.Case{Unit: bench.GBPerSec}, "baseline y", []float64{3, 4, 5}, []float64{3, 4, 4}, 1.0)
	require.InDelta(t, 1.0, rate.Ratio, 1e-9)
	require.True(t, *rate.Met, "a rate at 1.0x reaches a goal of at least 1.0x")

	require.Nil(t, comparePaired(bench.Case{Unit: bench.NsPerOp}, "z", ours, theirs, 0).Met, "no goal, no verdict")
}
