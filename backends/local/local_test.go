package local_test

import (
	"context"
	"fmt"
	"testing"
	"time"
	"unsafe"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/xpu-go/xpu/backends/local"
	"github.com/xpu-go/xpu/comm"
	"github.com/xpu-go/xpu/internal/tooling/testwait"
	"github.com/xpu-go/xpu/memspace"
)

func TestNewGroup(t *testing.T) {
	for _, n := range []int{0, -1, local.MaxRanks + 1, 1 << 62} {
		_, err := local.NewGroup(n, local.Options{})
		require.ErrorIs(t, err, comm.ErrInvalidArgument, "n=%d", n)
	}
	cs := group(t, 3, local.Options{})
	for i, c := range cs {
		assert.Equal(t, i, c.Rank())
		assert.Equal(t, 3, c.Size())
		assert.Equal(t, local.DefaultEagerLimit, c.EagerLimit())
		assert.Equal(t, local.DefaultEagerBudget, c.EagerBudget())
	}
	for _, budget := range []int{-1, -3} {
		_, err := local.NewGroup(1, local.Options{EagerBudget: budget})
		require.ErrorIs(t, err, comm.ErrInvalidArgument, "a negative eager budget is refused")
		assert.NotContains(t, err.Error(), "\n", "one line")
		_, err = local.GroupFunc(local.Options{EagerBudget: budget})(context.Background(), 1)
		require.ErrorIs(t, err, comm.ErrInvalidArgument, "a negative eager budget is refused by GroupFunc")
	}
	assert.Equal(t, 1, group(t, 1, local.Options{EagerBudget: 1})[0].EagerBudget())
	assert.Equal(t, -1, group(t, 1, local.Options{EagerLimit: -5})[0].EagerLimit())
	assert.Equal(t, 10, group(t, 1, local.Options{EagerLimit: 10})[0].EagerLimit())
}

func TestGroupFunc(t *testing.T) {
	f := local.GroupFunc(local.Options{})
	cs, err := f(context.Background(), 2)
	require.NoError(t, err)
	require.Len(t, cs, 2)
	defer func() {
		for _, c := range cs {
			require.NoError(t, c.Close())
		}
	}()
	ctx := testwait.Ctx(t)
	go func() { _ = comm.Send(ctx, cs[0], blk(t, []byte("hi")), 1, 3) }()
	got := make([]byte, 2)
	st, err := comm.Recv(ctx, cs[1], blk(t, got), 0, 3)
	require.NoError(t, err)
	assert.Equal(t, comm.Status{Source: 0, Tag: 3, Count: 2}, st)
	assert.Equal(t, "hi", string(got))

	_, err = f(ctx, 0)
	require.ErrorIs(t, err, comm.ErrInvalidArgument)
	done, cancel := context.WithCancel(ctx)
	cancel()
	_, err = f(done, 2)
	require.ErrorIs(t, err, context.Canceled)
}

// TestSendRecv covers both protocols, both arrival orders (receive posted
// first, message first) and self-sends, checking data and Status.
func TestSendRecv(t *testing.T) {
	for _, p := range protocols {
		for _, postFirst := range []bool{true, false} {
			for _, self := range []bool{false, true} {
				t.Run(fmt.Sprintf("%s/postFirst=%v/self=%v", p.name, postFirst, self), func(t *testing.T) {
					cs := group(t, 2, p.opts)
					src, dst := cs[0], cs[1]
					if self {
						dst = src
					}
					msg := pattern(1000, 3)
					got := make([]byte, 1200)
					var rr, sr comm.Request
					if postFirst {
						rr = irecv(t, dst, got, src.Rank(), 42)
						pending(t, rr)
						sr = isend(t, src, msg, dst.Rank(), 42)
					} else {
						sr = isend(t, src, msg, dst.Rank(), 42)
						if p.name == "rendezvous" {
							pending(t, sr)
						} else {
							_, done, err := sr.Test()
							require.True(t, done, "eager send completes at once")
							require.NoError(t, err)
						}
						rr = irecv(t, dst, got, src.Rank(), 42)
					}
					st, err := wait(t, rr)
					require.NoError(t, err)
					assert.Equal(t, comm.Status{Source: src.Rank(), Tag: 42, Count: 1000}, st)
					assert.Equal(t, msg, got[:1000])
					assert.Equal(t, make([]byte, 200), got[1000:], "bytes past the message untouched")
					st, err = wait(t, sr)
					require.NoError(t, err)
					assert.Equal(t, comm.Status{Source: dst.Rank(), Tag: 42, Count: 1000}, st)
				})
			}
		}
	}
}

