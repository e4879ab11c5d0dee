package rdma_test

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/xpu-go/xpu/backends/rdma"
	"github.com/xpu-go/xpu/backends/rdma/internal/fabric"
	"github.com/xpu-go/xpu/backends/rdma/internal/fabric/sim"
	"github.com/xpu-go/xpu/backends/rdma/internal/verbs"
	"github.com/xpu-go/xpu/comm"
	"github.com/xpu-go/xpu/internal/tooling/testwait"
	"github.com/xpu-go/xpu/memspace"
)

// kit is a fabric the protocol tests run on: the simulated one here, the
// kernel's verbs in the guest (verbs_test.go).
type kit struct {
	prov fabric.Provider
	host string
	// crash makes a rank's process die: its connections go, no goodbye.
	crash func(t *testing.T, c *rdma.Comm)
	// rnr counts SENDs that found no receive posted (-1: unknown).
	rnr func() int
}

func simKit(opts ...sim.Option) (kit, *sim.Network) {
	net := sim.New(opts...)
	return kit{
		prov: net.Provider("10.0.0.1"), host: "10.0.0.1",
		crash: func(t *testing.T, c *rdma.Comm) { require.NoError(t, net.Kill(rdma.FabricOf(c))) },
		rnr:   func() int { return int(net.Stats().RNR) },
	}, net
}

// verbsKit returns the kit of the kernel's verbs, or skips: where no
// device has an active port with an IPv4 address, and in a build without
// -tags rdma (whose verbs report ErrNotBuilt).
func verbsKit(t testing.TB) kit {
	t.Helper()
	prov := verbs.Provider()
	devs, err := prov.Devices()
	if err != nil {
		t.Skipf("no RDMA device: %v", err)
	}
	for _, d := range devs {
		for _, p := range d.Ports {
			if p.State == "ACTIVE" && p.IPv4 != "" {
				return kit{
					prov: prov, host: p.IPv4,
					crash: func(t *testing.T, c *rdma.Comm) { require.NoError(t, rdma.Crash(c)) },
					rnr:   func() int { return -1 },
				}
			}
		}
	}
	t.Skip("no RDMA device with an active port and an IPv4 address")
	return kit{}
}

func (k kit) group(t testing.TB, n int, cfg rdma.Config) []*rdma.Comm {
	t.Helper()
	cs := k.groupNoCleanup(t, n, cfg)
	t.Cleanup(func() {
		for _, c := range cs {
			_ = c.Close()
		}
	})
	return cs
}

// groupNoCleanup makes a group its caller closes.
func (k kit) groupNoCleanup(t testing.TB, n int, cfg rdma.Config) []*rdma.Comm {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
	defer cancel()
	cs, err := rdma.NewGroupOn(ctx, k.prov, "", k.host, n, cfg)
	require.NoError(t, err)
	return cs
}

func TestReceiverStopsReceiving(t *testing.T) { k, _ := simKit(); testReceiverStops(t, k) }
func TestKillMidAllreduce(t *testing.T)       { k, _ := simKit(); testKillMidAllreduce(t, k) }
func TestCorruptMessage(t *testing.T)         { k, _ := simKit(); testCorruptMessage(t, k) }
func TestFailedLink(t *testing.T)             { k, _ := simKit(); testFailedLink(t, k) }
func TestStranger(t *testing.T)               { k, _ := simKit(); testStranger(t, k) }
func TestShakenOrder(t *testing.T) {
	k, _ := simKit(sim.WithSeed(7), sim.WithDelays(200*time.Microsecond))
	testShakenOrder(t, k)
}

func blk(b []byte) memspace.Block {
	buf, _ := memspace.FromSlice(b)
	return buf.Block()
}

// TestReceiverStopsReceiving has a sender run far ahead of a receiver
// that posts no receive for a while: the receiver holds at most its eager
// budget, the rest waits for rendezvous, no SEND ever finds no receive
// posted, and every message arrives, in order, intact.
func testReceiverStops(t *testing.T, k kit) {
	const budget = 32 << 10
	cs := k.group(t, 2, rdma.Config{Slots: 4, EagerBudget: budget, EagerLimit: 4 << 10})
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
	require.LessOrEqual(t, k.rnr(), 0, "a SEND found no receive posted")
	require.Zero(t, rdma.HeldFrom(cs[0], 1))
}

