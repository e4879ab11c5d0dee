package procs

import (
	"bytes"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/xpu-go/xpu/comm"
	"github.com/xpu-go/xpu/internal/onesided"
	"github.com/xpu-go/xpu/internal/shm"
)

// Large one-sided transfers over a shared-memory link to a region not in
// its directory go by single copy — no chunk crosses the ring — and when
// the kernel refuses the copy they go through the link instead, once
// refused, with the same bytes.
func TestOneSidedSingleCopy(t *testing.T) {
	needSingleCopy(t)
	const n = 1 << 20
	run := func(t *testing.T, cs []*Comm) {
		ctx := testCtx(t)
		region := pattern(3*n, 1)
		reg, err := cs[1].Expose(blk(region))
		require.NoError(t, err)
		defer reg.Close()
		src := pattern(n, 2)
		r, err := cs[0].Put(blk(src), reg.Key(), n+3)
		require.NoError(t, err)
		_, err = r.Wait(ctx)
		require.NoError(t, err)
		require.True(t, bytes.Equal(src, region[n+3:2*n+3]), "a Put by single copy")
		got := make([]byte, n)
		r, err = cs[0].Get(blk(got), reg.Key(), n+3)
		require.NoError(t, err)
		_, err = r.Wait(ctx)
		require.NoError(t, err)
		require.True(t, bytes.Equal(src, got), "a Get by single copy")
		require.NoError(t, cs[0].Flush(ctx, 1))
		// The origin gives the range back as its Get completes; the
		// target takes it back when it reads that frame.
		require.Eventually(t, func() bool {
			l := cs[1].links[0]
			l.one.mu.Lock()
			defer l.one.mu.Unlock()
			return len(l.one.lent) == 0
		}, 10*time.Second, time.Millisecond, "a range still lent after the Get")
	}
	t.Run("copied", func(t *testing.T) {
		var tries atomic.Int64
		old := cmaRead
		cmaRead = func(pid int, dst []byte, addr uint64) error {
			tries.Add(1)
			return old(pid, dst, addr)
		}
		t.Cleanup(func() { cmaRead = old })
		cs := cmaGroup(t, 2, Config{noDirect: true})
		run(t, cs)
		require.Positive(t, tries.Load(), "no single copy was made")
	})
	t.Run("refused", func(t *testing.T) {
		var tries atomic.Int64
		old := cmaRead
		cmaRead = func(pid int, dst []byte, addr uint64) error {
			tries.Add(1)
			return fmt.Errorf("%w: refused by the test", shm.ErrNotPermitted)
		}
		t.Cleanup(func() { cmaRead = old })
		sink := &logSink{}
		cs := cmaGroup(t, 2, Config{Logf: sink.logf, noDirect: true})
		run(t, cs)
		require.True(t, cs[1].links[0].cma.refused.Load(), "the target's link still tries single copies")
		require.True(t, cs[0].links[1].cma.refused.Load(), "the origin's link still asks for single copies")
		// The first refused copy may be tried by each of the goroutines
		// that share it (cmaPieces); none after it.
		require.Positive(t, tries.Load())
		require.LessOrEqual(t, tries.Load(), int64(cmaWorkers), "copies tried once refused")
		require.Equal(t, 1, sink.count("one-sided transfers cross the ring"))
	})
}

// A key of a region the target withdrew is refused by a single-copy Put
// and Get too, and nothing is written.
func TestOneSidedSingleCopyRefusedKey(t *testing.T) {
	needSingleCopy(t)
	cs := cmaGroup(t, 2, Config{})
	ctx := testCtx(t)
	region := pattern(1<<20, 1)
	reg, err := cs[1].Expose(blk(region))
	require.NoError(t, err)
	key := reg.Key()
	require.NoError(t, reg.Close())
	r, err := cs[0].Put(blk(pattern(1<<20, 2)), key, 0)
	require.NoError(t, err)
	_, err = r.Wait(ctx)
	require.ErrorIs(t, err, comm.ErrInvalidArgument)
	require.True(t, bytes.Equal(pattern(1<<20, 1), region), "a refused Put wrote")
	r, err = cs[0].Get(blk(make([]byte, 1<<20)), key, 0)
	require.NoError(t, err)
	_, err = r.Wait(ctx)
	require.ErrorIs(t, err, comm.ErrInvalidArgument)
}

// A peer that keeps a range of a closing region (a single-copy Get it
// never gives back) holds the Close up to the failure bound, and no
// longer: its link is cut, which gives the range back.
func TestOneSidedCloseCutsKeptRange(t *testing.T) {
	cs := cmaGroup(t, 2, Config{Timeout: 300 * time.Millisecond})
	region := pattern(4096, 1)
	reg, err := cs[1].Expose(blk(region))
	require.NoError(t, err)
	// Lend a range to rank 0 as onGetAddr does, and let rank 0 never give
	// it back.
	g, _ := cs[1].one.Find(reg.Key(), 0, 4096)
	require.NotNil(t, g)
	l := cs[1].links[0]
	l.one.mu.Lock()
	l.one.lent = map[uint64][]*onesided.Region{99: {g}}
	l.one.mu.Unlock()
	start := time.Now()
	require.NoError(t, reg.Close())
	took := time.Since(start)
	require.GreaterOrEqual(t, took, 300*time.Millisecond, "Close did not wait for the range lent")
	require.Less(t, took, 10*time.Second)
	require.ErrorIs(t, l.failed(), comm.ErrPeerLost, "the peer that kept the range is not cut")
	require.ErrorContains(t, l.failed(), "kept a range of a closing region")
}
