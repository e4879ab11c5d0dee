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
		"PMIX_RANK", "PMIX_SIZE", "SLURM_PROCID", "SLURM_NTASKS", "XPU_RANK", "XPU_WORLD_SIZE"} {
		t.Setenv(k, "")
	}
	_, _, _, ok := mpi.Launched()
	assert.False(t, ok, "no launcher variables")

	t.Setenv("XPU_RANK", "1")
	t.Setenv("XPU_WORLD_SIZE", "2")
	_, _, _, ok = mpi.Launched()
	assert.False(t, ok, "xpu run's variables: each rank it starts is a singleton to MPI")

	t.Setenv("PMI_RANK", "2")
	t.Setenv("PMI_SIZE", "4")
	r, s, k, ok := mpi.Launched()
	require.True(t, ok)
	assert.Equal(t, []any{2, 4, "pmi"}, []any{r, s, k})

	t.Setenv("PMIX_RANK", "3")
	t.Setenv("PMIX_SIZE", "4")
	r, s, k, ok = mpi.Launched()
	require.True(t, ok)
	assert.Equal(t, []any{3, 4, "pmix"}, []any{r, s, k}, "PMIx's variables come before PMI's")

	t.Setenv("OMPI_COMM_WORLD_RANK", "1")
	t.Setenv("OMPI_COMM_WORLD_SIZE", "3")
	r, s, k, ok = mpi.Launched()
	require.True(t, ok)
	assert.Equal(t, []any{1, 3, "open-mpi"}, []any{r, s, k}, "Open MPI's variables come first")

	t.Setenv("OMPI_COMM_WORLD_RANK", "5") // out of range: a malformed launch is no launch
	r, s, k, ok = mpi.Launched()
	assert.False(t, ok)
	assert.Equal(t, []any{0, 0, ""}, []any{r, s, k})
}

func TestThreadLevelString(t *testing.T) {
	assert.Equal(t, "multiple", mpi.ThreadMultiple.String())
	assert.Equal(t, "serialized", mpi.ThreadSerialized.String())
	assert.Equal(t, "funneled", mpi.ThreadFunneled.String())
	assert.Equal(t, "single", mpi.ThreadSingle.String())
	assert.Equal(t, "ThreadLevel(9)", mpi.ThreadLevel(9).String())
}

// TestDriverRegistered: the driver is there in every build, and refuses a
// bad option, or one it does not know, before anything else, with an error
// that names the backend once.
func TestDriverRegistered(t *testing.T) {
	ctx := context.Background()
	assert.Contains(t, xpu.Drivers(), mpi.Name)
	_, err := xpu.Open(ctx, mpi.Name, xpu.Options{mpi.OptThreadLevel: "funneled"})
	require.ErrorIs(t, err, xpu.ErrInvalidArgument)
	assert.Equal(t, `mpi open: option thread_level="funneled": want one of multiple, serialized`, err.Error())
	_, err = xpu.Open(ctx, mpi.Name, xpu.Options{"mpi." + mpi.OptThreadLevel: "bogus"})
	require.ErrorIs(t, err, xpu.ErrInvalidArgument, "a key scoped to mpi is read")
	_, err = xpu.Open(ctx, mpi.Name, xpu.Options{"thread_levle": "multiple"})
	require.ErrorIs(t, err, xpu.ErrUnknownOption)
	assert.Equal(t, `mpi open: unknown option thread_levle="multiple": mpi takes thread_level (did you mean thread_level?)`, err.Error())
	_, err = xpu.Open(ctx, mpi.Name, xpu.Options{"mpi.workers": "4"})
	require.ErrorIs(t, err, xpu.ErrUnknownOption)

	_, err = mpi.Open(ctx, mpi.Options{ThreadLevel: mpi.ThreadFunneled})
	require.Error(t, err)
}