// TestKillMidAllreduce kills one rank's process (its fabric context) in
// the middle of allreduces: every survivor's allreduce fails with
// ErrPeerLost within a bound, none hangs.
func testKillMidAllreduce(t *testing.T, k kit) {
	cs := k.group(t, 4, rdma.Config{})
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
		testwait.Recv(t, started, "a sender to start")
	}
	time.Sleep(20 * time.Millisecond)
	killed = time.Now()
	k.crash(t, cs[victim])
	testwait.Group(t, &wg, "the senders, after the crash")
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
func testCorruptMessage(t *testing.T, k kit) {
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
			cs := k.group(t, 2, rdma.Config{})
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
func testShakenOrder(t *testing.T, k kit) {
	const n = 3
	cs := k.group(t, n, rdma.Config{Slots: 4, EagerLimit: 1 << 10, EagerBudget: 4 << 10, Chunk: 4096})
	ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
	defer cancel()
	sizes := []int{0, 1, 100, 1 << 10, 5000, 70000}
	require.NoError(t, onEvery(t, cs, func(me int, c *rdma.Comm) error {
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
						return err
					}
					reqs = append(reqs, r)
					in := make([]byte, size)
					bufs[[3]int{peer, i, rep}] = in
					r, err = c.Irecv(blk(in), peer, i)
					if err != nil {
						return err
					}
					reqs = append(reqs, r)
				}
			}
		}
		if err := comm.WaitAll(ctx, reqs...); err != nil {
			return err
		}
		for key, in := range bufs {
			peer, i, rep := key[0], key[1], key[2]
			for k := range in {
				if in[k] != byte(peer*7+i+rep+k) {
					return fmt.Errorf("rank %d: from %d size %d rep %d byte %d wrong", me, peer, sizes[i], rep, k)
				}
			}
		}
		return nil
	}))
	require.LessOrEqual(t, k.rnr(), 0)
}

// testFailedLink forces one queue pair to the error state: both of its
// ranks see the other lost (ErrPeerLost) within a bound, and the third
// rank still talks to both.
func testFailedLink(t *testing.T, k kit) {
	cs := k.group(t, 3, rdma.Config{})
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	r0, err := cs[0].Irecv(blk(make([]byte, 8)), 1, 3)
	require.NoError(t, err)
	r1, err := cs[1].Irecv(blk(make([]byte, 8)), 0, 3)
	require.NoError(t, err)
	require.NoError(t, rdma.FailLink(cs[0], 1))
	_, err = r0.Wait(ctx)
	require.ErrorIs(t, err, comm.ErrPeerLost)
	_, err = r1.Wait(ctx)
	require.ErrorIs(t, err, comm.ErrPeerLost)
	for _, peer := range []int{0, 1} {
		in := make([]byte, 5)
		got := make(chan error, 1)
		go func() {
			_, err := comm.Recv(ctx, cs[peer], blk(in), 2, 9)
			got <- err
		}()
		require.NoError(t, comm.Send(ctx, cs[2], blk([]byte("hello")), peer, 9))
		require.NoError(t, testwait.Recv(t, got, "the Recv"))
		require.Equal(t, "hello", string(in))
	}
}

// testStranger has a process without the job secret connect to a rank's
// listener while the job forms: it is refused, and the job forms.
func testStranger(t *testing.T, k kit) {
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	strangerErr, jobErr := rdma.StrangerDuringJoin(ctx, k.prov, k.host)
	require.NoError(t, jobErr)
	require.Error(t, strangerErr)
	t.Logf("the stranger was told: %v", strangerErr)
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

func TestFrozenPeer(t *testing.T) { k, _ := simKit(); testFrozenPeer(t, k) }

// testFrozenPeer freezes a rank (it sends nothing more, heartbeats
// included): its peers see it lost within the timeout, not later, and
// still talk to each other.
func testFrozenPeer(t *testing.T, k kit) {
	const timeout = 400 * time.Millisecond
	cs := k.group(t, 3, rdma.Config{Timeout: timeout})
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	time.Sleep(timeout) // heartbeats keep the idle group together
	r0, err := cs[0].Irecv(blk(make([]byte, 8)), 2, 1)
	require.NoError(t, err)
	r1, err := cs[1].Irecv(blk(make([]byte, 8)), 2, 1)
	require.NoError(t, err)
	frozen := time.Now()
	rdma.Freeze(cs[2])
	for i, r := range []comm.Request{r0, r1} {
		_, err := r.Wait(ctx)
		require.ErrorIs(t, err, comm.ErrPeerLost, "rank %d", i)
		took := time.Since(frozen)
		t.Logf("rank %d saw the frozen rank lost after %v: %v", i, took.Round(time.Millisecond), err)
		require.Less(t, took, timeout+timeout/2+time.Second)
	}
	in := make([]byte, 2)
	got := make(chan error, 1)
	go func() {
		_, err := comm.Recv(ctx, cs[1], blk(in), 0, 3)
		got <- err
	}()
	require.NoError(t, comm.Send(ctx, cs[0], blk([]byte("ok")), 1, 3))
	require.NoError(t, testwait.Recv(t, got, "the Recv"))
}

func TestAllreduceStress(t *testing.T) { k, _ := simKit(); testAllreduceStress(t, k, 100) }

// testAllreduceStress runs many checked allreduces of sizes around the
// eager limit and the ring's pieces over 4 ranks: every element of every
// result is checked, as a wrong byte once in hundreds of calls is the bug
// such a test is for.
func testAllreduceStress(t *testing.T, k kit, iters int) {
	const n = 4
	cs := k.group(t, n, rdma.Config{})
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Minute)
	defer cancel()
	require.NoError(t, onEvery(t, cs, func(me int, c *rdma.Comm) error {
		for it := range iters {
			count := []int{1, 1000, 2048, 8192, 40000}[it%5]
			v := make([]float64, count)
			for i := range v {
				v[i] = float64(me*1000 + i%97 + it)
			}
			b, _ := memspace.FromSlice(v)
			if err := comm.Allreduce(ctx, c, b, b, comm.Sum); err != nil {
				return fmt.Errorf("allreduce %d: %w", it, err)
			}
			for i, x := range v {
				if want := float64(1000*n*(n-1)/2 + n*(i%97+it)); x != want {
					return fmt.Errorf("rank %d, allreduce %d of %d elements: element %d is %v, want %v", me, it, count, i, x, want)
				}
			}
		}
		return nil
	}))
}

