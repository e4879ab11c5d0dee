package rdma_test

import (
	"context"
	"fmt"
	"net"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/xpu-go/xpu"
	"github.com/xpu-go/xpu/backends/procs"
	"github.com/xpu-go/xpu/backends/rdma"
	"github.com/xpu-go/xpu/backends/rdma/internal/fabric/sim"
	"github.com/xpu-go/xpu/comm"
	"github.com/xpu-go/xpu/memspace"
)

// TestDriverOnSim opens the driver over the simulated fabric: Info lists
// the device and its port, Group makes working groups, options are
// checked.
func TestDriverOnSim(t *testing.T) {
	net := sim.New()
	defer rdma.UseProvider(net.Provider("10.0.0.7"))()
	ctx := t.Context()

	in, err := xpu.Describe(ctx, rdma.Name)
	require.NoError(t, err)
	require.True(t, in.Available, in.Reason)
	require.Len(t, in.Devices, 1)
	require.Equal(t, "sim0", in.Devices[0].Name)
	require.NotEmpty(t, in.Devices[0].Ports)
	require.Equal(t, "10.0.0.7", in.Devices[0].Ports[0].Addr)

	_, err = xpu.Open(ctx, rdma.Name, xpu.Options{"slots": "2"})
	require.ErrorIs(t, err, xpu.ErrInvalidArgument)
	_, err = xpu.Open(ctx, rdma.Name, xpu.Options{"device": "mlx5_9"})
	require.ErrorIs(t, err, xpu.ErrUnavailable)

	b, err := xpu.Open(ctx, rdma.Name, xpu.Options{"eager_limit": "1K"})
	require.NoError(t, err)
	defer b.Close()
	ranks, err := b.Group(ctx, 3)
	require.NoError(t, err)
	for i := range 3 {
		require.Equal(t, i, ranks[i].Rank())
	}
	send, recv := make([]float64, 1000), make([]float64, 1000)
	require.NoError(t, onEvery(t, ranks, func(i int, c comm.Comm) error {
		s := append([]float64(nil), send...)
		for k := range s {
			s[k] = float64(i + k)
		}
		sb, _ := memspace.FromSlice(s)
		r := make([]float64, len(recv))
		rb, _ := memspace.FromSlice(r)
		if err := comm.Allreduce(ctx, c, sb, rb, comm.Sum); err != nil {
			return err
		}
		for k := range r {
			if want := float64(3*k + 3); r[k] != want {
				return fmt.Errorf("rank %d: element %d is %v, want %v", i, k, r[k], want)
			}
		}
		return nil
	}))
}

// TestJoinOverTCPBootstrap joins a job of 4 ranks as processes do (here
// goroutines): over a tcp bootstrap job with a secret, then queue pairs
// on the simulated fabric; a broadcast then reaches every rank.
func TestJoinOverTCPBootstrap(t *testing.T) {
	cs := joinSim(t, sim.New(), 4, procs.LinkAuto)
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	require.NoError(t, onEvery(t, cs, func(me int, c *rdma.Comm) error {
		buf := make([]int64, 4)
		if me == 0 {
			buf = []int64{1, 2, 3, 4}
		}
		b, _ := memspace.FromSlice(buf)
		if err := comm.Bcast(ctx, c, b, 0); err != nil {
			return err
		}
		if buf[3] != 4 {
			return fmt.Errorf("rank %d got %v", me, buf)
		}
		return nil
	}))
}

func freePort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}
