package sim_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"testing"
	"time"
	"unsafe"

	"github.com/stretchr/testify/require"

	"github.com/xpu-go/xpu/backends/rdma/internal/fabric"
	"github.com/xpu-go/xpu/backends/rdma/internal/fabric/sim"
	"github.com/xpu-go/xpu/internal/tooling/testwait"
)

// rank is one process of a test: a context with one registered buffer.
type rank struct {
	t      *testing.T
	c      fabric.Context
	buf    []byte
	mr     *fabric.MR
	closed bool
}

func newRank(t *testing.T, n *sim.Network, cqDepth int) *rank {
	t.Helper()
	c, err := n.Provider("").Open("", cqDepth)
	require.NoError(t, err)
	r := &rank{t: t, c: c, buf: make([]byte, 4096)}
	r.mr, err = c.Register(unsafe.Pointer(&r.buf[0]), len(r.buf))
	require.NoError(t, err)
	t.Cleanup(func() {
		if !r.closed {
			r.close()
		}
	})
	return r
}

func (r *rank) close() {
	r.t.Helper()
	r.closed = true
	require.NoError(r.t, r.c.Deregister(r.mr))
	require.NoError(r.t, r.c.Close())
}

// sge names [off, off+n) of the rank's buffer.
func (r *rank) sge(off, n int) fabric.SGE {
	return fabric.SGE{Addr: r.mr.Addr + uintptr(off), Len: uint32(n), LKey: r.mr.LKey}
}

// remote is the address of off in the rank's buffer, for a peer.
func (r *rank) remote(off int) uint64 { return uint64(r.mr.Addr) + uint64(off) }

// next waits for the rank's next completion.
func (r *rank) next() fabric.Completion {
	r.t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	var out [1]fabric.Completion
	for time.Now().Before(deadline) {
		k, err := r.c.Poll(out[:])
		require.NoError(r.t, err)
		if k == 1 {
			return out[0]
		}
		require.NoError(r.t, r.c.Arm())
		if k, err = r.c.Poll(out[:]); err == nil && k == 1 {
			return out[0]
		}
		require.NoError(r.t, r.c.Wait(50*time.Millisecond))
	}
	r.t.Fatal("no completion within 5s")
	return fabric.Completion{}
}

// nextErr waits for the rank's next completion and checks its ID and error.
func (r *rank) nextErr(id uint64, want error) {
	r.t.Helper()
	c := r.next()
	require.Equal(r.t, id, c.ID)
	require.ErrorIs(r.t, c.Err, want)
}

// none checks that the rank has no completion queued.
func (r *rank) none() {
	r.t.Helper()
	var out [1]fabric.Completion
	k, err := r.c.Poll(out[:])
	require.NoError(r.t, err)
	require.Zero(r.t, k, "unexpected completion %+v", out[0])
}

var cfg = fabric.EndpointConfig{SendDepth: 16, RecvDepth: 16, MaxInline: 64}

// connect connects a (dialing) to b (accepting).
func connect(t *testing.T, a, b *rank, c fabric.EndpointConfig) (ea, eb fabric.Endpoint) {
	t.Helper()
	l, err := b.c.Listen("0.0.0.0:0")
	require.NoError(t, err)
	defer l.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	done := make(chan error, 1)
	go func() {
		req, err := l.Accept(ctx)
		if err == nil {
			eb, err = req.Accept(c, nil)
		}
		done <- err
	}()
	ea, _, err = a.c.Dial(ctx, l.Addr(), c, nil)
	require.NoError(t, err)
	require.NoError(t, testwait.Recv(t, done, "the accept"))
	return ea, eb
}

func setup(t *testing.T, opts ...sim.Option) (n *sim.Network, a, b *rank, ea, eb fabric.Endpoint) {
	t.Helper()
	n = sim.New(opts...)
	a, b = newRank(t, n, 256), newRank(t, n, 256)
	ea, eb = connect(t, a, b, cfg)
	return n, a, b, ea, eb
}

func isLost(ep fabric.Endpoint) bool {
	select {
	case <-ep.Lost():
		return true
	default:
		return false
	}
}

