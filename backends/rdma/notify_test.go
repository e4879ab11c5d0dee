package rdma_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/xpu-go/xpu/backends/cpu"
	"github.com/xpu-go/xpu/backends/rdma"
	"github.com/xpu-go/xpu/backends/rdma/internal/fabric/sim"
	"github.com/xpu-go/xpu/comm"
	"github.com/xpu-go/xpu/internal/tooling/testwait"
	"github.com/xpu-go/xpu/memspace"
)

func TestNotify(t *testing.T)         { k, _ := simKit(); testNotify(t, k) }
func TestNotifyPeerLost(t *testing.T) { k, _ := simKit(); testNotifyPeerLost(t, k) }
func TestBatchNative(t *testing.T)    { k, _ := simKit(); testBatchNative(t, k) }

// TestNotifyShaken runs testNotify with every work request delayed at
// random: a notification that could overtake a WRITE would.
func TestNotifyShaken(t *testing.T) {
	k, _ := simKit(sim.WithDelays(100 * time.Microsecond))
	testNotify(t, k)
}

// testNotify: rank 0 Puts into rank 1's region, Gets from it, and
// notifies; rank 1, on the notification, finds the Put's bytes in place.
// Many rounds, with the message naming the round, so that a notification
// overtaking its Puts would show. Then: a notification too long is
// refused, an empty one and one to itself arrive, a poll with an ended
// context returns at once, and after Close WaitNotification fails with
// ErrClosed.
func testNotify(t *testing.T, k kit) {
	const size, rounds = 256 << 10, 20
	cs := k.group(t, 2, rdma.Config{})
	space := cpu.NewSpace(cpu.SpaceOptions{})
	defer space.Close()
	ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
	defer cancel()
	require.NoError(t, onEvery(t, cs, func(me int, c *rdma.Comm) error {
		mem, err := memspace.Alloc[byte](space, size)
		if err != nil {
			return err
		}
		defer mem.Free()
		reg, err := c.Expose(mem.Block())
		if err != nil {
			return err
		}
		defer reg.Close()
		keys, err := comm.ExchangeKeys(ctx, c, reg.Key())
		if err != nil {
			return err
		}
		host, _ := mem.Host()
		if me == 0 {
			src := make([]byte, size)
			back := make([]byte, 4096)
			for round := range rounds {
				for i := range src {
					src[i] = byte(round*7 + i)
				}
				// Chunks, so that some wait for send-queue room.
				for off := 0; off < size; off += 4096 {
					if _, err := c.Put(blk(src[off:off+4096]), keys[1], off); err != nil {
						return err
					}
				}
				if _, err := c.Get(blk(back), keys[1], 0); err != nil {
					return err
				}
				if err := c.Notify(ctx, 1, []byte(fmt.Sprint(round))); err != nil {
					return err
				}
				// Rank 1's answer: it has checked the round.
				if n, err := c.WaitNotification(ctx); err != nil || n.Source != 1 {
					return fmt.Errorf("the answer of round %d: %v from %d", round, err, n.Source)
				}
			}
			if err := c.Flush(ctx, 1); err != nil {
				return err
			}
			return nil
		}
		for round := range rounds {
			n, err := c.WaitNotification(ctx)
			if err != nil {
				return err
			}
			if n.Source != 0 || string(n.Msg) != fmt.Sprint(round) {
				return fmt.Errorf("notification %d: from %d, %q", round, n.Source, n.Msg)
			}
			for i := range size {
				if host[i] != byte(round*7+i) {
					return fmt.Errorf("round %d: byte %d is %d on notification, want %d", round, i, host[i], byte(round*7+i))
				}
			}
			if err := c.Notify(ctx, 0, nil); err != nil {
				return err
			}
		}
		return nil
	}))
	c := cs[0]
	long := make([]byte, comm.MaxNotification+1)
	require.ErrorIs(t, c.Notify(ctx, 1, long), comm.ErrInvalidArgument)
	require.ErrorIs(t, c.Notify(ctx, 2, nil), comm.ErrInvalidArgument)
	// A poll: an ended context returns at once, with its error.
	ended, stop := context.WithCancel(ctx)
	stop()
	start := time.Now()
	_, err := cs[1].WaitNotification(ended)
	require.ErrorIs(t, err, context.Canceled)
	require.Less(t, time.Since(start), time.Second)
	// Empty, longest and self notifications arrive.
	full := bytes.Repeat([]byte{0xa5}, comm.MaxNotification)
	require.NoError(t, c.Notify(ctx, 1, nil))
	require.NoError(t, c.Notify(ctx, 1, full))
	require.NoError(t, c.Notify(ctx, 0, []byte("me")))
	n, err := cs[1].WaitNotification(ctx)
	require.NoError(t, err)
	require.Empty(t, n.Msg)
	n, err = cs[1].WaitNotification(ctx)
	require.NoError(t, err)
	require.Equal(t, full, n.Msg)
	n, err = c.WaitNotification(ctx)
	require.NoError(t, err)
	require.Equal(t, comm.Notification{Source: 0, Msg: []byte("me")}, n)
	// A poll finds one that has arrived.
	require.NoError(t, c.Notify(ctx, 1, []byte("polled")))
	var got comm.Notification
	require.Eventually(t, func() bool {
		got, err = cs[1].WaitNotification(ended)
		return err == nil
	}, 10*time.Second, time.Millisecond)
	require.Equal(t, "polled", string(got.Msg))
	// A waiter is released by Close, with ErrClosed.
	done := make(chan error, 1)
	go func() {
		_, err := cs[1].WaitNotification(ctx)
		done <- err
	}()
	time.Sleep(20 * time.Millisecond)
	require.NoError(t, cs[1].Close())
	require.ErrorIs(t, testwait.Recv(t, done, "the WaitNotification, after Close"), comm.ErrClosed)
	_, err = cs[1].WaitNotification(ctx)
	require.ErrorIs(t, err, comm.ErrClosed)
}

