package faults_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/xpu-go/xpu/backends/local"
	"github.com/xpu-go/xpu/comm"
	"github.com/xpu-go/xpu/faults"
	"github.com/xpu-go/xpu/internal/tooling/testwait"
)

// TestCloseIsNotPeerLoss is the regression test of a wrapper that injects
// nothing turning this rank's own Close into a lost peer: a receive
// pending at Close, and one waited for after it, must fail with
// comm.ErrClosed, as they do unwrapped — not "lost peer 1".
func TestCloseIsNotPeerLoss(t *testing.T) {
	ranks, err := local.NewGroup(2, local.Options{})
	require.NoError(t, err)
	t.Cleanup(func() { _ = ranks[1].Close() })
	c := faults.WrapComm(ranks[0], faults.None)

	pending, err := c.Irecv(bytesBuf(t, 8).Block(), 1, 5)
	require.NoError(t, err)
	// A request watched by a Wait already under way when Close comes.
	waiting, err := c.Irecv(bytesBuf(t, 8).Block(), 1, 6)
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	during := make(chan error, 1)
	go func() {
		_, err := waiting.Wait(ctx)
		during <- err
	}()

	require.NoError(t, c.Close())
	_, err = pending.Wait(ctx)
	require.ErrorIs(t, err, comm.ErrClosed, "a receive pending at Close, waited for after it")
	require.NotErrorIs(t, err, comm.ErrPeerLost)
	err = testwait.Recv(t, during, "the receive waited for when Close came")
	require.ErrorIs(t, err, comm.ErrClosed, "a receive waited for when Close came")
	require.NotErrorIs(t, err, comm.ErrPeerLost)
	_, done, err := pending.Test()
	require.True(t, done)
	require.ErrorIs(t, err, comm.ErrClosed, "Test after Close")

	// Calls after Close say so, for a peer that is alive.
	_, err = c.Irecv(bytesBuf(t, 8).Block(), 1, 5)
	require.ErrorIs(t, err, comm.ErrClosed)
	_, err = c.Isend(bytesBuf(t, 8).Block(), 1, 5)
	require.ErrorIs(t, err, comm.ErrClosed)

	// The peer sees this rank lost, as it would unwrapped.
	_, err = ranks[1].Irecv(bytesBuf(t, 8).Block(), 0, 5)
	if err == nil {
		t.Fatal("Irecv from a closed rank started")
	}
	require.ErrorIs(t, err, comm.ErrPeerLost)
}

// TestLostPeerStillLostAfterClose checks that a peer lost before Close
// keeps its requests failing with ErrPeerLost: only this rank's own Close
// is reported as ErrClosed.
func TestLostPeerStillLostAfterClose(t *testing.T) {
	g := group(t, 2, func(int) faults.Injector { return faults.None })
	r, err := g[0].Irecv(bytesBuf(t, 8).Block(), 1, 5)
	require.NoError(t, err)
	g[0].LosePeer(1)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_, err = r.Wait(ctx)
	require.ErrorIs(t, err, comm.ErrPeerLost)
}
