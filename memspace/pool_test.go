package memspace_test

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"sync"
	"testing"
	"unsafe"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/xpu-go/xpu/internal/tooling/testwait"
	"github.com/xpu-go/xpu/memspace"
)

const (
	kib = 1 << 10
	mib = 1 << 20
)

func newPool(t testing.TB, up memspace.Space, opts memspace.PoolOptions) *memspace.Pool {
	t.Helper()
	p, err := memspace.NewPool(up, opts)
	require.NoError(t, err)
	return p
}

func checkPool(t testing.TB, p *memspace.Pool) {
	t.Helper()
	require.NoError(t, p.CheckInvariants())
}

func TestPoolOptionsValidated(t *testing.T) {
	bad := []memspace.PoolOptions{
		{MinBlock: 3},
		{MinBlock: -512},
		{SegmentSize: 1000},
		{MinBlock: 1 << 20, SegmentSize: 2 << 20},
		{SegmentSize: 2 << 30},
		{LargeSegmentSize: 3 << 20},
		{LargeSegmentSize: 1 << 20},
		{RoundUp: 3},
		{RoundUp: -1},
		{RoundUp: 2048},
	}
	for _, o := range bad {
		_, err := memspace.NewPool(newDevice(0), o)
		assert.ErrorIs(t, err, memspace.ErrInvalidArgument, "%+v", o)
	}
	_, err := memspace.NewPool(nil, memspace.PoolOptions{})
	require.ErrorIs(t, err, memspace.ErrInvalidArgument)
	for _, o := range []memspace.PoolOptions{{}, {MinBlock: 8, SegmentSize: 64}, {RoundUp: 1024}, {SegmentSize: 1 << 30, LargeSegmentSize: 1 << 30}} {
		_, err := memspace.NewPool(newDevice(0), o)
		assert.NoError(t, err, "%+v", o)
	}
}

func TestPoolIdentity(t *testing.T) {
	up := newDevice(0)
	p := newPool(t, up, memspace.PoolOptions{})
	assert.Equal(t, "pool(fakedev)", p.Name())
	assert.Same(t, up, p.Unwrap().(*fakeSpace))
	props := up.Properties()
	props.Alignment = memspace.DefaultPoolMinBlock
	assert.Equal(t, props, p.Properties())

	// Capabilities are found through the pool.
	l, ok := memspace.As[memspace.Lookuper](wrapper{p})
	require.True(t, ok)
	assert.Same(t, p, l.(*memspace.Pool), "the pool itself is the first Lookuper")
	f, ok := memspace.As[*fakeSpace](wrapper{p})
	require.True(t, ok)
	assert.Same(t, up, f)
	st, err := memspace.StatsOf(p)
	require.NoError(t, err)
	assert.Equal(t, memspace.Stats{}, st)
}

func TestPoolDeviceBlocks(t *testing.T) {
	up := newDevice(0)
	p := newPool(t, up, memspace.PoolOptions{})
	b, err := p.Allocate(1000, 0)
	require.NoError(t, err)
	assert.Equal(t, memspace.Space(p), b.Space())
	assert.Equal(t, 1000, b.Len())
	assert.Nil(t, b.HostPointer())
	assert.False(t, b.HostAccessible())
	_, err = b.Bytes()
	require.ErrorIs(t, err, memspace.ErrNotHostAccessible)
	assert.Zero(t, uintptr(b.Addr())%memspace.DefaultPoolMinBlock)

	ub, ok := up.Lookup(b.Addr())
	require.True(t, ok, "the block lies in an upstream allocation")
	assert.Equal(t, memspace.DefaultPoolSegmentSize, ub.Len())

	st := p.PoolStats()
	assert.Equal(t, memspace.Stats{InUse: 1000, Peak: 1000, Live: 1, Allocs: 1, Reserved: 2 * mib, Fragmented: 0}, st.Stats)
	assert.EqualValues(t, 1024, st.Held, "1000 bytes round to two 512-byte units")
	assert.EqualValues(t, 2*mib-1024, st.Free)
	assert.EqualValues(t, 2*mib-1024, st.LargestFree)
	assert.Equal(t, 1, st.Segments)

	require.NoError(t, p.Free(b))
	st = p.PoolStats()
	assert.Equal(t, memspace.Stats{Peak: 1000, Allocs: 1, Frees: 1, Reserved: 2 * mib}, st.Stats)
	assert.EqualValues(t, 2*mib, st.Cached)
	checkPool(t, p)

	// The same size again is served from the cache, at the same address.
	b2, err := p.Allocate(1000, 0)
	require.NoError(t, err)
	assert.Equal(t, b.Addr(), b2.Addr())
	assert.Equal(t, 1, up.allocateCalls())
	require.NoError(t, p.Free(b2))
}