// TestNoSpinWaiterIsWoken has waiters that never poll (Spin < 0): each
// blocks at once, and the engine must be armed to wake for its
// completion rather than find it on its next unprompted look, up to
// 100 ms later. Twenty round trips take about 4 ms on the simulated
// fabric with the race detector; a waiter not woken costs up to 100 ms.
func TestNoSpinWaiterIsWoken(t *testing.T) {
	k, _ := simKit()
	cs := k.group(t, 2, rdma.Config{Spin: -1})
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	echo := make(chan error, 1)
	go func() {
		buf := make([]byte, 8)
		for range 20 {
			if _, err := comm.Recv(ctx, cs[1], blk(buf), 0, 1); err != nil {
				echo <- err
				return
			}
			if err := comm.Send(ctx, cs[1], blk(buf), 0, 1); err != nil {
				echo <- err
				return
			}
		}
		echo <- nil
	}()
	buf := make([]byte, 8)
	start := time.Now()
	for range 20 {
		require.NoError(t, comm.Send(ctx, cs[0], blk(buf), 1, 1))
		_, err := comm.Recv(ctx, cs[0], blk(buf), 1, 1)
		require.NoError(t, err)
	}
	require.NoError(t, testwait.Recv(t, echo, "the echoing rank"))
	took := time.Since(start)
	t.Logf("20 round trips without spinning: %v", took)
	require.Less(t, took, 150*time.Millisecond, "blocked waiters' completions waited for the engine's next unprompted look")
}

// TestLossDuringPoll has a peer send a message, say goodbye and close
// between the moment a poll of the completion queue finds it empty and the
// moment the poller looks for lost endpoints: the loss, recorded after
// the poll began, must wait for the next poll, which takes the message
// first — so the message is received, not dropped with the peer.
func TestLossDuringPoll(t *testing.T) {
	k, _ := simKit()
	cs := k.group(t, 2, rdma.Config{})
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	var fired atomic.Bool
	hookErr := make(chan error, 1)
	restore := rdma.SetPollHook(func(c *rdma.Comm, n int) {
		if c != cs[0] || n != 0 || !fired.CompareAndSwap(false, true) {
			return
		}
		hookErr <- func() error {
			if err := comm.Send(ctx, cs[1], blk([]byte("last words")), 0, 9); err != nil {
				return err
			}
			if err := cs[1].Close(); err != nil {
				return err
			}
			// Hold the poll until rank 0's watcher has recorded the loss.
			for rdma.LossesRecorded(cs[0]) == 0 {
				if ctx.Err() != nil {
					return fmt.Errorf("rank 0 recorded no loss after rank 1 closed: %w", ctx.Err())
				}
				time.Sleep(time.Millisecond)
			}
			return nil
		}()
	})
	defer restore()
	buf := make([]byte, 32)
	st, err := comm.Recv(ctx, cs[0], blk(buf), 1, 9)
	require.NoError(t, testwait.Recv(t, hookErr, "the hook"))
	require.NoError(t, err, "a message sent before the sender closed")
	require.Equal(t, "last words", string(buf[:st.Count]))
	_, err = comm.Recv(ctx, cs[0], blk(buf), 1, 9)
	require.ErrorIs(t, err, comm.ErrPeerLost)
}