func TestSendRecv(t *testing.T) {
	n, a, b, ea, eb := setup(t)
	copy(a.buf, "hello, fabric")
	require.NoError(t, eb.PostRecv(7, b.sge(100, 64)))
	require.NoError(t, ea.PostSend(fabric.SendWR{ID: 1, Op: fabric.OpSend, Local: a.sge(0, 13), Signaled: true, Imm: 42, HasImm: true}))

	c := b.next()
	require.NoError(t, c.Err)
	require.Equal(t, fabric.Completion{ID: 7, Op: fabric.OpRecv, Len: 13, Imm: 42, HasImm: true}, c)
	require.Equal(t, "hello, fabric", string(b.buf[100:113]))
	c = a.next()
	require.Equal(t, fabric.Completion{ID: 1, Op: fabric.OpSend}, c)

	st := n.Stats()
	require.Equal(t, uint64(1), st.Sends)
	require.Equal(t, uint64(13), st.SendBytes)
	require.Zero(t, st.RNR)
	require.False(t, isLost(ea) || isLost(eb))
	require.NoError(t, ea.Err())
}

func TestSendWithoutReceive(t *testing.T) {
	n, a, b, ea, eb := setup(t)
	require.NoError(t, ea.PostSend(fabric.SendWR{ID: 1, Op: fabric.OpSend, Local: a.sge(0, 8)}))
	c := a.next() // unsignaled, but failed requests always complete
	require.ErrorIs(t, c.Err, fabric.ErrRemote)
	require.ErrorContains(t, c.Err, "receiver not ready")
	testwait.Closed(t, ea.Lost(), "endpoint ea to be lost")
	testwait.Closed(t, eb.Lost(), "endpoint eb to be lost")
	require.ErrorIs(t, ea.Err(), fabric.ErrRemote)
	require.ErrorIs(t, eb.Err(), fabric.ErrRemote)
	require.Equal(t, uint64(1), n.Stats().RNR)
	require.Error(t, eb.PostRecv(1, b.sge(0, 8)), "post on an endpoint in the error state")
	require.Error(t, ea.PostSend(fabric.SendWR{ID: 2, Op: fabric.OpSend, Local: a.sge(0, 8)}))
	b.none()
}

func TestReceiveTooShort(t *testing.T) {
	_, a, b, ea, eb := setup(t)
	require.NoError(t, eb.PostRecv(7, b.sge(0, 4)))
	require.NoError(t, eb.PostRecv(8, b.sge(4, 64)))
	require.NoError(t, ea.PostSend(fabric.SendWR{ID: 1, Op: fabric.OpSend, Local: a.sge(0, 8), Signaled: true}))
	c := a.next()
	require.ErrorIs(t, c.Err, fabric.ErrRemote)
	b.nextErr(7, fabric.ErrLocal)
	b.nextErr(8, fabric.ErrFlushed)
	testwait.Closed(t, ea.Lost(), "endpoint ea to be lost")
	testwait.Closed(t, eb.Lost(), "endpoint eb to be lost")
}

func TestWriteRead(t *testing.T) {
	n, a, b, ea, _ := setup(t)
	copy(a.buf, "written")
	copy(b.buf[200:], "to be read")
	require.NoError(t, ea.PostSend(
		fabric.SendWR{ID: 1, Op: fabric.OpWrite, Local: a.sge(0, 7), RemoteAddr: b.remote(50), RKey: b.mr.RKey},
		fabric.SendWR{ID: 2, Op: fabric.OpRead, Local: a.sge(300, 10), RemoteAddr: b.remote(200), RKey: b.mr.RKey, Signaled: true},
	))
	c := a.next()
	require.Equal(t, fabric.Completion{ID: 2, Op: fabric.OpRead}, c)
	a.none() // the unsignaled write completed silently
	b.none() // one-sided: nothing on the target
	require.Equal(t, "written", string(b.buf[50:57]))
	require.Equal(t, "to be read", string(a.buf[300:310]))
	st := n.Stats()
	require.Equal(t, [4]uint64{1, 7, 1, 10}, [4]uint64{st.Writes, st.WriteBytes, st.Reads, st.ReadBytes})
}

