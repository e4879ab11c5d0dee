package procs_test

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math/rand/v2"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/xpu-go/xpu/backends/procs"
	"github.com/xpu-go/xpu/comm"
	"github.com/xpu-go/xpu/flight"
	"github.com/xpu-go/xpu/internal/tooling/testwait"
)

// The tests of the small-message lane (lane.go): a blocking Recv from one
// shared-memory peer takes its message straight from the link's ring when
// the link's read role is free. They check that the lane is taken, and
// that it keeps every rule the general path keeps: the order of matching
// (posted receives and queued messages first), truncation, contexts,
// close and loss, the eager credit, and the flight recorder.

// warmTag is the tag of freeRole's message.
const warmTag = 99

// lanePair makes a group of two ranks linked through shared memory with
// tmpl, whose reader goroutines never take a free read role back on their
// own (no idle check): once a receive has freed a rank's role (freeRole),
// the rank's next blocking Recv finds it free and takes the lane, so that
// what a test sends goes through the lane, not by chance. Heartbeats are
// rare, so that none lands among a test's frames.
func lanePair(t testing.TB, tmpl procs.Config) []*procs.Comm {
	t.Helper()
	tmpl.Links = procs.LinkShm
	if tmpl.Timeout == 0 {
		tmpl.Timeout = time.Minute
	}
	cs := group(t, 2, procs.WithoutIdleCheck(tmpl))
	require.Equal(t, procs.TransportShm, cs[0].Transport(1))
	return cs
}

// freeRole has rank to take the read role of its link from rank from, for
// a receive that waits there while from sends it a message, and leaves the
// role free once the receive is over: nothing reads that link until a
// receive of to does.
func freeRole(t testing.TB, ctx context.Context, cs []*procs.Comm, to, from int) {
	t.Helper()
	got := make([]byte, 8)
	before := procs.DirectReads(cs[to], from)
	res := make(chan error, 1)
	go func() { _, err := cs[to].Recv(ctx, bytesBlock(got), from, warmTag); res <- err }()
	waitDirectReads(t, cs[to], from, before)
	require.NoError(t, cs[from].Send(ctx, bytesBlock(pattern(8, warmTag)), to, warmTag))
	require.NoError(t, testwait.Recv(t, res, "the receive that frees the read role"))
	require.Equal(t, pattern(8, warmTag), got)
}

// word returns v as 8 bytes.
func word(v uint64) []byte { return binary.LittleEndian.AppendUint64(nil, v) }

// TestLaneTaken: in a ping-pong of 8-byte messages through blocking Send
// and Recv over shared memory, with the default settings but a spin long
// enough for the answer to come while the lane polls, each rank takes most
// messages through the lane, and every payload arrives right. Not all: a
// receive finds the read role held, and goes the general path, whenever
// the link's reader goroutine holds it — at the start, and after each of
// its idle checks (every 50 ms) has taken a free role back. The spin is
// the longest allowed (the lane polls a quarter of it, 2.5 ms): under the
// race detector on a loaded machine a round trip took milliseconds, and
// with 2 ms of spin three receives in four left the lane for it.
func TestLaneTaken(t *testing.T) {
	cs := group(t, 2, procs.Config{Links: procs.LinkShm, ShmSpin: 10 * time.Millisecond})
	require.Equal(t, procs.TransportShm, cs[0].Transport(1))
	// A rank that fails ends the other's wait.
	ctx, cancel := context.WithCancel(testwait.Ctx(t))
	defer cancel()
	const rounds = 1000
	lanes := make([]int64, 2)
	errs := onEach(t, cs, func(c *procs.Comm) (err error) {
		defer func() {
			if err != nil {
				cancel()
			}
		}()
		me, peer := c.Rank(), 1-c.Rank()
		before := procs.LaneReads(c, peer)
		got := make([]byte, 8)
		for i := range uint64(rounds) {
			if me == 0 {
				if err := c.Send(ctx, bytesBlock(word(i)), peer, 1); err != nil {
					return err
				}
			}
			st, err := c.Recv(ctx, bytesBlock(got), peer, 1)
			if err != nil {
				return err
			}
			want := i
			if me == 0 {
				want = ^i
			}
			if st.Count != 8 || st.Source != peer || st.Tag != 1 || binary.LittleEndian.Uint64(got) != want {
				return fmt.Errorf("rank %d, round %d: got %x (%+v), want %x", me, i, got, st, want)
			}
			if me == 1 {
				if err := c.Send(ctx, bytesBlock(word(^i)), peer, 1); err != nil {
					return err
				}
			}
		}
		lanes[me] = procs.LaneReads(c, peer) - before
		return nil
	})
	require.NoError(t, errors.Join(errs...))
	for r, n := range lanes {
		t.Logf("rank %d took %d of %d messages through the lane", r, n, rounds)
		require.GreaterOrEqual(t, n, int64(rounds/2), "rank %d took too few messages through the lane", r)
		require.LessOrEqual(t, n, int64(rounds), "rank %d counted more lane messages than it received", r)
	}
}

