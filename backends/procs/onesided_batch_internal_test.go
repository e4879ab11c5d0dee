package procs

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/xpu-go/xpu/comm"
	"github.com/xpu-go/xpu/internal/shm"
)

// A batch over a shared-memory link to regions not in its directory goes
// as batch frames, each moved by one vectored single copy — more
// descriptors than one frame carries, scattered both ends — and when the
// kernel refuses the copy its descriptors go through the link one by one,
// with the same bytes. A descriptor whose region closed after the batch
// was prepared fails the batch naming it, and nothing of its frame is
// written.
func TestOneSidedBatchSingleCopy(t *testing.T) {
	needSingleCopy(t)
	const page, pages = 4096, batchMax + 76
	run := func(t *testing.T, cs []*Comm) {
		ctx := testCtx(t)
		region := pattern(page*pages*2, 1)
		reg, err := cs[1].Expose(blk(region))
		require.NoError(t, err)
		defer reg.Close()
		local := pattern(page*pages, 2)
		var gets, puts []comm.Xfer
		for i := range pages {
			b, _ := blk(local).Slice(i*page, page)
			gets = append(gets, comm.Xfer{Local: b, Remote: reg.Key(), RemoteOff: (pages - 1 - i) * 2 * page})
			puts = append(puts, comm.Xfer{Local: b, Remote: reg.Key(), RemoteOff: (2*i + 1) * page})
		}
		gb, err := comm.PrepareBatch(cs[0], false, gets)
		require.NoError(t, err)
		require.NoError(t, gb.Run(ctx))
		for i := range pages {
			at := (pages - 1 - i) * 2 * page
			require.True(t, bytes.Equal(region[at:at+page], local[i*page:(i+1)*page]), "page %d of a batch of Gets", i)
		}
		pb, err := comm.PrepareBatch(cs[0], true, puts)
		require.NoError(t, err)
		r, err := pb.Post(ctx)
		require.NoError(t, err)
		st, err := r.Wait(ctx)
		require.NoError(t, err)
		require.Equal(t, page*pages, st.Count)
		for i := range pages {
			at := (2*i + 1) * page
			require.True(t, bytes.Equal(region[at:at+page], local[i*page:(i+1)*page]), "page %d of a batch of Puts", i)
		}
		require.Eventually(t, func() bool {
			l := cs[1].links[0]
			l.one.mu.Lock()
			defer l.one.mu.Unlock()
			return len(l.one.lent) == 0
		}, 10*time.Second, time.Millisecond, "ranges still lent after the batch")
	}
	t.Run("copied", func(t *testing.T) {
		var calls, ranges atomic.Int64
		old := cmaReadVec
		cmaReadVec = func(pid int, dst [][]byte, addrs []uint64) error {
			calls.Add(1)
			ranges.Add(int64(len(dst)))
			return old(pid, dst, addrs)
		}
		t.Cleanup(func() { cmaReadVec = old })
		run(t, cmaGroup(t, 2, Config{noDirect: true}))
		require.Equal(t, int64(2*pages), ranges.Load(), "every range of both batches copied once")
		// Runs of cmaPiece bytes (64 pages) a call.
		require.LessOrEqual(t, calls.Load(), int64(2*(pages/64+2)), "ranges copied one by one")
	})
	t.Run("refused", func(t *testing.T) {
		old := cmaReadVec
		cmaReadVec = func(pid int, dst [][]byte, addrs []uint64) error {
			return fmt.Errorf("%w: refused by the test", shm.ErrNotPermitted)
		}
		t.Cleanup(func() { cmaReadVec = old })
		sink := &logSink{}
		cs := cmaGroup(t, 2, Config{Logf: sink.logf, noDirect: true})
		run(t, cs)
		require.True(t, cs[0].links[1].cma.refused.Load(), "the origin's link still makes single copies")
	})
	t.Run("tcp", func(t *testing.T) {
		// Gets streamed in one frame, Puts one by one.
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		cs, err := NewLoopbackGroupConfig(ctx, 2, Config{Links: LinkTCP})
		require.NoError(t, err)
		t.Cleanup(func() { closeEach(t, cs) })
		run(t, cs)
	})
	t.Run("closed", func(t *testing.T) {
		cs := cmaGroup(t, 2, Config{noDirect: true})
		ctx := testCtx(t)
		open := pattern(page*pages, 1)
		reg, err := cs[1].Expose(blk(open))
		require.NoError(t, err)
		defer reg.Close()
		closing := pattern(page, 3)
		gone, err := cs[1].Expose(blk(closing))
		require.NoError(t, err)
		src := pattern(page*pages, 2)
		var puts []comm.Xfer
		for i := range pages {
			b, _ := blk(src).Slice(i*page, page)
			puts = append(puts, comm.Xfer{Local: b, Remote: reg.Key(), RemoteOff: i * page})
		}
		b, _ := blk(src).Slice(0, page)
		puts[700] = comm.Xfer{Local: b, Remote: gone.Key()}
		pb, err := comm.PrepareBatch(cs[0], true, puts)
		require.NoError(t, err)
		require.NoError(t, gone.Close())
		err = pb.Run(ctx)
		var xe *comm.XferError
		require.True(t, errors.As(err, &xe), "error %v", err)
		require.Equal(t, 700, xe.Index)
		require.ErrorIs(t, err, comm.ErrInvalidArgument)
		// The frame of descriptors 0 to batchMax-1 was refused whole; the
		// next one was written.
		require.True(t, bytes.Equal(pattern(page*pages, 1)[:batchMax*page], open[:batchMax*page]), "a refused batch frame wrote")
		require.True(t, bytes.Equal(src[batchMax*page:], open[batchMax*page:]), "the frame after the refused one")
		require.True(t, bytes.Equal(pattern(page, 3), closing), "a closed region was written")
	})
	t.Run("closed-tcp", func(t *testing.T) {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		cs, err := NewLoopbackGroupConfig(ctx, 2, Config{Links: LinkTCP})
		require.NoError(t, err)
		t.Cleanup(func() { closeEach(t, cs) })
		reg, err := cs[1].Expose(blk(pattern(page*pages, 1)))
		require.NoError(t, err)
		defer reg.Close()
		gone, err := cs[1].Expose(blk(pattern(page, 3)))
		require.NoError(t, err)
		dst := pattern(page*pages, 2)
		var gets []comm.Xfer
		for i := range pages {
			b, _ := blk(dst).Slice(i*page, page)
			gets = append(gets, comm.Xfer{Local: b, Remote: reg.Key(), RemoteOff: i * page})
		}
		b, _ := blk(dst).Slice(0, page)
		gets[5] = comm.Xfer{Local: b, Remote: gone.Key()}
		gb, err := comm.PrepareBatch(cs[0], false, gets)
		require.NoError(t, err)
		require.NoError(t, gone.Close())
		err = gb.Run(ctx)
		var xe *comm.XferError
		require.True(t, errors.As(err, &xe), "error %v", err)
		require.Equal(t, 5, xe.Index)
		require.ErrorIs(t, err, comm.ErrInvalidArgument)
		require.True(t, bytes.Equal(pattern(page*pages, 2)[:batchMax*page], dst[:batchMax*page]), "a refused streamed frame wrote")
		require.True(t, bytes.Equal(pattern(page*pages, 1)[batchMax*page:], dst[batchMax*page:]), "the frame after the refused one")
		// The link goes on: the batch without the bad descriptor.
		b5, _ := blk(dst).Slice(5*page, page)
		gets[5] = comm.Xfer{Local: b5, Remote: reg.Key(), RemoteOff: 5 * page}
		gb, err = comm.PrepareBatch(cs[0], false, gets)
		require.NoError(t, err)
		require.NoError(t, gb.Run(ctx))
		require.True(t, bytes.Equal(pattern(page*pages, 1), dst), "a streamed batch of Gets")
		// Puts streamed: one refused descriptor writes nothing of its
		// frame, and the next batch lands.
		region := reg.Block()
		before, err := region.Bytes()
		require.NoError(t, err)
		want := append([]byte(nil), before...)
		src := pattern(page*pages, 7)
		var puts []comm.Xfer
		for i := range pages {
			b, _ := blk(src).Slice(i*page, page)
			puts = append(puts, comm.Xfer{Local: b, Remote: reg.Key(), RemoteOff: (pages - 1 - i) * page})
		}
		bad := puts[9]
		puts[9] = comm.Xfer{Local: bad.Local, Remote: gone.Key()}
		pb, err := comm.PrepareBatch(cs[0], true, puts)
		require.NoError(t, err)
		err = pb.Run(ctx)
		require.True(t, errors.As(err, &xe), "error %v", err)
		require.Equal(t, 9, xe.Index)
		require.ErrorIs(t, err, comm.ErrInvalidArgument)
		for i := batchMax; i < pages; i++ {
			at := (pages - 1 - i) * page
			copy(want[at:at+page], src[i*page:(i+1)*page])
		}
		require.True(t, bytes.Equal(want, before), "a refused streamed frame of Puts wrote, or the next did not")
		puts[9] = bad
		pb, err = comm.PrepareBatch(cs[0], true, puts)
		require.NoError(t, err)
		require.NoError(t, pb.Run(ctx))
		for i := range pages {
			at := (pages - 1 - i) * page
			require.True(t, bytes.Equal(src[i*page:(i+1)*page], before[at:at+page]), "page %d of a streamed batch of Puts", i)
		}
	})
}
