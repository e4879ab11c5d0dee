package procs_test

import (
	"bytes"
	"context"
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/xpu-go/xpu/backends/procs"
	"github.com/xpu-go/xpu/comm"
	"github.com/xpu-go/xpu/internal/tooling/testwait"
	"github.com/xpu-go/xpu/memspace"
)

// The tests of the read role: a goroutine waiting for a receive from one
// peer reads that link's socket itself (readrole.go).

func bytesBlock(p []byte) memspace.Block {
	b, err := memspace.FromSlice(p)
	if err != nil {
		panic(err)
	}
	return b.Block()
}

// waitDirectReads waits until a goroutine of c has taken the read role of
// its link to peer more than n times.
func waitDirectReads(t testing.TB, c *procs.Comm, peer int, n int64) {
	t.Helper()
	require.Eventually(t, func() bool { return procs.DirectReads(c, peer) > n },
		10*time.Second, time.Millisecond, "no goroutine took the read role")
}

// startDirectRecv posts a receive into buf on c from peer with tag, and
// starts a goroutine waiting for it with ctx; it returns once that
// goroutine has taken the read role of c's link to peer, with the request
// and the channel its Wait's error comes on.
func startDirectRecv(t *testing.T, ctx context.Context, c *procs.Comm, peer, tag int, buf []byte) (comm.Request, <-chan error) {
	t.Helper()
	r, err := c.Irecv(bytesBlock(buf), peer, tag)
	require.NoError(t, err)
	before := procs.DirectReads(c, peer)
	res := make(chan error, 1)
	go func() { _, err := r.Wait(ctx); res <- err }()
	waitDirectReads(t, c, peer, before)
	return r, res
}

// within returns the first value of ch, failing the test with what after
// 5 seconds.
func within[T any](t *testing.T, ch <-chan T, what string) T {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(5 * time.Second):
		t.Fatal(what)
		panic("unreachable")
	}
}

// pattern returns n bytes that depend on seed.
func pattern(n, seed int) []byte {
	p := make([]byte, n)
	for i := range p {
		p[i] = byte(i*7 + seed*13 + i>>8)
	}
	return p
}

// pairOf makes a group of 2 ranks with tmpl, and a context that ends with
// the test, or after 20 seconds.
func pairOf(t *testing.T, tmpl procs.Config) ([]*procs.Comm, context.Context) {
	t.Helper()
	cs := group(t, 2, tmpl)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	t.Cleanup(cancel)
	return cs, ctx
}

// recvDirect has rank 0 of cs receive 8 bytes from rank 1 with tag under
// wctx, reading the link itself, while rank 1 sends them under ctx, and
// fails the test unless they arrive whole. The receive is an Irecv and
// its Wait, which waits in the read role (the path these tests are about);
// a blocking Recv over shared memory may take its message through the
// lane instead (lane.go), which registers nothing for its context.
func recvDirect(t *testing.T, ctx, wctx context.Context, cs []*procs.Comm, tag int) {
	t.Helper()
	got := make([]byte, 8)
	before := procs.DirectReads(cs[0], 1)
	res := make(chan error, 1)
	r, err := cs[0].Irecv(bytesBlock(got), 1, tag)
	require.NoError(t, err)
	go func() { _, err := r.Wait(wctx); res <- err }()
	waitDirectReads(t, cs[0], 1, before)
	require.NoError(t, comm.Send(ctx, cs[1], bytesBlock(pattern(8, tag)), 0, tag))
	require.NoError(t, within(t, res, "a receive did not complete"))
	require.Equal(t, pattern(8, tag), got)
}

// bothWaits runs a test over shared-memory links (waiters poll the ring,
// then sleep), and over TCP links with waiters that block at once and with
// waiters that poll the socket first (Config.Spin). Heartbeats come every
// 15 s, so that none ends a blocked read during a test: a wait that
// returns does so for its own reason.
func bothWaits(t *testing.T, test func(*testing.T, procs.Config)) {
	t.Run("shm", func(t *testing.T) { test(t, procs.Config{Timeout: time.Minute, Links: procs.LinkShm}) })
	t.Run("block", func(t *testing.T) { test(t, procs.Config{Timeout: time.Minute, Links: procs.LinkTCP}) })
	t.Run("spin", func(t *testing.T) {
		test(t, procs.Config{Timeout: time.Minute, Links: procs.LinkTCP, Spin: time.Millisecond})
	})
}

