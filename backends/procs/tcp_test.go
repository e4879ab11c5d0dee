package procs_test

import (
	"bytes"
	"context"
	"errors"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/xpu-go/xpu"
	"github.com/xpu-go/xpu/backends/procs"
	"github.com/xpu-go/xpu/comm"
	"github.com/xpu-go/xpu/internal/tooling/testwait"
	"github.com/xpu-go/xpu/memspace"
)

func group(t testing.TB, n int, tmpl procs.Config) []*procs.Comm {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	cs, err := procs.NewLoopbackGroupConfig(ctx, n, tmpl)
	require.NoError(t, err)
	t.Cleanup(func() { closeAll(t, cs) })
	return cs
}

func closeAll(t testing.TB, cs []*procs.Comm) {
	var wg sync.WaitGroup
	for _, c := range cs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_ = c.Close()
		}()
	}
	testwait.Group(t, &wg, "the ranks' Close")
}

// each runs f on every rank at once and fails the test on any error.
func each(t *testing.T, cs []*procs.Comm, f func(ctx context.Context, c *procs.Comm) error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	require.NoError(t, errors.Join(onEach(t, cs, func(c *procs.Comm) error { return f(ctx, c) })...))
}

// TestRingChunks runs the native ring with small chunks, so that blocks
// travel in many pieces through the window, in place and not, with sizes
// that do not divide evenly.
func TestRingChunks(t *testing.T) {
	defer procs.SetRing(1024, 4096)()
	for _, n := range []int{2, 3, 5} {
		cs := group(t, n, procs.Config{})
		for _, count := range []int{n, 1000, 12345} {
			each(t, cs, func(ctx context.Context, c *procs.Comm) error {
				return checkedAllreduce(ctx, c, count, count%7)
			})
			each(t, cs, func(ctx context.Context, c *procs.Comm) error {
				// Not in place, float32 max.
				send := make([]float32, count)
				for i := range send {
					send[i] = float32((c.Rank()*13 + i*7) % 101)
				}
				recv := make([]float32, count)
				sb, _ := memspace.FromSlice(send)
				rb, _ := memspace.FromSlice(recv)
				if err := comm.Allreduce(ctx, c, sb, rb, comm.Max); err != nil {
					return err
				}
				for i, x := range recv {
					want := float32(0)
					for r := range n {
						want = max(want, float32((r*13+i*7)%101))
					}
					if x != want {
						return errors.New("max differs")
					}
				}
				return nil
			})
		}
	}
}

// TestCloseUnblocks checks that Close fails this rank's pending requests
// with ErrClosed, peers' with ErrPeerLost, and returns promptly.
func TestCloseUnblocks(t *testing.T) {
	cs := group(t, 2, procs.Config{})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	b := func(n int) memspace.Block { v, _ := memspace.FromSlice(make([]byte, n)); return v.Block() }
	mine, err := cs[0].Irecv(b(8), 1, 1)
	require.NoError(t, err)
	big, err := cs[0].Isend(b(1<<20), 1, 2)
	require.NoError(t, err)
	theirs, err := cs[1].Irecv(b(8), 0, 3)
	require.NoError(t, err)
	start := time.Now()
	require.NoError(t, cs[0].Close())
	require.Less(t, time.Since(start), 5*time.Second)
	_, err = mine.Wait(ctx)
	require.ErrorIs(t, err, comm.ErrClosed)
	_, err = big.Wait(ctx)
	require.ErrorIs(t, err, comm.ErrClosed)
	_, err = theirs.Wait(ctx)
	require.ErrorIs(t, err, comm.ErrPeerLost)
	require.NoError(t, cs[0].Close(), "a second Close")
}

// TestDriver opens the registered driver: a Group of loopback ranks, and
// no job communicator outside a job.
func TestDriver(t *testing.T) {
	t.Setenv(procs.EnvRank, "")
	t.Setenv(procs.EnvWorldSize, "")
	ctx := testwait.Ctx(t)
	b, err := xpu.Open(ctx, procs.Name, xpu.Options{procs.OptTimeout: "2s"})
	require.NoError(t, err)
	defer b.Close()
	require.Nil(t, b.Comm)
	require.NotNil(t, b.Group)
	g, err := b.Group(ctx, 2)
	require.NoError(t, err)
	require.Equal(t, 1, g[1].Rank())
	info, err := xpu.Describe(ctx, procs.Name)
	require.NoError(t, err)
	require.True(t, info.Available)
	_, err = xpu.Open(ctx, procs.Name, xpu.Options{procs.OptTimeout: "soon"})
	require.ErrorIs(t, err, xpu.ErrInvalidArgument)
}

