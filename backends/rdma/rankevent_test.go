package rdma_test

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/xpu-go/xpu/backends/rdma"
	"github.com/xpu-go/xpu/backends/rdma/internal/fabric/sim"
	"github.com/xpu-go/xpu/comm"
	"github.com/xpu-go/xpu/internal/jobenv"
	"github.com/xpu-go/xpu/internal/rankevent"
	"github.com/xpu-go/xpu/internal/tooling/testwait"
	"github.com/xpu-go/xpu/memspace"
)

// A rank that loses a peer tells the launcher (ADR 38): rank 1 closes,
// rank 0's receive from it fails with ErrPeerLost, and the events file
// holds that rank 0 lost rank 1 by its goodbye — and nothing for rank 1,
// which cut its own links as it closed.
func TestPeerLossReported(t *testing.T) {
	events := filepath.Join(t.TempDir(), "events")
	require.NoError(t, os.WriteFile(events, nil, 0o600)) // the launcher makes it
	t.Setenv(jobenv.Events, events)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	net := sim.New()
	cs, err := rdma.NewGroupOn(ctx, net.Provider("10.0.0.1"), "", "10.0.0.1", 2, rdma.Config{})
	require.NoError(t, err)
	defer func() { _ = cs[0].Close() }()
	r, err := cs[0].Irecv(memspace.Block{}, 1, 3)
	require.NoError(t, err)
	require.NoError(t, cs[1].Close())
	_, err = r.Wait(testwait.Ctx(t))
	require.ErrorIs(t, err, comm.ErrPeerLost)
	evs, err := rankevent.Read(events)
	require.NoError(t, err)
	require.Len(t, evs, 1, "%+v", evs)
	assert.Equal(t, 0, evs[0].Rank)
	assert.Equal(t, 1, evs[0].Peer)
	assert.Equal(t, rankevent.PeerClosed, evs[0].Kind)
}