func TestBadMemory(t *testing.T) {
	cases := []struct {
		name string
		wr   func(a, b *rank) fabric.SendWR
		want error
	}{
		{"bad lkey", func(a, b *rank) fabric.SendWR {
			s := a.sge(0, 8)
			s.LKey++
			return fabric.SendWR{Op: fabric.OpWrite, Local: s, RemoteAddr: b.remote(0), RKey: b.mr.RKey}
		}, fabric.ErrLocal},
		{"rkey as lkey", func(a, b *rank) fabric.SendWR {
			s := a.sge(0, 8)
			s.LKey = a.mr.RKey
			return fabric.SendWR{Op: fabric.OpSend, Local: s}
		}, fabric.ErrLocal},
		{"local out of region", func(a, b *rank) fabric.SendWR {
			return fabric.SendWR{Op: fabric.OpWrite, Local: a.sge(4090, 8), RemoteAddr: b.remote(0), RKey: b.mr.RKey}
		}, fabric.ErrLocal},
		{"bad rkey", func(a, b *rank) fabric.SendWR {
			return fabric.SendWR{Op: fabric.OpWrite, Local: a.sge(0, 8), RemoteAddr: b.remote(0), RKey: b.mr.LKey}
		}, fabric.ErrRemote},
		{"own rkey", func(a, b *rank) fabric.SendWR {
			return fabric.SendWR{Op: fabric.OpRead, Local: a.sge(0, 8), RemoteAddr: a.remote(0), RKey: a.mr.RKey}
		}, fabric.ErrRemote},
		{"remote out of region", func(a, b *rank) fabric.SendWR {
			return fabric.SendWR{Op: fabric.OpRead, Local: a.sge(0, 8), RemoteAddr: b.remote(4095), RKey: b.mr.RKey}
		}, fabric.ErrRemote},
		{"remote before region", func(a, b *rank) fabric.SendWR {
			return fabric.SendWR{Op: fabric.OpWrite, Local: a.sge(0, 8), RemoteAddr: b.remote(0) - 1, RKey: b.mr.RKey}
		}, fabric.ErrRemote},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, a, b, ea, eb := setup(t)
			require.NoError(t, eb.PostRecv(9, b.sge(0, 64)))
			wr := tc.wr(a, b)
			wr.ID = 1
			require.NoError(t, ea.PostSend(wr, fabric.SendWR{ID: 2, Op: fabric.OpWrite, Local: a.sge(0, 8), RemoteAddr: b.remote(0), RKey: b.mr.RKey}))
			a.nextErr(1, tc.want)
			a.nextErr(2, fabric.ErrFlushed)
			b.nextErr(9, fabric.ErrFlushed)
			testwait.Closed(t, ea.Lost(), "endpoint ea to be lost")
			testwait.Closed(t, eb.Lost(), "endpoint eb to be lost")
		})
	}
}

func TestDeregisteredKey(t *testing.T) {
	n, a, b, ea, _ := setup(t)
	buf := make([]byte, 64)
	mr, err := b.c.Register(unsafe.Pointer(&buf[0]), len(buf))
	require.NoError(t, err)
	require.NoError(t, b.c.Deregister(mr))
	require.Error(t, b.c.Deregister(mr), "double deregister")
	require.Error(t, a.c.Deregister(b.mr), "a region of another context")
	require.Error(t, b.c.Deregister(&fabric.MR{}))

	n.Pause()
	require.NoError(t, ea.PostSend(fabric.SendWR{ID: 1, Op: fabric.OpWrite, Local: a.sge(0, 8), RemoteAddr: uint64(mr.Addr), RKey: mr.RKey}))
	n.Resume()
	require.ErrorIs(t, a.next().Err, fabric.ErrRemote)
}

// The bytes of a SEND are read when it executes, those of an inline SEND
// when it is posted.
func TestCopyAtExecution(t *testing.T) {
	n, a, b, ea, eb := setup(t)
	require.NoError(t, eb.PostRecv(1, b.sge(0, 16)))
	require.NoError(t, eb.PostRecv(2, b.sge(16, 16)))
	copy(a.buf, "old")
	n.Pause()
	require.NoError(t, ea.PostSend(
		fabric.SendWR{ID: 1, Op: fabric.OpSend, Local: a.sge(0, 3)},
		fabric.SendWR{ID: 2, Op: fabric.OpSend, Local: fabric.SGE{Addr: a.mr.Addr, Len: 3}, Inline: true, Signaled: true},
	))
	copy(a.buf, "new")
	n.Resume()
	require.NoError(t, b.next().Err)
	require.NoError(t, b.next().Err)
	require.NoError(t, a.next().Err)
	require.Equal(t, "new", string(b.buf[0:3]))
	require.Equal(t, "old", string(b.buf[16:19]))
}