func TestPoolHostBlocksShareUpstreamMemory(t *testing.T) {
	up := newHost(0)
	p := newPool(t, up, memspace.PoolOptions{})
	var blocks []memspace.Block
	for i, n := range []int{100, 5000, 70000, 3 * mib} {
		b, err := p.Allocate(n, 0)
		require.NoError(t, err)
		require.True(t, b.HostAccessible())
		ub, ok := up.Lookup(b.Addr())
		require.True(t, ok)
		assert.Equal(t, unsafe.Add(ub.HostPointer(), int(b.Addr()-ub.Addr())), b.HostPointer())
		bs, err := b.Bytes()
		require.NoError(t, err)
		require.Len(t, bs, n)
		bs[0], bs[n-1] = byte(i+1), byte(i+101)
		ubs, err := ub.Bytes()
		require.NoError(t, err)
		off := int(b.Addr() - ub.Addr())
		assert.Equal(t, byte(i+1), ubs[off], "a write through the pool block is seen upstream")
		assert.Equal(t, byte(i+101), ubs[off+n-1])
		blocks = append(blocks, b)
	}
	for i, b := range blocks {
		bs, err := b.Bytes()
		require.NoError(t, err)
		assert.Equal(t, byte(i+1), bs[0], "no block overwrote another")
		assert.Equal(t, byte(i+101), bs[len(bs)-1])
		require.NoError(t, p.Free(b))
	}
	checkPool(t, p)
}

func TestPoolAllocateErrors(t *testing.T) {
	p := newPool(t, newDevice(0), memspace.PoolOptions{})
	for _, c := range []struct{ size, align int }{{0, 0}, {-1, 0}, {8, 3}, {8, -8}, {8, memspace.MaxAlign * 2}} {
		_, err := p.Allocate(c.size, c.align)
		assert.ErrorIs(t, err, memspace.ErrInvalidArgument, "%+v", c)
	}
	_, err := p.Allocate(math.MaxInt, 0)
	require.ErrorIs(t, err, memspace.ErrOutOfMemory)
	_, err = p.Allocate(1<<61, 0)
	require.ErrorIs(t, err, memspace.ErrOutOfMemory)
	assert.Equal(t, memspace.Stats{}, p.Stats(), "failed allocations leave no trace")
	checkPool(t, p)
}

func TestPoolFreeErrors(t *testing.T) {
	up := newDevice(0)
	p := newPool(t, up, memspace.PoolOptions{})
	require.ErrorIs(t, p.Free(memspace.NewBlock(p, 1<<20, 512, nil)), memspace.ErrDoubleFree, "a fresh pool holds nothing")
	other := newPool(t, up, memspace.PoolOptions{})
	b, err := p.Allocate(4096, 0)
	require.NoError(t, err)
	ob, err := other.Allocate(4096, 0)
	require.NoError(t, err)
	ub, err := up.Allocate(4096, 0)
	require.NoError(t, err)

	require.ErrorIs(t, p.Free(ob), memspace.ErrForeignBlock, "a block of another pool")
	require.ErrorIs(t, p.Free(ub), memspace.ErrForeignBlock, "a block of upstream")
	require.ErrorIs(t, p.Free(memspace.Block{}), memspace.ErrForeignBlock)
	require.ErrorIs(t, p.Free(ob), memspace.ErrInvalidArgument)

	head, err := b.Slice(0, 100)
	require.NoError(t, err)
	require.ErrorIs(t, p.Free(head), memspace.ErrDoubleFree, "a sub-slice at the start")
	tail, err := b.Slice(512, 512)
	require.NoError(t, err)
	require.ErrorIs(t, p.Free(tail), memspace.ErrDoubleFree, "a sub-slice inside")
	forged := memspace.NewBlock(p, b.Addr()+1<<30, 4096, nil)
	require.ErrorIs(t, p.Free(forged), memspace.ErrDoubleFree, "never allocated")

	before := p.PoolStats()
	require.NoError(t, p.Free(b))
	err = p.Free(b)
	require.ErrorIs(t, err, memspace.ErrDoubleFree)
	require.ErrorIs(t, err, memspace.ErrInvalidArgument)
	after := p.PoolStats()
	assert.Equal(t, before.Frees+1, after.Frees, "only the good free counted")
	checkPool(t, p)

	// Still usable.
	b, err = p.Allocate(4096, 0)
	require.NoError(t, err)
	require.NoError(t, p.Free(b))
	require.NoError(t, other.Free(ob))
	require.NoError(t, up.Free(ub))
}