// TestEagerLimit checks the boundary: a message of exactly the limit is
// eager, one byte more is rendezvous.
func TestEagerLimit(t *testing.T) {
	cs := group(t, 2, local.Options{EagerLimit: 16})
	r := isend(t, cs[0], make([]byte, 16), 1, 0)
	_, done, _ := r.Test()
	assert.True(t, done, "16 bytes with limit 16 is eager")
	r2 := isend(t, cs[0], make([]byte, 17), 1, 0)
	pending(t, r2)
	_, err := wait(t, irecv(t, cs[1], make([]byte, 16), 0, 0))
	require.NoError(t, err)
	_, err = wait(t, irecv(t, cs[1], make([]byte, 17), 0, 0))
	require.NoError(t, err)
	_, err = wait(t, r2)
	require.NoError(t, err)
}

// TestEagerCopies checks that an eager send has copied its buffer: the
// sender may overwrite it at once.
func TestEagerCopies(t *testing.T) {
	cs := group(t, 2, local.Options{})
	msg := pattern(100, 1)
	want := append([]byte(nil), msg...)
	_, err := wait(t, isend(t, cs[0], msg, 1, 0))
	require.NoError(t, err)
	clear(msg)
	got := make([]byte, 100)
	_, err = wait(t, irecv(t, cs[1], got, 0, 0))
	require.NoError(t, err)
	assert.Equal(t, want, got)
}

func TestZeroLength(t *testing.T) {
	for _, p := range protocols {
		t.Run(p.name, func(t *testing.T) {
			cs := group(t, 2, p.opts)
			empty, err := memspace.FromSlice([]byte{})
			require.NoError(t, err)
			for _, b := range []memspace.Block{{}, empty.Block()} {
				sr, err := cs[0].Isend(b, 1, 5)
				require.NoError(t, err)
				rr, err := cs[1].Irecv(b, 0, 5)
				require.NoError(t, err)
				st, err := wait(t, rr)
				require.NoError(t, err)
				assert.Equal(t, comm.Status{Source: 0, Tag: 5, Count: 0}, st)
				st, err = wait(t, sr)
				require.NoError(t, err)
				assert.Equal(t, comm.Status{Source: 1, Tag: 5, Count: 0}, st)
			}
			// An empty receive buffer truncates a non-empty message.
			isend(t, cs[0], []byte{1}, 1, 6)
			rr, err := cs[1].Irecv(memspace.Block{}, 0, 6)
			require.NoError(t, err)
			st, err := wait(t, rr)
			require.ErrorIs(t, err, comm.ErrTruncated)
			assert.Equal(t, 0, st.Count)
		})
	}
}

// TestOtherHostSpace sends between a block of another host space and Go
// memory.
func TestOtherHostSpace(t *testing.T) {
	cs := group(t, 2, local.Options{EagerLimit: 8})
	backing := pattern(64, 9)
	b := memspace.NewBlock(fakeSpace{host: true}, memspace.Addr(uintptr(unsafe.Pointer(&backing[0]))), len(backing), unsafe.Pointer(&backing[0]))
	sr, err := cs[0].Isend(b, 1, 1)
	require.NoError(t, err)
	got := make([]byte, 64)
	_, err = wait(t, irecv(t, cs[1], got, 0, 1))
	require.NoError(t, err)
	_, err = wait(t, sr)
	require.NoError(t, err)
	assert.Equal(t, backing, got)
}

