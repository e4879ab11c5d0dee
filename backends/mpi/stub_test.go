//go:build !mpi

package mpi_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/xpu-go/xpu"
	"github.com/xpu-go/xpu/backends/mpi"
	"github.com/xpu-go/xpu/comm"
	"github.com/xpu-go/xpu/internal/tooling/testwait"
	"github.com/xpu-go/xpu/memspace"
)

// TestBuiltWithoutMPI: without the mpi tag the driver is registered, says
// why it cannot run, and every entry point fails with ErrUnavailable.
func TestBuiltWithoutMPI(t *testing.T) {
	ctx := testwait.Ctx(t)
	info, err := xpu.Describe(ctx, mpi.Name)
	require.NoError(t, err)
	assert.False(t, info.Available)
	assert.Contains(t, info.Reason, "-tags mpi")
	assert.Equal(t, []string{"comm"}, info.Concepts)
	assert.Empty(t, info.Capabilities, "nothing can be opened")

	_, err = xpu.Open(ctx, mpi.Name, nil)
	require.ErrorIs(t, err, xpu.ErrUnavailable)
	assert.Equal(t, "mpi open: built without MPI support: rebuild with -tags mpi "+
		"(and libopenmpi-dev or libmpich-dev installed): backend unavailable", err.Error(), "one line, naming mpi once")
	_, err = xpu.Open(ctx, mpi.Name, xpu.Options{"tcp.timeout": "1s"})
	require.ErrorIs(t, err, xpu.ErrUnavailable, "keys of other backends are skipped")

	c, err := mpi.Open(ctx, mpi.Options{})
	require.ErrorIs(t, err, xpu.ErrUnavailable)
	require.Nil(t, c)
	_, up := mpi.Provided()
	assert.False(t, up)
	assert.Empty(t, mpi.LibraryVersion())

	var z mpi.Comm
	b := memspace.Block{}
	_, err = z.Isend(b, 0, 0)
	require.ErrorIs(t, err, xpu.ErrUnavailable)
	require.ErrorIs(t, z.Barrier(ctx), xpu.ErrUnavailable)
	require.ErrorIs(t, comm.Barrier(ctx, &z), comm.ErrInvalidArgument, "a zero Comm has no ranks")
	_, err = z.Split(ctx, 0, 0)
	require.ErrorIs(t, err, xpu.ErrUnavailable)
	require.NoError(t, z.Close())
}