func TestPostChecks(t *testing.T) {
	_, a, b, ea, eb := setup(t)
	for i := range cfg.RecvDepth {
		require.NoError(t, eb.PostRecv(uint64(i), b.sge(i*8, 8)))
	}
	require.ErrorIs(t, eb.PostRecv(99, b.sge(0, 8)), fabric.ErrLocal, "over RecvDepth")

	big := fabric.SendWR{Op: fabric.OpSend, Local: fabric.SGE{Addr: a.mr.Addr, Len: uint32(cfg.MaxInline + 1)}, Inline: true}
	require.Error(t, ea.PostSend(big), "inline over MaxInline")
	require.Error(t, ea.PostSend(fabric.SendWR{Op: fabric.OpRead, Local: a.sge(0, 8), Inline: true}))
	require.Error(t, ea.PostSend(fabric.SendWR{Op: fabric.OpWrite, Local: a.sge(0, 8), HasImm: true}))
	require.Error(t, ea.PostSend(fabric.SendWR{Op: fabric.OpRecv, Local: a.sge(0, 8)}))

	wrs := make([]fabric.SendWR, cfg.SendDepth+1)
	for i := range wrs {
		wrs[i] = fabric.SendWR{ID: uint64(i), Op: fabric.OpWrite, Local: a.sge(0, 8), RemoteAddr: b.remote(0), RKey: b.mr.RKey}
	}
	require.ErrorIs(t, ea.PostSend(wrs...), fabric.ErrLocal, "over SendDepth: nothing posted")
	a.none()
	require.False(t, isLost(ea))
}

// Unsignaled requests hold their send-queue slots until a later signaled
// completion is polled.
func TestSendSlots(t *testing.T) {
	_, a, b, ea, _ := setup(t)
	w := fabric.SendWR{Op: fabric.OpWrite, Local: a.sge(0, 8), RemoteAddr: b.remote(0), RKey: b.mr.RKey}
	for range cfg.SendDepth {
		require.NoError(t, ea.PostSend(w))
	}
	time.Sleep(10 * time.Millisecond) // all executed, none retired
	require.Error(t, ea.PostSend(w), "unsignaled requests still hold their slots")
	a.none()
}

func TestSignaledRetires(t *testing.T) {
	_, a, b, ea, _ := setup(t)
	w := fabric.SendWR{Op: fabric.OpWrite, Local: a.sge(0, 8), RemoteAddr: b.remote(0), RKey: b.mr.RKey}
	for range cfg.SendDepth - 1 {
		require.NoError(t, ea.PostSend(w))
	}
	s := w
	s.ID, s.Signaled = 5, true
	require.NoError(t, ea.PostSend(s))
	for range 20 {
		require.Error(t, ea.PostSend(w), "full until the completion is polled")
		time.Sleep(time.Millisecond)
	}
	require.Equal(t, uint64(5), a.next().ID)
	for range cfg.SendDepth {
		require.NoError(t, ea.PostSend(w))
	}
}

// WRITEs posted before a SEND are visible when its receive completes, on
// every connection, whatever the delays.
func TestOrder(t *testing.T) {
	const conns, rounds = 3, 20
	n := sim.New(sim.WithSeed(7), sim.WithDelays(200*time.Microsecond))
	a, b := newRank(t, n, 1024), newRank(t, n, 1024)
	var eas, ebs []fabric.Endpoint
	for range conns {
		ea, eb := connect(t, a, b, fabric.EndpointConfig{SendDepth: rounds + 1, RecvDepth: 1})
		eas, ebs = append(eas, ea), append(ebs, eb)
	}
	for i := range conns {
		for j := range rounds {
			a.buf[i*rounds+j] = byte(1 + j)
		}
		require.NoError(t, ebs[i].PostRecv(uint64(i), b.sge(2000+i*8, 8)))
	}
	for i := range conns {
		for j := range rounds {
			off := i*rounds + j
			require.NoError(t, eas[i].PostSend(fabric.SendWR{Op: fabric.OpWrite, Local: a.sge(off, 1), RemoteAddr: b.remote(1000 + off), RKey: b.mr.RKey}))
		}
		require.NoError(t, eas[i].PostSend(fabric.SendWR{ID: uint64(i), Op: fabric.OpSend, Local: a.sge(0, 1), Signaled: true}))
	}
	for range conns {
		c := b.next()
		require.NoError(t, c.Err)
		i := int(c.ID)
		require.Equal(t, a.buf[i*rounds:(i+1)*rounds], b.buf[1000+i*rounds:1000+(i+1)*rounds], "connection %d", i)
	}
	for range conns {
		require.NoError(t, a.next().Err)
	}
	require.Zero(t, n.Stats().RNR)
}

