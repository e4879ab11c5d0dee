package tcp_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/xpu-go/xpu"
	"github.com/xpu-go/xpu/backends/tcp"
	"github.com/xpu-go/xpu/comm"
)

// TestDriverOptions checks that the options reach the groups Open makes,
// and that a key scoped to another backend is left to it.
func TestDriverOptions(t *testing.T) {
	t.Setenv(tcp.EnvRank, "")
	t.Setenv(tcp.EnvWorldSize, "")
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	b, err := xpu.Open(ctx, tcp.Name, xpu.Options{
		tcp.OptTimeout: " 1500ms ", tcp.OptEagerLimit: "16", tcp.OptEagerBudget: "4K", "cpu.device": "ignored",
	})
	require.NoError(t, err)
	defer b.Close()
	g, err := b.Group(ctx, 2)
	require.NoError(t, err)
	c, ok := comm.As[*tcp.Comm](g[0])
	require.True(t, ok)
	require.Equal(t, 1500*time.Millisecond, c.Timeout())
	require.Equal(t, tcp.TransportShm, c.Transport(1))

	b2, err := xpu.Open(ctx, tcp.Name, xpu.Options{tcp.OptLinks: "tcp", tcp.OptShmRing: "64K"})
	require.NoError(t, err)
	defer b2.Close()
	g, err = b2.Group(ctx, 2)
	require.NoError(t, err)
	c, _ = comm.As[*tcp.Comm](g[0])
	require.Equal(t, tcp.TransportTCP, c.Transport(1))
}

// TestDriverBadOptions checks that Open rejects each bad value with an
// error that names the key and the value.
func TestDriverBadOptions(t *testing.T) {
	t.Setenv(tcp.EnvRank, "")
	t.Setenv(tcp.EnvWorldSize, "")
	for _, tc := range []struct {
		opts xpu.Options
		key  string
	}{
		{xpu.Options{tcp.OptTimeout: "soon"}, tcp.OptTimeout},
		{xpu.Options{tcp.OptTimeout: "3"}, tcp.OptTimeout},
		{xpu.Options{tcp.OptTimeout: "0s"}, tcp.OptTimeout},
		{xpu.Options{tcp.OptTimeout: "-1s"}, tcp.OptTimeout},
		{xpu.Options{tcp.OptTimeout: ""}, tcp.OptTimeout},
		{xpu.Options{tcp.OptEagerLimit: "lots"}, tcp.OptEagerLimit},
		{xpu.Options{tcp.OptEagerLimit: "-1"}, tcp.OptEagerLimit},
		{xpu.Options{tcp.OptEagerLimit: "2G"}, tcp.OptEagerLimit},
		{xpu.Options{tcp.OptEagerBudget: "0"}, tcp.OptEagerBudget},
		{xpu.Options{"eager_limt": "1K"}, "eager_limt"},
		{xpu.Options{"device": "0"}, "device"},
		{xpu.Options{tcp.OptTimeout: "2s", tcp.OptEagerBudget: "1.5"}, tcp.OptEagerBudget},
		{xpu.Options{tcp.OptEagerBudget: "-1"}, tcp.OptEagerBudget},
		{xpu.Options{tcp.OptEagerBudget: "2000000000000"}, tcp.OptEagerBudget},
		{xpu.Options{tcp.OptEagerLimit: "2000000000"}, tcp.OptEagerLimit},
		{xpu.Options{tcp.OptLinks: "rdma"}, tcp.OptLinks},
		{xpu.Options{tcp.OptShmRing: "3000"}, tcp.OptShmRing},
		{xpu.Options{tcp.OptShmRing: "1K"}, tcp.OptShmRing},
	} {
		_, err := xpu.Open(context.Background(), tcp.Name, tc.opts)
		require.ErrorIs(t, err, xpu.ErrInvalidArgument, "%v", tc.opts)
		var oe *xpu.OptionError
		require.ErrorAs(t, err, &oe, "%v", tc.opts)
		require.Equal(t, tc.key, oe.Key, "%v", tc.opts)
		require.Equal(t, tc.opts[tc.key], oe.Value, "%v", tc.opts)
		require.Contains(t, err.Error(), fmt.Sprintf("%s=%q", tc.key, tc.opts[tc.key]))
		require.NotContains(t, err.Error(), "\n")
	}
	_, err := xpu.Open(context.Background(), tcp.Name, xpu.Options{"eager_limt": "1K"})
	require.ErrorIs(t, err, xpu.ErrUnknownOption)
	require.ErrorContains(t, err, "did you mean eager_limit?")
}
