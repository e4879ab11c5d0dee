package mpi_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/xpu-go/xpu"
	"github.com/xpu-go/xpu/backends/mpi"
)

func TestLaunched(t *testing.T) {
	for _, k := range []string{"OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE", "PMI_RANK", "PMI_SIZE",
		"PMIX_RANK", "PMIX_SIZE", "SLURM_PROCID", "SLURM_NTASKS"} {
		t.Setenv(k, "")
	}
	_, _, _, ok := mpi.Launched()
	assert.False(t, ok, "no launcher variables")

	t.Setenv("PMI_RANK", "2")
	t.Setenv("PMI_SIZE", "4")
	r, s, k, ok := mpi.Launched()
	require.True(t, ok)
	assert.Equal(t, []any{2, 4, "hydra"}, []any{r, s, k})

	t.Setenv("OMPI_COMM_WORLD_RANK", "1")
	t.Setenv("OMPI_COMM_WORLD_SIZE", "3")
	r, s, k, ok = mpi.Launched()
	require.True(t, ok)
	assert.Equal(t, []any{1, 3, "open-mpi"}, []any{r, s, k}, "Open MPI's variables come first")

	t.Setenv("OMPI_COMM_WORLD_RANK", "5") // out of range: ignored
	r, _, k, _ = mpi.Launched()
	assert.Equal(t, []any{2, "hydra"}, []any{r, k})
}

func TestThreadLevelString(t *testing.T) {
	assert.Equal(t, "multiple", mpi.ThreadMultiple.String())
	assert.Equal(t, "serialized", mpi.ThreadSerialized.String())
	assert.Equal(t, "funneled", mpi.ThreadFunneled.String())
	assert.Equal(t, "single", mpi.ThreadSingle.String())
	assert.Equal(t, "ThreadLevel(9)", mpi.ThreadLevel(9).String())
}

// TestDriverRegistered: the driver is there in every build, and refuses a
// bad option before anything else.
func TestDriverRegistered(t *testing.T) {
	assert.Contains(t, xpu.Drivers(), mpi.Name)
	_, err := xpu.Open(context.Background(), mpi.Name, xpu.Options{mpi.OptThreadLevel: "funneled"})
	require.ErrorIs(t, err, xpu.ErrInvalidArgument)
	_, err = mpi.Open(context.Background(), mpi.Options{ThreadLevel: mpi.ThreadFunneled})
	require.Error(t, err)
}