func TestFail(t *testing.T) {
	n, a, b, ea, eb := setup(t)
	require.NoError(t, ea.PostRecv(10, a.sge(0, 8)))
	require.NoError(t, eb.PostRecv(20, b.sge(0, 8)))
	n.Pause()
	require.NoError(t, ea.PostSend(fabric.SendWR{ID: 11, Op: fabric.OpWrite, Local: a.sge(0, 8), RemoteAddr: b.remote(0), RKey: b.mr.RKey}))
	require.NoError(t, eb.PostSend(
		fabric.SendWR{ID: 21, Op: fabric.OpWrite, Local: b.sge(0, 8), RemoteAddr: a.remote(0), RKey: a.mr.RKey},
		fabric.SendWR{ID: 22, Op: fabric.OpWrite, Local: b.sge(0, 8), RemoteAddr: a.remote(0), RKey: a.mr.RKey},
	))
	require.NoError(t, ea.Fail())
	n.Resume()
	testwait.Closed(t, ea.Lost(), "endpoint ea to be lost")
	testwait.Closed(t, eb.Lost(), "endpoint eb to be lost")
	require.ErrorIs(t, ea.Err(), fabric.ErrFlushed)
	require.ErrorIs(t, eb.Err(), fabric.ErrRemote)

	got := map[uint64]error{}
	for range 2 {
		c := a.next()
		got[c.ID] = c.Err
	}
	require.ErrorIs(t, got[10], fabric.ErrFlushed)
	require.ErrorIs(t, got[11], fabric.ErrFlushed)
	got = map[uint64]error{}
	for range 3 {
		c := b.next()
		got[c.ID] = c.Err
	}
	require.ErrorIs(t, got[21], fabric.ErrRemote, "the peer's oldest request: retry exceeded")
	require.ErrorIs(t, got[22], fabric.ErrFlushed)
	require.ErrorIs(t, got[20], fabric.ErrFlushed)
	require.NoError(t, ea.Fail(), "failing twice is harmless")
	require.NoError(t, ea.Close())
	require.ErrorIs(t, ea.Close(), net.ErrClosed)
}

func TestClose(t *testing.T) {
	_, a, b, ea, eb := setup(t)
	require.NoError(t, eb.PostRecv(20, b.sge(0, 8)))
	require.NoError(t, ea.PostRecv(10, a.sge(0, 8)))
	require.NoError(t, ea.Close())
	testwait.Closed(t, eb.Lost(), "endpoint eb to be lost")
	require.ErrorIs(t, eb.Err(), fabric.ErrRemote)
	require.ErrorIs(t, b.next().Err, fabric.ErrFlushed)
	require.ErrorIs(t, a.next().Err, fabric.ErrFlushed)
	require.Error(t, ea.PostRecv(1, a.sge(0, 8)))
	require.Error(t, eb.PostRecv(1, b.sge(0, 8)))

	// Closing a context disconnects its endpoints.
	ea2, eb2 := connect(t, a, b, cfg)
	a.close()
	testwait.Closed(t, ea2.Lost(), "endpoint ea2 to be lost")
	testwait.Closed(t, eb2.Lost(), "endpoint eb2 to be lost")
	require.ErrorIs(t, eb2.Err(), fabric.ErrRemote)
	_, err := a.c.Poll(make([]fabric.Completion, 1))
	require.ErrorIs(t, err, net.ErrClosed)
	require.Error(t, a.c.Close())
}

func TestKill(t *testing.T) {
	n, a, b, ea, eb := setup(t)
	l, err := a.c.Listen("0.0.0.0:0")
	require.NoError(t, err)
	n.Pause()
	require.NoError(t, eb.PostSend(fabric.SendWR{ID: 21, Op: fabric.OpWrite, Local: b.sge(0, 8), RemoteAddr: a.remote(0), RKey: a.mr.RKey}))
	require.NoError(t, n.Kill(a.c))
	n.Resume()
	testwait.Closed(t, ea.Lost(), "endpoint ea to be lost")
	testwait.Closed(t, eb.Lost(), "endpoint eb to be lost")
	b.nextErr(21, fabric.ErrRemote)
	require.ErrorIs(t, eb.Err(), fabric.ErrRemote)

	_, err = a.c.Poll(make([]fabric.Completion, 1))
	require.Error(t, err, "a dead process polls nothing")
	require.Error(t, a.c.Wait(time.Second))
	_, _, err = b.c.Dial(testwait.Ctx(t), l.Addr(), cfg, nil)
	require.ErrorIs(t, err, fabric.ErrRefused, "a dead process listens no more")
	require.Error(t, n.Kill(a.c))
}