func TestBadArguments(t *testing.T) {
	cs := group(t, 2, local.Options{})
	c := cs[0]
	p := make([]byte, 4)
	for _, tc := range []struct {
		name      string
		rank, tag int
	}{
		{"rank -2", -2, 0}, {"rank n", 2, 0}, {"tag -2", 1, -2}, {"tag too large", 1, comm.MaxReservedTag + 1},
		{"AnySource", comm.AnySource, 0}, {"AnyTag", 1, comm.AnyTag},
	} {
		_, err := c.Isend(blk(t, p), tc.rank, tc.tag)
		require.ErrorIs(t, err, comm.ErrInvalidArgument, "isend %s", tc.name)
		if tc.name == "AnySource" || tc.name == "AnyTag" {
			continue
		}
		_, err = c.Irecv(blk(t, p), tc.rank, tc.tag)
		require.ErrorIs(t, err, comm.ErrInvalidArgument, "irecv %s", tc.name)
	}
	dev := memspace.NewBlock(fakeSpace{}, 0x1000, 64, nil)
	_, err := c.Isend(dev, 1, 0)
	require.ErrorIs(t, err, comm.ErrNotSupported)
	_, err = c.Irecv(dev, 1, 0)
	require.ErrorIs(t, err, comm.ErrNotSupported)
	// A zero-length block of a non-host space is still not host memory.
	_, err = c.Irecv(memspace.NewBlock(fakeSpace{}, 0x1000, 0, nil), 1, 0)
	require.ErrorIs(t, err, comm.ErrNotSupported)
	var nilReq comm.Request = isend(t, c, p, 1, 0)
	_, err = nilReq.Wait(nil) //nolint:staticcheck // a nil context is the bad input under test
	// An eager send has completed, so Wait answers without the context.
	require.NoError(t, err)
	rr := irecv(t, c, p, 1, 9)
	_, err = rr.Wait(nil) //nolint:staticcheck // a nil context is the bad input under test
	require.ErrorIs(t, err, comm.ErrInvalidArgument)
	require.NoError(t, rr.Cancel())
	// Nothing above disturbed the ranks.
	_, err = wait(t, irecv(t, cs[1], p, 0, 0))
	require.NoError(t, err)
}

func TestWildcards(t *testing.T) {
	cs := group(t, 3, local.Options{})
	ctx := testwait.Ctx(t)
	// AnySource and AnyTag report the actual source and tag.
	isend(t, cs[2], []byte{2}, 0, 7)
	got := make([]byte, 1)
	st, err := wait(t, irecv(t, cs[0], got, comm.AnySource, comm.AnyTag))
	require.NoError(t, err)
	assert.Equal(t, comm.Status{Source: 2, Tag: 7, Count: 1}, st)

	// A specific tag skips other tags; AnySource with a tag skips others.
	isend(t, cs[1], []byte{10}, 0, 10)
	isend(t, cs[1], []byte{11}, 0, 11)
	st, err = wait(t, irecv(t, cs[0], got, 1, 11))
	require.NoError(t, err)
	assert.Equal(t, 11, st.Tag)
	assert.Equal(t, byte(11), got[0])
	st, err = wait(t, irecv(t, cs[0], got, comm.AnySource, 10))
	require.NoError(t, err)
	assert.Equal(t, comm.Status{Source: 1, Tag: 10, Count: 1}, st)

	// AnyTag never matches a reserved tag, posted first or not.
	reserved := comm.MaxTag + 1
	isend(t, cs[1], []byte{1}, 0, reserved)
	r := irecv(t, cs[0], got, comm.AnySource, comm.AnyTag)
	r2 := irecv(t, cs[0], got, 1, comm.AnyTag)
	pending(t, r)
	pending(t, r2)
	st, err = wait(t, irecv(t, cs[0], make([]byte, 1), 1, reserved))
	require.NoError(t, err)
	assert.Equal(t, reserved, st.Tag)
	sr := isend(t, cs[2], []byte{1}, 0, comm.MaxReservedTag)
	pending(t, r)
	st, err = comm.Recv(ctx, cs[0], blk(t, make([]byte, 1)), 2, comm.MaxReservedTag)
	require.Error(t, err, "comm.Recv rejects reserved tags")
	require.ErrorIs(t, err, comm.ErrInvalidArgument)
	rr := irecv(t, cs[0], make([]byte, 1), 2, comm.MaxReservedTag)
	st, err = wait(t, rr)
	require.NoError(t, err)
	assert.Equal(t, comm.MaxReservedTag, st.Tag)
	_, err = wait(t, sr)
	require.NoError(t, err)
	require.NoError(t, r.Cancel())
	require.NoError(t, r2.Cancel())
	_, err = wait(t, r)
	require.ErrorIs(t, err, comm.ErrCanceled)
	_, err = wait(t, r2)
	require.ErrorIs(t, err, comm.ErrCanceled)
}

