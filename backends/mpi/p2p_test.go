//go:build mpi

package mpi_test

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/xpu-go/xpu/backends/cpu"
	"github.com/xpu-go/xpu/backends/mpi"
	"github.com/xpu-go/xpu/comm"
	"github.com/xpu-go/xpu/internal/tooling/testwait"
	"github.com/xpu-go/xpu/memspace"
)

// TestSPMDPointToPoint checks the point-to-point operations, each rank
// running it as its own rank of the world communicator.
func TestSPMDPointToPoint(t *testing.T) {
	c := rank(t)
	spmd(t, c, "ring", func(t *testing.T) { testRing(t, c) })
	spmd(t, c, "off-heap", func(t *testing.T) { testOffHeap(t, c) })
	spmd(t, c, "wildcards", func(t *testing.T) { testWildcards(t, c) })
	spmd(t, c, "reserved-tags", func(t *testing.T) { testReservedTags(t, c) })
	spmd(t, c, "non-overtaking", func(t *testing.T) { testNonOvertaking(t, c) })
	spmd(t, c, "truncation", func(t *testing.T) { testTruncation(t, c) })
	spmd(t, c, "cancel", func(t *testing.T) { testCancel(t, c) })
	spmd(t, c, "context", func(t *testing.T) { testContext(t, c) })
	spmd(t, c, "bad-arguments", func(t *testing.T) { testBadArguments(t, c) })
	spmd(t, c, "concurrent", func(t *testing.T) { testConcurrent(t, c) })
}

// testRing sends messages of many sizes around the ring of ranks, with the
// blocking calls on both paths and with requests, and checks every byte
// and status.
func testRing(t *testing.T, c *mpi.Comm) {
	p, r := c.Size(), c.Rank()
	next, prev := mod(r+1, p), mod(r-1, p)
	sizes := []int{0, 1, 3, 8, 4095, 4096, 4097, 65536, 1<<20 + 13}
	for _, cx := range contexts {
		for _, n := range sizes {
			for _, mode := range []string{"irecv+send", "isend+recv"} {
				t.Run(fmt.Sprintf("%s/%s/n=%d", cx.name, mode, n), func(t *testing.T) {
					ctx, cancel := cx.make()
					defer cancel()
					tag := 10 + n%1000
					out, in := pattern(n, r), make([]byte, n)
					var st comm.Status
					if mode == "irecv+send" {
						rr, err := c.Irecv(buf(t, in), prev, tag)
						require.NoError(t, err)
						require.NoError(t, comm.Send(ctx, c, buf(t, out), next, tag))
						st, err = wait(t, rr)
						require.NoError(t, err)
					} else {
						sr, err := c.Isend(buf(t, out), next, tag)
						require.NoError(t, err)
						st, err = comm.Recv(ctx, c, buf(t, in), prev, tag)
						require.NoError(t, err)
						sst, err := wait(t, sr)
						require.NoError(t, err)
						assert.Equal(t, comm.Status{Source: next, Tag: tag, Count: n}, sst, "send status")
					}
					assert.Equal(t, comm.Status{Source: prev, Tag: tag, Count: n}, st)
					require.Equal(t, pattern(n, prev), in, "bytes from rank %d", prev)
				})
			}
		}
	}
}

// testOffHeap moves memory allocated outside the Go heap.
func testOffHeap(t *testing.T, c *mpi.Comm) {
	p, r := c.Size(), c.Rank()
	sp := cpu.NewSpace(cpu.SpaceOptions{})
	defer func() { require.NoError(t, sp.Close()) }()
	const n = 300_000
	out, err := memspace.Alloc[byte](sp, n)
	require.NoError(t, err)
	defer func() { require.NoError(t, out.Free()) }()
	in, err := memspace.Alloc[byte](sp, n)
	require.NoError(t, err)
	defer func() { require.NoError(t, in.Free()) }()
	o, err := out.Host()
	require.NoError(t, err)
	copy(o, pattern(n, r))
	for _, cx := range contexts {
		ctx, cancel := cx.make()
		rr, err := c.Irecv(in.Block(), mod(r-1, p), 5)
		require.NoError(t, err)
		require.NoError(t, c.Send(ctx, out.Block(), mod(r+1, p), 5))
		st, err := wait(t, rr)
		cancel()
		require.NoError(t, err)
		require.Equal(t, n, st.Count)
		i, err := in.Host()
		require.NoError(t, err)
		require.Equal(t, pattern(n, mod(r-1, p)), i, cx.name)
	}
}