func TestWaitWake(t *testing.T) {
	n := sim.New()
	a := newRank(t, n, 16)

	start := time.Now()
	require.NoError(t, a.c.Wait(30*time.Millisecond))
	require.GreaterOrEqual(t, time.Since(start), 30*time.Millisecond, "nothing to wait for: times out")

	a.c.Wake()
	start = time.Now()
	require.NoError(t, a.c.Wait(10*time.Second))
	require.Less(t, time.Since(start), time.Second, "a Wake before Wait is not lost")

	go func() {
		time.Sleep(20 * time.Millisecond)
		a.c.Wake()
	}()
	start = time.Now()
	require.NoError(t, a.c.Wait(10*time.Second))
	require.Less(t, time.Since(start), 5*time.Second, "Wake ends a Wait in progress")
}

// Events are edge-triggered, as ibv_req_notify_cq's: a completion queued
// before Arm raises none (Wait runs to its bound; Poll takes it); one
// queued after Arm ends a Wait in progress, and the next Wait too if it
// came first.
func TestWaitCompletion(t *testing.T) {
	n, a, b, ea, eb := setup(t)
	require.NoError(t, eb.PostRecv(1, b.sge(0, 8)))
	require.NoError(t, eb.PostRecv(2, b.sge(0, 8)))
	require.NoError(t, eb.PostRecv(3, b.sge(0, 8)))
	require.NoError(t, ea.PostSend(fabric.SendWR{ID: 1, Op: fabric.OpSend, Local: a.sge(0, 8)}))
	deadline := time.Now().Add(5 * time.Second)
	for n.Stats().Sends == 0 && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
	require.NoError(t, b.c.Arm())
	start := time.Now()
	require.NoError(t, b.c.Wait(50*time.Millisecond))
	require.GreaterOrEqual(t, time.Since(start), 50*time.Millisecond, "a completion from before Arm raised an event")
	require.Equal(t, uint64(1), b.next().ID)

	require.NoError(t, b.c.Arm())
	go func() {
		time.Sleep(20 * time.Millisecond)
		_ = ea.PostSend(fabric.SendWR{ID: 2, Op: fabric.OpSend, Local: a.sge(0, 8)})
	}()
	start = time.Now()
	require.NoError(t, b.c.Wait(10*time.Second))
	require.Less(t, time.Since(start), 5*time.Second)
	require.Equal(t, uint64(2), b.next().ID)

	require.NoError(t, b.c.Arm())
	require.NoError(t, ea.PostSend(fabric.SendWR{ID: 3, Op: fabric.OpSend, Local: a.sge(0, 8)}))
	for n.Stats().Sends < 3 && time.Now().Before(deadline.Add(5*time.Second)) {
		time.Sleep(time.Millisecond)
	}
	start = time.Now()
	require.NoError(t, b.c.Wait(10*time.Second))
	require.Less(t, time.Since(start), time.Second, "an event raised before Wait is not lost")
	require.Equal(t, uint64(3), b.next().ID)
}

func TestCQOverrun(t *testing.T) {
	n := sim.New()
	a, b := newRank(t, n, 2), newRank(t, n, 64)
	ea, eb := connect(t, a, b, cfg)
	for i := range 3 {
		require.NoError(t, ea.PostSend(fabric.SendWR{ID: uint64(i), Op: fabric.OpWrite, Local: a.sge(0, 8), RemoteAddr: b.remote(0), RKey: b.mr.RKey, Signaled: true}))
	}
	testwait.Closed(t, ea.Lost(), "endpoint ea to be lost")
	testwait.Closed(t, eb.Lost(), "endpoint eb to be lost")
	_, err := a.c.Poll(make([]fabric.Completion, 4))
	require.ErrorContains(t, err, "overrun")
}

