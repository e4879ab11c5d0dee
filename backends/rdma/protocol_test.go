package rdma_test

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/xpu-go/xpu/backends/rdma"
	"github.com/xpu-go/xpu/backends/rdma/internal/fabric/sim"
	"github.com/xpu-go/xpu/comm"
	"github.com/xpu-go/xpu/memspace"
)

func simGroup(t *testing.T, net *sim.Network, n int, cfg rdma.Config) []*rdma.Comm {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	cs, err := rdma.NewGroupOn(ctx, net.Provider("10.0.0.1"), "", "10.0.0.1", n, cfg)
	require.NoError(t, err)
	t.Cleanup(func() {
		for _, c := range cs {
			_ = c.Close()
		}
	})
	return cs
}

func blk(b []byte) memspace.Block {
	buf, _ := memspace.FromSlice(b)
	return buf.Block()
}

// TestReceiverStopsReceiving has a sender run far ahead of a receiver
// that posts no receive for a while: the receiver holds at most its eager
// budget, the rest waits for rendezvous, no SEND ever finds no receive
// posted, and every message arrives, in order, intact.
func TestReceiverStopsReceiving(t *testing.T) {
	net := sim.New()
	const budget = 32 << 10
	cs := simGroup(t, net, 2, rdma.Config{Slots: 4, EagerBudget: budget, EagerLimit: 4 << 10})
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	const msgs = 400
	var sends []comm.Request
	for i := range msgs {
		size := 1 + i*37%9000 // eager and rendezvous sizes
		m := make([]byte, size)
		for k := range m {
			m[k] = byte(i + k)
		}
		r, err := cs[1].Isend(blk(m), 0, i%3)
		require.NoError(t, err)
		sends = append(sends, r)
	}
	time.Sleep(100 * time.Millisecond) // the receiver is away
	require.LessOrEqual(t, rdma.HeldFrom(cs[0], 1), budget)
	for i := range msgs {
		size := 1 + i*37%9000
		got := make([]byte, 9000)
		st, err := comm.Recv(ctx, cs[0], blk(got), 1, i%3)
		require.NoError(t, err)
		require.Equal(t, size, st.Count, "message %d", i)
		for k := range size {
			if got[k] != byte(i+k) {
				t.Fatalf("message %d byte %d: %d, want %d", i, k, got[k], byte(i+k))
			}
		}
	}
	require.NoError(t, comm.WaitAll(ctx, sends...))
	st := net.Stats()
	require.Zero(t, st.RNR, "a SEND found no receive posted")
	require.Zero(t, st.Errors)
	require.Zero(t, rdma.HeldFrom(cs[0], 1))
}

// TestKillMidAllreduce kills one rank's process (its fabric context) in
// the middle of allreduces: every survivor's allreduce fails with
// ErrPeerLost within a bound, none hangs.
func TestKillMidAllreduce(t *testing.T) {
	net := sim.New()
	cs := simGroup(t, net, 4, rdma.Config{})
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	const victim = 2
	started := make(chan struct{}, 4)
	var killed time.Time
	var wg sync.WaitGroup
	errs := make([]error, 4)
	took := make([]time.Duration, 4)
	for i, c := range cs {
		if i == victim {
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			send := make([]float64, 1<<17)
			recv := make([]float64, 1<<17)
			sb, _ := memspace.FromSlice(send)
			rb, _ := memspace.FromSlice(recv)
			started <- struct{}{}
			for {
				if err := comm.Allreduce(ctx, c, sb, rb, comm.Sum); err != nil {
					errs[i], took[i] = err, time.Since(killed)
					return
				}
			}
		}()
	}
	go func() {
		send := make([]float64, 1<<17)
		recv := make([]float64, 1<<17)
		sb, _ := memspace.FromSlice(send)
		rb, _ := memspace.FromSlice(recv)
		for range 3 {
			if comm.Allreduce(ctx, cs[victim], sb, rb, comm.Sum) != nil {
				return
			}
		}
	}()
	for range 3 {
		<-started
	}
	time.Sleep(20 * time.Millisecond)
	killed = time.Now()
	require.NoError(t, net.Kill(rdma.FabricOf(cs[victim])))
	wg.Wait()
	for i, err := range errs {
		if i == victim {
			continue
		}
		require.ErrorIs(t, err, comm.ErrPeerLost, "rank %d", i)
		require.Less(t, took[i], 5*time.Second, "rank %d took %v", i, took[i])
	}
}