// testWildcards: rank 0 receives one message from every rank with
// AnySource and AnyTag, and the statuses name who sent what.
func testWildcards(t *testing.T, c *mpi.Comm) {
	p, r := c.Size(), c.Rank()
	for _, cx := range contexts {
		ctx, cancel := cx.make()
		var sends []comm.Request
		msg := []byte{byte(r)}
		sr, err := c.Isend(buf(t, msg), 0, 100+r)
		require.NoError(t, err)
		sends = append(sends, sr)
		if r == 0 {
			seen := map[int]bool{}
			for range p {
				in := make([]byte, 4)
				st, err := comm.Recv(ctx, c, buf(t, in), comm.AnySource, comm.AnyTag)
				require.NoError(t, err)
				assert.Equal(t, 1, st.Count)
				assert.Equal(t, int(in[0]), st.Source, "payload names the sender")
				assert.Equal(t, 100+st.Source, st.Tag)
				assert.False(t, seen[st.Source], "two messages from rank %d", st.Source)
				seen[st.Source] = true
			}
			assert.Len(t, seen, p)
		}
		require.NoError(t, comm.WaitAll(ctx, sends...))
		// Any source, one tag: every rank sends tag 7 to the last rank.
		last := p - 1
		sr, err = c.Isend(buf(t, msg), last, 7)
		require.NoError(t, err)
		if r == last {
			got := map[int]bool{}
			for range p {
				in := make([]byte, 1)
				rr, err := c.Irecv(buf(t, in), comm.AnySource, 7)
				require.NoError(t, err)
				st, err := wait(t, rr)
				require.NoError(t, err)
				assert.Equal(t, 7, st.Tag)
				assert.Equal(t, int(in[0]), st.Source)
				got[st.Source] = true
			}
			assert.Len(t, got, p)
		}
		_, err = wait(t, sr)
		require.NoError(t, err)
		// The next round's messages must not meet this round's receives.
		require.NoError(t, comm.Barrier(ctx, c))
		cancel()
	}
}

// testReservedTags: an AnyTag receive never matches a reserved tag, which
// still travels under its own tag.
func testReservedTags(t *testing.T, c *mpi.Comm) {
	p, r := c.Size(), c.Rank()
	const reserved = comm.MaxTag + 7
	from := mod(1, p) // the sender; rank 0 receives
	ctx, cancel := context.WithTimeout(context.Background(), guard)
	defer cancel()
	var anyReq comm.Request
	anyBuf := make([]byte, 8)
	if r == 0 {
		var err error
		anyReq, err = c.Irecv(buf(t, anyBuf), comm.AnySource, comm.AnyTag)
		require.NoError(t, err)
	}
	var sends []comm.Request
	if r == from {
		sr, err := c.Isend(buf(t, []byte("reserved")), 0, reserved)
		require.NoError(t, err)
		sends = append(sends, sr)
	}
	require.NoError(t, comm.Barrier(ctx, c))
	if r == 0 {
		// Only the reserved message has been sent: the wildcard must wait.
		time.Sleep(20 * time.Millisecond)
		_, done, err := anyReq.Test()
		require.NoError(t, err)
		require.False(t, done, "an AnyTag receive matched a reserved tag")
	}
	require.NoError(t, comm.Barrier(ctx, c))
	if r == from {
		sr, err := c.Isend(buf(t, []byte("user")), 0, 5)
		require.NoError(t, err)
		sends = append(sends, sr)
	}
	if r == 0 {
		st, err := wait(t, anyReq)
		require.NoError(t, err)
		assert.Equal(t, comm.Status{Source: from, Tag: 5, Count: 4}, st)
		assert.Equal(t, "user", string(anyBuf[:st.Count]))
		in := make([]byte, 16)
		rr, err := c.Irecv(buf(t, in), from, reserved)
		require.NoError(t, err)
		st, err = wait(t, rr)
		require.NoError(t, err)
		assert.Equal(t, comm.Status{Source: from, Tag: reserved, Count: 8}, st)
		assert.Equal(t, "reserved", string(in[:st.Count]))
	}
	require.NoError(t, comm.WaitAll(ctx, sends...))
	// The largest reserved tag travels too.
	rr, err := c.Irecv(buf(t, make([]byte, 1)), r, comm.MaxReservedTag)
	require.NoError(t, err)
	require.NoError(t, c.Send(ctx, buf(t, []byte{1}), r, comm.MaxReservedTag))
	st, err := wait(t, rr)
	require.NoError(t, err)
	assert.Equal(t, comm.MaxReservedTag, st.Tag)
}