// TestLanePostedFirst: a receive posted before a blocking Recv gets the
// first of two matching messages, and the Recv, through the lane, the
// second (MPI's non-overtaking rule: the receive posted first gets the
// message that came first), for a posted receive from the peer and from
// any source.
func TestLanePostedFirst(t *testing.T) {
	for name, source := range map[string]int{"source": 0, "any-source": comm.AnySource} {
		t.Run(name, func(t *testing.T) {
			cs := lanePair(t, procs.Config{})
			ctx := testwait.Ctx(t)
			freeRole(t, ctx, cs, 1, 0)
			const tag = 4
			// Both wait in rank 1's ring: nothing reads it until rank 1
			// waits.
			require.NoError(t, cs[0].Send(ctx, bytesBlock([]byte("first")), 1, tag))
			require.NoError(t, cs[0].Send(ctx, bytesBlock([]byte("second")), 1, tag))
			early := make([]byte, 8)
			r, err := cs[1].Irecv(bytesBlock(early), source, tag)
			require.NoError(t, err)
			before := procs.LaneReads(cs[1], 0)
			late := make([]byte, 8)
			st, err := cs[1].Recv(ctx, bytesBlock(late), 0, tag)
			require.NoError(t, err)
			require.Equal(t, "second", string(late[:st.Count]), "the blocking Recv took the message the receive posted before it is owed")
			require.Equal(t, before+1, procs.LaneReads(cs[1], 0), "the Recv did not take its message through the lane")
			st, err = r.Wait(ctx)
			require.NoError(t, err)
			require.Equal(t, "first", string(early[:st.Count]))
			require.Equal(t, 0, st.Source)
		})
	}
}

// TestLaneUnexpectedFirst: messages from the peer already queued as
// unexpected when a blocking Recv starts are its first, in their order,
// before the one the lane could take from the ring: A and B are queued
// while rank 1 waits for C (another tag), D comes after, and three Recvs
// for their tag get A, B, D — the last one through the lane.
func TestLaneUnexpectedFirst(t *testing.T) {
	cs := lanePair(t, procs.Config{})
	ctx := testwait.Ctx(t)
	freeRole(t, ctx, cs, 1, 0)
	c, err := cs[1].Irecv(bytesBlock(make([]byte, 8)), 0, 9)
	require.NoError(t, err)
	for _, m := range []struct {
		s   string
		tag int
	}{{"A", 5}, {"B", 5}, {"C", 9}} {
		require.NoError(t, cs[0].Send(ctx, bytesBlock([]byte(m.s)), 1, m.tag))
	}
	// Rank 1 reads the link for C, queueing A and B on its way.
	_, err = c.Wait(ctx)
	require.NoError(t, err)
	require.NoError(t, cs[0].Send(ctx, bytesBlock([]byte("D")), 1, 5))
	before := procs.LaneReads(cs[1], 0)
	for _, want := range []string{"A", "B", "D"} {
		got := make([]byte, 8)
		st, err := cs[1].Recv(ctx, bytesBlock(got), 0, 5)
		require.NoError(t, err)
		require.Equal(t, want, string(got[:st.Count]), "a later message overtook one queued before the Recv")
	}
	require.Equal(t, before+1, procs.LaneReads(cs[1], 0), "D did not come through the lane")
}

