//go:build mpi

package main

import (
	"bytes"
	"context"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/xpu-go/xpu/internal/tooling/bench/sweep"
)

// TestSweepOpenMPIReference builds the Open MPI reference as make
// refs-mpi does and sweeps the procs backend's two kinds of link beside it:
// every point of ours has the reference's beside it, measured in the same
// run, and the tables show their ratio. It needs Open MPI (mpicc and
// mpirun), which is why it builds with the mpi tag: make test runs it
// after scripts/setup-mpi.sh has installed them.
func TestSweepOpenMPIReference(t *testing.T) {
	dir := t.TempDir()
	out, err := exec.Command("mpicc", "-O3", "-o", filepath.Join(dir, refProgram), "../../internal/tooling/bench/ref/sweep_mpi_ref.c").CombinedOutput()
	require.NoError(t, err, "mpicc: %s", out)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	sf := quickSweep(`^(tcp|shm)/(latency|bw|allreduce|alltoall)$`)
	sf.refDir = dir
	var log bytes.Buffer
	doc, err := sweepAll(ctx, sf, rankProg(t), &log)
	require.NoError(t, err, log.String())
	require.Empty(t, doc.Errors, log.String())
	got := map[sweep.Key]sweep.Point{}
	for _, p := range doc.Points {
		require.Empty(t, p.Invalid, "%s", p.Key())
		got[p.Key()] = p
	}
	for _, pair := range [][2]string{{"tcp", "openmpi.tcp"}, {"shm", "openmpi.vader"}} {
		for _, op := range []string{"latency", "bw", "allreduce", "alltoall"} {
			for _, size := range sf.sizes {
				for _, series := range pair {
					require.Contains(t, got, sweep.Key{Series: series, Op: op, Ranks: 2, Size: size})
				}
			}
		}
	}
	require.Equal(t, "Open MPI", doc.Machine.References[0].Name)
	require.True(t, doc.Machine.References[0].Available)
	require.Contains(t, doc.Machine.References[0].Version, "Open MPI")
	var tables bytes.Buffer
	require.NoError(t, sweep.PrintTables(&tables, doc))
	require.Contains(t, tables.String(), "## allreduce · 2 ranks · shm against openmpi.vader")
	require.Contains(t, tables.String(), "RATIO")
}
