package main

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/xpu-go/xpu/internal/tooling/bench/sweep"
)

// TestPointsPlanned: the progress counts the Open MPI references' points
// only when they run, so that a sweep without them does not end at half
// its count.
func TestPointsPlanned(t *testing.T) {
	plan := sweep.Plan{Ops: []string{"latency"}, Sizes: []int64{8, 16, 32}}
	jobs := []sweepJob{
		{how: inJob, ranks: 2, plan: plan},
		{how: openMPI, ranks: 2, plan: plan},
		{how: inCopy, ranks: 1, plan: sweep.Plan{Ops: []string{"copy"}, Sizes: []int64{8, 16}}},
	}
	require.Equal(t, 2*(3+3+2), pointsPlanned(jobs, 2, true))
	require.Equal(t, 2*(3+2), pointsPlanned(jobs, 2, false))
}