func TestPoolAlignment(t *testing.T) {
	up := newDevice(0)
	p := newPool(t, up, memspace.PoolOptions{})
	var live []memspace.Block
	for shift := 0; shift <= 30; shift++ {
		align := 1 << shift
		for _, size := range []int{1, 4096, 3 * mib} {
			b, err := p.Allocate(size, align)
			require.NoError(t, err, "size %d align %d", size, align)
			assert.Zero(t, uintptr(b.Addr())%uintptr(align), "size %d align %d: %v", size, align, b)
			assert.Zero(t, uintptr(b.Addr())%memspace.DefaultPoolMinBlock)
			for _, o := range live {
				require.False(t, memspace.Overlaps(o, b), "%v overlaps %v", o, b)
			}
			live = append(live, b)
		}
	}
	checkPool(t, p)
	// Aligned requests are carved from cached memory too.
	segs := p.PoolStats().Segments
	for _, b := range live[:len(live)/2] {
		require.NoError(t, p.Free(b))
	}
	b, err := p.Allocate(4096, 64*kib)
	require.NoError(t, err)
	assert.Zero(t, uintptr(b.Addr())%(64*kib))
	assert.Equal(t, segs, p.PoolStats().Segments, "served from a cached segment")
	checkPool(t, p)
	for _, b := range append(live[len(live)/2:], b) {
		require.NoError(t, p.Free(b))
	}
	checkPool(t, p)
	_, err = p.Trim()
	require.NoError(t, err)
	assert.Equal(t, memspace.Stats{Peak: up.Stats().Peak, Allocs: up.Stats().Allocs, Frees: up.Stats().Frees}, up.Stats())
}

func TestPoolRoundUp(t *testing.T) {
	for _, c := range []struct {
		policy     memspace.RoundPolicy
		size, held int
	}{
		{memspace.RoundMinBlock, 9000, 9216},
		{memspace.RoundPow2, 9000, 16384},
		{memspace.RoundPolicy(4), 9000, 10240},
		{memspace.RoundPolicy(4), 8192, 8192},
		{memspace.RoundPolicy(4), 100, 512},
		{memspace.RoundPolicy(1024), 9000, 9216},
		{memspace.RoundPow2, 3 * mib, 4 * mib},
	} {
		p := newPool(t, newDevice(0), memspace.PoolOptions{RoundUp: c.policy})
		b, err := p.Allocate(c.size, 0)
		require.NoError(t, err)
		st := p.PoolStats()
		assert.EqualValues(t, c.held, st.Held, "policy %d size %d", c.policy, c.size)
		assert.EqualValues(t, c.size, st.InUse, "InUse counts the bytes asked for")
		assert.Equal(t, c.size, b.Len())
		require.NoError(t, p.Free(b))
	}
}

func TestPoolLookup(t *testing.T) {
	p := newPool(t, newDevice(0), memspace.PoolOptions{})
	a, err := p.Allocate(1000, 0)
	require.NoError(t, err)
	b, err := p.Allocate(5*mib, 0)
	require.NoError(t, err)
	for _, blk := range []memspace.Block{a, b} {
		for _, off := range []int{0, 1, blk.Len() - 1} {
			got, ok := p.Lookup(blk.Addr() + memspace.Addr(off))
			require.True(t, ok, "%v+%d", blk, off)
			assert.Equal(t, blk, got)
		}
	}
	_, ok := p.Lookup(a.Addr() + 1000)
	assert.False(t, ok, "slack after the asked-for bytes is no allocation")
	_, ok = p.Lookup(a.Addr() + 4096)
	assert.False(t, ok, "free memory is no allocation")
	_, ok = p.Lookup(0)
	assert.False(t, ok)
	_, ok = p.Lookup(^memspace.Addr(0))
	assert.False(t, ok)
	require.NoError(t, p.Free(a))
	_, ok = p.Lookup(a.Addr())
	assert.False(t, ok, "a freed block is gone")
	require.NoError(t, p.Free(b))
}