// TestDirectWaitCancel cancels a receive whose waiter is blocked reading
// the socket: the waiter returns ErrCanceled and the link goes on working.
func TestDirectWaitCancel(t *testing.T) { bothWaits(t, testDirectWaitCancel) }

func testDirectWaitCancel(t *testing.T, tmpl procs.Config) {
	cs, ctx := pairOf(t, tmpl)
	r, res := startDirectRecv(t, ctx, cs[0], 1, 1, make([]byte, 8))
	time.Sleep(20 * time.Millisecond) // let it block in the read
	require.NoError(t, r.Cancel())
	require.ErrorIs(t, within(t, res, "the waiter blocked in the read did not see the cancel"), comm.ErrCanceled)
	want := pattern(8, 1)
	go func() { _ = comm.Send(ctx, cs[1], bytesBlock(want), 0, 2) }()
	got := make([]byte, 8)
	st, err := comm.Recv(ctx, cs[0], bytesBlock(got), 1, 2)
	require.NoError(t, err)
	require.Equal(t, 8, st.Count)
	require.Equal(t, want, got)
}

// TestDirectWaitStaleKick interrupts a direct waiter's read although its
// receive is pending and its context live, as a late completer of an
// earlier waiter's request can: the waiter clears the kick and reads its
// message.
func TestDirectWaitStaleKick(t *testing.T) { bothWaits(t, testDirectWaitStaleKick) }

func testDirectWaitStaleKick(t *testing.T, tmpl procs.Config) {
	cs, ctx := pairOf(t, tmpl)
	got := make([]byte, 8)
	_, res := startDirectRecv(t, ctx, cs[0], 1, 1, got)
	time.Sleep(20 * time.Millisecond) // let it block in the read
	procs.KickRead(cs[0], 1)
	time.Sleep(20 * time.Millisecond)
	want := pattern(8, 5)
	require.NoError(t, comm.Send(ctx, cs[1], bytesBlock(want), 0, 1))
	require.NoError(t, within(t, res, "a stale kick kept the waiter from reading its message"))
	require.Equal(t, want, got)
}

// TestDirectWaitContext ends a direct wait through its context: Wait
// returns the context's error, the receive stays posted, and a later Wait
// gets the message whole.
func TestDirectWaitContext(t *testing.T) { bothWaits(t, testDirectWaitContext) }

func testDirectWaitContext(t *testing.T, tmpl procs.Config) {
	cs, ctx := pairOf(t, tmpl)
	got := make([]byte, 100<<10) // a rendezvous-sized receive
	wctx, wcancel := context.WithCancel(ctx)
	r, res := startDirectRecv(t, wctx, cs[0], 1, 1, got)
	time.Sleep(20 * time.Millisecond)
	wcancel()
	require.ErrorIs(t, within(t, res, "the waiter blocked in the read did not see its context end"), context.Canceled)
	_, done, err := r.Test()
	require.NoError(t, err)
	require.False(t, done, "the receive completed without a message")
	want := pattern(len(got), 2)
	sent := make(chan error, 1)
	go func() { sent <- comm.Send(ctx, cs[1], bytesBlock(want), 0, 1) }()
	st, err := r.Wait(ctx)
	require.NoError(t, err)
	require.Equal(t, len(want), st.Count)
	require.True(t, bytes.Equal(want, got), "the message arrived damaged")
	require.NoError(t, testwait.Recv(t, sent, "rank 1's Send"))
}

// TestDirectWaitContextReused ends a direct wait through a context that
// earlier waits used too (the link keeps a reused context's registration
// from wait to wait), and checks that the end of a context no wait uses any more
// leaves a later waiter alone.
func TestDirectWaitContextReused(t *testing.T) { bothWaits(t, testDirectWaitContextReused) }

func testDirectWaitContextReused(t *testing.T, tmpl procs.Config) {
	cs, ctx := pairOf(t, tmpl)
	got := make([]byte, 8)
	// Earlier waits with a and b, each of them direct.
	a, cancelA := context.WithCancel(ctx)
	b, cancelB := context.WithCancel(ctx)
	for i, wctx := range []context.Context{a, a, b, a, b} {
		recvDirect(t, ctx, wctx, cs, 10+i)
	}
	// a's end while b's waiter reads: b's waiter goes on and gets its
	// message.
	r, res := startDirectRecv(t, b, cs[0], 1, 2, got)
	cancelA()
	time.Sleep(20 * time.Millisecond)
	require.NoError(t, comm.Send(ctx, cs[1], bytesBlock(pattern(8, 7)), 0, 2))
	require.NoError(t, within(t, res, "the end of another context stopped a waiter"))
	require.Equal(t, pattern(8, 7), got)
	// b's end while its waiter reads: the wait ends with b's error.
	r, res = startDirectRecv(t, b, cs[0], 1, 3, got)
	time.Sleep(20 * time.Millisecond)
	cancelB()
	require.ErrorIs(t, within(t, res, "the waiter did not see its reused context end"), context.Canceled)
	require.NoError(t, r.Cancel())
}

