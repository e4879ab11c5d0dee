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
	assert.ElementsMatch(t, []string{"p2p", "blocking", "onesided", "onesided.notify", "anysource", "anytag", "cancel", "eager", "rendezvous", "group", "kill"},
		info.Capabilities, "blocking, onesided and onesided.notify are derived from comm.Blocking, comm.OneSided and comm.Notifier")
	assert.NotNil(t, info.Devices)
}

func TestDriverOpen(t *testing.T) {
	ctx := context.Background()
	b, err := xpu.Open(ctx, local.Name, xpu.Options{local.OptEagerLimit: "16", local.OptEagerBudget: "1000", "cpu.limit": "ignored"})
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
		{local.OptEagerBudget: "99999999999999999999"}, {local.OptEagerLimit: "16", local.OptEagerBudget: "1X"},
		{local.OptEagerLimit: "-1"}, {local.OptEagerLimit: " -1 "}, {local.OptEagerBudget: "-1"},
		{local.OptEagerBudget: "0"},
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
	b, err := xpu.Open(ctx, local.Name, xpu.Options{local.OptEagerLimit: " 0 "})
	require.NoError(t, err)
	defer b.Close()
	cs, err := b.Group(ctx, 1)
	require.NoError(t, err)
	lc, ok := comm.As[*local.Comm](cs[0])
	require.True(t, ok)
	assert.Equal(t, -1, lc.EagerLimit(), "eager_limit=0: no eager messages")
	_, err = b.Group(ctx, 0)
	require.ErrorIs(t, err, comm.ErrInvalidArgument)
}

// openEager opens the driver with opts and returns the eager limit and
// budget of a rank of a group of its backend.
func openEager(t *testing.T, opts xpu.Options) (limit, budget int) {
	t.Helper()
	ctx := context.Background()
	b, err := xpu.Open(ctx, local.Name, opts)
	require.NoError(t, err, "%v", opts)
	defer func() { require.NoError(t, b.Close()) }()
	cs, err := b.Group(ctx, 1)
	require.NoError(t, err)
	lc, ok := comm.As[*local.Comm](cs[0])
	require.True(t, ok)
	return lc.EagerLimit(), lc.EagerBudget()
}

// Sizes take units; keys scoped to local are read first, those scoped to
// another backend skipped, and a key the driver does not know refused.
func TestDriverOptions(t *testing.T) {
	limit, budget := openEager(t, nil)
	assert.Equal(t, []int{local.DefaultEagerLimit, local.DefaultEagerBudget}, []int{limit, budget}, "defaults")
	limit, budget = openEager(t, xpu.Options{local.OptEagerLimit: "1K", local.OptEagerBudget: "2 MiB"})
	assert.Equal(t, []int{1 << 10, 2 << 20}, []int{limit, budget}, "units")
	limit, budget = openEager(t, xpu.Options{local.OptEagerBudget: "1"})
	assert.Equal(t, []int{local.DefaultEagerLimit, 1}, []int{limit, budget}, "the smallest budget")

	limit, _ = openEager(t, xpu.Options{"tcp.eager_limit": "lots", local.OptEagerLimit: "32"})
	assert.Equal(t, 32, limit, "a key scoped to tcp is ignored")
	limit, _ = openEager(t, xpu.Options{"local.eager_limit": "64", local.OptEagerLimit: "32"})
	assert.Equal(t, 64, limit, "a key scoped to local is read, before the bare key")

	_, err := xpu.Open(context.Background(), local.Name, xpu.Options{"eager_limt": "64K"})
	require.ErrorIs(t, err, xpu.ErrUnknownOption)
	assert.ErrorIs(t, err, xpu.ErrInvalidArgument)
	assert.Contains(t, err.Error(), "eager_limt")
	assert.Contains(t, err.Error(), "eager_limit")
	var oe *xpu.OptionError
	require.ErrorAs(t, err, &oe)
	assert.Equal(t, "eager_limt", oe.Key)
	_, err = xpu.Open(context.Background(), local.Name, xpu.Options{"local.eager_limt": "64K"})
	require.ErrorIs(t, err, xpu.ErrUnknownOption, "a key scoped to local is checked")
	_, err = xpu.Open(context.Background(), local.Name, xpu.Options{"local.eager_budget": "0", local.OptEagerBudget: "1K"})
	require.ErrorIs(t, err, xpu.ErrInvalidArgument, "the value of a key scoped to local is checked")
}