// TestMatchOrder checks that a message matches the earliest posted receive
// it fits, across specific and AnySource receives, and that receives take
// the earliest message they fit.
func TestMatchOrder(t *testing.T) {
	for _, p := range protocols {
		t.Run(p.name, func(t *testing.T) {
			cs := group(t, 3, p.opts)
			bufs := make([][]byte, 4)
			for i := range bufs {
				bufs[i] = make([]byte, 1)
			}
			// Posted in the order any, specific, any, specific.
			r0 := irecv(t, cs[0], bufs[0], comm.AnySource, 1)
			r1 := irecv(t, cs[0], bufs[1], 1, 1)
			r2 := irecv(t, cs[0], bufs[2], comm.AnySource, comm.AnyTag)
			r3 := irecv(t, cs[0], bufs[3], 1, comm.AnyTag)
			var sends []comm.Request
			for i := range 4 {
				sends = append(sends, isend(t, cs[1], []byte{byte(i)}, 0, 1))
			}
			for i, r := range []comm.Request{r0, r1, r2, r3} {
				st, err := wait(t, r)
				require.NoError(t, err)
				assert.Equal(t, comm.Status{Source: 1, Tag: 1, Count: 1}, st)
				assert.Equal(t, byte(i), bufs[i][0], "receive %d got message %d", i, bufs[i][0])
			}
			require.NoError(t, comm.WaitAll(testwait.Ctx(t), sends...))

			// Messages first: from rank 2, then rank 1, then rank 2 again.
			sends = sends[:0]
			sends = append(sends, isend(t, cs[2], []byte{0}, 0, 5))
			sends = append(sends, isend(t, cs[1], []byte{1}, 0, 6))
			sends = append(sends, isend(t, cs[2], []byte{2}, 0, 6))
			got := make([]byte, 1)
			st, err := wait(t, irecv(t, cs[0], got, comm.AnySource, 6))
			require.NoError(t, err)
			assert.Equal(t, comm.Status{Source: 1, Tag: 6, Count: 1}, st)
			st, err = wait(t, irecv(t, cs[0], got, comm.AnySource, comm.AnyTag))
			require.NoError(t, err)
			assert.Equal(t, comm.Status{Source: 2, Tag: 5, Count: 1}, st)
			assert.Equal(t, byte(0), got[0])
			st, err = wait(t, irecv(t, cs[0], got, 2, comm.AnyTag))
			require.NoError(t, err)
			assert.Equal(t, byte(2), got[0])
			require.NoError(t, comm.WaitAll(testwait.Ctx(t), sends...))
		})
	}
}

