// This file holds Pool, a caching allocator over any Space in the manner of
// PyTorch's CUDA caching allocator. The design, and the reasons for it:
//
//   - It never touches the memory it manages. Everything the pool knows lives
//     in Go structures beside the memory (no headers, no host access): it only
//     does arithmetic on Addr and slices upstream blocks (Block.Slice's
//     arithmetic, inlined). So it serves GPU device memory, pinned memory and
//     host memory alike; the tests run it over a fake device with no memory.
//   - Upstream memory is taken in segments. Requests of up to SegmentSize/2
//     (1 MiB by default) are "small" and carved from SegmentSize segments
//     (2 MiB). Larger requests are "large": those below LargeSegmentSize/2
//     share LargeSegmentSize segments (20 MiB), bigger ones get a segment of
//     their own, rounded up to a multiple of SegmentSize. Small and large
//     requests live in separate heaps so that long-lived small blocks do not
//     pin large segments (PyTorch's small and large pools).
//   - Inside a segment, blocks are split on allocation and coalesced with free
//     address neighbours on free, so that a large request fits again once its
//     neighbours are gone. A split remainder in the large heap smaller than
//     SegmentSize/2 is not cut off (no large request could use it): it stays
//     with the allocation as slack and comes back with it.
//   - Free blocks are indexed by size in two-level segregated bins (TLSF:
//     one level per power of two, 32 linear steps inside it, a bitmap per
//     level). Finding a good fit, inserting and removing are O(1) bit
//     operations; the request's own bin is searched first, so an exact or
//     near-exact fit is preferred to splitting a larger block (best fit to
//     within 1/32 of the size). Bins are LIFO, so the block just freed is
//     reused first: the hot path (alloc and free of a cached size) touches the
//     same few cache lines. Requests with an alignment above MinBlock scan the
//     bins for a block that holds an aligned start.
//   - Sizes are rounded up to MinBlock (512 B), or by a RoundPolicy to one of
//     n steps per power of two, which trades slack for fewer distinct sizes.
//   - When upstream runs out of memory the pool returns every wholly free
//     cached segment upstream and retries once (and for a shared segment, tries
//     a segment just large enough), as CUDA's caching allocators do, before
//     answering ErrOutOfMemory. Trim does the same on demand; MaxCached caps
//     the wholly free segments kept after a free.
//   - One mutex guards the pool. Upstream calls (rare: growth and release) are
//     made holding it, so a slow upstream allocation delays other callers; in
//     return the pool's state is always consistent and Close is simple.
//   - The hot path is Allocate+Free of a size the cache holds: a bin lookup,
//     one split and one merge, and the live allocation filed by address in an
//     open-addressing table (pool_live.go) instead of a Go map, which cost
//     more than the rest together. It measures ~70 ns on a 2-core VM, over a
//     third of it the mutex. A per-size free list in front of the bins
//     (deferred coalescing, as dlmalloc's fastbins) would save the split and
//     merge (~15 ns) but keep freed blocks from merging until a flush, which
//     costs fragmentation and makes Cached and Trim lag; not worth it here.
//
// The ledger (Stats): InUse counts the bytes callers asked for, not the
// rounded sizes, so that a pool's ledger matches any other space's for the
// same allocations; the slack from rounding is part of Reserved - InUse.
// Reserved is the bytes of the segments held from upstream. Fragmented is the
// free bytes outside the largest free block: Free - LargestFree, where Free
// is the reserved bytes not held by a live allocation (with its slack) and
// LargestFree the largest contiguous free block. It is zero when all free
// memory is one block, and it is the part of the cache that a request as
// large as all the free memory could not use without going upstream.
// PoolStats gives these parts separately.

package memspace

import (
	"errors"
	"fmt"
	"math"
	"math/bits"
	"sort"
	"sync"
	"unsafe"

	"github.com/xpu-go/xpu/impl"
	"github.com/xpu-go/xpu/xerr"
)

// Defaults of PoolOptions.
const (
	// DefaultPoolMinBlock is the default granularity and alignment of pool
	// blocks (PyTorch's kMinBlockSize).
	DefaultPoolMinBlock = 512
	// DefaultPoolSegmentSize is the default size of the segments small
	// requests are carved from.
	DefaultPoolSegmentSize = 2 << 20
	// DefaultPoolLargeSegmentSize is the default size of the segments
	// medium-sized large requests share.
	DefaultPoolLargeSegmentSize = 20 << 20
)