// laneSizes are the sizes of TestLaneMixed's messages, with its ring of
// 16 KiB and eager limit of 32 KiB: empty, one word, a few hundred bytes,
// around the largest frame written into the ring in place (4 KiB of
// payload), eager ones that take much of the ring or do not fit it, and
// one by rendezvous.
var laneSizes = []int{0, 8, 8, 8, 300, 4064, 4096, 4097, 12 << 10, 20 << 10, 40 << 10}

// TestLaneMixed: under a random mix of sizes that take every path of the
// link, over a small ring, and of three tags, a receiver that waits in
// blocking Recvs with any tag and with given tags, in an order drawn from
// the same seed, gets every message once, whole, in the order sent among
// those it matches — the model below says which it must get — and a
// receive into a buffer too short fails with ErrTruncated, with the first
// bytes delivered and counted.
func TestLaneMixed(t *testing.T) {
	for _, seed := range []uint64{1, 2, 3} {
		t.Run(fmt.Sprint("seed", seed), func(t *testing.T) { testLaneMixed(t, seed) })
	}
}

// testLaneMixed is TestLaneMixed with the random choices drawn from seed.
func testLaneMixed(t *testing.T, seed uint64) {
	cs := lanePair(t, procs.Config{ShmRing: 16 << 10, EagerLimit: 32 << 10, ShmSpin: time.Millisecond})
	ctx := testwait.Ctx(t)
	freeRole(t, ctx, cs, 1, 0)
	rng := rand.New(rand.NewPCG(seed, 44))
	type msg struct {
		tag  int
		data []byte
	}
	const n = 300
	msgs := make([]msg, n)
	for i := range msgs {
		msgs[i] = msg{tag: 1 + rng.IntN(3), data: pattern(laneSizes[rng.IntN(len(laneSizes))], i)}
	}
	before := procs.LaneReads(cs[1], 0)
	// Rank 0 sends a few messages, rank 1 receives some of those sent,
	// and again: a receive never waits for a message not yet sent, which
	// this goroutine would never send. The sends are Isends: a
	// rendezvous completes once received.
	var sends []comm.Request
	var left []int // indices of the messages sent and not received yet
	next, truncated := 0, 0
	for next < n || len(left) > 0 {
		for k := 1 + rng.IntN(4); k > 0 && next < n; k-- {
			r, err := cs[0].Isend(bytesBlock(msgs[next].data), 1, msgs[next].tag)
			require.NoError(t, err)
			sends = append(sends, r)
			left = append(left, next)
			next++
		}
		recvs := 1 + rng.IntN(len(left))
		if next == n {
			recvs = len(left)
		}
		for ; recvs > 0; recvs-- {
			// The message the receive must get: the first left that its
			// tag matches. Mostly the first left, by any tag or by its
			// own, so that the messages queued meanwhile drain and the
			// lane gets its turns (it leaves a receive to the general
			// path while any message from the peer is queued).
			tag, at := comm.AnyTag, 0
			switch k := rng.IntN(10); {
			case k >= 8:
				tag = msgs[left[rng.IntN(len(left))]].tag
				for msgs[left[at]].tag != tag {
					at++
				}
			case k >= 4:
				tag = msgs[left[0]].tag
			}
			i := left[at]
			m := msgs[i]
			size := len(m.data)
			short := size > 0 && rng.IntN(6) == 0
			buf := make([]byte, size+rng.IntN(16))
			if short {
				buf = buf[:rng.IntN(size)]
			}
			st, err := cs[1].Recv(ctx, bytesBlock(buf), 0, tag)
			what := fmt.Sprintf("receive with tag %d into %d bytes, owed message %d (tag %d, %d bytes)", tag, len(buf), i, m.tag, size)
			if short {
				truncated++
				require.ErrorIs(t, err, comm.ErrTruncated, what)
				require.Equal(t, len(buf), st.Count, what)
				require.True(t, bytes.Equal(m.data[:len(buf)], buf), "%s: the bytes delivered differ", what)
			} else {
				require.NoError(t, err, what)
				require.Equal(t, size, st.Count, what)
				require.Equal(t, m.tag, st.Tag, what)
				require.Equal(t, 0, st.Source, what)
				require.True(t, bytes.Equal(m.data, buf[:size]), "%s: another message, or damaged", what)
			}
			left = append(left[:at], left[at+1:]...)
		}
	}
	for i, r := range sends {
		_, err := r.Wait(ctx)
		require.NoError(t, err, "send %d", i)
	}
	lanes := procs.LaneReads(cs[1], 0) - before
	t.Logf("%d messages, %d truncated, %d through the lane", n, truncated, lanes)
	require.Positive(t, lanes, "no message came through the lane: the test did not exercise it")
}