// TestDirectWaitWatchKept checks when a link keeps a context's
// registration from wait to wait: not for a context made per call, which
// ends after it (a kept registration would run a callback then), but for
// one that waits twice in a row; and never for a collective's derived
// context, which the collective drops before it ends it.
func TestDirectWaitWatchKept(t *testing.T) {
	cs, ctx := pairOf(t, procs.Config{Timeout: time.Minute})
	for i := range 3 {
		call, end := context.WithTimeout(ctx, time.Minute)
		recvDirect(t, ctx, call, cs, i)
		end()
		require.Nil(t, procs.KeptWatch(cs[0], 1), "kept the registration of a context made per call")
	}
	recvDirect(t, ctx, ctx, cs, 5)
	require.Nil(t, procs.KeptWatch(cs[0], 1), "kept a registration after one wait")
	recvDirect(t, ctx, ctx, cs, 6)
	require.True(t, procs.KeptWatch(cs[0], 1) == ctx.Done(), "no registration kept after two waits with one context")
	// The native ring, in small chunks, waits for the peer many times with
	// its derived context.
	defer procs.SetRing(1<<10, 4<<10)()
	errs := make(chan error, 2)
	for _, c := range cs {
		go func() {
			v := make([]float64, 32<<10) // 256 KiB: the ring
			b, _ := memspace.FromSlice(v)
			errs <- comm.Allreduce(ctx, c, b, b, comm.Sum)
		}()
	}
	require.NoError(t, within(t, errs, "the allreduce did not complete"))
	require.NoError(t, within(t, errs, "the allreduce did not complete"))
	kept := procs.KeptWatch(cs[0], 1)
	require.True(t, kept == nil || kept == ctx.Done(), "a collective left its derived context's registration behind")
}

// TestDirectWaitClose closes a rank while one of its goroutines is blocked
// reading for a receive: Close returns, and so does the wait, with
// ErrClosed.
func TestDirectWaitClose(t *testing.T) { bothWaits(t, testDirectWaitClose) }

func testDirectWaitClose(t *testing.T, tmpl procs.Config) {
	cs, ctx := pairOf(t, tmpl)
	_, res := startDirectRecv(t, ctx, cs[0], 1, 1, make([]byte, 8))
	closed := make(chan error, 1)
	go func() { closed <- cs[0].Close() }()
	require.ErrorIs(t, within(t, res, "the waiter blocked in the read did not return on Close"), comm.ErrClosed)
	require.NoError(t, within(t, closed, "Close did not return"))
}

// TestProgressWithoutWaiting checks that a rank answers a peer's large
// message while none of its goroutines waits or tests: after a direct wait
// has left the read role free, the reader goroutine takes it back on its
// own, so the peer's send (which needs this rank's clear-to-send)
// completes.
func TestProgressWithoutWaiting(t *testing.T) {
	cs := group(t, 2, procs.Config{})
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	before := procs.DirectReads(cs[0], 1)
	one := make([]byte, 8)
	res := make(chan error, 1)
	go func() { _, err := comm.Recv(ctx, cs[0], bytesBlock(one), 1, 1); res <- err }()
	waitDirectReads(t, cs[0], 1, before)
	require.NoError(t, comm.Send(ctx, cs[1], bytesBlock(pattern(8, 3)), 0, 1))
	require.NoError(t, testwait.Recv(t, res, "rank 0's Recv"))

	got := make([]byte, 4<<20)
	r, err := cs[0].Irecv(bytesBlock(got), 1, 2)
	require.NoError(t, err)
	want := pattern(len(got), 4)
	// Rank 0 neither waits nor tests until rank 1's send has completed.
	require.NoError(t, comm.Send(ctx, cs[1], bytesBlock(want), 0, 2))
	st, err := r.Wait(ctx)
	require.NoError(t, err)
	require.Equal(t, len(want), st.Count)
	require.True(t, bytes.Equal(want, got), "the message arrived damaged")
}

