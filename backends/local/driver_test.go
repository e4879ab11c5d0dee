package local_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/xpu-go/xpu"
	"github.com/xpu-go/xpu/backends/local"
	"github.com/xpu-go/xpu/comm"
)

func TestDriverRegistered(t *testing.T) {
	assert.Contains(t, xpu.Drivers(), local.Name)
	info, err := xpu.Describe(context.Background(), local.Name)
	require.NoError(t, err)
	assert.Equal(t, local.Name, info.Name)
	assert.True(t, info.Available)
	assert.Equal(t, []string{"comm"}, info.Concepts)
	for _, c := range []string{"p2p", "anysource", "cancel", "rendezvous"} {
		assert.Contains(t, info.Capabilities, c)
	}
	assert.NotNil(t, info.Devices)
}

func TestDriverOpen(t *testing.T) {
	ctx := context.Background()
	b, err := xpu.Open(ctx, local.Name, xpu.Options{local.OptEagerLimit: "16", local.OptEagerBudget: "1000", "device": "ignored"})
	require.NoError(t, err)
	assert.Equal(t, local.Name, b.Name)
	assert.Nil(t, b.Memory)
	assert.Nil(t, b.Comm)
	require.NotNil(t, b.Group)

	cs, err := b.Group(ctx, 3)
	require.NoError(t, err)
	require.Len(t, cs, 3)
	lc, ok := comm.As[*local.Comm](cs[0])
	require.True(t, ok)
	assert.Equal(t, 16, lc.EagerLimit(), "eager_limit option applied")
	assert.Equal(t, 1000, lc.EagerBudget(), "eager_budget option applied")
	// A group fully closed by its user is forgotten; one still open is
	// closed by the backend.
	done, err := b.Group(ctx, 2)
	require.NoError(t, err)
	for _, c := range done {
		require.NoError(t, c.Close())
	}
	r, err := cs[1].Irecv(blk(t, make([]byte, 1)), 0, 1)
	require.NoError(t, err)

	require.NoError(t, b.Close())
	_, err = wait(t, r)
	require.True(t, errorIsOneOf(err, comm.ErrClosed, comm.ErrPeerLost), "pending receive after backend Close: %v", err)
	_, err = cs[0].Isend(blk(t, []byte{1}), 1, 1)
	require.ErrorIs(t, err, comm.ErrClosed)
	_, err = b.Group(ctx, 2)
	require.ErrorIs(t, err, comm.ErrClosed)
}

func TestDriverBadOptions(t *testing.T) {
	ctx := context.Background()
	for _, bad := range []xpu.Options{
		{local.OptEagerLimit: "lots"}, {local.OptEagerBudget: "1.5"}, {local.OptEagerLimit: ""},
		{local.OptEagerBudget: "99999999999999999999"}, {local.OptEagerLimit: "16", local.OptEagerBudget: "1K"},
	} {
		_, err := xpu.Open(ctx, local.Name, bad)
		require.ErrorIs(t, err, xpu.ErrInvalidArgument, "%v", bad)
		// The error names the bad key and its value.
		var oe *xpu.OptionError
		require.ErrorAs(t, err, &oe, "%v", bad)
		require.Contains(t, bad, oe.Key)
		require.Equal(t, bad[oe.Key], oe.Value)
		require.NotEqual(t, "16", oe.Value, "the valid key is not the one named")
		require.Contains(t, err.Error(), oe.Key+"=")
	}
	var err error
	canceled, cancel := context.WithCancel(ctx)
	cancel()
	_, err = xpu.Open(canceled, local.Name, nil)
	require.ErrorIs(t, err, context.Canceled)
	b, err := xpu.Open(ctx, local.Name, xpu.Options{local.OptEagerLimit: " -1 "})
	require.NoError(t, err)
	defer b.Close()
	cs, err := b.Group(ctx, 1)
	require.NoError(t, err)
	lc, ok := comm.As[*local.Comm](cs[0])
	require.True(t, ok)
	assert.Equal(t, -1, lc.EagerLimit())
	_, err = b.Group(ctx, 0)
	require.ErrorIs(t, err, comm.ErrInvalidArgument)
}