// TestLaneTruncated: through the lane, an 8-byte message received into 4
// bytes fails with ErrTruncated and delivers and counts 4 bytes, and a
// message of no bytes arrives with a count of 0.
func TestLaneTruncated(t *testing.T) {
	cs := lanePair(t, procs.Config{})
	ctx := testwait.Ctx(t)
	freeRole(t, ctx, cs, 1, 0)
	before := procs.LaneReads(cs[1], 0)
	require.NoError(t, cs[0].Send(ctx, bytesBlock(pattern(8, 3)), 1, 3))
	got := make([]byte, 4)
	st, err := cs[1].Recv(ctx, bytesBlock(got), 0, 3)
	require.ErrorIs(t, err, comm.ErrTruncated)
	require.Equal(t, 4, st.Count)
	require.Equal(t, pattern(8, 3)[:4], got)
	require.Equal(t, before+1, procs.LaneReads(cs[1], 0), "the truncated message did not come through the lane")

	require.NoError(t, cs[0].Send(ctx, bytesBlock(make([]byte, 0)), 1, 3))
	got = []byte{7, 7, 7, 7}
	st, err = cs[1].Recv(ctx, bytesBlock(got), 0, comm.AnyTag)
	require.NoError(t, err)
	require.Equal(t, comm.Status{Source: 0, Tag: 3, Count: 0}, st)
	require.Equal(t, []byte{7, 7, 7, 7}, got, "an empty message wrote into the buffer")
	require.Equal(t, before+2, procs.LaneReads(cs[1], 0), "the empty message did not come through the lane")

	// The link goes on: the next message arrives whole.
	require.NoError(t, cs[0].Send(ctx, bytesBlock(pattern(8, 4)), 1, 3))
	got = make([]byte, 8)
	_, err = cs[1].Recv(ctx, bytesBlock(got), 0, 3)
	require.NoError(t, err)
	require.Equal(t, pattern(8, 4), got)
}