func TestDial(t *testing.T) {
	n := sim.New()
	a, b := newRank(t, n, 16), newRank(t, n, 16)
	ctx := testwait.Ctx(t)

	_, _, err := a.c.Dial(ctx, "10.9.9.9:1", cfg, nil)
	require.ErrorIs(t, err, fabric.ErrRefused, "nobody listens")
	_, _, err = a.c.Dial(ctx, "10.9.9.9:1", cfg, make([]byte, fabric.MaxPrivate+1))
	require.Error(t, err, "private data too long")

	l, err := b.c.Listen("0.0.0.0:0")
	require.NoError(t, err)
	_, err = b.c.Listen(l.Addr())
	require.Error(t, err, "address in use")
	_, err = b.c.Listen("10.9.9.9:0")
	require.Error(t, err, "not this host's address")

	priv := bytes.Repeat([]byte{'p'}, fabric.MaxPrivate)
	served := make(chan error, 1)
	go func() { served <- serve(ctx, l, priv) }()
	_, _, err = a.c.Dial(ctx, l.Addr(), cfg, []byte("let me in"))
	require.ErrorIs(t, err, fabric.ErrRefused, "rejected")
	ep, reply, err := a.c.Dial(ctx, l.Addr(), cfg, priv)
	require.NoError(t, err)
	require.Equal(t, []byte("welcome"), reply)
	require.NoError(t, testwait.Recv(t, served, "the listener's serving"))
	testwait.Closed(t, ep.Lost(), "endpoint ep to be lost")
	require.NoError(t, ep.Close())

	// Cancellation ends Dial and Accept promptly.
	cctx, cancel := context.WithTimeout(ctx, 20*time.Millisecond)
	defer cancel()
	_, _, err = a.c.Dial(cctx, l.Addr(), cfg, nil)
	require.ErrorIs(t, err, context.DeadlineExceeded)
	_, err = l.Accept(cctx)
	require.ErrorIs(t, err, context.DeadlineExceeded, "the canceled dial left nothing behind")

	// Closing the listener refuses dials in flight.
	done := make(chan error, 1)
	go func() {
		_, _, err := a.c.Dial(ctx, l.Addr(), cfg, nil)
		done <- err
	}()
	time.Sleep(10 * time.Millisecond)
	require.NoError(t, l.Close())
	require.ErrorIs(t, testwait.Recv(t, done, "the Dial, after the listener closed"), fabric.ErrRefused)
	require.ErrorIs(t, l.Close(), net.ErrClosed)
}

func TestDevices(t *testing.T) {
	p := sim.New().Provider("192.168.7.1")
	ds, err := p.Devices()
	require.NoError(t, err)
	require.Len(t, ds, 1)
	require.Equal(t, "192.168.7.1", ds[0].Ports[0].IPv4)
	_, err = p.Open("mlx5_0", 16)
	require.Error(t, err)
	c, err := p.Open("sim0", 16)
	require.NoError(t, err)
	l, err := c.Listen("192.168.7.1:4791")
	require.NoError(t, err)
	require.Equal(t, "192.168.7.1:4791", l.Addr())
	require.NoError(t, c.Close())
	require.ErrorIs(t, l.Close(), net.ErrClosed, "Close closed the listener")

	buf := make([]byte, 8)
	c, err = p.Open("", 16)
	require.NoError(t, err)
	_, err = c.Register(unsafe.Pointer(&buf[0]), len(buf))
	require.NoError(t, err)
	require.Error(t, c.Close(), "a region left registered")
}

// serve rejects one request, then accepts one offering priv and closes it.
func serve(ctx context.Context, l fabric.Listener, priv []byte) error {
	req, err := l.Accept(ctx)
	if err != nil {
		return err
	}
	if got := string(req.Private()); got != "let me in" {
		return fmt.Errorf("private data %q", got)
	}
	if err := req.Reject(); err != nil {
		return err
	}
	if req.Reject() == nil {
		return errors.New("rejected twice")
	}
	if req, err = l.Accept(ctx); err != nil {
		return err
	}
	if !bytes.Equal(req.Private(), priv) {
		return fmt.Errorf("private data %q", req.Private())
	}
	if _, err := req.Accept(cfg, make([]byte, fabric.MaxPrivate+1)); err == nil {
		return errors.New("accepted a reply too long")
	}
	ep, err := req.Accept(cfg, []byte("welcome"))
	if err != nil {
		return err
	}
	return ep.Close()
}