func TestTruncation(t *testing.T) {
	for _, p := range protocols {
		for _, postFirst := range []bool{true, false} {
			t.Run(fmt.Sprintf("%s/postFirst=%v", p.name, postFirst), func(t *testing.T) {
				cs := group(t, 2, p.opts)
				msg := pattern(100, 5)
				got := make([]byte, 40)
				var rr, sr comm.Request
				if postFirst {
					rr = irecv(t, cs[1], got, 0, 1)
					sr = isend(t, cs[0], msg, 1, 1)
				} else {
					sr = isend(t, cs[0], msg, 1, 1)
					rr = irecv(t, cs[1], got, 0, 1)
				}
				st, err := wait(t, rr)
				require.ErrorIs(t, err, comm.ErrTruncated)
				assert.Equal(t, comm.Status{Source: 0, Tag: 1, Count: 40}, st)
				assert.Equal(t, msg[:40], got)
				st, err = wait(t, sr)
				require.NoError(t, err, "the send of a truncated message completes normally")
				assert.Equal(t, 100, st.Count)
				// The message was consumed: the next receive gets the next one.
				isend(t, cs[0], []byte{77}, 1, 1)
				st, err = wait(t, irecv(t, cs[1], got, 0, 1))
				require.NoError(t, err)
				assert.Equal(t, 1, st.Count)
				assert.Equal(t, byte(77), got[0])
			})
		}
	}
}

func TestCancel(t *testing.T) {
	t.Run("recv", func(t *testing.T) {
		cs := group(t, 2, local.Options{})
		got := make([]byte, 1)
		r := irecv(t, cs[1], got, 0, 1)
		require.NoError(t, r.Cancel())
		st, err := wait(t, r)
		require.ErrorIs(t, err, comm.ErrCanceled)
		assert.Equal(t, comm.Status{}, st)
		require.NoError(t, r.Cancel(), "cancel twice")
		// The canceled receive takes nothing: a new one gets the message.
		isend(t, cs[0], []byte{9}, 1, 1)
		assert.Equal(t, byte(0), got[0])
		recvByte(t, cs[1], 0, 1, 9)
	})
	t.Run("rendezvous send", func(t *testing.T) {
		cs := group(t, 2, local.Options{EagerLimit: -1})
		s1 := isend(t, cs[0], []byte{1}, 1, 1)
		s2 := isend(t, cs[0], []byte{2}, 1, 1)
		require.NoError(t, s1.Cancel())
		_, err := wait(t, s1)
		require.ErrorIs(t, err, comm.ErrCanceled)
		recvByte(t, cs[1], 0, 1, 2, "the canceled message is gone")
		_, err = wait(t, s2)
		require.NoError(t, err)
	})
	t.Run("eager send", func(t *testing.T) {
		cs := group(t, 2, local.Options{})
		s := isend(t, cs[0], []byte{3}, 1, 1)
		require.NoError(t, s.Cancel())
		_, err := wait(t, s)
		require.NoError(t, err, "an eager send has completed")
		recvByte(t, cs[1], 0, 1, 3)
	})
	t.Run("after completion", func(t *testing.T) {
		cs := group(t, 2, local.Options{EagerLimit: -1})
		r := irecv(t, cs[1], make([]byte, 1), 0, 1)
		s := isend(t, cs[0], []byte{4}, 1, 1)
		_, err := wait(t, r)
		require.NoError(t, err)
		require.NoError(t, r.Cancel())
		require.NoError(t, s.Cancel())
		st, err := wait(t, r)
		require.NoError(t, err)
		assert.Equal(t, 1, st.Count)
		_, err = wait(t, s)
		require.NoError(t, err)
	})
}