// TestLaneConcurrentReceivers: two goroutines of rank 1 receive from rank
// 0 at once with blocking Recvs, each its own tag — one of them in the
// lane, the other past it, by turns — while rank 0 sends the two tags
// interleaved at random, numbered: each goroutine gets all its tag's
// messages, in order, none lost or taken by the other.
func TestLaneConcurrentReceivers(t *testing.T) {
	cs := lanePair(t, procs.Config{})
	// A goroutine that fails ends the others' waits.
	ctx, cancel := context.WithCancel(testwait.Ctx(t))
	defer cancel()
	freeRole(t, ctx, cs, 1, 0)
	const n = 300
	tags := [2]int{11, 12}
	before, lanes := procs.DirectReads(cs[1], 0), procs.LaneReads(cs[1], 0)
	var wg sync.WaitGroup
	errs := make([]error, 3)
	for g, tag := range tags {
		wg.Add(1)
		go func() {
			defer wg.Done()
			got := make([]byte, 8)
			for i := range uint64(n) {
				st, err := cs[1].Recv(ctx, bytesBlock(got), 0, tag)
				if err != nil {
					errs[g] = err
					cancel()
					return
				}
				if v := binary.LittleEndian.Uint64(got); st.Tag != tag || st.Count != 8 || v != i<<8|uint64(tag) {
					errs[g] = fmt.Errorf("tag %d: message %d is %#x (%+v), want %#x", tag, i, v, st, i<<8|uint64(tag))
					cancel()
					return
				}
			}
		}()
	}
	wg.Add(1)
	go func() {
		defer wg.Done()
		rng := rand.New(rand.NewPCG(5, 6))
		var next [2]uint64
		for next[0] < n || next[1] < n {
			g := rng.IntN(2)
			if next[g] == n {
				g = 1 - g
			}
			if err := cs[0].Send(ctx, bytesBlock(word(next[g]<<8|uint64(tags[g]))), 1, tags[g]); err != nil {
				errs[2] = err
				cancel()
				return
			}
			next[g]++
		}
	}()
	testwait.Group(t, &wg, "the receivers and the sender")
	require.NoError(t, errors.Join(errs...))
	t.Logf("%d of %d messages through the lane", procs.LaneReads(cs[1], 0)-lanes, 2*n)
	require.Greater(t, procs.DirectReads(cs[1], 0), before, "no receive took the read role")
}

// TestLaneContext: a blocking Recv whose context ends while nothing comes
// — during the lane's polling (a spin longer than the context) or after
// it — returns the context's error promptly, and takes nothing: the
// message sent next goes to the next Recv, through the lane.
func TestLaneContext(t *testing.T) {
	cs := lanePair(t, procs.Config{ShmSpin: 10 * time.Millisecond})
	ctx := testwait.Ctx(t)
	freeRole(t, ctx, cs, 1, 0)
	for i, end := range []struct {
		name string
		make func() (context.Context, context.CancelFunc)
		want error
	}{
		{"timeout in the lane", func() (context.Context, context.CancelFunc) {
			return context.WithTimeout(ctx, 2*time.Millisecond)
		}, context.DeadlineExceeded},
		{"timeout past the lane", func() (context.Context, context.CancelFunc) {
			return context.WithTimeout(ctx, 40*time.Millisecond)
		}, context.DeadlineExceeded},
		{"cancel", func() (context.Context, context.CancelFunc) {
			c, cancel := context.WithCancel(ctx)
			time.AfterFunc(3*time.Millisecond, cancel)
			return c, cancel
		}, context.Canceled},
	} {
		rctx, cancel := end.make()
		res := make(chan error, 1)
		start := time.Now()
		go func() {
			_, err := cs[1].Recv(rctx, bytesBlock(make([]byte, 8)), 0, 2)
			res <- err
		}()
		select {
		case err := <-res:
			require.ErrorIs(t, err, end.want, end.name)
		case <-time.After(5 * time.Second):
			t.Fatalf("%s: the Recv still waits %v after its context ended", end.name, time.Since(start))
		}
		cancel()
		before := procs.LaneReads(cs[1], 0)
		require.NoError(t, cs[0].Send(ctx, bytesBlock(pattern(8, i)), 1, 2))
		got := make([]byte, 8)
		_, err := cs[1].Recv(ctx, bytesBlock(got), 0, 2)
		require.NoError(t, err, end.name)
		require.Equal(t, pattern(8, i), got, "%s: the message after a canceled Recv", end.name)
		require.Equal(t, before+1, procs.LaneReads(cs[1], 0), "%s: the message after did not come through the lane", end.name)
	}
}