// testNonOvertaking: messages from one sender on one tag arrive in the
// order sent, while several goroutines send and receive on other tags at
// once; and a wildcard receiver sees one goroutine's messages in order.
func testNonOvertaking(t *testing.T, c *mpi.Comm) {
	p, r := c.Size(), c.Rank()
	const streams, msgs = 4, 40
	to, from := mod(r+1, p), mod(r-1, p)
	for _, cx := range contexts {
		ctx, cancel := cx.make()
		var wg sync.WaitGroup
		errs := make(chan error, 2*streams)
		for g := range streams {
			wg.Add(2)
			go func() {
				defer wg.Done()
				for i := range msgs {
					var m [8]byte
					binary.LittleEndian.PutUint64(m[:], uint64(i))
					mb, _ := memspace.FromSlice(m[:])
					if err := comm.Send(ctx, c, mb.Block(), to, 200+g); err != nil {
						errs <- err
						return
					}
				}
			}()
			go func() {
				defer wg.Done()
				for i := range msgs {
					var m [8]byte
					mb, _ := memspace.FromSlice(m[:])
					if _, err := comm.Recv(ctx, c, mb.Block(), from, 200+g); err != nil {
						errs <- err
						return
					}
					if got := binary.LittleEndian.Uint64(m[:]); got != uint64(i) {
						errs <- fmt.Errorf("stream %d: message %d arrived as number %d", g, got, i)
						return
					}
				}
			}()
		}
		reportErrs(t, &wg, errs)
		// One goroutine sends on alternating tags; AnyTag receives keep order.
		done := make(chan error, 1)
		go func() {
			for i := range msgs {
				var m [8]byte
				binary.LittleEndian.PutUint64(m[:], uint64(i))
				mb, _ := memspace.FromSlice(m[:])
				if err := comm.Send(ctx, c, mb.Block(), to, 300+i%3); err != nil {
					done <- err
					return
				}
			}
			done <- nil
		}()
		for i := range msgs {
			var m [8]byte
			st, err := comm.Recv(ctx, c, buf(t, m[:]), from, comm.AnyTag)
			require.NoError(t, err)
			require.Equal(t, uint64(i), binary.LittleEndian.Uint64(m[:]), "AnyTag message order")
			require.Equal(t, 300+i%3, st.Tag)
		}
		require.NoError(t, testwait.Recv(t, done, "the sender"))
		cancel()
	}
}