// testNotifyPeerLost: a notification to a rank that died fails with
// ErrPeerLost, within the bound.
func testNotifyPeerLost(t *testing.T, k kit) {
	cs := k.group(t, 2, rdma.Config{})
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	k.crash(t, cs[1])
	var err error
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		if err = cs[0].Notify(ctx, 1, []byte("hello")); err != nil {
			break
		}
	}
	require.ErrorIs(t, err, comm.ErrPeerLost)
}

// testBatchNative: batches of Gets and Puts of many pages (more than a
// send queue holds) through the native path, posted twice; a batch whose
// descriptors 5 and 9 name a closed region fails naming index 5 with
// ErrInvalidArgument, moves the others, and leaves the link working.
func testBatchNative(t *testing.T, k kit) {
	const page, pages = 4096, 600
	cs := k.group(t, 2, rdma.Config{})
	space := cpu.NewSpace(cpu.SpaceOptions{})
	defer space.Close()
	ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
	defer cancel()
	remote, err := memspace.Alloc[byte](space, page*pages)
	require.NoError(t, err)
	defer remote.Free()
	rmem, _ := remote.Host()
	reg, err := cs[1].Expose(remote.Block())
	require.NoError(t, err)
	defer reg.Close()
	gone, err := cs[1].Expose(blk(make([]byte, page)))
	require.NoError(t, err)
	goneKey := gone.Key()
	require.NoError(t, gone.Close())
	local, err := memspace.Alloc[byte](space, page*pages)
	require.NoError(t, err)
	defer local.Free()
	lmem, _ := local.Host()
	c := cs[0]
	var gets, puts []comm.Xfer
	for i := range pages {
		b, _ := local.Block().Slice(i*page, page)
		gets = append(gets, comm.Xfer{Local: b, Remote: reg.Key(), RemoteOff: (pages - 1 - i) * page})
		puts = append(puts, comm.Xfer{Local: b, Remote: reg.Key(), RemoteOff: i * page})
	}
	_, ok := comm.OneSided(c).(comm.Batcher)
	require.True(t, ok)
	pull, err := comm.PrepareBatch(c, false, gets)
	require.NoError(t, err)
	push, err := comm.PrepareBatch(c, true, puts)
	require.NoError(t, err)
	for round := range 2 {
		for i := range rmem {
			rmem[i] = byte(round + i/page)
		}
		require.NoError(t, pull.Run(ctx))
		for i := range pages {
			require.Equal(t, byte(round+pages-1-i), lmem[i*page], "page %d of round %d", i, round)
			lmem[i*page+1] = byte(200 + i)
		}
		require.NoError(t, push.Run(ctx))
		for i := range pages {
			require.Equal(t, byte(200+i), rmem[i*page+1], "page %d of round %d written back", i, round)
		}
	}
	bad := append([]comm.Xfer(nil), puts[:20]...)
	for _, i := range []int{9, 5} {
		bad[i].Remote, bad[i].RemoteOff = goneKey, 0
	}
	bb, err := comm.PrepareBatch(c, true, bad)
	require.NoError(t, err)
	for i := range 20 {
		lmem[i*page+2] = 77
	}
	err = bb.Run(ctx)
	var xe *comm.XferError
	require.True(t, errors.As(err, &xe), "%v", err)
	require.Equal(t, 5, xe.Index)
	require.ErrorIs(t, err, comm.ErrInvalidArgument)
	for i := range 20 {
		if i != 5 && i != 9 {
			require.Equal(t, byte(77), rmem[i*page+2], "page %d", i)
		}
	}
	require.NoError(t, pull.Run(ctx), "the link after a refused batch")
	require.NoError(t, c.Flush(ctx, 1))
}