func TestPoolCoalescesSmallBlocks(t *testing.T) {
	up := newDevice(0)
	p := newPool(t, up, memspace.PoolOptions{})
	const n, size = 32, 64 * kib // exactly one 2 MiB segment
	blocks := make([]memspace.Block, n)
	for i := range blocks {
		b, err := p.Allocate(size, 0)
		require.NoError(t, err)
		blocks[i] = b
	}
	st := p.PoolStats()
	require.Equal(t, 1, st.Segments)
	require.Zero(t, st.Free)
	seg, ok := up.Lookup(blocks[0].Addr())
	require.True(t, ok)

	for i := 0; i < n; i += 2 {
		require.NoError(t, p.Free(blocks[i]))
	}
	st = p.PoolStats()
	assert.EqualValues(t, n/2*size, st.Free)
	assert.EqualValues(t, size, st.LargestFree)
	assert.EqualValues(t, (n/2-1)*size, st.Fragmented, "every free hole but the largest")
	checkPool(t, p)

	// 1 MiB does not fit in the holes: it needs a segment of its own.
	big, err := p.Allocate(1*mib, 0)
	require.NoError(t, err)
	assert.False(t, memspace.Overlaps(seg, memspace.NewBlock(up, big.Addr(), big.Len(), nil)))
	assert.Equal(t, 2, p.PoolStats().Segments)
	require.NoError(t, p.Free(big))
	released, err := p.Trim()
	require.NoError(t, err)
	assert.EqualValues(t, 2*mib, released, "only the wholly free segment goes")

	// Free the rest in a shuffled order; the holes merge into one block.
	odd := []int{}
	for i := 1; i < n; i += 2 {
		odd = append(odd, i)
	}
	rand.New(rand.NewPCG(1, 2)).Shuffle(len(odd), func(i, j int) { odd[i], odd[j] = odd[j], odd[i] })
	for _, i := range odd {
		require.NoError(t, p.Free(blocks[i]))
		checkPool(t, p)
	}
	st = p.PoolStats()
	assert.EqualValues(t, 2*mib, st.LargestFree)
	assert.Zero(t, st.Fragmented)
	calls := up.allocateCalls()
	big, err = p.Allocate(1*mib, 0)
	require.NoError(t, err)
	assert.Equal(t, seg.Addr(), big.Addr(), "the big block fits in the coalesced segment")
	assert.Equal(t, calls, up.allocateCalls(), "no upstream allocation")
	require.NoError(t, p.Free(big))
}

func TestPoolCoalescesLargeBlocks(t *testing.T) {
	up := newDevice(0)
	p := newPool(t, up, memspace.PoolOptions{})
	var bs []memspace.Block
	for _, n := range []int{6 * mib, 6 * mib, 7*mib + 512*kib} { // all share one 20 MiB segment
		b, err := p.Allocate(n, 0)
		require.NoError(t, err)
		bs = append(bs, b)
	}
	st := p.PoolStats()
	require.Equal(t, 1, st.Segments)
	assert.EqualValues(t, 20*mib, st.Reserved)
	assert.EqualValues(t, 20*mib, st.Held, "the last 512 KiB is too small for a large request and stays as slack")
	require.NoError(t, p.Free(bs[1]))
	require.NoError(t, p.Free(bs[0]))
	checkPool(t, p)
	b, err := p.Allocate(11*mib, 0)
	require.NoError(t, err)
	assert.Equal(t, bs[0].Addr(), b.Addr(), "the two freed neighbours merged")
	assert.Equal(t, 1, up.allocateCalls())
	require.NoError(t, p.Free(b))
	require.NoError(t, p.Free(bs[2]))
	checkPool(t, p)
	assert.EqualValues(t, 20*mib, p.PoolStats().Cached)
}

func TestPoolRetriesAfterReleasingCache(t *testing.T) {
	up := newDevice(24 * mib)
	p := newPool(t, up, memspace.PoolOptions{})
	var bs []memspace.Block
	for range 12 { // 1 MiB is the largest small request: two per 2 MiB segment
		b, err := p.Allocate(1*mib, 0)
		require.NoError(t, err)
		bs = append(bs, b)
	}
	require.EqualValues(t, 12*mib, up.Stats().InUse)
	for _, b := range bs {
		require.NoError(t, p.Free(b))
	}
	require.EqualValues(t, 12*mib, p.PoolStats().Cached)

	// 16 MiB does not fit beside the 12 MiB cached: the pool must give its
	// cache back and retry.
	b, err := p.Allocate(16*mib, 0)
	require.NoError(t, err)
	st := p.PoolStats()
	assert.EqualValues(t, 1, st.OOMRetries)
	assert.EqualValues(t, 16*mib, st.Reserved)
	assert.EqualValues(t, 16*mib, up.Stats().InUse)
	checkPool(t, p)

	// 3 MiB would share a 20 MiB segment, which cannot be had: the pool asks
	// for just 3 MiB.
	b2, err := p.Allocate(3*mib, 0)
	require.NoError(t, err)
	assert.EqualValues(t, 19*mib, up.Stats().InUse)

	// Truly out of memory: an error, and the pool is unharmed.
	before := p.Stats()
	_, err = p.Allocate(8*mib, 0)
	require.ErrorIs(t, err, memspace.ErrOutOfMemory)
	assert.Equal(t, before, p.Stats())
	checkPool(t, p)
	require.NoError(t, p.Free(b))
	b3, err := p.Allocate(8*mib, 0)
	require.NoError(t, err, "the freed 16 MiB block serves it")
	for _, b := range []memspace.Block{b2, b3} {
		require.NoError(t, p.Free(b))
	}
	_, err = p.Trim()
	require.NoError(t, err)
	assert.Zero(t, up.Stats().InUse)
}