// testTruncation: a message longer than the buffer fails the receive with
// ErrTruncated, is consumed, and the next message is received intact.
// The sizes are those of the C reproducer (overrunCases,
// TestTruncationOverrun), at which Open MPI 4.1 writes a plain receive's
// message past the buffer: eager ones, then rendezvous ones into buffers
// of 10 bytes, 4 KiB, 60000 bytes (above the shared-memory eager limit)
// and one byte short.
func testTruncation(t *testing.T, c *mpi.Comm) {
	p, r := c.Size(), c.Rank()
	to, from := mod(r+1, p), mod(r-1, p)
	const slack = 64 // bytes after the buffer that must stay zero
	for _, tc := range overrunCases {
		big, n := tc[0], tc[1]
		for _, mode := range []string{"recv/background", "recv/deadline", "irecv"} {
			what := fmt.Sprintf("%s: %d bytes into %d", mode, big, n)
			ctx, cancel := context.WithTimeout(context.Background(), guard)
			if mode == "recv/background" {
				ctx = context.Background()
			}
			s1, err := c.Isend(buf(t, pattern(big, r)), to, 9)
			require.NoError(t, err)
			s2, err := c.Isend(buf(t, []byte("abc")), to, 9)
			require.NoError(t, err)
			room := make([]byte, n+slack) // the buffer, then the slack
			small := room[:n:n]
			var st comm.Status
			var rerr error
			if mode == "irecv" {
				rr, err := c.Irecv(buf(t, small), from, 9)
				require.NoError(t, err)
				st, rerr = wait(t, rr)
			} else {
				st, rerr = c.Recv(ctx, buf(t, small), from, 9)
			}
			require.ErrorIs(t, rerr, comm.ErrTruncated, what)
			assert.Contains(t, rerr.Error(), "mpi ", "the error names the backend")
			assert.Contains(t, rerr.Error(), "truncated")
			assert.Equal(t, comm.Status{Source: from, Tag: 9, Count: n}, st, what)
			assert.True(t, bytes.Equal(pattern(big, from)[:n], small), "%s: the delivered prefix", what)
			assert.Equal(t, make([]byte, slack), room[n:], "%s: bytes past the buffer were written", what)
			next := make([]byte, 10)
			st, err = c.Recv(ctx, buf(t, next), from, 9)
			require.NoError(t, err, "%s: the next message", what)
			assert.Equal(t, "abc", string(next[:st.Count]))
			require.NoError(t, comm.WaitAll(ctx, s1, s2))
			cancel()
		}
	}
}

// testCancel: canceling an unmatched receive makes Wait return
// ErrCanceled; canceling a small send either cancels it or lets it
// complete, and the receiver agrees.
func testCancel(t *testing.T, c *mpi.Comm) {
	p, r := c.Size(), c.Rank()
	ctx, cancel := context.WithTimeout(context.Background(), guard)
	defer cancel()
	rr, err := c.Irecv(buf(t, make([]byte, 8)), comm.AnySource, 999)
	require.NoError(t, err)
	_, done, err := rr.Test()
	require.NoError(t, err)
	require.False(t, done)
	require.NoError(t, rr.Cancel())
	_, err = wait(t, rr)
	require.ErrorIs(t, err, comm.ErrCanceled)
	require.NoError(t, rr.Cancel(), "cancel after completion")
	_, done, err = rr.Test()
	require.True(t, done)
	require.ErrorIs(t, err, comm.ErrCanceled)

	// A small send, canceled at once: MPI either cancels it or delivers it.
	to, from := mod(r+1, p), mod(r-1, p)
	sr, err := c.Isend(buf(t, []byte("cancel me")), to, 998)
	require.NoError(t, err)
	require.NoError(t, sr.Cancel())
	_, serr := wait(t, sr)
	if serr != nil {
		require.ErrorIs(t, serr, comm.ErrCanceled)
	}
	// Tell the receiver whether to expect it.
	flags := make([]byte, p)
	if serr == nil {
		flags[r] = 1
	}
	all := make([]byte, p)
	require.NoError(t, comm.AllreduceBlock(ctx, c, buf(t, flags), buf(t, all), comm.Uint8, comm.Sum))
	if all[from] == 1 {
		in := make([]byte, 16)
		st, err := comm.Recv(ctx, c, buf(t, in), from, 998)
		require.NoError(t, err)
		assert.Equal(t, "cancel me", string(in[:st.Count]))
	}
}