// maxPoolRequest is the largest size the pool will try to serve; larger
// requests cannot be rounded without overflow and no memory is that large.
const maxPoolRequest = 1 << 60

// RoundPolicy chooses the size a request is rounded up to before the pool
// serves it. Its value is the number of equal steps each interval between
// consecutive powers of two is divided into: RoundPolicy(4) serves a
// 5000-byte request with 5120 bytes and a 40000-byte one with 40960. Every
// size is further rounded to a multiple of MinBlock. Fewer steps mean fewer
// distinct block sizes (better reuse of freed blocks) and more slack (up to
// 1/n of the request).
type RoundPolicy int

const (
	// RoundMinBlock rounds only to a multiple of MinBlock: the least slack.
	RoundMinBlock RoundPolicy = 0
	// RoundPow2 rounds up to the next power of two: the fewest sizes, up to
	// half of a block as slack.
	RoundPow2 RoundPolicy = 1
)

// PoolOptions configure a Pool. The zero value is a good default.
type PoolOptions struct {
	// MinBlock is the granularity of block sizes and the alignment every
	// block gets (Properties().Alignment). Zero means 512 B. It must be a
	// power of two no larger than SegmentSize/4.
	MinBlock int
	// SegmentSize is the size of the upstream segments that small requests
	// (up to SegmentSize/2) are carved from. Zero means 2 MiB. It must be a
	// multiple of MinBlock.
	SegmentSize int
	// LargeSegmentSize is the size of the upstream segments that requests
	// above SegmentSize/2 and below LargeSegmentSize/2 share; larger requests
	// get a segment of their own. Zero means 20 MiB. It must be a multiple of
	// SegmentSize.
	LargeSegmentSize int
	// MaxCached caps the bytes of wholly free segments the pool keeps for
	// reuse: when a free leaves more than this cached, the segment it freed
	// goes back upstream. Zero means no cap; a negative value keeps none.
	// Partly used segments are never returned.
	MaxCached int64
	// RoundUp is the round-up policy; the zero value rounds to MinBlock only.
	// It must be zero or a power of two up to 1024.
	RoundUp RoundPolicy
}

// PoolStats is the detailed ledger of a Pool.
type PoolStats struct {
	Stats
	// Held is the bytes of blocks held by live allocations, slack included.
	Held int64
	// Free is the reserved bytes not held: Reserved - Held.
	Free int64
	// LargestFree is the largest contiguous free block, in bytes.
	LargestFree int64
	// Cached is the bytes of segments with no live allocation.
	Cached int64
	// Segments is the number of segments held from upstream.
	Segments int
	// UpstreamAllocs and UpstreamFrees count the segments allocated from and
	// returned to upstream.
	UpstreamAllocs, UpstreamFrees int64
	// OOMRetries counts the times upstream ran out of memory and the pool
	// released its cache to retry.
	OOMRetries int64
}

// Pool is a caching allocator over an upstream Space; see the comment at the
// top of pool.go for its design. Blocks it returns belong to the pool
// (Block.Space() is the pool) and have upstream's addresses, host mappings
// and properties, so they can be used wherever upstream's blocks can.
//
// A Pool is safe for concurrent use. It does not own upstream: Close
// returns the pool's memory but does not close upstream.
type Pool struct {
	poolConfig // fixed by NewPool

	mu     sync.Mutex
	closed bool
	small  poolHeap
	large  poolHeap
	live   liveMap
	segs   []*segment // sorted by start address
	spare  *chunk     // recycled chunk structs, linked by next

	poolLedger // guarded by mu
}

// poolConfig is what NewPool fixes of a pool: its upstream and the sizes
// it cuts and caches.
type poolConfig struct {
	up        Space
	name      string
	device    int
	minBlock  int
	shift     uint // log2(minBlock)
	segSize   int
	largeSeg  int
	smallMax  int   // largest small request: segSize/2
	maxCached int64 // cap on Cached; math.MaxInt64 for none
	divisions int
}