// TestLaneCloseAndLoss: a blocking Recv waiting for a peer — in the lane
// (its spin is long) or past it — returns ErrClosed when its own
// communicator is closed meanwhile, and ErrPeerLost when the peer's is,
// within 2 s: for the peer's, by the goodbye it reads, not once the peer
// gives up waiting for the answer (CloseTimeout, 5 s) and cuts the link.
// Close itself returns within 2 s: the goodbyes are read although the
// receive, not the reader goroutine, held the read role when Close began.
func TestLaneCloseAndLoss(t *testing.T) {
	for _, tc := range []struct {
		name   string
		closer int // the rank closed
		after  time.Duration
		want   error
	}{
		{"own-in-lane", 1, time.Millisecond, comm.ErrClosed},
		{"own-past-lane", 1, 40 * time.Millisecond, comm.ErrClosed},
		{"peer-in-lane", 0, time.Millisecond, comm.ErrPeerLost},
		{"peer-past-lane", 0, 40 * time.Millisecond, comm.ErrPeerLost},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := procs.Config{ShmSpin: 10 * time.Millisecond, CloseTimeout: 5 * time.Second}
			cs := lanePair(t, cfg)
			ctx := testwait.Ctx(t)
			freeRole(t, ctx, cs, 1, 0)
			res := make(chan error, 1)
			before := procs.DirectReads(cs[1], 0)
			go func() {
				_, err := cs[1].Recv(ctx, bytesBlock(make([]byte, 8)), 0, 2)
				res <- err
			}()
			waitDirectReads(t, cs[1], 0, before)
			time.Sleep(tc.after)
			closed := make(chan error, 1)
			go func() { closed <- cs[tc.closer].Close() }()
			select {
			case err := <-res:
				require.ErrorIs(t, err, tc.want)
			case <-time.After(2 * time.Second):
				t.Fatal("the Recv still waits 2 s after the close")
			}
			// The receive that held the read role woke the reader
			// goroutine as it gave the role back during Close, which then
			// read the peer's goodbye: no idle check takes it back here.
			select {
			case err := <-closed:
				require.NoError(t, err)
			case <-time.After(2 * time.Second):
				t.Fatal("Close still waits 2 s on: nobody read the peer's goodbye")
			}
		})
	}
}

// TestLaneCredit: with a small eager budget (4 KiB), far more 8-byte
// messages than it holds pass through the lane: the lane gives each
// message's credit back, and the sender counts what it wrote into the
// ring in place, so the budget never runs out nor goes wrong (no
// ErrProtocol, no fall to rendezvous, which the lane does not take).
func TestLaneCredit(t *testing.T) {
	cs := lanePair(t, procs.Config{EagerBudget: 4 << 10, ShmSpin: 2 * time.Millisecond})
	ctx := testwait.Ctx(t)
	freeRole(t, ctx, cs, 1, 0)
	const n = 10000
	before := procs.LaneReads(cs[1], 0)
	sent := make(chan error, 1)
	go func() {
		for i := range uint64(n) {
			if err := cs[0].Send(ctx, bytesBlock(word(i)), 1, 6); err != nil {
				sent <- err
				return
			}
		}
		sent <- nil
	}()
	got := make([]byte, 8)
	for i := range uint64(n) {
		_, err := cs[1].Recv(ctx, bytesBlock(got), 0, 6)
		require.NoError(t, err, "message %d", i)
		require.Equal(t, i, binary.LittleEndian.Uint64(got), "message %d", i)
	}
	require.NoError(t, testwait.Recv(t, sent, "rank 0's sends"))
	lanes := procs.LaneReads(cs[1], 0) - before
	t.Logf("%d of %d messages through the lane", lanes, n)
	// Those the lane could not take went the general path (a poll past
	// the spin, the role held), not by rendezvous: most go through it.
	require.GreaterOrEqual(t, lanes, int64(n/2), "few messages came through the lane: the sender ran out of eager credit?")
}

