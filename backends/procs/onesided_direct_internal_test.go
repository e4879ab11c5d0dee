package procs

import (
	"bytes"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/xpu-go/xpu/comm"
	"github.com/xpu-go/xpu/internal/shm"
	"github.com/xpu-go/xpu/internal/tooling/testwait"
)

// A Put or a Get of directMin bytes or more to a region in the peer's
// directory is one copy made by the origin's call: its request has completed when Put or
// Get returns, with no answer of the target's, and the bytes are in
// place.
func TestOneSidedDirect(t *testing.T) {
	needSingleCopy(t)
	var writes, reads atomic.Int64
	oldW, oldR := cmaWrite, cmaRead
	cmaWrite = func(pid int, addr uint64, src []byte) error { writes.Add(1); return oldW(pid, addr, src) }
	cmaRead = func(pid int, dst []byte, addr uint64) error { reads.Add(1); return oldR(pid, dst, addr) }
	t.Cleanup(func() { cmaWrite, cmaRead = oldW, oldR })
	cs := cmaGroup(t, 2, Config{})
	region := pattern(5<<20, 1)
	reg, err := cs[1].Expose(blk(region))
	require.NoError(t, err)
	defer reg.Close()
	for _, n := range []int{directMin, directMin + 4099, 1 << 20, 5<<20 - 7} {
		src := pattern(n, n)
		r, err := cs[0].Put(blk(src), reg.Key(), 7)
		require.NoError(t, err)
		st, done, err := r.Test()
		require.True(t, done, "a direct Put of %d bytes is complete when Put returns", n)
		require.NoError(t, err)
		require.Equal(t, n, st.Count)
		require.True(t, bytes.Equal(src, region[7:7+n]), "a direct Put of %d bytes", n)
		got := make([]byte, n)
		r, err = cs[0].Get(blk(got), reg.Key(), 7)
		require.NoError(t, err)
		_, done, err = r.Test()
		require.True(t, done, "a direct Get of %d bytes is complete when Get returns", n)
		require.NoError(t, err)
		require.True(t, bytes.Equal(src, got), "a direct Get of %d bytes", n)
	}
	assert.Positive(t, writes.Load())
	assert.Positive(t, reads.Load())
	assert.Equal(t, pattern(7, 1), region[:7], "bytes before the offset")
}

// When the kernel refuses the origin's copy, the transfer goes by frames,
// and the link stops trying.
func TestOneSidedDirectRefused(t *testing.T) {
	needSingleCopy(t)
	var tries atomic.Int64
	old := cmaWrite
	cmaWrite = func(int, uint64, []byte) error {
		tries.Add(1)
		return fmt.Errorf("%w: refused by the test", shm.ErrNotPermitted)
	}
	t.Cleanup(func() { cmaWrite = old })
	sink := &logSink{}
	cs := cmaGroup(t, 2, Config{Logf: sink.logf})
	region := pattern(2*directMin, 1)
	reg, err := cs[1].Expose(blk(region))
	require.NoError(t, err)
	defer reg.Close()
	for range 3 {
		src := pattern(directMin, 2)
		require.NoError(t, comm.Put(testCtx(t), cs[0], blk(src), reg.Key(), 10))
		require.True(t, bytes.Equal(src, region[10:10+directMin]))
	}
	assert.Equal(t, int64(1), tries.Load(), "copies tried once refused")
	assert.True(t, cs[0].links[1].cma.refused.Load())
	assert.Equal(t, 1, sink.count("one-sided transfers cross the ring"))
}

// Closing a region waits for a copy under way into it, and the next
// transfer with its key is refused.
func TestOneSidedDirectCloseWaits(t *testing.T) {
	needSingleCopy(t)
	entered, release := make(chan struct{}), make(chan struct{})
	old := cmaWrite
	cmaWrite = func(pid int, addr uint64, src []byte) error {
		close(entered)
		<-release // unbounded: the hooked copy, on the Put's goroutine, is released below
		return old(pid, addr, src)
	}
	t.Cleanup(func() { cmaWrite = old })
	cs := cmaGroup(t, 2, Config{})
	region := pattern(directMin, 1)
	reg, err := cs[1].Expose(blk(region))
	require.NoError(t, err)
	key := reg.Key()
	put := make(chan error, 1)
	go func() { put <- comm.Put(testCtx(t), cs[0], blk(pattern(directMin, 2)), key, 0) }()
	testwait.Closed(t, entered, "the Put's copy into the region")
	closed := make(chan struct{})
	go func() {
		assert.NoError(t, reg.Close())
		close(closed)
	}()
	select {
	case <-closed:
		t.Fatal("Close returned while a copy into the region was under way")
	case <-time.After(50 * time.Millisecond):
	}
	close(release)
	require.NoError(t, testwait.Recv(t, put, "the Put, after its copy was released"))
	testwait.Closed(t, closed, "the region's Close, after the copy")
	require.Equal(t, pattern(directMin, 2), region)
	cmaWrite = old
	err = comm.Put(testCtx(t), cs[0], blk(pattern(directMin, 3)), key, 0)
	require.ErrorIs(t, err, comm.ErrInvalidArgument, "a Put with the key of a closed region")
	require.Equal(t, pattern(directMin, 2), region, "a refused Put wrote")
}