// TestDirectWaitMany has several goroutines of one rank receive from the
// same peer at once, eager and rendezvous messages mixed, so that the read
// role passes between waiters and the reader goroutine, kicks land in the
// middle of large frames, and waiters find their message read by others.
func TestDirectWaitMany(t *testing.T) { bothWaits(t, testDirectWaitMany) }

func testDirectWaitMany(t *testing.T, tmpl procs.Config) {
	tmpl.EagerLimit, tmpl.Chunk = 4<<10, 16<<10
	cs := group(t, 2, tmpl)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	const workers, msgs = 4, 40
	size := func(w, i int) int { return []int{0, 8, 3000, 5000, 70 << 10}[(w+i)%5] }
	before := procs.DirectReads(cs[0], 1)
	var wg sync.WaitGroup
	errs := make(chan error, workers+1)
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range msgs {
				got := make([]byte, size(w, i))
				st, err := comm.Recv(ctx, cs[0], bytesBlock(got), 1, w)
				if err != nil {
					errs <- err
					return
				}
				if st.Count != len(got) || !bytes.Equal(got, pattern(len(got), w*1000+i)) {
					errs <- fmt.Errorf("worker %d message %d: %d bytes, damaged or short", w, i, st.Count)
					return
				}
			}
		}()
	}
	wg.Add(1)
	go func() {
		defer wg.Done()
		// Interleave the workers' streams in a random order, keeping each
		// worker's messages in order (they share a tag).
		next := make([]int, workers)
		rng := rand.New(rand.NewPCG(1, 2))
		for left := workers * msgs; left > 0; left-- {
			w := rng.IntN(workers)
			for next[w] == msgs {
				w = (w + 1) % workers
			}
			i := next[w]
			next[w]++
			if err := comm.Send(ctx, cs[1], bytesBlock(pattern(size(w, i), w*1000+i)), 0, w); err != nil {
				errs <- err
				return
			}
		}
	}()
	testwait.Group(t, &wg, "the senders")
	close(errs)
	for err := range errs {
		require.NoError(t, err)
	}
	require.Greater(t, procs.DirectReads(cs[0], 1), before, "no waiter read the socket itself")
}

// TestNothingWaitsForTheIdleCheck runs the collectives of large messages
// (rendezvous, the native ring) on 4 ranks over TCP links with the reader
// goroutines' idle check put off by an hour: every frame a rank needs
// must be read because some goroutine was woken to read it, never because
// the idle check came round. A missed wake-up hangs here until the
// context's deadline; before the links woke their readers for
// announcements and blocked waits woke every link's, a 1 MiB reduce on 4
// ranks took 50 ms, the idle check's period, instead of 2.
func TestNothingWaitsForTheIdleCheck(t *testing.T) {
	cs := group(t, 4, procs.WithoutIdleCheck(procs.Config{Links: procs.LinkTCP}))
	const n = 1 << 17 // 1 MiB of float64
	each(t, cs, func(ctx context.Context, c *procs.Comm) error {
		ctx, cancel := context.WithTimeout(ctx, 20*time.Second)
		defer cancel()
		send, recv := make([]float64, n), make([]float64, n)
		for i := range send {
			send[i] = float64(c.Rank() + i%7)
		}
		s, _ := memspace.FromSlice(send)
		r, _ := memspace.FromSlice(recv)
		all := make([]float64, 4*n)
		a, _ := memspace.FromSlice(all)
		big := make([]float64, 4*n)
		b, _ := memspace.FromSlice(big)
		for range 3 {
			for _, step := range []struct {
				name string
				run  func() error
			}{
				{"allreduce", func() error { return comm.Allreduce(ctx, c, s, r, comm.Sum) }},
				{"reduce", func() error { return comm.Reduce(ctx, c, s, r, comm.Sum, 0) }},
				{"bcast", func() error { return comm.Bcast(ctx, c, r, 0) }},
				{"allgather", func() error { return comm.Allgather(ctx, c, s, a) }},
				{"alltoall", func() error { return comm.Alltoall(ctx, c, b, a) }},
			} {
				if err := step.run(); err != nil {
					return fmt.Errorf("rank %d: %s: %w", c.Rank(), step.name, err)
				}
			}
		}
		for i, v := range recv {
			if want := float64(6 + 4*(i%7)); v != want && c.Rank() != 0 {
				// After the bcast every rank holds rank 0's allreduce/reduce
				// result: the sum over ranks.
				return fmt.Errorf("rank %d: element %d = %v, want %v", c.Rank(), i, v, want)
			}
		}
		return nil
	})
}
