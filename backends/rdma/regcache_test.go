package rdma_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/xpu-go/xpu/backends/cpu"
	"github.com/xpu-go/xpu/backends/rdma"
	"github.com/xpu-go/xpu/comm"
	"github.com/xpu-go/xpu/memspace"
)

// TestRegistrationCache sends rendezvous messages from and into buffers of
// the cpu space: each allocation is registered once and reused, and its
// registration dies with it at Free — a new allocation at the same address
// is registered afresh and its bytes arrive.
func TestRegistrationCache(t *testing.T) { k, _ := simKit(); testRegistrationCache(t, k) }

func testRegistrationCache(t *testing.T, k kit) {
	cs := k.group(t, 2, rdma.Config{EagerLimit: 1 << 10})
	space := cpu.NewSpace(cpu.SpaceOptions{})
	defer space.Close()
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	const n = 256 << 10
	round := func(fill byte) {
		t.Helper()
		src, err := memspace.Alloc[byte](space, n)
		require.NoError(t, err)
		dst, err := memspace.Alloc[byte](space, n)
		require.NoError(t, err)
		s, _ := src.Host()
		for i := range s {
			s[i] = fill + byte(i)
		}
		for range 3 {
			r, err := cs[1].Irecv(dst.Block(), 0, 1)
			require.NoError(t, err)
			require.NoError(t, comm.Send(ctx, cs[0], src.Block(), 1, 1))
			_, err = r.Wait(ctx)
			require.NoError(t, err)
			d, _ := dst.Host()
			require.Equal(t, s, d)
		}
		require.NoError(t, src.Free())
		require.NoError(t, dst.Free())
	}
	round(1)
	h0, m0 := rdma.RegStats(cs[0])
	h1, m1 := rdma.RegStats(cs[1])
	require.Equal(t, 1, m0, "the sender's buffer is registered once")
	require.Equal(t, 1, m1, "the receiver's buffer is registered once")
	require.Equal(t, 2, h0)
	require.Equal(t, 2, h1)
	round(7) // the same addresses again, most likely: registered afresh
	_, m0 = rdma.RegStats(cs[0])
	_, m1 = rdma.RegStats(cs[1])
	require.Equal(t, 2, m0)
	require.Equal(t, 2, m1)
}