// A peer that never ends a copy into a withdrawn region holds Close up to
// the failure bound, and no longer: its link is cut.
func TestOneSidedDirectCloseCuts(t *testing.T) {
	needSingleCopy(t)
	cs := cmaGroup(t, 2, Config{Timeout: 300 * time.Millisecond})
	region := pattern(4096, 1)
	reg, err := cs[1].Expose(blk(region))
	require.NoError(t, err)
	key := reg.Key()
	l := cs[0].links[1]
	l.dir.mu.RLock()
	require.True(t, l.dir.peer.Enter(dirSlot(key), key.Key, key.Addr, uint64(key.Len)), "the region is in rank 0's view of rank 1's directory")
	l.dir.mu.RUnlock()
	start := time.Now()
	require.NoError(t, reg.Close())
	took := time.Since(start)
	require.GreaterOrEqual(t, took, 300*time.Millisecond, "Close did not wait for the copy under way")
	require.Less(t, took, 10*time.Second)
	lt := cs[1].links[0]
	require.ErrorIs(t, lt.failed(), comm.ErrPeerLost, "the peer that kept copying is not cut")
	require.ErrorContains(t, lt.failed(), "kept copying into a withdrawn region")
}

// A region exposed while its directory slot holds another goes by frames,
// and so does every region once the slot's region is closed and the slot
// reused.
func TestOneSidedDirectSlotTaken(t *testing.T) {
	needSingleCopy(t)
	cs := cmaGroup(t, 2, Config{})
	regions := make([][]byte, shm.DirSlots+1)
	keys := make([]comm.RemoteKey, len(regions))
	var closers []func() error
	for i := range regions {
		regions[i] = pattern(64, i)
		reg, err := cs[1].Expose(blk(regions[i]))
		require.NoError(t, err)
		keys[i] = reg.Key()
		closers = append(closers, reg.Close)
	}
	defer func() {
		for _, c := range closers {
			assert.NoError(t, c())
		}
	}()
	first, last := keys[0], keys[len(keys)-1]
	require.Equal(t, dirSlot(first), dirSlot(last), "the test wants two regions of one slot")
	for _, k := range []comm.RemoteKey{first, last} {
		r, err := cs[0].Put(blk(pattern(8, 9)), k, 0)
		require.NoError(t, err)
		_, err = r.Wait(testCtx(t))
		require.NoError(t, err)
	}
	assert.Equal(t, pattern(8, 9), regions[0][:8])
	assert.Equal(t, pattern(8, 9), regions[len(regions)-1][:8], "a region whose slot was taken, by frames")
}

// A batch to regions in the peer's directory is copied by the call that
// posts it, a vectored copy for many descriptors; a batch with a key of a
// closed region goes by frames, and its error names that descriptor.
func TestOneSidedDirectBatch(t *testing.T) {
	needSingleCopy(t)
	cs := cmaGroup(t, 2, Config{})
	ctx := testCtx(t)
	const page, pages = 4096, 1500 // more than one vectored call
	region := pattern(page*pages, 1)
	reg, err := cs[1].Expose(blk(region))
	require.NoError(t, err)
	defer reg.Close()
	local := make([]byte, page*pages)
	xfers := make([]comm.Xfer, pages)
	for i := range xfers {
		b, err := blk(local).Slice(i*page, page)
		require.NoError(t, err)
		xfers[i] = comm.Xfer{Local: b, Remote: reg.Key(), RemoteOff: ((i * 37) % pages) * page}
	}
	get, err := comm.PrepareBatch(cs[0], false, xfers)
	require.NoError(t, err)
	r, err := get.Post(ctx)
	require.NoError(t, err)
	st, done, err := r.Test()
	require.True(t, done, "a direct batch is complete when Post returns")
	require.NoError(t, err)
	require.Equal(t, page*pages, st.Count)
	for i := range pages {
		at := ((i * 37) % pages) * page
		require.True(t, bytes.Equal(region[at:at+page], local[i*page:(i+1)*page]), "page %d", i)
	}
	for i := range local {
		local[i]++
	}
	put, err := comm.PrepareBatch(cs[0], true, xfers)
	require.NoError(t, err)
	require.NoError(t, put.Run(ctx))
	for i := range pages {
		at := ((i * 37) % pages) * page
		require.True(t, bytes.Equal(region[at:at+page], local[i*page:(i+1)*page]), "page %d written back", i)
	}

	other := pattern(page*4, 2)
	closed, err := cs[1].Expose(blk(other))
	require.NoError(t, err)
	stale := closed.Key()
	require.NoError(t, closed.Close())
	mixed := append([]comm.Xfer(nil), xfers[:20]...)
	mixed[13].Remote, mixed[13].RemoteOff = stale, 0
	b, err := comm.PrepareBatch(cs[0], true, mixed)
	require.NoError(t, err)
	err = b.Run(ctx)
	var xe *comm.XferError
	require.ErrorAs(t, err, &xe)
	assert.Equal(t, 13, xe.Index)
	assert.ErrorIs(t, err, comm.ErrInvalidArgument)
	assert.Equal(t, pattern(page*4, 2), other, "a refused batch wrote")
}