// poolLedger is the counts PoolStats reports.
type poolLedger struct {
	inUse, peak, nlive, allocs, frees int64
	reserved, held, cached            int64
	upAllocs, upFrees, oomRetries     int64
}

var (
	_ Space      = (*Pool)(nil)
	_ StatsSpace = (*Pool)(nil)
	_ Lookuper   = (*Pool)(nil)
	_ Closer     = (*Pool)(nil)
	_ Unwrapper  = (*Pool)(nil)
)

// segment is one block held from upstream.
type segment struct {
	blk   Block
	heap  *poolHeap
	first *chunk // the chunk at the segment's start; stable for its life
}

// chunk is a contiguous part of a segment: free, or held by one allocation.
type chunk struct {
	seg          *segment
	addr         Addr
	size         int // bytes, a multiple of minBlock
	req          int // bytes the caller asked for while live; 0 when free
	prev, next   *chunk
	fprev, fnext *chunk // bin list links while free
	free         bool
	fl, sl       uint8
}

// NewPool returns a caching pool over upstream.
func NewPool(upstream Space, opts PoolOptions) (*Pool, error) {
	if upstream == nil {
		return nil, fmt.Errorf("memspace: pool over a nil space: %w", ErrInvalidArgument)
	}
	o := opts
	if o.MinBlock == 0 {
		o.MinBlock = DefaultPoolMinBlock
	}
	if o.SegmentSize == 0 {
		o.SegmentSize = DefaultPoolSegmentSize
	}
	if o.LargeSegmentSize == 0 {
		o.LargeSegmentSize = max(DefaultPoolLargeSegmentSize/o.SegmentSize, 1) * o.SegmentSize
	}
	bad := func(format string, args ...any) (*Pool, error) {
		return nil, fmt.Errorf("memspace: pool options: "+format+": %w", append(args, ErrInvalidArgument)...)
	}
	switch {
	case o.MinBlock < 0 || o.MinBlock&(o.MinBlock-1) != 0:
		return bad("MinBlock %d is not a power of two", o.MinBlock)
	case o.SegmentSize < 4*o.MinBlock || o.SegmentSize%o.MinBlock != 0 || o.SegmentSize > MaxAlign:
		return bad("SegmentSize %d is not a multiple of MinBlock %d, at least 4 of them and at most 1 GiB", o.SegmentSize, o.MinBlock)
	case o.LargeSegmentSize < o.SegmentSize || o.LargeSegmentSize%o.SegmentSize != 0 || o.LargeSegmentSize > 64*MaxAlign:
		return bad("LargeSegmentSize %d is not a multiple of SegmentSize %d (at most 64 GiB)", o.LargeSegmentSize, o.SegmentSize)
	case o.RoundUp < 0 || o.RoundUp > 1024 || o.RoundUp&(o.RoundUp-1) != 0:
		return bad("RoundUp %d is not zero or a power of two up to 1024", int(o.RoundUp))
	}
	props := upstream.Properties()
	p := &Pool{poolConfig: poolConfig{
		up:        upstream,
		name:      "pool(" + upstream.Name() + ")",
		device:    props.Device,
		minBlock:  o.MinBlock,
		shift:     uint(bits.TrailingZeros(uint(o.MinBlock))),
		segSize:   o.SegmentSize,
		largeSeg:  o.LargeSegmentSize,
		smallMax:  o.SegmentSize / 2,
		maxCached: o.MaxCached,
		divisions: int(o.RoundUp),
	}}
	switch {
	case o.MaxCached == 0:
		p.maxCached = math.MaxInt64
	case o.MaxCached < 0:
		p.maxCached = 0
	}
	p.large.large = true
	return p, nil
}

// Name returns "pool(" + upstream's name + ")".
func (p *Pool) Name() string { return p.name }

// Properties returns upstream's properties, except Alignment, which is the
// pool's MinBlock: every block is aligned to it, and a caller needing more
// (a page, say, where upstream aligns to pages) asks for it in Allocate.
func (p *Pool) Properties() Properties {
	props := p.up.Properties()
	props.Alignment = p.minBlock
	return props
}

// Unwrap returns the upstream space.
func (p *Pool) Unwrap() Space { return p.up }

