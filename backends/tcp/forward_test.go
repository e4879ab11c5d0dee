package tcp_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/xpu-go/xpu"
	"github.com/xpu-go/xpu/backends/procs"
	"github.com/xpu-go/xpu/backends/tcp"
	"github.com/xpu-go/xpu/internal/tooling/testwait"
	"github.com/xpu-go/xpu/memspace"
)

// The former name keeps working: the package's names forward to procs and
// the registered name "tcp" opens procs, reading options scoped "tcp.".
func TestFormerNameForwards(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	b, err := xpu.Open(ctx, tcp.Name, xpu.Options{"tcp.links": "tcp"})
	require.NoError(t, err)
	defer b.Close()
	assert.Equal(t, procs.Name, b.Name)

	_, err = xpu.Open(ctx, tcp.Name, xpu.Options{"tcp.linkz": "tcp"})
	assert.ErrorIs(t, err, xpu.ErrUnknownOption, "a typo scoped to the old name is still caught")

	info, err := xpu.Describe(ctx, tcp.Name)
	require.NoError(t, err)
	assert.Equal(t, []string{tcp.Name}, info.Aliases)

	g, err := b.Group(ctx, 2)
	require.NoError(t, err)
	ranks := make([]*tcp.Comm, len(g))
	for i, c := range g {
		var ok bool
		ranks[i], ok = c.(*tcp.Comm)
		require.True(t, ok, "a group's ranks are *tcp.Comm, which is *procs.Comm")
		defer c.Close()
	}
	assert.Equal(t, tcp.TransportTCP, ranks[0].Transport(1), "the scoped option reached the group")
	got := make([]byte, 8)
	errc := make(chan error, 1)
	go func() { errc <- ranks[1].Send(ctx, block(t, []byte("forwards")), 0, 1) }()
	_, err = ranks[0].Recv(ctx, block(t, got), 1, 1)
	require.NoError(t, err)
	require.NoError(t, testwait.Recv(t, errc, "rank 1's Send"))
	assert.Equal(t, "forwards", string(got))

	m, err := tcp.ParseLinkMode("shm")
	require.NoError(t, err)
	assert.Equal(t, tcp.LinkShm, m)
	assert.ErrorIs(t, tcp.ErrAuth, procs.ErrAuth)
}

// block is p as a host block.
func block(t *testing.T, p []byte) memspace.Block {
	v, err := memspace.FromSlice(p)
	require.NoError(t, err)
	return v.Block()
}