// TestCancelRace races Cancel with matching: every message is received
// exactly once, by a receive that succeeded, whatever the interleaving.
func TestCancelRace(t *testing.T) {
	for _, p := range protocols {
		t.Run(p.name, func(t *testing.T) {
			cs := group(t, 2, p.opts)
			const n = 300
			received := map[int]bool{}
			record := func(got []byte) {
				v := int(got[0]) | int(got[1])<<8
				require.False(t, received[v], "message %d received twice", v)
				received[v] = true
			}
			var sends []comm.Request
			for i := range n {
				got := make([]byte, 2)
				rr := irecv(t, cs[1], got, 0, 1)
				msg := []byte{byte(i), byte(i >> 8)}
				done := make(chan comm.Request)
				go func() {
					r, err := cs[0].Isend(blk(t, msg), 1, 1)
					assert.NoError(t, err)
					done <- r
				}()
				require.NoError(t, rr.Cancel())
				sr := testwait.Recv(t, done, "the Isend")
				require.NotNil(t, sr)
				if i%2 == 0 {
					require.NoError(t, sr.Cancel())
				}
				sends = append(sends, sr)
				st, err := wait(t, rr)
				if err == nil {
					record(got)
					assert.Equal(t, 2, st.Count)
				} else {
					require.ErrorIs(t, err, comm.ErrCanceled)
				}
			}
			// Every send has started, so what is left is queued: a receive
			// that does not complete at once finds nothing more.
			for {
				got := make([]byte, 2)
				r := irecv(t, cs[1], got, 0, 1)
				if _, done, _ := r.Test(); !done {
					require.NoError(t, r.Cancel())
					_, err := wait(t, r)
					require.ErrorIs(t, err, comm.ErrCanceled)
					break
				}
				_, err := wait(t, r)
				require.NoError(t, err)
				record(got)
			}
			var canceledSends []int
			for i, sr := range sends {
				if _, err := wait(t, sr); err != nil {
					require.ErrorIs(t, err, comm.ErrCanceled)
					canceledSends = append(canceledSends, i)
				}
			}
			assert.Equal(t, n, len(received)+len(canceledSends), "every message received or its send canceled")
			for _, i := range canceledSends {
				assert.False(t, received[i], "canceled message %d was received", i)
			}
		})
	}
}

func TestWaitContext(t *testing.T) {
	cs := group(t, 2, local.Options{})
	got := make([]byte, 1)
	r := irecv(t, cs[1], got, 0, 1)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Millisecond)
	defer cancel()
	_, err := r.Wait(ctx)
	require.ErrorIs(t, err, context.DeadlineExceeded)
	pending(t, r)
	// Still usable: the request completes when the message comes.
	isend(t, cs[0], []byte{8}, 1, 1)
	st, err := wait(t, r)
	require.NoError(t, err)
	assert.Equal(t, 1, st.Count)
	assert.Equal(t, byte(8), got[0])

	// A completed request answers even with a done context.
	_, err = r.Wait(ctx)
	require.NoError(t, err)

	// comm.Recv cancels on timeout: a later message goes to the next receive.
	short, cancel2 := context.WithTimeout(context.Background(), 10*time.Millisecond)
	defer cancel2()
	_, err = comm.Recv(short, cs[1], blk(t, got), 0, 2)
	require.ErrorIs(t, err, context.DeadlineExceeded)
	isend(t, cs[0], []byte{6}, 1, 2)
	_, err = wait(t, irecv(t, cs[1], got, 0, 2))
	require.NoError(t, err)
	assert.Equal(t, byte(6), got[0])

	// comm.Send of a rendezvous message cancels on timeout.
	rz := group(t, 2, local.Options{EagerLimit: -1})
	short3, cancel3 := context.WithTimeout(context.Background(), 10*time.Millisecond)
	defer cancel3()
	err = comm.Send(short3, rz[0], blk(t, []byte{1}), 1, 3)
	require.ErrorIs(t, err, context.DeadlineExceeded)
	r = irecv(t, rz[1], got, 0, 3)
	pending(t, r)
	require.NoError(t, r.Cancel())
}