func TestPoolMaxCached(t *testing.T) {
	up := newDevice(0)
	p := newPool(t, up, memspace.PoolOptions{MaxCached: 24 * mib})
	var bs []memspace.Block
	for range 8 { // 12 MiB requests get a segment each
		b, err := p.Allocate(12*mib, 0)
		require.NoError(t, err)
		bs = append(bs, b)
	}
	require.Equal(t, 8, p.PoolStats().Segments)
	for i, b := range bs {
		require.NoError(t, p.Free(b))
		st := p.PoolStats()
		assert.LessOrEqual(t, st.Cached, int64(24*mib))
		assert.Equal(t, len(bs)-(i+1)+min(i+1, 2), st.Segments, "two segments fit under the cap")
		assert.Equal(t, up.Stats().InUse, st.Reserved)
	}
	checkPool(t, p)

	none := newDevice(0)
	p = newPool(t, none, memspace.PoolOptions{MaxCached: -1})
	b, err := p.Allocate(100, 0)
	require.NoError(t, err)
	c, err := p.Allocate(100, 0)
	require.NoError(t, err)
	require.NoError(t, p.Free(b))
	assert.EqualValues(t, 2*mib, none.Stats().InUse, "a segment with a live block stays")
	require.NoError(t, p.Free(c))
	assert.Zero(t, none.Stats().InUse, "nothing is cached")
	assert.Zero(t, p.Stats().Reserved)
}

func TestPoolClose(t *testing.T) {
	up := newDevice(0)
	p := newPool(t, up, memspace.PoolOptions{})
	keep, err := p.Allocate(1000, 0)
	require.NoError(t, err)
	keepBig, err := p.Allocate(30*mib, 0)
	require.NoError(t, err)
	drop, err := p.Allocate(5*mib, 0)
	require.NoError(t, err)
	require.NoError(t, p.Free(drop)) // its 20 MiB segment is cached
	require.EqualValues(t, 52*mib, up.Stats().InUse)

	require.NoError(t, p.Close())
	assert.EqualValues(t, 32*mib, up.Stats().InUse, "cached memory went back; live memory stayed")
	_, err = p.Allocate(100, 0)
	require.ErrorIs(t, err, memspace.ErrClosed)
	require.ErrorIs(t, p.Close(), memspace.ErrClosed)
	got, ok := p.Lookup(keep.Addr())
	require.True(t, ok, "live blocks stay valid")
	assert.Equal(t, keep, got)

	require.NoError(t, p.Free(keep))
	assert.EqualValues(t, 30*mib, up.Stats().InUse, "a freed block's segment goes straight back")
	require.ErrorIs(t, p.Free(keep), memspace.ErrDoubleFree)
	require.NoError(t, p.Free(keepBig))
	assert.Zero(t, up.Stats().InUse)
	assert.Zero(t, up.Stats().Live)
	st := p.Stats()
	assert.Zero(t, st.Reserved)
	assert.Zero(t, st.Live)
	released, err := p.Trim()
	require.NoError(t, err)
	assert.Zero(t, released)
	checkPool(t, p)
}

func TestPoolUpstreamClosed(t *testing.T) {
	up := newDevice(0)
	p := newPool(t, up, memspace.PoolOptions{})
	require.NoError(t, up.Close())
	_, err := p.Allocate(100, 0)
	require.ErrorIs(t, err, memspace.ErrClosed, "upstream's error comes through")
	assert.Equal(t, memspace.Stats{}, p.Stats())
}

// poolModel drives a pool with a random workload and checks it against a
// model of what must hold after every step.
type poolModel struct {
	t    *testing.T
	p    *memspace.Pool
	up   *fakeSpace
	rng  *rand.Rand
	live []modelBlock
	tag  byte
}

type modelBlock struct {
	b     memspace.Block
	align int
	tag   byte
}

