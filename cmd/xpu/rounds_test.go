package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/xpu-go/xpu/xpucmd"
)

// TestRounds reads rounds of figures and reports each comparison's median
// and worst ratio: a goal met in the median but not in one round is not
// met, and says in how many rounds it was not; a goal with a bound of its
// own for the worst round is met when the median meets the goal and the
// worst round the bound, and only then; a comparison missing from a round counts the rounds that
// have it.
func TestRounds(t *testing.T) {
	dir := t.TempDir()
	rounds := []string{
		"shm.np2.pingpong.8B 300 ns/op\nvader.np2.pingpong.8B 330 ns/op\nshm.np2.put.bw.1MiB 12 GB/s\nvader.np2.put.bw.1MiB 10 GB/s\n" +
			"shm.np2.allreduce.8B 90 ns/op\nvader.np2.allreduce.8B 100 ns/op\nshm.np4.allreduce.8B 105 ns/op\nvader.np4.allreduce.8B 100 ns/op\n",
		"shm.np2.pingpong.8B 310 ns/op\nvader.np2.pingpong.8B 320 ns/op\nshm.np2.put.bw.1MiB 11 GB/s\nvader.np2.put.bw.1MiB 10 GB/s\n" +
			"shm.np2.allreduce.8B 95 ns/op\nvader.np2.allreduce.8B 100 ns/op\nshm.np4.allreduce.8B 105 ns/op\nvader.np4.allreduce.8B 100 ns/op\n",
		"shm.np2.pingpong.8B 400 ns/op\nvader.np2.pingpong.8B 320 ns/op\n" +
			"shm.np2.allreduce.8B 115 ns/op\nvader.np2.allreduce.8B 100 ns/op\nshm.np4.allreduce.8B 90 ns/op\nvader.np4.allreduce.8B 100 ns/op\n",
	}
	for i, r := range rounds {
		d := filepath.Join(dir, string(rune('1'+i)))
		require.NoError(t, os.MkdirAll(d, 0o755))
		require.NoError(t, os.WriteFile(filepath.Join(d, "figures.out"), []byte(r), 0o644))
	}
	var out, errs bytes.Buffer
	require.NoError(t, runRounds(context.Background(), []string{dir}, &out, &errs), errs.String())
	lines := map[string]string{}
	for _, l := range strings.Split(out.String(), "\n") {
		if f := strings.Fields(l); len(f) > 3 {
			lines[f[0]+" "+f[3]] = l
		}
	}
	pp := lines["shm.np2.pingpong.8B vader.np2.pingpong.8B"]
	require.Contains(t, pp, " 0.97 ", "the median of 0.91, 0.97 and 1.25")
	require.Contains(t, pp, " 1.25 ", "the worst round of a time is the highest ratio")
	require.Contains(t, pp, "NOT MET in 1 of 3 rounds", "only the third round's 1.25 misses the worst round's bound")
	require.Contains(t, pp, "worst ≤1.20", "the bound of the worst round is shown beside the median's")
	ar := lines["shm.np2.allreduce.8B vader.np2.allreduce.8B"]
	require.Contains(t, ar, " 1.15 ")
	require.Contains(t, ar, "met in every round", "a median of 0.95 and a worst round of 1.15 meet ≤1.00, worst ≤1.20")
	ar4 := lines["shm.np4.allreduce.8B vader.np4.allreduce.8B"]
	require.Contains(t, ar4, " 1.05 ")
	require.True(t, strings.HasSuffix(strings.TrimSpace(ar4), "NOT MET"), "a median of 1.05 does not meet ≤1.00 however good the worst round: %s", ar4)
	bw := lines["shm.np2.put.bw.1MiB vader.np2.put.bw.1MiB"]
	require.Contains(t, bw, " 1.10 ", "the worst round of a rate is the lowest ratio")
	require.Contains(t, bw, "met in every round")
	require.Contains(t, bw, " 2 ", "two rounds have the figure")

	err := runRounds(context.Background(), []string{t.TempDir()}, &out, &errs)
	require.ErrorIs(t, err, xpucmd.ErrUsage, "no round")
	err = runRounds(context.Background(), nil, &out, &errs)
	require.ErrorIs(t, err, xpucmd.ErrUsage, "no directory")
}