// roundSize returns the size a request of size bytes is served with.
func (p *Pool) roundSize(size int) int {
	if d := p.divisions; d > 0 && size > p.minBlock {
		floor := 1 << (bits.Len(uint(size)) - 1)
		if floor != size {
			step := max(floor/d, 1)
			size = (size + step - 1) &^ (step - 1)
		}
	}
	return (size + p.minBlock - 1) &^ (p.minBlock - 1)
}

// Allocate returns a block of size bytes aligned to align (zero means
// MinBlock), from the cache when it can and from upstream otherwise. When
// upstream is out of memory, the pool releases its cached segments and
// retries before returning ErrOutOfMemory. After Close it returns
// ErrClosed.
func (p *Pool) Allocate(size, align int) (Block, error) {
	align, err := impl.CheckAlloc(size, align, p.minBlock)
	if err != nil {
		return Block{}, xerr.Dev(p.name, p.device, "alloc", err)
	}
	if size > maxPoolRequest {
		return Block{}, xerr.Dev(p.name, p.device, "alloc", xerr.Detail(ErrOutOfMemory, "%d bytes", size))
	}
	rsize := p.roundSize(size)
	h := &p.small
	if rsize > p.smallMax {
		h = &p.large
	}
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return Block{}, xerr.Dev(p.name, p.device, "alloc", xerr.Detail(ErrClosed, "pool is closed"))
	}
	var c *chunk
	if align <= p.minBlock {
		c = h.find(rsize, p.shift)
	} else {
		c = h.findAligned(rsize, align, p.shift)
	}
	if c == nil {
		if c, err = p.grow(h, rsize, align); err != nil {
			p.mu.Unlock()
			return Block{}, err
		}
	}
	c = p.carve(h, c, rsize, align)
	c.req = size
	p.live.put(c.addr, c)
	p.held += int64(c.size)
	p.inUse += int64(size)
	p.peak = max(p.peak, p.inUse)
	p.nlive++
	p.allocs++
	b := p.block(c, size)
	p.mu.Unlock()
	return b, nil
}

// block returns the pool's block for the first n bytes of chunk c: the
// segment's upstream block sliced (Block.Slice, done inline here because it
// is on the hot path), owned by the pool.
func (p *Pool) block(c *chunk, n int) Block {
	b := Block{space: p, addr: c.addr, size: n}
	if h := c.seg.blk.host; h != nil {
		b.host = unsafe.Add(h, int(c.addr-c.seg.blk.addr))
	}
	return b
}

// carve takes the free chunk c, which can hold rsize bytes at align, out of
// its bin, splits off what the allocation does not need and returns the
// allocation's chunk, marked live.
func (p *Pool) carve(h *poolHeap, c *chunk, rsize, align int) *chunk {
	p.unbin(h, c)
	if lead := int(alignUp(c.addr, align) - c.addr); lead > 0 {
		rest := p.split(c, lead)
		p.bin(h, c)
		c = rest
	}
	rem := c.size - rsize
	if rem > 0 && (!h.large || rem >= p.smallMax) {
		r := p.split(c, rsize)
		p.bin(h, r)
	}
	c.free = false
	return c
}

// split cuts c after n bytes and returns the second part as a new free chunk
// absorb merges b, the chunk that follows a in their segment, into a, and
// recycles b. Neither is in a bin.
func (p *Pool) absorb(a, b *chunk) {
	a.size += b.size
	a.next = b.next
	if b.next != nil {
		b.next.prev = a
	}
	p.recycle(b)
}

// (not in a bin).
func (p *Pool) split(c *chunk, n int) *chunk {
	r := p.newChunk()
	r.seg, r.addr, r.size, r.free = c.seg, c.addr+Addr(n), c.size-n, true
	r.prev, r.next = c, c.next
	if c.next != nil {
		c.next.prev = r
	}
	c.next = r
	c.size = n
	return r
}

func (p *Pool) newChunk() *chunk {
	c := p.spare
	if c == nil {
		return new(chunk)
	}
	p.spare = c.next
	c.next = nil
	return c
}

func (p *Pool) recycle(c *chunk) {
	*c = chunk{next: p.spare}
	p.spare = c
}