func (m *poolModel) alloc(size, align int) {
	t := m.t
	b, err := m.p.Allocate(size, align)
	require.NoError(t, err, "size %d align %d", size, align)
	require.Equal(t, memspace.Space(m.p), b.Space())
	require.Equal(t, size, b.Len())
	require.Zero(t, uintptr(b.Addr())%uintptr(max(align, m.p.Properties().Alignment)), "%v align %d", b, align)
	ub, ok := m.up.Lookup(b.Addr())
	require.True(t, ok, "%v lies in no upstream segment", b)
	require.LessOrEqual(t, b.Addr()+memspace.Addr(size), ub.Addr()+memspace.Addr(ub.Len()), "%v overruns %v", b, ub)
	for _, o := range m.live {
		require.False(t, memspace.Overlaps(o.b, b), "%v overlaps %v", o.b, b)
	}
	m.tag++
	if m.up.host {
		require.Equal(t, unsafe.Add(ub.HostPointer(), int(b.Addr()-ub.Addr())), b.HostPointer())
		bs, err := b.Bytes()
		require.NoError(t, err)
		bs[0] = m.tag
		if size > 1 {
			bs[size-1] = ^m.tag
		}
	} else {
		require.Nil(t, b.HostPointer())
	}
	m.live = append(m.live, modelBlock{b: b, align: align, tag: m.tag})
}

func (m *poolModel) free(i int) {
	t := m.t
	mb := m.live[i]
	if m.up.host {
		bs, err := mb.b.Bytes()
		require.NoError(t, err)
		require.Equal(t, mb.tag, bs[0], "%v was overwritten", mb.b)
		if len(bs) > 1 {
			require.Equal(t, ^mb.tag, bs[len(bs)-1], "%v was overwritten", mb.b)
		}
	}
	require.NoError(t, m.p.Free(mb.b))
	m.live[i] = m.live[len(m.live)-1]
	m.live = m.live[:len(m.live)-1]
}

func (m *poolModel) check() {
	t := m.t
	checkPool(t, m.p)
	st := m.p.PoolStats()
	var inUse int64
	for _, mb := range m.live {
		inUse += int64(mb.b.Len())
	}
	require.Equal(t, inUse, st.InUse)
	require.EqualValues(t, len(m.live), st.Live)
	require.Equal(t, st.Allocs-st.Frees, st.Live)
	require.GreaterOrEqual(t, st.Peak, st.InUse)
	require.Equal(t, m.up.Stats().InUse, st.Reserved, "the pool is upstream's only user")
	require.Equal(t, st.Free-st.LargestFree, st.Fragmented)
	require.GreaterOrEqual(t, st.Reserved, st.Held)
	require.GreaterOrEqual(t, st.Held, st.InUse)
	if len(m.live) > 0 {
		mb := m.live[m.rng.IntN(len(m.live))]
		got, ok := m.p.Lookup(mb.b.Addr() + memspace.Addr(m.rng.IntN(mb.b.Len())))
		require.True(t, ok)
		require.Equal(t, mb.b.Addr(), got.Addr())
		require.Equal(t, mb.b.Len(), got.Len())
	}
}

// logUniform returns a size between lo and hi, log-uniformly.
func logUniform(rng *rand.Rand, lo, hi int) int {
	l, h := math.Log(float64(lo)), math.Log(float64(hi))
	return int(math.Exp(l + rng.Float64()*(h-l)))
}

func TestPoolRandomModel(t *testing.T) {
	cases := []struct {
		name     string
		up       func() *fakeSpace
		opts     memspace.PoolOptions
		maxAlign int
	}{
		{"device", func() *fakeSpace { return newDevice(0) }, memspace.PoolOptions{}, memspace.MaxAlign},
		{"host", func() *fakeSpace { return newHost(0) }, memspace.PoolOptions{}, 64 * kib},
		{"small-segments-pow2", func() *fakeSpace { return newDevice(0) },
			memspace.PoolOptions{MinBlock: 64, SegmentSize: 64 * kib, LargeSegmentSize: 256 * kib, RoundUp: memspace.RoundPow2}, 1 * mib},
		{"capped-cache-div4", func() *fakeSpace { return newDevice(0) },
			memspace.PoolOptions{MaxCached: 8 * mib, RoundUp: 4}, 16 * mib},
		{"no-cache", func() *fakeSpace { return newDevice(0) }, memspace.PoolOptions{MaxCached: -1}, 4 * kib},
	}
	for ci, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			up := c.up()
			m := &poolModel{t: t, p: newPool(t, up, c.opts), up: up, rng: rand.New(rand.NewPCG(uint64(ci), 42))}
			steps, maxLive := 2000, 150
			if testing.Short() {
				steps = 500
			}
			for step := range steps {
				if len(m.live) < maxLive && m.rng.Float64() < 0.55 {
					align := 0
					if m.rng.IntN(4) == 0 {
						align = 1 << m.rng.IntN(bitsLen(c.maxAlign))
					}
					m.alloc(logUniform(m.rng, 1, 8*mib), align)
				} else if len(m.live) > 0 {
					m.free(m.rng.IntN(len(m.live)))
				}
				if step%50 == 0 {
					m.check()
				}
			}
			m.check()
			for len(m.live) > 0 {
				m.free(m.rng.IntN(len(m.live)))
			}
			m.check()
			st := m.p.PoolStats()
			require.Zero(t, st.InUse)
			require.Zero(t, st.Live)
			require.Equal(t, st.Allocs, st.Frees)
			require.Equal(t, st.Reserved, st.Cached, "every segment is wholly free")
			released, err := m.p.Trim()
			require.NoError(t, err)
			require.Equal(t, st.Reserved, released)
			require.Zero(t, m.p.Stats().Reserved)
			ust := up.Stats()
			require.Zero(t, ust.InUse, "Trim returned everything upstream")
			require.Zero(t, ust.Live)
			require.Equal(t, ust.Allocs, ust.Frees)
			checkPool(t, m.p)
		})
	}
}