// testContext: blocking calls honour their context and leave the
// communicator usable; a canceled Recv does not steal a later message.
func testContext(t *testing.T, c *mpi.Comm) {
	p, r := c.Size(), c.Rank()
	to, from := mod(r+1, p), mod(r-1, p)
	long, cancelLong := context.WithTimeout(context.Background(), guard)
	defer cancelLong()

	// Already done: nothing starts.
	done, cancel := context.WithCancel(context.Background())
	cancel()
	_, err := c.Recv(done, buf(t, make([]byte, 1)), from, 40)
	require.ErrorIs(t, err, context.Canceled)
	require.ErrorIs(t, c.Send(done, buf(t, []byte{1}), to, 40), context.Canceled)
	require.ErrorIs(t, c.Barrier(done), context.Canceled)

	// A receive nothing matches times out promptly.
	short, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	start := time.Now()
	_, err = c.Recv(short, buf(t, make([]byte, 8)), from, 41)
	cancel()
	require.ErrorIs(t, err, context.DeadlineExceeded)
	require.Less(t, time.Since(start), guard)
	// The message sent afterwards goes to the next receive.
	require.NoError(t, comm.Barrier(long, c))
	sr, err := c.Isend(buf(t, []byte("after")), to, 41)
	require.NoError(t, err)
	in := make([]byte, 8)
	st, err := c.Recv(long, buf(t, in), from, 41)
	require.NoError(t, err)
	assert.Equal(t, "after", string(in[:st.Count]))
	_, err = wait(t, sr)
	require.NoError(t, err)

	// Wait on a request with a context that ends leaves it pending.
	rr, err := c.Irecv(buf(t, in), from, 42)
	require.NoError(t, err)
	short, cancel = context.WithTimeout(context.Background(), 20*time.Millisecond)
	_, err = rr.Wait(short)
	cancel()
	require.ErrorIs(t, err, context.DeadlineExceeded)
	require.NoError(t, comm.Barrier(long, c))
	require.NoError(t, c.Send(long, buf(t, []byte("late")), to, 42))
	st, err = wait(t, rr)
	require.NoError(t, err)
	assert.Equal(t, "late", string(in[:st.Count]))

	if p < 2 {
		return
	}
	// A large send nobody receives yet times out; the bytes it carries are
	// its own copy, taken at the call, whether or not MPI still delivers
	// it (Open MPI cannot cancel a send; MPICH can).
	const n = 1 << 20
	if r == 0 {
		msg := pattern(n, 77)
		short, cancel = context.WithTimeout(context.Background(), 50*time.Millisecond)
		err := c.Send(short, buf(t, msg), 1, 43)
		cancel()
		if err != nil {
			require.ErrorIs(t, err, context.DeadlineExceeded)
		}
		clear(msg) // the caller may reuse its buffer at once
	}
	require.NoError(t, comm.Barrier(long, c))
	if r == 1 {
		got := make([]byte, n)
		short, cancel = context.WithTimeout(context.Background(), 2*time.Second)
		st, err := c.Recv(short, buf(t, got), 0, 43)
		cancel()
		if err == nil {
			require.Equal(t, n, st.Count)
			require.Equal(t, pattern(n, 77), got, "a send that timed out delivered other bytes than it was given")
		} else {
			require.ErrorIs(t, err, context.DeadlineExceeded)
		}
	}
	require.NoError(t, comm.Barrier(long, c))
}

