//go:build mpi

package mpi_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/xpu-go/xpu/backends/mpi"
	"github.com/xpu-go/xpu/comm"
	"github.com/xpu-go/xpu/memspace"
)

// exposeSwap exposes mem on every rank of c and returns every rank's key.
func exposeSwap(t *testing.T, ctx context.Context, c *mpi.Comm, mem []byte) (comm.Region, []comm.RemoteKey) {
	t.Helper()
	reg, err := c.Expose(buf(t, mem))
	require.NoError(t, err)
	keys, err := comm.ExchangeKeys(ctx, c, reg.Key())
	if err != nil {
		_ = reg.Close()
		require.NoError(t, err)
	}
	return reg, keys
}

// TestSPMDOneSided checks what the conformance suite leaves to the
// backend: notifications (order, bounds, polls, Close), keys altered in
// any field, device memory, overlapping regions, and a Comm closed with
// regions open and transfers under way.
func TestSPMDOneSided(t *testing.T) {
	c := rank(t)
	p, r := c.Size(), c.Rank()
	next, prev := (r+1)%p, (r+p-1)%p

	spmd(t, c, "notify-after-put", func(t *testing.T) {
		ctx, cancel := context.WithTimeout(context.Background(), guard)
		defer cancel()
		const size, parts = 1 << 20, 4
		mem := make([]byte, size)
		reg, keys := exposeSwap(t, ctx, c, mem)
		defer func() { require.NoError(t, reg.Close()) }()
		// Every rank Puts into the next one without waiting, then
		// notifies it: the notification comes after the bytes.
		var reqs []comm.Request
		for part := range parts {
			q, err := c.Put(buf(t, pattern(size/parts, 100*r+part)), keys[next], part*size/parts)
			require.NoError(t, err)
			reqs = append(reqs, q)
		}
		require.NoError(t, c.Notify(ctx, next, []byte(fmt.Sprintf("from %d", r))))
		n, err := c.WaitNotification(ctx)
		require.NoError(t, err)
		assert.Equal(t, prev, n.Source)
		assert.Equal(t, fmt.Sprintf("from %d", prev), string(n.Msg))
		for part := range parts {
			require.Equal(t, pattern(size/parts, 100*prev+part), mem[part*size/parts:(part+1)*size/parts], "part %d of rank %d's Puts", part, prev)
		}
		require.NoError(t, comm.WaitAll(ctx, reqs...))
		// Every rank has checked before the next Puts land.
		require.NoError(t, comm.Barrier(ctx, c))
		// PutNotify, and an empty notification to this rank itself.
		q, err := comm.PutNotify(ctx, c, buf(t, pattern(64, 7+r)), keys[next], 5, []byte{byte(r)})
		require.NoError(t, err)
		n, err = c.WaitNotification(ctx)
		require.NoError(t, err)
		assert.Equal(t, comm.Notification{Source: prev, Msg: []byte{byte(prev)}}, n)
		assert.Equal(t, pattern(64, 7+prev), mem[5:69])
		_, err = wait(t, q)
		require.NoError(t, err)
		require.NoError(t, c.Notify(ctx, r, nil))
		n, err = c.WaitNotification(ctx)
		require.NoError(t, err)
		assert.Equal(t, r, n.Source)
		assert.Empty(t, n.Msg)
		require.NoError(t, comm.Barrier(ctx, c))
	})

	spmd(t, c, "notify-bounds", func(t *testing.T) {
		ctx, cancel := context.WithTimeout(context.Background(), guard)
		defer cancel()
		err := c.Notify(ctx, next, make([]byte, comm.MaxNotification+1))
		require.ErrorIs(t, err, comm.ErrInvalidArgument)
		require.ErrorIs(t, c.Notify(ctx, p, nil), comm.ErrInvalidArgument)
		require.ErrorIs(t, c.Notify(ctx, comm.AnySource, nil), comm.ErrInvalidArgument)
		_, err = comm.PutNotify(ctx, c, buf(t, []byte{1}), comm.RemoteKey{Rank: next, Len: 1}, 0, make([]byte, comm.MaxNotification+1))
		require.ErrorIs(t, err, comm.ErrInvalidArgument)
		// The longest notification goes through.
		big := pattern(comm.MaxNotification, r)
		require.NoError(t, c.Notify(ctx, next, big))
		n, err := c.WaitNotification(ctx)
		require.NoError(t, err)
		assert.Equal(t, prev, n.Source)
		assert.Equal(t, pattern(comm.MaxNotification, prev), n.Msg)
		require.NoError(t, comm.Barrier(ctx, c))
	})

	spmd(t, c, "notify-poll", func(t *testing.T) {
		ctx, cancel := context.WithTimeout(context.Background(), guard)
		defer cancel()
		ended, end := context.WithCancel(context.Background())
		end()
		// Nothing sent yet: the poll says so at once.
		start := time.Now()
		_, err := c.WaitNotification(ended)
		require.ErrorIs(t, err, context.Canceled)
		assert.Less(t, time.Since(start), time.Second)
		require.NoError(t, comm.Barrier(ctx, c))
		require.NoError(t, c.Notify(ctx, next, []byte("poll")))
		// Polls with the ended context find it once it has arrived.
		for {
			n, err := c.WaitNotification(ended)
			if err == nil {
				assert.Equal(t, comm.Notification{Source: prev, Msg: []byte("poll")}, n)
				break
			}
			require.ErrorIs(t, err, context.Canceled)
			require.NoError(t, ctx.Err(), "no notification within the guard")
			time.Sleep(100 * time.Microsecond)
		}
		// A deadline that passes with nothing received.
		short, cancelShort := context.WithTimeout(ctx, 20*time.Millisecond)
		defer cancelShort()
		_, err = c.WaitNotification(short)
		require.ErrorIs(t, err, context.DeadlineExceeded)
		require.NoError(t, comm.Barrier(ctx, c))
	})

	spmd(t, c, "forged-keys", func(t *testing.T) {
		ctx, cancel := context.WithTimeout(context.Background(), guard)
		defer cancel()
		const size = 4096
		mem := pattern(size, r)
		reg, keys := exposeSwap(t, ctx, c, mem)
		defer func() { require.NoError(t, reg.Close()) }()
		for _, target := range []int{next, r} {
			k := keys[target]
			moved, inside, longer, forged, renumbered, otherRank := k, k, k, k, k, k
			moved.Addr += 1 << 20
			inside.Addr += 8
			longer.Len += 4096
			forged.Key ^= 0x5a5a5a5a << 32
			renumbered.Key++
			otherRank.Rank = (target + 1) % p
			for _, bad := range []comm.RemoteKey{moved, inside, longer, forged, renumbered, otherRank} {
				if bad == k {
					continue // one rank: no other rank to name
				}
				_, err := c.Put(buf(t, pattern(16, 99)), bad, 0)
				require.ErrorIs(t, err, comm.ErrInvalidArgument, "a Put with %v (the key is %v)", bad, k)
				got := make([]byte, 16)
				_, err = c.Get(buf(t, got), bad, 0)
				require.ErrorIs(t, err, comm.ErrInvalidArgument, "a Get with %v (the key is %v)", bad, k)
				require.Equal(t, make([]byte, 16), got)
			}
		}
		// A key made on another communicator is refused on this one.
		d, err := c.Dup(ctx)
		require.NoError(t, err)
		_, err = d.Put(buf(t, pattern(16, 99)), keys[next], 0)
		require.ErrorIs(t, err, comm.ErrInvalidArgument, "a key of the parent on a duplicate")
		require.NoError(t, d.Close())
		require.NoError(t, c.Flush(ctx, comm.AnySource))
		require.NoError(t, comm.Barrier(ctx, c))
		require.Equal(t, pattern(size, r), mem, "refused transfers wrote into the region")
	})

	spmd(t, c, "memory", func(t *testing.T) {
		ctx, cancel := context.WithTimeout(context.Background(), guard)
		defer cancel()
		mem := make([]byte, 256)
		reg, keys := exposeSwap(t, ctx, c, mem)
		defer func() { require.NoError(t, reg.Close()) }()
		dev := memspace.NewBlock(deviceSpace{}, 0x1000, 64, nil)
		_, err := c.Put(dev, keys[next], 0)
		require.ErrorIs(t, err, comm.ErrNotSupported)
		require.ErrorIs(t, err, memspace.ErrNotHostAccessible)
		_, err = c.Get(dev, keys[next], 0)
		require.ErrorIs(t, err, comm.ErrNotSupported)
		_, err = c.Expose(dev)
		require.ErrorIs(t, err, comm.ErrNotSupported)
		require.ErrorIs(t, err, memspace.ErrNotHostAccessible)
		_, err = c.Expose(buf(t, []byte{}))
		require.ErrorIs(t, err, comm.ErrInvalidArgument, "an empty block")
		// MPI attaches memory once: an overlapping region is refused,
		// one beside it is not.
		_, err = c.Expose(buf(t, mem[100:200]))
		require.ErrorIs(t, err, comm.ErrInvalidArgument)
		other := make([]byte, 64)
		beside, err := c.Expose(buf(t, other))
		require.NoError(t, err)
		require.NoError(t, beside.Close())
		require.NoError(t, beside.Close(), "Close twice")
		require.ErrorIs(t, c.Flush(ctx, p), comm.ErrInvalidArgument)
		require.ErrorIs(t, c.Flush(ctx, -5), comm.ErrInvalidArgument)
		//nolint:staticcheck // a nil context is refused
		require.ErrorIs(t, c.Flush(nil, next), comm.ErrInvalidArgument)
		require.NoError(t, comm.Barrier(ctx, c))
	})

	spmd(t, c, "goroutines", func(t *testing.T) {
		ctx, cancel := context.WithTimeout(context.Background(), guard)
		defer cancel()
		const workers, rounds, slice = 4, 50, 1000
		mem := make([]byte, workers*rounds*slice)
		reg, keys := exposeSwap(t, ctx, c, mem)
		defer func() { require.NoError(t, reg.Close()) }()
		errs := make(chan error, workers)
		for w := range workers {
			go func() {
				errs <- func() error {
					for i := range rounds {
						at := (w*rounds + i) * slice
						q, err := c.Put(buf(t, pattern(slice, r*1000+w*rounds+i)), keys[next], at)
						if err != nil {
							return err
						}
						if i%3 == 0 {
							if err := c.Flush(ctx, comm.AnySource); err != nil {
								return err
							}
						}
						if _, err := q.Wait(ctx); err != nil {
							return err
						}
						back := make([]byte, slice)
						g, err := c.Get(buf(t, back), keys[next], at)
						if err != nil {
							return err
						}
						if _, err := g.Wait(ctx); err != nil {
							return err
						}
						if want := pattern(slice, r*1000+w*rounds+i); string(back) != string(want) {
							return fmt.Errorf("worker %d, round %d: read back other bytes than it wrote", w, i)
						}
					}
					return nil
				}()
			}()
		}
		for range workers {
			require.NoError(t, <-errs)
		}
		require.NoError(t, comm.Barrier(ctx, c))
		for w := range workers {
			for i := range rounds {
				at := (w*rounds + i) * slice
				require.Equal(t, pattern(slice, prev*1000+w*rounds+i), mem[at:at+slice], "worker %d of rank %d, round %d", w, prev, i)
			}
		}
		require.NoError(t, comm.Barrier(ctx, c))
	})

	spmd(t, c, "close", func(t *testing.T) {
		ctx, cancel := context.WithTimeout(context.Background(), guard)
		defer cancel()
		d, err := c.Dup(ctx)
		require.NoError(t, err)
		mem := make([]byte, 1<<20)
		reg, keys := exposeSwap(t, ctx, d, mem)
		// Transfers under way and regions still open when d closes: Close
		// completes them and frees the window.
		q, err := d.Put(buf(t, pattern(1<<20, r)), keys[next], 0)
		require.NoError(t, err)
		require.NoError(t, comm.Barrier(ctx, d))
		require.NoError(t, d.Close())
		_, err = wait(t, q)
		require.NoError(t, err)
		require.NoError(t, reg.Close(), "a region closed after its Comm")
		_, err = d.Expose(buf(t, mem))
		require.ErrorIs(t, err, comm.ErrClosed)
		_, err = d.Put(buf(t, mem[:8]), keys[next], 0)
		require.ErrorIs(t, err, comm.ErrClosed)
		require.ErrorIs(t, d.Flush(ctx, next), comm.ErrClosed)
		require.ErrorIs(t, d.Notify(ctx, next, nil), comm.ErrClosed)
		_, err = d.WaitNotification(ctx)
		require.ErrorIs(t, err, comm.ErrClosed)
	})

	spmd(t, c, "close-while-waiting", func(t *testing.T) {
		ctx, cancel := context.WithTimeout(context.Background(), guard)
		defer cancel()
		d, err := c.Dup(ctx)
		require.NoError(t, err)
		got := make(chan error, 1)
		go func() {
			_, err := d.WaitNotification(ctx)
			got <- err
		}()
		time.Sleep(10 * time.Millisecond)
		require.NoError(t, d.Close())
		select {
		case err := <-got:
			require.True(t, errors.Is(err, comm.ErrClosed), "WaitNotification after Close: %v", err)
		case <-ctx.Done():
			t.Fatal("WaitNotification did not return after Close")
		}
	})
}