// TestEagerBudget: once a rank holds its budget of unreceived eager bytes,
// further messages to it go by rendezvous, in order with the others.
func TestEagerBudget(t *testing.T) {
	cs := group(t, 2, local.Options{EagerLimit: 100, EagerBudget: 250})
	var sends []comm.Request
	for i := range 3 {
		sends = append(sends, isend(t, cs[0], pattern(100, byte(i)), 1, 1))
	}
	for i, r := range sends {
		_, done, err := r.Test()
		require.NoError(t, err)
		assert.Equal(t, i < 2, done, "send %d: eager within the budget, rendezvous beyond", i)
	}
	got := make([]byte, 100)
	_, err := wait(t, irecv(t, cs[1], got, 0, 1))
	require.NoError(t, err)
	assert.Equal(t, pattern(100, 0), got)
	// 100 bytes held now: room for one more eager message.
	sends = append(sends, isend(t, cs[0], pattern(100, 3), 1, 1))
	_, done, _ := sends[3].Test()
	assert.True(t, done, "eager again once the budget has room")
	for i := 1; i < 4; i++ {
		_, err := wait(t, irecv(t, cs[1], got, 0, 1))
		require.NoError(t, err)
		assert.Equal(t, pattern(100, byte(i)), got, "message %d in order", i)
	}
	require.NoError(t, comm.WaitAll(testwait.Ctx(t), sends...))

	// There is no unbounded budget.
	_, err = local.NewGroup(2, local.Options{EagerLimit: 100, EagerBudget: -1})
	require.ErrorIs(t, err, comm.ErrInvalidArgument)
}

// TestBlocking exercises the native blocking calls used by comm.Send and
// comm.Recv.
func TestBlocking(t *testing.T) {
	var _ comm.Blocking = (*local.Comm)(nil)
	ctx := testwait.Ctx(t)
	cs := group(t, 2, local.Options{EagerLimit: 8})
	// Reserved tags are carried by the native calls.
	reserved := comm.MaxTag + 5
	require.NoError(t, cs[0].Send(ctx, blk(t, []byte{1, 2}), 1, reserved))
	got := make([]byte, 1)
	st, err := cs[1].Recv(ctx, blk(t, got), 0, reserved)
	require.ErrorIs(t, err, comm.ErrTruncated, "a waiting message longer than the buffer")
	assert.Equal(t, comm.Status{Source: 0, Tag: reserved, Count: 1}, st)
	assert.Equal(t, byte(1), got[0])

	// Bad arguments.
	require.ErrorIs(t, cs[0].Send(ctx, blk(t, got), 2, 0), comm.ErrInvalidArgument)
	_, err = cs[0].Recv(ctx, blk(t, got), 0, -7)
	require.ErrorIs(t, err, comm.ErrInvalidArgument)

	// Timeouts cancel: a pending receive, a pending rendezvous send.
	short, cancel := context.WithTimeout(ctx, 10*time.Millisecond)
	defer cancel()
	_, err = cs[1].Recv(short, blk(t, got), 0, 1)
	require.ErrorIs(t, err, context.DeadlineExceeded)
	require.ErrorIs(t, cs[0].Send(short, blk(t, make([]byte, 64)), 1, 1), context.DeadlineExceeded)
	r := irecv(t, cs[1], got, 0, 1)
	pending(t, r)
	require.NoError(t, r.Cancel())

	// A rendezvous Send completes when the receive comes.
	errc := make(chan error, 1)
	go func() { errc <- cs[0].Send(ctx, blk(t, pattern(64, 1)), 1, 2) }()
	big := make([]byte, 64)
	st, err = cs[1].Recv(ctx, blk(t, big), 0, 2)
	require.NoError(t, err)
	assert.Equal(t, comm.Status{Source: 0, Tag: 2, Count: 64}, st)
	assert.Equal(t, pattern(64, 1), big)
	require.NoError(t, testwait.Recv(t, errc, "the rendezvous Send"))
}