// testBadArguments: bad ranks, tags, buffers and contexts are refused with
// the right sentinel, and nothing is sent.
func testBadArguments(t *testing.T, c *mpi.Comm) {
	p := c.Size()
	b := buf(t, make([]byte, 4))
	ctx := testwait.Ctx(t)
	for _, dest := range []int{-1, comm.AnySource, p, p + 100} {
		_, err := c.Isend(b, dest, 0)
		require.ErrorIs(t, err, comm.ErrInvalidArgument, "isend to %d", dest)
		require.ErrorIs(t, c.Send(ctx, b, dest, 0), comm.ErrInvalidArgument, "send to %d", dest)
	}
	for _, src := range []int{-2, p} {
		_, err := c.Irecv(b, src, 0)
		require.ErrorIs(t, err, comm.ErrInvalidArgument, "irecv from %d", src)
		_, err = c.Recv(ctx, b, src, 0)
		require.ErrorIs(t, err, comm.ErrInvalidArgument, "recv from %d", src)
	}
	for _, tag := range []int{-2, comm.MaxReservedTag + 1} {
		_, err := c.Isend(b, 0, tag)
		require.ErrorIs(t, err, comm.ErrInvalidArgument, "tag %d", tag)
		_, err = c.Irecv(b, 0, tag)
		require.ErrorIs(t, err, comm.ErrInvalidArgument, "tag %d", tag)
	}
	_, err := c.Isend(b, 0, comm.AnyTag)
	require.ErrorIs(t, err, comm.ErrInvalidArgument, "AnyTag on a send")
	require.ErrorIs(t, comm.Send(ctx, c, b, 0, comm.MaxTag+1), comm.ErrInvalidArgument, "reserved tag through comm.Send")
	if ub := c.TagUB(); ub < comm.MaxTag {
		_, err := c.Isend(b, 0, ub+1)
		require.ErrorIs(t, err, comm.ErrInvalidArgument, "tag above MPI_TAG_UB %d", ub)
	}
	assert.GreaterOrEqual(t, c.TagUB(), 32767, "MPI guarantees tags up to 32767")
	//nolint:staticcheck // a nil context is the bad input under test
	require.ErrorIs(t, c.Send(nil, b, 0, 0), comm.ErrInvalidArgument)
	//nolint:staticcheck // a nil context is the bad input under test
	_, err = c.Recv(nil, b, 0, 0)
	require.ErrorIs(t, err, comm.ErrInvalidArgument)
	dev := memspace.NewBlock(deviceSpace{}, 0x1000, 64, nil)
	_, err = c.Isend(dev, 0, 0)
	require.ErrorIs(t, err, comm.ErrNotSupported, "device memory")
	_, err = c.Irecv(dev, 0, 0)
	require.ErrorIs(t, err, comm.ErrNotSupported, "device memory")
}

// testConcurrent: many goroutines exchange messages with every rank at
// once, with requests, both blocking paths and Test polling.
func testConcurrent(t *testing.T, c *mpi.Comm) {
	p, r := c.Size(), c.Rank()
	const workers, rounds = 4, 25
	ctx, cancel := context.WithTimeout(context.Background(), guard)
	defer cancel()
	var wg sync.WaitGroup
	errs := make(chan error, workers*p)
	for w := range workers {
		for peer := range p {
			wg.Add(1)
			go func() {
				defer wg.Done()
				tag := 500 + w
				for i := range rounds {
					out := pattern(64+i, r*100+w)
					in := make([]byte, 64+i)
					ib, _ := memspace.FromSlice(in)
					ob, _ := memspace.FromSlice(out)
					rr, err := c.Irecv(ib.Block(), peer, tag)
					if err != nil {
						errs <- err
						return
					}
					cx := ctx
					if i%2 == 0 {
						cx = context.Background()
					}
					if err := comm.Send(cx, c, ob.Block(), peer, tag); err != nil {
						errs <- err
						return
					}
					for {
						_, done, err := rr.Test()
						if err != nil {
							errs <- err
							return
						}
						if done {
							break
						}
						time.Sleep(10 * time.Microsecond)
					}
					if want := pattern(64+i, peer*100+w); string(in) != string(want) {
						errs <- fmt.Errorf("worker %d, peer %d, round %d: wrong bytes", w, peer, i)
						return
					}
				}
			}()
		}
	}
	reportErrs(t, &wg, errs)
}

// deviceSpace is a space whose memory the host cannot touch.
type deviceSpace struct{}

func (deviceSpace) Name() string { return "test-device" }
func (deviceSpace) Properties() memspace.Properties {
	return memspace.Properties{Kind: "test-device", Device: 0, DeviceAccessible: true, Alignment: 256}
}
func (deviceSpace) Allocate(size, align int) (memspace.Block, error) {
	return memspace.Block{}, memspace.ErrNotSupported
}
func (deviceSpace) Free(memspace.Block) error { return memspace.ErrNotSupported }

// reportErrs waits for wg, then reports every error sent on errs.
func reportErrs(t *testing.T, wg *sync.WaitGroup, errs chan error) {
	t.Helper()
	testwait.Group(t, wg, "the goroutines")
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}