// TestCorruptMessage hands a rank a message whose header breaks the
// protocol: the link to its sender is cut (ErrProtocol, which matches
// ErrPeerLost), never a crash, and both sides see the peer lost.
func TestCorruptMessage(t *testing.T) {
	for _, tc := range []struct {
		name string
		msg  func() []byte
	}{
		{"short", func() []byte { return []byte{1, 2, 3} }},
		{"unknown kind", func() []byte { b := make([]byte, 40); b[0] = 99; return b }},
		{"fin for nothing", func() []byte { b := make([]byte, 40); b[0] = 3; binary.LittleEndian.PutUint64(b[24:], 12345); return b }},
		{"payload on control", func() []byte { b := make([]byte, 50); b[0] = 5; return b }},
		{"too many credits", func() []byte { b := make([]byte, 40); b[0] = 5; binary.LittleEndian.PutUint16(b[2:], 60000); return b }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			net := sim.New()
			cs := simGroup(t, net, 2, rdma.Config{})
			rdma.InjectRecv(cs[0], 1, tc.msg())
			_, err := cs[0].Irecv(blk(make([]byte, 8)), 1, 0)
			require.ErrorIs(t, err, comm.ErrPeerLost)
			require.ErrorContains(t, err, "protocol")
			ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
			defer cancel()
			r, err := cs[1].Irecv(blk(make([]byte, 8)), 0, 0)
			if err == nil {
				_, err = r.Wait(ctx)
			}
			require.ErrorIs(t, err, comm.ErrPeerLost)
		})
	}
}

// TestShakenOrder runs all-to-all traffic of every size class with
// random delays before each request runs, so that completions of
// different endpoints interleave in every order.
func TestShakenOrder(t *testing.T) {
	net := sim.New(sim.WithSeed(7), sim.WithDelays(200*time.Microsecond))
	const n = 3
	cs := simGroup(t, net, n, rdma.Config{Slots: 4, EagerLimit: 1 << 10, EagerBudget: 4 << 10, Chunk: 4096})
	ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
	defer cancel()
	sizes := []int{0, 1, 100, 1 << 10, 5000, 70000}
	var wg sync.WaitGroup
	errs := make([]error, n)
	for me, c := range cs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var reqs []comm.Request
			bufs := map[[3]int][]byte{}
			for peer := range n {
				for i, size := range sizes {
					for rep := range 3 {
						m := make([]byte, size)
						for k := range m {
							m[k] = byte(me*7 + i + rep + k)
						}
						r, err := c.Isend(blk(m), peer, i)
						if err != nil {
							errs[me] = err
							return
						}
						reqs = append(reqs, r)
						in := make([]byte, size)
						bufs[[3]int{peer, i, rep}] = in
						r, err = c.Irecv(blk(in), peer, i)
						if err != nil {
							errs[me] = err
							return
						}
						reqs = append(reqs, r)
					}
				}
			}
			if err := comm.WaitAll(ctx, reqs...); err != nil {
				errs[me] = err
				return
			}
			for key, in := range bufs {
				peer, i, rep := key[0], key[1], key[2]
				for k := range in {
					if in[k] != byte(peer*7+i+rep+k) {
						errs[me] = fmt.Errorf("rank %d: from %d size %d rep %d byte %d wrong", me, peer, sizes[i], rep, k)
						return
					}
				}
			}
		}()
	}
	wg.Wait()
	require.NoError(t, errors.Join(errs...))
	require.Zero(t, net.Stats().RNR)
}

func FuzzParseHeader(f *testing.F) {
	f.Add(make([]byte, 40))
	f.Add([]byte{1, 0, 1, 0, 5, 0, 0, 0})
	f.Fuzz(func(t *testing.T, b []byte) {
		err := rdma.ParseHeader(b)
		if err != nil && !errors.Is(err, rdma.ErrProtocolKind) {
			t.Fatalf("error %v does not match ErrProtocol", err)
		}
	})
}