func bitsLen(n int) int {
	l := 0
	for n > 0 {
		l++
		n >>= 1
	}
	return l
}

func TestPoolConcurrent(t *testing.T) {
	up := newDevice(0)
	p := newPool(t, up, memspace.PoolOptions{MaxCached: 16 * mib})
	var (
		mu     sync.Mutex
		others = map[memspace.Addr]memspace.Block{} // every live block, for the overlap check
	)
	register := func(b memspace.Block) error {
		mu.Lock()
		defer mu.Unlock()
		for _, o := range others {
			if memspace.Overlaps(o, b) {
				return fmt.Errorf("%v overlaps %v", b, o)
			}
		}
		others[b.Addr()] = b
		return nil
	}
	unregister := func(b memspace.Block) {
		mu.Lock()
		delete(others, b.Addr())
		mu.Unlock()
	}
	const workers, iters = 8, 1000
	errc := make(chan error, workers)
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			rng := rand.New(rand.NewPCG(uint64(w), 7))
			var mine []memspace.Block
			for range iters {
				if len(mine) < 6 && rng.IntN(2) == 0 {
					b, err := p.Allocate(logUniform(rng, 1, 4*mib), 0)
					if err == nil {
						err = register(b)
					}
					if err != nil {
						errc <- err
						return
					}
					mine = append(mine, b)
					continue
				}
				if len(mine) == 0 {
					continue
				}
				i := rng.IntN(len(mine))
				b := mine[i]
				if got, ok := p.Lookup(b.Addr()); !ok || got != b {
					errc <- fmt.Errorf("lookup of %v: %v %v", b, got, ok)
					return
				}
				unregister(b)
				if err := p.Free(b); err != nil {
					errc <- err
					return
				}
				mine = slices.Delete(mine, i, i+1)
				_ = p.Stats()
			}
			for _, b := range mine {
				unregister(b)
				if err := p.Free(b); err != nil {
					errc <- err
					return
				}
			}
		})
	}
	testwait.Group(t, &wg, "the goroutines allocating and freeing")
	close(errc)
	for err := range errc {
		require.NoError(t, err)
	}
	checkPool(t, p)
	st := p.Stats()
	assert.Zero(t, st.InUse)
	assert.Zero(t, st.Live)
	assert.Equal(t, st.Allocs, st.Frees)
	_, err := p.Trim()
	require.NoError(t, err)
	assert.Zero(t, up.Stats().InUse)
}

// TestPoolFragmentation runs the randomized workload of the fragmentation
// benchmark and checks the pool stays within sane bounds of waste.
func TestPoolFragmentation(t *testing.T) {
	up := newDevice(0)
	p := newPool(t, up, memspace.PoolOptions{})
	rng := rand.New(rand.NewPCG(2024, 1))
	var live []memspace.Block
	var peakInUse int64
	for range 5000 {
		if len(live) < 200 && rng.IntN(2) == 0 {
			b, err := p.Allocate(logUniform(rng, 256, 8*mib), 0)
			require.NoError(t, err)
			live = append(live, b)
			peakInUse = max(peakInUse, p.Stats().InUse)
		} else if len(live) > 0 {
			i := rng.IntN(len(live))
			require.NoError(t, p.Free(live[i]))
			live = slices.Delete(live, i, i+1)
		}
	}
	st := p.PoolStats()
	t.Logf("in use %d MiB, held %d MiB, reserved %d MiB (peak in use %d MiB), free %d MiB, largest free %d MiB, fragmented %d MiB, %d segments",
		st.InUse>>20, st.Held>>20, st.Reserved>>20, peakInUse>>20, st.Free>>20, st.LargestFree>>20, st.Fragmented>>20, st.Segments)
	require.Positive(t, st.InUse)
	// The cache never returns memory here (no cap, no Trim), so Reserved is
	// the most the workload ever needed at once plus waste; a caching
	// allocator that reserved twice the peak demand would be broken.
	assert.Less(t, float64(st.Reserved), 2*float64(peakInUse), "reserved vs peak in use")
	assert.Less(t, st.Fragmented, st.Reserved)
	checkPool(t, p)
	for _, b := range live {
		require.NoError(t, p.Free(b))
	}
}