// bin marks c free and files it by size, keeping Free and Cached current.
func (p *Pool) bin(h *poolHeap, c *chunk) {
	c.free = true
	h.insert(c, p.shift)
	if c.size == c.seg.blk.size {
		p.cached += int64(c.size)
	}
}

func (p *Pool) unbin(h *poolHeap, c *chunk) {
	h.remove(c)
	if c.size == c.seg.blk.size {
		p.cached -= int64(c.size)
	}
}

// grow allocates a segment for a request of rsize bytes at align and
// returns its one free chunk, binned.
func (p *Pool) grow(h *poolHeap, rsize, align int) (*chunk, error) {
	segSize, minSize := p.segSize, rsize
	if h.large {
		if rsize < p.largeSeg/2 {
			segSize = p.largeSeg
		} else {
			segSize = (rsize + p.segSize - 1) / p.segSize * p.segSize
		}
	}
	segAlign := max(align, p.minBlock)
	blk, err := p.up.Allocate(segSize, segAlign)
	if err != nil && errors.Is(err, ErrOutOfMemory) {
		if p.releaseCached() > 0 {
			p.oomRetries++
			blk, err = p.up.Allocate(segSize, segAlign)
		}
		if err != nil && errors.Is(err, ErrOutOfMemory) && minSize < segSize {
			segSize = minSize
			blk, err = p.up.Allocate(segSize, segAlign)
		}
	}
	if err != nil {
		return nil, xerr.Dev(p.name, p.device, "alloc", fmt.Errorf("segment of %d bytes from %s: %w", segSize, p.up.Name(), err))
	}
	if blk.space != p.up || blk.size != segSize || uintptr(blk.addr)%uintptr(segAlign) != 0 {
		err := xerr.Detail(ErrNotSupported, "upstream %s returned %v for %d bytes at alignment %d", p.up.Name(), blk, segSize, segAlign)
		if ferr := p.up.Free(blk); ferr != nil {
			err = fmt.Errorf("%w; freeing it: %w", err, ferr)
		}
		return nil, xerr.Dev(p.name, p.device, "alloc", err)
	}
	p.upAllocs++
	seg := &segment{blk: blk, heap: h}
	c := p.newChunk()
	c.seg, c.addr, c.size = seg, blk.addr, segSize
	seg.first = c
	i := sort.Search(len(p.segs), func(i int) bool { return p.segs[i].blk.addr > blk.addr })
	p.segs = append(p.segs, nil)
	copy(p.segs[i+1:], p.segs[i:])
	p.segs[i] = seg
	p.reserved += int64(segSize)
	p.bin(h, c)
	return c, nil
}

// Free returns b to the pool. b must be a block this pool returned and not
// yet freed, whole: anything else is ErrDoubleFree (ErrForeignBlock for a
// block of another space) and changes nothing. Free keeps working after
// Close, so that memory still held at Close can be returned upstream.
func (p *Pool) Free(b Block) error {
	if b.space != Space(p) {
		return xerr.Dev(p.name, p.device, "free", xerr.Detail(ErrForeignBlock, "block %v", b))
	}
	p.mu.Lock()
	c := p.live.get(b.addr)
	if c == nil || c.req != b.size {
		p.mu.Unlock()
		return xerr.Dev(p.name, p.device, "free", xerr.Detail(ErrDoubleFree, "block %v is not a live allocation of this pool (freed twice, never allocated, or a sub-slice)", b))
	}
	p.live.del(b.addr)
	p.inUse -= int64(c.req)
	p.held -= int64(c.size)
	p.nlive--
	p.frees++
	c.req = 0
	h := c.seg.heap
	if n := c.next; n != nil && n.free {
		p.unbin(h, n)
		p.absorb(c, n)
	}
	if pr := c.prev; pr != nil && pr.free {
		p.unbin(h, pr)
		p.absorb(pr, c)
		c = pr
	}
	p.bin(h, c)
	if c.size == c.seg.blk.size && (p.closed || p.cached > p.maxCached) {
		err := p.releaseSegment(c.seg)
		p.mu.Unlock()
		if err != nil {
			return xerr.Dev(p.name, p.device, "free", err)
		}
		return nil
	}
	p.mu.Unlock()
	return nil
}