// TestDialInvalid checks Dial's argument errors.
func TestDialInvalid(t *testing.T) {
	ctx := testwait.Ctx(t)
	for name, cfg := range map[string]procs.Config{
		"size 0":        {Size: 0, Secret: []byte("s")},
		"rank too big":  {Rank: 2, Size: 2, MasterAddr: "127.0.0.1:1", Secret: []byte("s")},
		"no secret":     {Rank: 0, Size: 2, MasterAddr: "127.0.0.1:1"},
		"no master":     {Rank: 1, Size: 2, Secret: []byte("s")},
		"bad master":    {Rank: 1, Size: 2, MasterAddr: "nowhere", Secret: []byte("s")},
		"spin too long": {Rank: 0, Size: 1, Secret: []byte("s"), Spin: time.Second},
	} {
		_, err := procs.Dial(ctx, cfg)
		require.ErrorIs(t, err, comm.ErrInvalidArgument, name)
	}
	// Nobody at the master: the context ends the wait.
	dctx, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
	defer cancel()
	_, err := procs.Dial(dctx, procs.Config{Rank: 1, Size: 2, MasterAddr: "127.0.0.1:1", Secret: []byte("s")})
	require.ErrorIs(t, err, context.DeadlineExceeded)
	// A negative spin never spins, as in every spin setting: it is no
	// error.
	c, err := procs.Dial(ctx, procs.Config{Rank: 0, Size: 1, Secret: []byte("s"), Spin: -time.Microsecond})
	require.NoError(t, err)
	require.NoError(t, c.Close())
	// A job of one needs nobody.
	c, err = procs.Dial(ctx, procs.Config{Rank: 0, Size: 1, Secret: []byte("s")})
	require.NoError(t, err)
	require.NoError(t, c.Close())
}

// TestBlockingAllocs checks the blocking calls' fast path: a round trip
// of small messages through comm.Send and comm.Recv allocates nothing —
// no request, no completion channel (a receive whose waiter reads the
// link completes without one) — and every message arrives whole.
func TestBlockingAllocs(t *testing.T) {
	cs := group(t, 2, procs.Config{})
	ctx := testwait.Ctx(t)
	const warm, rounds = 100, 5000
	echo := make(chan error, 1)
	go func() {
		buf := bytesBlock(make([]byte, 8))
		for range warm + rounds {
			if _, err := comm.Recv(ctx, cs[1], buf, 0, 3); err != nil {
				echo <- err
				return
			}
			if err := comm.Send(ctx, cs[1], buf, 0, 3); err != nil {
				echo <- err
				return
			}
		}
		echo <- nil
	}()
	out, in := make([]byte, 8), make([]byte, 8)
	outB, inB := bytesBlock(out), bytesBlock(in)
	var before runtime.MemStats
	for i := range warm + rounds {
		if i == warm {
			runtime.ReadMemStats(&before)
		}
		out[0], out[7] = byte(i), byte(i>>8)
		if err := comm.Send(ctx, cs[0], outB, 1, 3); err != nil {
			t.Fatal(err)
		}
		st, err := comm.Recv(ctx, cs[0], inB, 1, 3)
		if err != nil || st.Count != 8 || !bytes.Equal(in, out) {
			t.Fatalf("round %d: got %v (%d bytes, %v), want %v", i, in, st.Count, err, out)
		}
	}
	var after runtime.MemStats
	runtime.ReadMemStats(&after)
	require.NoError(t, within(t, echo, "the echoing rank did not finish"))
	perRound := float64(after.Mallocs-before.Mallocs) / rounds
	t.Logf("%.2f allocations per round trip", perRound)
	require.Less(t, perRound, 1.0, "allocations per round trip of two small messages (a completion channel each would be 2)")
}

// TestIsendDoneAtOnce: an eager Isend the link takes at once is complete
// when Isend returns, with the send's status, and its message arrives;
// canceling it does nothing.
func TestIsendDoneAtOnce(t *testing.T) {
	cs := group(t, 2, procs.Config{})
	ctx := testwait.Ctx(t)
	msg := []byte("eager and early")
	r, err := cs[0].Isend(bytesBlock(msg), 1, 9)
	require.NoError(t, err)
	st, done, err := r.Test()
	require.NoError(t, err)
	require.True(t, done, "an eager send written at once is complete")
	want := comm.Status{Source: 1, Tag: 9, Count: len(msg)}
	require.Equal(t, want, st)
	require.NoError(t, r.Cancel())
	st, err = r.Wait(ctx)
	require.NoError(t, err)
	require.Equal(t, want, st)
	in := make([]byte, 64)
	st, err = comm.Recv(ctx, cs[1], bytesBlock(in), 0, 9)
	require.NoError(t, err)
	require.Equal(t, comm.Status{Source: 0, Tag: 9, Count: len(msg)}, st)
	require.Equal(t, msg, in[:st.Count])
}
