package rdma_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/xpu-go/xpu/backends/cpu"
	"github.com/xpu-go/xpu/backends/rdma"
	"github.com/xpu-go/xpu/comm"
	"github.com/xpu-go/xpu/memspace"
)

func TestOneSided(t *testing.T)         { k, _ := simKit(); testOneSided(t, k) }
func TestOneSidedPeerLost(t *testing.T) { k, _ := simKit(); testOneSidedPeerLost(t, k) }

// testOneSided has every rank of 3 expose a region (rank 0's in the cpu
// space, the others' Go memory), exchange the keys, Put a pattern into the
// next rank's region and its own, Flush, and after a barrier Get from the
// rank after next and check every byte.
func testOneSided(t *testing.T, k kit) {
	const n, part = 3, 64 << 10
	cs := k.group(t, n, rdma.Config{})
	space := cpu.NewSpace(cpu.SpaceOptions{})
	defer space.Close()
	ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
	defer cancel()
	require.NoError(t, onEvery(t, cs, func(me int, c *rdma.Comm) error {
		var mine memspace.Block
		if me == 0 {
			b, err := memspace.Alloc[byte](space, n*part)
			if err != nil {
				return err
			}
			defer b.Free()
			mine = b.Block()
		} else {
			mine = blk(make([]byte, n*part))
		}
		reg, err := c.Expose(mine)
		if err != nil {
			return err
		}
		defer reg.Close()
		keys, err := comm.ExchangeKeys(ctx, c, reg.Key())
		if err != nil {
			return err
		}
		src := make([]byte, part)
		for i := range src {
			src[i] = byte(me*31 + i)
		}
		var reqs []comm.Request
		for _, to := range []int{(me + 1) % n, me} {
			r, err := c.Put(blk(src), keys[to], me*part)
			if err != nil {
				return fmt.Errorf("put to %d: %w", to, err)
			}
			reqs = append(reqs, r)
		}
		if err := c.Flush(ctx, comm.AnySource); err != nil {
			return err
		}
		if err := comm.WaitAll(ctx, reqs...); err != nil {
			return err
		}
		if err := comm.Barrier(ctx, c); err != nil {
			return err
		}
		from := (me + 2) % n
		got := make([]byte, n*part)
		r, err := c.Get(blk(got), keys[from], 0)
		if err != nil {
			return err
		}
		if _, err := r.Wait(ctx); err != nil {
			return err
		}
		// Rank from's region holds, at w*part, the pattern of every
		// rank w that Put there: from-1 and from itself.
		for _, w := range []int{(from + n - 1) % n, from} {
			for i := range part {
				if got[w*part+i] != byte(w*31+i) {
					return fmt.Errorf("rank %d: byte %d of rank %d's part in rank %d's region is %d, want %d",
						me, i, w, from, got[w*part+i], byte(w*31+i))
				}
			}
		}
		// Bad ranges and keys are refused, one line each.
		if _, err := c.Put(blk(src), keys[from], n*part-1); !errors.Is(err, comm.ErrInvalidArgument) {
			return fmt.Errorf("a Put past the region: %v, want ErrInvalidArgument", err)
		}
		bad := keys[from]
		bad.Rank = n
		if _, err := c.Get(blk(got), bad, 0); !errors.Is(err, comm.ErrInvalidArgument) {
			return fmt.Errorf("a Get from rank %d of %d: %v, want ErrInvalidArgument", n, n, err)
		}
		return comm.Barrier(ctx, c)
	}))
}

// testOneSidedPeerLost Puts to a rank that died: the Put, and Flush, fail
// with ErrPeerLost.
func testOneSidedPeerLost(t *testing.T, k kit) {
	cs := k.group(t, 2, rdma.Config{})
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	reg, err := cs[1].Expose(blk(make([]byte, 4096)))
	require.NoError(t, err)
	key := reg.Key()
	k.crash(t, cs[1])
	var perr error
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); {
		r, err := cs[0].Put(blk(make([]byte, 4096)), key, 0)
		if err == nil {
			_, err = r.Wait(ctx)
		}
		if err != nil {
			perr = err
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	require.ErrorIs(t, perr, comm.ErrPeerLost)
	_ = reg.Close()
}