// TestLaneFlight: a receive through the lane is in the flight recorder as
// a receive from its peer with its tag, done, and a truncated one as
// failed with its error.
func TestLaneFlight(t *testing.T) {
	cs := lanePair(t, procs.Config{})
	rec := cs[1].FlightRecorder()
	if rec == nil {
		t.Skip("the flight recorder is off (XPU_FLIGHT_SIZE)")
	}
	ctx := testwait.Ctx(t)
	freeRole(t, ctx, cs, 1, 0)
	count := func() int {
		es, _ := rec.Entries()
		return len(es)
	}
	// last returns the entry that the receive just made, its only one.
	last := func(had int) flight.Entry {
		es, _ := rec.Entries()
		require.Len(t, es, had+1, "one entry for one receive: %+v", es)
		return es[len(es)-1]
	}
	before := procs.LaneReads(cs[1], 0)
	require.NoError(t, cs[0].Send(ctx, bytesBlock(pattern(8, 1)), 1, 7))
	had := count()
	_, err := cs[1].Recv(ctx, bytesBlock(make([]byte, 8)), 0, 7)
	require.NoError(t, err)
	e := last(had)
	require.Equal(t, flight.OpRecv, e.Op, "%+v", e)
	require.Equal(t, 0, e.Peer, "%+v", e)
	require.Equal(t, 7, e.Tag, "%+v", e)
	require.Equal(t, int64(8), e.Count, "%+v", e)
	require.Equal(t, flight.Done, e.State, "%+v", e)

	require.NoError(t, cs[0].Send(ctx, bytesBlock(pattern(8, 2)), 1, 8))
	had = count()
	_, err = cs[1].Recv(ctx, bytesBlock(make([]byte, 4)), 0, 8)
	require.ErrorIs(t, err, comm.ErrTruncated)
	e = last(had)
	require.Equal(t, flight.OpRecv, e.Op, "%+v", e)
	require.Equal(t, 0, e.Peer, "%+v", e)
	require.Equal(t, 8, e.Tag, "%+v", e)
	require.Equal(t, flight.Failed, e.State, "%+v", e)
	require.Contains(t, e.Err, "truncated", "%+v", e)
	require.Equal(t, before+2, procs.LaneReads(cs[1], 0), "the receives did not go through the lane")
}

// TestLaneFlightWhileWaiting: a receive whose message comes while it
// waits in the lane has one entry in the flight recorder, ended done (or
// failed, truncated) when its message comes through the lane. A receive
// that the lane leaves to the general path, its wait longer than the
// lane's share of the spin, is in the record as posted while it waits,
// and keeps the entry the lane posted: one entry for one receive, done
// when the general path completes it.
func TestLaneFlightWhileWaiting(t *testing.T) {
	cs := lanePair(t, procs.Config{ShmSpin: 10 * time.Millisecond})
	rec := cs[1].FlightRecorder()
	if rec == nil {
		t.Skip("the flight recorder is off (XPU_FLIGHT_SIZE)")
	}
	ctx := testwait.Ctx(t)
	freeRole(t, ctx, cs, 1, 0)
	for i, tc := range []struct {
		name  string
		size  int  // the receive's buffer
		lane  bool // the message is sent at once, while the lane polls
		state flight.State
	}{
		{"in the lane", 8, true, flight.Done},
		{"truncated in the lane", 4, true, flight.Failed},
		{"past the lane", 8, false, flight.Done},
	} {
		// A loaded machine may keep the sender past the lane's share of
		// the spin: a receive meant for the lane has three tries.
		for try := 1; ; try++ {
			lanes := procs.LaneReads(cs[1], 0)
			laneRecvFlight(t, ctx, cs, tc.name, tc.size, 20+i, tc.lane, tc.state)
			took := procs.LaneReads(cs[1], 0) - lanes
			if !tc.lane {
				require.Zero(t, took, "%s: the message came through the lane", tc.name)
				break
			}
			if took == 1 || try == 3 {
				require.Equal(t, int64(1), took, "%s: the message did not come through the lane in %d tries", tc.name, try)
				break
			}
		}
	}
}