// releaseSegment returns the wholly free segment seg upstream. The segment
// leaves the pool's books even when upstream's Free fails (upstream then
// says the memory is not its own, or it is closed: either way it is gone).
func (p *Pool) releaseSegment(seg *segment) error {
	c := seg.first
	p.unbin(seg.heap, c)
	p.recycle(c)
	i := sort.Search(len(p.segs), func(i int) bool { return p.segs[i].blk.addr >= seg.blk.addr })
	copy(p.segs[i:], p.segs[i+1:])
	p.segs[len(p.segs)-1] = nil
	p.segs = p.segs[:len(p.segs)-1]
	p.reserved -= int64(seg.blk.size)
	p.upFrees++
	if err := p.up.Free(seg.blk); err != nil {
		return fmt.Errorf("segment %v back to %s: %w", seg.blk, p.up.Name(), err)
	}
	return nil
}

// releaseCached returns every wholly free segment upstream and the bytes
// released. Errors of upstream are dropped here (see releaseSegment); Trim
// reports them.
func (p *Pool) releaseCached() int64 {
	n, _ := p.trimLocked()
	return n
}

func (p *Pool) trimLocked() (int64, error) {
	var released int64
	var errs []error
	for i := 0; i < len(p.segs); {
		seg := p.segs[i]
		if c := seg.first; c.free && c.size == seg.blk.size {
			released += int64(seg.blk.size)
			if err := p.releaseSegment(seg); err != nil {
				errs = append(errs, err)
			}
			continue // p.segs[i] is now the next segment
		}
		i++
	}
	return released, errors.Join(errs...)
}

// Trim returns every cached segment with no live allocation upstream and
// reports the bytes released. Segments that hold a live allocation stay.
func (p *Pool) Trim() (released int64, err error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	released, err = p.trimLocked()
	if err != nil {
		err = xerr.Dev(p.name, p.device, "trim", err)
	}
	return released, err
}

// Close returns every cached segment upstream and makes Allocate return
// ErrClosed. Blocks still live stay valid, and their segments go back
// upstream as they are freed (Free keeps working), so that no memory a
// caller still uses is released under it. Close does not close upstream.
// A second Close returns ErrClosed.
func (p *Pool) Close() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return xerr.Dev(p.name, p.device, "close", xerr.Detail(ErrClosed, "pool closed twice"))
	}
	p.closed = true
	p.maxCached = 0
	if _, err := p.trimLocked(); err != nil {
		return xerr.Dev(p.name, p.device, "close", err)
	}
	return nil
}

// Lookup returns the live allocation containing addr: the whole block the
// caller asked for (not its slack).
func (p *Pool) Lookup(addr Addr) (Block, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	i := sort.Search(len(p.segs), func(i int) bool { return p.segs[i].blk.addr > addr }) - 1
	if i < 0 {
		return Block{}, false
	}
	seg := p.segs[i]
	if addr-seg.blk.addr >= Addr(seg.blk.size) {
		return Block{}, false
	}
	c := seg.first
	for c != nil && addr-c.addr >= Addr(c.size) {
		c = c.next
	}
	if c == nil || c.free || addr-c.addr >= Addr(c.req) {
		return Block{}, false
	}
	return p.block(c, c.req), true
}

// Stats returns the pool's ledger; see the top of pool.go for what each
// figure counts.
func (p *Pool) Stats() Stats { return p.PoolStats().Stats }

// PoolStats returns the pool's detailed ledger.
func (p *Pool) PoolStats() PoolStats {
	p.mu.Lock()
	defer p.mu.Unlock()
	largest := max(p.small.largest(), p.large.largest())
	free := p.reserved - p.held
	return PoolStats{
		Stats: Stats{
			InUse:      p.inUse,
			Peak:       p.peak,
			Live:       p.nlive,
			Allocs:     p.allocs,
			Frees:      p.frees,
			Reserved:   p.reserved,
			Fragmented: free - largest,
		},
		Held:           p.held,
		Free:           free,
		LargestFree:    largest,
		Cached:         p.cached,
		Segments:       len(p.segs),
		UpstreamAllocs: p.upAllocs,
		UpstreamFrees:  p.upFrees,
		OOMRetries:     p.oomRetries,
	}
}

func alignUp(a Addr, align int) Addr {
	m := Addr(align - 1)
	return (a + m) &^ m
}
