package procs_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/xpu-go/xpu"
	"github.com/xpu-go/xpu/backends/procs"
	"github.com/xpu-go/xpu/comm"
)

// TestDriverOptions checks that the options reach the groups Open makes,
// and that a key scoped to another backend is left to it.
func TestDriverOptions(t *testing.T) {
	t.Setenv(procs.EnvRank, "")
	t.Setenv(procs.EnvWorldSize, "")
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	b, err := xpu.Open(ctx, procs.Name, xpu.Options{
		procs.OptTimeout: " 1500ms ", procs.OptEagerLimit: "16", procs.OptEagerBudget: "4K", "cpu.device": "ignored",
	})
	require.NoError(t, err)
	defer b.Close()
	g, err := b.Group(ctx, 2)
	require.NoError(t, err)
	c, ok := comm.As[*procs.Comm](g[0])
	require.True(t, ok)
	require.Equal(t, 1500*time.Millisecond, c.Timeout())
	require.Equal(t, procs.TransportShm, c.Transport(1))

	b2, err := xpu.Open(ctx, procs.Name, xpu.Options{procs.OptLinks: "tcp", procs.OptShmRing: "64K"})
	require.NoError(t, err)
	defer b2.Close()
	g, err = b2.Group(ctx, 2)
	require.NoError(t, err)
	c, _ = comm.As[*procs.Comm](g[0])
	require.Equal(t, procs.TransportTCP, c.Transport(1))
}

// TestDriverBadOptions checks that Open rejects each bad value with an
// error that names the key and the value.
func TestDriverBadOptions(t *testing.T) {
	t.Setenv(procs.EnvRank, "")
	t.Setenv(procs.EnvWorldSize, "")
	for _, tc := range []struct {
		opts xpu.Options
		key  string
	}{
		{xpu.Options{procs.OptTimeout: "soon"}, procs.OptTimeout},
		{xpu.Options{procs.OptTimeout: "3"}, procs.OptTimeout},
		{xpu.Options{procs.OptTimeout: "0s"}, procs.OptTimeout},
		{xpu.Options{procs.OptTimeout: "-1s"}, procs.OptTimeout},
		{xpu.Options{procs.OptTimeout: ""}, procs.OptTimeout},
		{xpu.Options{procs.OptEagerLimit: "lots"}, procs.OptEagerLimit},
		{xpu.Options{procs.OptEagerLimit: "-1"}, procs.OptEagerLimit},
		{xpu.Options{procs.OptEagerLimit: "2G"}, procs.OptEagerLimit},
		{xpu.Options{procs.OptEagerBudget: "0"}, procs.OptEagerBudget},
		{xpu.Options{"eager_limt": "1K"}, "eager_limt"},
		{xpu.Options{"device": "0"}, "device"},
		{xpu.Options{procs.OptTimeout: "2s", procs.OptEagerBudget: "1.5"}, procs.OptEagerBudget},
		{xpu.Options{procs.OptEagerBudget: "-1"}, procs.OptEagerBudget},
		{xpu.Options{procs.OptEagerBudget: "2000000000000"}, procs.OptEagerBudget},
		{xpu.Options{procs.OptEagerLimit: "2000000000"}, procs.OptEagerLimit},
		{xpu.Options{procs.OptLinks: "rdma"}, procs.OptLinks},
		{xpu.Options{procs.OptShmRing: "3000"}, procs.OptShmRing},
		{xpu.Options{procs.OptShmRing: "1K"}, procs.OptShmRing},
	} {
		_, err := xpu.Open(context.Background(), procs.Name, tc.opts)
		require.ErrorIs(t, err, xpu.ErrInvalidArgument, "%v", tc.opts)
		var oe *xpu.OptionError
		require.ErrorAs(t, err, &oe, "%v", tc.opts)
		require.Equal(t, tc.key, oe.Key, "%v", tc.opts)
		require.Equal(t, tc.opts[tc.key], oe.Value, "%v", tc.opts)
		require.Contains(t, err.Error(), fmt.Sprintf("%s=%q", tc.key, tc.opts[tc.key]))
		require.NotContains(t, err.Error(), "\n")
	}
	_, err := xpu.Open(context.Background(), procs.Name, xpu.Options{"eager_limt": "1K"})
	require.ErrorIs(t, err, xpu.ErrUnknownOption)
	require.ErrorContains(t, err, "did you mean eager_limit?")
}