// laneRecvFlight receives a message with tag from rank 0 on rank 1 into a
// buffer of size bytes, sent as soon as the receive holds the read role
// (lane) or once it is in the flight record as posted and past the lane,
// and checks the receive's one entry: its state, and that it is the
// posted one.
func laneRecvFlight(t *testing.T, ctx context.Context, cs []*procs.Comm, name string, size, tag int, lane bool, state flight.State) {
	t.Helper()
	rec := cs[1].FlightRecorder()
	es, _ := rec.Entries()
	had := len(es)
	direct := procs.DirectReads(cs[1], 0)
	res := make(chan error, 1)
	go func() {
		_, err := cs[1].Recv(ctx, bytesBlock(make([]byte, size)), 0, tag)
		res <- err
	}()
	// The lane gives the receive up after a quarter of the spin (2.5 ms),
	// and the general path sleeps after the spin.
	for deadline := time.Now().Add(10 * time.Second); procs.DirectReads(cs[1], 0) == direct; runtime.Gosched() {
		require.True(t, time.Now().Before(deadline), "%s: the receive did not take the read role", name)
	}
	var posted flight.Entry
	if !lane {
		require.Eventually(t, func() bool {
			es, _ := rec.Entries()
			if len(es) != had+1 {
				return false
			}
			posted = es[had]
			return true
		}, 10*time.Second, time.Millisecond, "%s: the waiting receive is not in the flight record", name)
		require.Equal(t, flight.OpRecv, posted.Op, "%s: %+v", name, posted)
		require.Equal(t, tag, posted.Tag, "%s: %+v", name, posted)
		require.Equal(t, flight.Posted, posted.State, "%s: %+v", name, posted)
		time.Sleep(20 * time.Millisecond)
	}
	require.NoError(t, cs[0].Send(ctx, bytesBlock(pattern(8, tag)), 1, tag), name)
	err := testwait.Recv(t, res, "the receive "+name)
	if state == flight.Failed {
		require.ErrorIs(t, err, comm.ErrTruncated, name)
	} else {
		require.NoError(t, err, name)
	}
	es, _ = rec.Entries()
	require.Len(t, es, had+1, "%s: one entry for one receive: %+v", name, es[had:])
	e := es[had]
	if !lane {
		require.Equal(t, posted.ID, e.ID, "%s: %+v", name, e)
	}
	require.Equal(t, flight.OpRecv, e.Op, "%s: %+v", name, e)
	require.Equal(t, 0, e.Peer, "%s: %+v", name, e)
	require.Equal(t, tag, e.Tag, "%s: %+v", name, e)
	require.Equal(t, state, e.State, "%s: %+v", name, e)
	require.False(t, e.Ended.Before(e.Posted), "%s: %+v", name, e)
	if state == flight.Failed {
		require.Contains(t, e.Err, "truncated", "%s: %+v", name, e)
	}
}

// TestLaneAfterBufferedFrames: a record of the ring may hold several
// frames (the writer goroutine writes the frames queued behind a write at
// once); the general path reads such a record through the link's buffered
// reader, and the receive it completes may leave the record's later frames
// there. The next blocking Recv must get those before any message of a
// later record, which the lane would find first in the ring.
//
// Rank 0 writes E1 and E2 as one record; rank 1 receives E1 with Irecv and
// Wait (the general path, which leaves E2 in its buffered reader, and
// nothing else reads the link: no idle check); E3 follows as a record of
// its own, and the two blocking Recvs must get E2, then E3.
func TestLaneAfterBufferedFrames(t *testing.T) {
	cs := lanePair(t, procs.Config{})
	ctx := testwait.Ctx(t)
	freeRole(t, ctx, cs, 1, 0)
	require.NoError(t, procs.WriteFrames(cs[0], 1, 1, word(1), word(2)))
	got := make([]byte, 8)
	r, err := cs[1].Irecv(bytesBlock(got), 0, 1)
	require.NoError(t, err)
	_, err = r.Wait(ctx)
	require.NoError(t, err)
	require.Equal(t, uint64(1), binary.LittleEndian.Uint64(got))
	require.NoError(t, cs[0].Send(ctx, bytesBlock(word(3)), 1, 1))
	for _, want := range []uint64{2, 3} {
		_, err = cs[1].Recv(ctx, bytesBlock(got), 0, 1)
		require.NoError(t, err)
		require.Equal(t, want, binary.LittleEndian.Uint64(got), "E3 overtook E2, left in the buffered reader")
	}
}