func ExampleNewPool() {
	dev := newDevice(0) // any Space: GPU device memory, pinned host memory, the CPU backend
	pool, err := memspace.NewPool(dev, memspace.PoolOptions{})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer pool.Close()

	a, _ := memspace.Alloc[float32](pool, 1024)
	_ = a.Free() // back to the pool's cache, not to the device
	b, _ := memspace.Alloc[float32](pool, 1000)
	defer b.Free()

	st := pool.Stats()
	fmt.Println("live:", st.Live, "in use:", st.InUse, "reserved:", st.Reserved)
	fmt.Println("device allocations:", dev.Stats().Allocs)
	// Output:
	// live: 1 in use: 4000 reserved: 2097152
	// device allocations: 1
}

func ExamplePool_Trim() {
	dev := newDevice(0)
	pool, _ := memspace.NewPool(dev, memspace.PoolOptions{})
	b, _ := pool.Allocate(3<<20, 0)
	_ = pool.Free(b)
	released, _ := pool.Trim()
	fmt.Println("released:", released, "device in use:", dev.Stats().InUse)
	// Output: released: 20971520 device in use: 0
}

// liar is an upstream that misbehaves on demand: it returns blocks shorter
// than asked, or fails every Free after doing it.
type liar struct {
	*fakeSpace
	short    int
	failFree bool
	inner    map[memspace.Addr]memspace.Block
}

func (l *liar) Allocate(size, align int) (memspace.Block, error) {
	b, err := l.fakeSpace.Allocate(size, align)
	if err != nil {
		return b, err
	}
	l.inner[b.Addr()] = b
	return memspace.NewBlock(l, b.Addr(), b.Len()-l.short, nil), nil
}

func (l *liar) Free(b memspace.Block) error {
	ib, ok := l.inner[b.Addr()]
	if !ok {
		return memspace.ErrDoubleFree
	}
	delete(l.inner, b.Addr())
	if err := l.fakeSpace.Free(ib); err != nil {
		return err
	}
	if l.failFree {
		return fmt.Errorf("liar: %w", memspace.ErrClosed)
	}
	return nil
}

func TestPoolMisbehavingUpstream(t *testing.T) {
	up := &liar{fakeSpace: newDevice(0), short: 512, inner: map[memspace.Addr]memspace.Block{}}
	p := newPool(t, up, memspace.PoolOptions{})
	_, err := p.Allocate(100, 0)
	require.ErrorIs(t, err, memspace.ErrNotSupported, "a short segment is refused")
	assert.Zero(t, up.Stats().InUse, "and given back")
	assert.Equal(t, memspace.Stats{}, p.Stats())
	assert.NotContains(t, err.Error(), "\n", "one line")

	up.failFree = true
	_, err = p.Allocate(100, 0)
	require.ErrorIs(t, err, memspace.ErrNotSupported, "a short segment is refused")
	require.ErrorIs(t, err, memspace.ErrClosed, "and upstream's failure to take it back is reported too")
	assert.NotContains(t, err.Error(), "\n", "one line")
	assert.Equal(t, memspace.Stats{}, p.Stats())
	up.failFree = false

	up.short = 0
	up.failFree = true
	b, err := p.Allocate(100, 0)
	require.NoError(t, err)
	require.NoError(t, p.Free(b))
	released, err := p.Trim()
	require.ErrorIs(t, err, memspace.ErrClosed, "upstream's error is reported")
	assert.EqualValues(t, 2*mib, released)
	assert.Zero(t, p.Stats().Reserved, "the segment left the books all the same")
	checkPool(t, p)

	b, err = p.Allocate(100, 0)
	require.NoError(t, err)
	require.NoError(t, p.Free(b))
	require.ErrorIs(t, p.Close(), memspace.ErrClosed, "Close reports upstream's error")

	q := newPool(t, up, memspace.PoolOptions{MaxCached: -1})
	b, err = q.Allocate(100, 0)
	require.NoError(t, err)
	err = q.Free(b)
	require.ErrorIs(t, err, memspace.ErrClosed, "a Free that returns a segment reports upstream's error")
	assert.Zero(t, q.Stats().Live, "the block was freed")
	checkPool(t, q)
}
