package conformance

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"sort"
	"strings"
	"sync"
	"testing"
	"unicode"
	"unsafe"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/xpu-go/xpu/memspace"
	"github.com/xpu-go/xpu/transfer"
)

// TestSpace checks that the spaces newSpace makes keep the memspace.Space
// contract, and the optional capabilities each one has (StatsSpace,
// Lookuper, Availability, Closer, found through Unwrap with memspace.As).
//
// newSpace is called once per case and must return a fresh space, or one
// no other running test uses: the case checks the ledger returns to where
// it started. It releases the space with t.Cleanup; the suite frees every
// block it allocates before that.
//
// Frees that must be refused — a second Free, a part of an allocation, a
// block of another space — are tried at sizes from 1 byte to 64 MiB, so
// that a space serving sizes by class (slabs and mappings, a pool's heaps)
// is checked on each of its paths without the suite knowing where they
// part; so is what the space's Properties claim and can be checked by
// behaviour (a host view exactly where HostAccessible). A space out of
// memory at a size of that spread ends it there, saying so.
//
// Spaces that are not host-accessible are read and written through
// transfer.CopyBlock to and from Go memory; the data cases are skipped,
// with the reason, when there is no such path.
//
// The suite ends with the case "space/no-leak", which fails when a goroutine
// started during the suite is still running once every other case has ended
// and closed what it opened; it must not run beside tests that start
// goroutines of their own.
func TestSpace[S memspace.Space](t *testing.T, newSpace func(t *testing.T) S, opts ...Option) {
	t.Helper()
	s := newSuite(t, "space", opts)
	defer s.finish(t)
	defer s.watchLeaks(t)()
	spaceCases(t, s.root(), func(t *testing.T) memspace.Space { return newSpace(t) })
}

// spaceFactory makes a space for one case.
type spaceFactory func(t *testing.T) memspace.Space

// open makes the case's space and checks at cleanup that the ledger is
// back where it started.
func (f spaceFactory) open(c *tcase) memspace.Space {
	c.Helper()
	sp := f(c.T)
	if sp == nil {
		c.Fatal("conformance: the factory returned a nil space")
	}
	if ss, ok := memspace.As[memspace.StatsSpace](sp); ok {
		base := ss.Stats()
		c.Cleanup(func() {
			st := ss.Stats()
			if st.InUse != base.InUse || st.Live != base.Live {
				c.Errorf("ledger of space %s at the end of the case: InUse %d bytes in %d allocations, want %d in %d "+
					"(a Free that succeeded was not counted, or memory leaked)", sp.Name(), st.InUse, st.Live, base.InUse, base.Live)
			}
		})
	}
	return sp
}

// vec4 is a user element type: a struct of four float32.
type vec4 struct{ X, Y, Z, W float32 }

func spaceCases(t *testing.T, root node, f spaceFactory) {
	t.Helper()
	root.run(t, "properties", func(c *tcase) { spaceProperties(c, f.open(c)) })
	root.group(t, "alloc", func(t *testing.T, g node) {
		g.run(t, "alignment", func(c *tcase) { spaceAlignment(c, f.open(c)) })
		g.run(t, "sizes", func(c *tcase) { spaceSizes(c, f.open(c)) })
		g.run(t, "invalid-size", func(c *tcase) { spaceInvalidSize(c, f.open(c)) })
		g.run(t, "invalid-alignment", func(c *tcase) { spaceInvalidAlign(c, f.open(c)) })
		g.run(t, "huge", func(c *tcase) { spaceHuge(c, f.open(c)) })
		g.run(t, "no-overlap", func(c *tcase) { spaceNoOverlap(c, f.open(c)) })
		g.run(t, "typed", func(c *tcase) { spaceTyped(c, f.open(c)) })
	})
	root.group(t, "free", func(t *testing.T, g node) {
		g.run(t, "double", func(c *tcase) { spaceDoubleFree(c, f.open(c)) })
		g.run(t, "sub-slice", func(c *tcase) { spaceSubSlice(c, f.open(c)) })
		g.run(t, "foreign", func(c *tcase) { spaceForeign(c, f.open(c), f.open(c)) })
		g.run(t, "reuse", func(c *tcase) { spaceReuse(c, f.open(c)) })
	})
	root.group(t, "data", func(t *testing.T, g node) {
		g.run(t, "readback", func(c *tcase) { spaceReadback(c, f.open(c)) })
		g.run(t, "independent", func(c *tcase) { spaceIndependent(c, f.open(c)) })
	})
	root.run(t, "stats", func(c *tcase) { spaceStats(c, f.open(c)) })
	root.run(t, "lookup", func(c *tcase) { spaceLookup(c, f.open(c)) })
	root.run(t, "availability", func(c *tcase) { spaceAvailability(c, f.open(c)) })
	root.run(t, "close", func(c *tcase) { spaceClose(c, f.open(c)) })
	root.run(t, "concurrent", func(c *tcase) { spaceConcurrent(c, f.open(c)) })
}

// usable checks that sp still allocates and frees after an error.
func usable(c *tcase, sp memspace.Space, after string) {
	c.Helper()
	b, err := sp.Allocate(64, 0)
	require.NoError(c, err, "space %s does not allocate after %s", sp.Name(), after)
	require.Equal(c, 64, b.Len(), "space %s after %s", sp.Name(), after)
	require.NoError(c, sp.Free(b), "space %s does not free after %s", sp.Name(), after)
}

// stats returns sp's ledger, if it keeps one.
func stats(sp memspace.Space) (memspace.Stats, bool) {
	ss, ok := memspace.As[memspace.StatsSpace](sp)
	if !ok {
		return memspace.Stats{}, false
	}
	return ss.Stats(), true
}

// unchanged checks that the ledger's counts did not move across a failed
// call.
func unchanged(c *tcase, sp memspace.Space, before memspace.Stats, what string) {
	c.Helper()
	after, ok := stats(sp)
	if !ok {
		return
	}
	assert.Equal(c, before.InUse, after.InUse, "InUse changed across %s", what)
	assert.Equal(c, before.Live, after.Live, "Live changed across %s", what)
	assert.Equal(c, before.Allocs, after.Allocs, "Allocs changed across %s", what)
	assert.Equal(c, before.Frees, after.Frees, "Frees changed across %s", what)
}

func defaultAlign(sp memspace.Space) int {
	if a := sp.Properties().Alignment; isPow2(a) {
		return a
	}
	return 1
}

// checkBlock checks a fresh allocation: its space, length and alignment.
func checkBlock(c *tcase, sp memspace.Space, b memspace.Block, size, align int, what string) bool {
	c.Helper()
	want := max(align, defaultAlign(sp))
	ok := assert.True(c, sameSpace(b.Space(), sp), "%s: block %v does not belong to the space %s that allocated it", what, b, sp.Name())
	ok = assert.Equal(c, size, b.Len(), "%s: length of %v", what, b) && ok
	ok = assert.Zero(c, uintptr(b.Addr())%uintptr(want), "%s: address %#x of %v is not aligned to %d", what, uintptr(b.Addr()), b, want) && ok
	if hp := b.HostPointer(); hp != nil {
		ok = assert.Zero(c, uintptr(hp)%uintptr(want), "%s: host pointer %p of %v is not aligned to %d", what, hp, b, want) && ok
	}
	if sp.Properties().HostAccessible {
		ok = assert.True(c, b.HostAccessible(), "%s: block %v of host-accessible space %s has no host view", what, b, sp.Name()) && ok
	}
	return ok
}

func spaceProperties(c *tcase, sp memspace.Space) {
	p := sp.Properties()
	assert.NotEmpty(c, sp.Name(), "Name")
	assert.NotEmpty(c, p.Kind, "Properties().Kind names the sort of memory and keys transfer paths")
	assert.GreaterOrEqual(c, p.Device, -1, "Properties().Device")
	assert.True(c, isPow2(p.Alignment) && p.Alignment <= memspace.MaxAlign,
		"Properties().Alignment %d is not a power of two in [1, MaxAlign]", p.Alignment)
	if p.Unified {
		assert.True(c, p.HostAccessible && p.DeviceAccessible, "Unified memory must be host- and device-accessible: %+v", p)
	}
	// What the flags claim must hold together.
	if p.Device == -1 {
		assert.True(c, p.HostAccessible, "Properties() %+v: Device -1 is host memory, which the host can access; "+
			"memory only a device can reach names its device (Device >= 0)", p)
		assert.False(c, p.Unified, "Properties() %+v: Device -1 is host memory, which cannot be Unified "+
			"(one address valid on the host and a device): unified memory names its device", p)
	}
	assert.False(c, p.Pinned && p.Pageable, "Properties() %+v: memory cannot be both Pinned (page-locked) and Pageable "+
		"(memory the OS may page out)", p)
	if p.Pageable {
		assert.True(c, p.HostAccessible, "Properties() %+v: Pageable memory is the host's virtual memory, "+
			"so it is HostAccessible", p)
	}
	if p.Kind == "host" {
		assert.True(c, p.HostAccessible && p.Device == -1, "Properties() %+v: kind \"host\" is the host's memory "+
			"(HostAccessible, Device -1): the host paths registered for it (transfer.ParallelHost) view its blocks "+
			"with Block.Bytes", p)
	}
	// What can be checked by behaviour is, on every allocation path: a
	// host-accessible space's blocks have a host view that is their memory;
	// the blocks of any other space have none.
	for _, size := range fitOf(sp).sizes(c, spreadSizes) {
		b, err := sp.Allocate(size, 0)
		if errors.Is(err, memspace.ErrOutOfMemory) {
			c.Logf("%d-byte blocks and larger not checked: %v", size, err)
			break
		}
		require.NoError(c, err, "Allocate(%d, 0)", size)
		ok := hostView(c, sp, p, b)
		require.NoError(c, sp.Free(b))
		if !ok {
			break // one size shows it
		}
	}
	assert.Equal(c, p, sp.Properties(), "Properties() changed after allocations: a space's properties are fixed")
}

// hostView checks that block b of sp has a host view exactly when sp's
// properties p say the host can access its memory, and that the view is
// the block's memory. It reports whether the checks passed.
func hostView(c *tcase, sp memspace.Space, p memspace.Properties, b memspace.Block) bool {
	c.Helper()
	v, err := b.Bytes()
	if !p.HostAccessible {
		return assert.False(c, b.HostAccessible(), "space %s says its memory is not HostAccessible, but its %d-byte block %v has a host view",
			sp.Name(), b.Len(), b) &&
			assert.ErrorIs(c, err, memspace.ErrNotHostAccessible, "Bytes of a %d-byte block of a space that is not HostAccessible", b.Len())
	}
	if !assert.NoError(c, err, "Bytes of a %d-byte block of a HostAccessible space: a HostAccessible space's blocks "+
		"carry their host mapping (memspace.NewBlock's host argument)", b.Len()) {
		return false
	}
	if !assert.Len(c, v, b.Len(), "host view of a %d-byte block", b.Len()) {
		return false
	}
	// The ends of the view are memory the host can store to and load from.
	v[0], v[len(v)-1] = 0xa5, 0x5a
	return len(v) == 1 || assert.True(c, v[0] == 0xa5 && v[len(v)-1] == 0x5a, "stores through the host view of a %d-byte block did not stick", b.Len())
}

// spaceAlignment allocates blocks of every alignment up to 1 MiB (and the
// space's own), each of a few sizes, and keeps every block live until the
// end: a block allocated beside others is at an aligned address only when
// the space honours the alignment it was asked for (the first block of an
// empty space may be at a well-aligned offset 0 by luck).
func spaceAlignment(c *tcase, sp memspace.Space) {
	aligns := []int{0}
	for a := 1; a <= 1<<20; a <<= 1 {
		aligns = append(aligns, a)
	}
	aligns = append(aligns, sp.Properties().Alignment)
	io, noIO := newBlockIO(sp)
	f := fitOf(sp)
	var live []memspace.Block
	defer func() {
		assert.Empty(c, sortedOverlap(live), "blocks of the alignment case")
		for _, b := range live {
			require.NoError(c, sp.Free(b), "Free of %v", b)
		}
	}()
	for _, a := range aligns {
		if !f.ok(4 * a) {
			c.Logf("alignments of %d bytes and more left out: %s", a, f.why)
			break
		}
		for _, size := range []int{1, 100, a + 3} {
			b, err := sp.Allocate(size, a)
			if !assert.NoError(c, err, "Allocate(%d, %d) with %d blocks live", size, a, len(live)) {
				continue
			}
			live = append(live, b)
			checkBlock(c, sp, b, size, a, fmt.Sprintf("Allocate(%d, %d) with %d other blocks live", size, a, len(live)-1))
			if noIO == "" {
				want := pattern(a+size, size)
				if assert.NoError(c, io.write(c.ctx, b, want)) {
					got, err := io.read(c.ctx, b)
					if assert.NoError(c, err) {
						assert.Empty(c, diff(want, got), "data of Allocate(%d, %d)", size, a)
					}
				}
			}
		}
	}
}

func spaceSizes(c *tcase, sp memspace.Space) {
	io, noIO := newBlockIO(sp)
	for i, size := range fitOf(sp).sizes(c, []int{1, 2, 7, 63, 4095, 4096, 4097, 65537, 1<<20 + 3, 16 << 20}) {
		b, err := sp.Allocate(size, 0)
		require.NoError(c, err, "Allocate(%d, 0)", size)
		checkBlock(c, sp, b, size, 0, fmt.Sprintf("Allocate(%d, 0)", size))
		if noIO == "" {
			want := bigPattern(i, size)
			if assert.NoError(c, io.write(c.ctx, b, want)) {
				got, err := io.read(c.ctx, b)
				if assert.NoError(c, err) {
					assert.Empty(c, diff(want, got), "data of a %d-byte block", size)
				}
			}
		}
		require.NoError(c, sp.Free(b), "Free of a %d-byte block", size)
	}
	if noIO != "" {
		c.Logf("data not checked: %s", noIO)
	}
}

func spaceInvalidSize(c *tcase, sp memspace.Space) {
	for _, size := range []int{0, -1, -4096, math.MinInt} {
		before, _ := stats(sp)
		b, err := sp.Allocate(size, 0)
		assert.ErrorIs(c, err, memspace.ErrInvalidArgument, "Allocate(%d, 0) returned %v", size, b)
		namesSpace(c, sp, err, fmt.Sprintf("Allocate(%d, 0)", size))
		unchanged(c, sp, before, fmt.Sprintf("Allocate(%d, 0)", size))
		usable(c, sp, fmt.Sprintf("Allocate(%d, 0)", size))
	}
}

func spaceInvalidAlign(c *tcase, sp memspace.Space) {
	for _, a := range []int{3, 6, 12, 1000, -1, -8, math.MinInt, 1 << 31, memspace.MaxAlign + 1, memspace.MaxAlign << 1} {
		before, _ := stats(sp)
		b, err := sp.Allocate(64, a)
		assert.ErrorIs(c, err, memspace.ErrInvalidArgument, "Allocate(64, %d) returned %v", a, b)
		namesSpace(c, sp, err, fmt.Sprintf("Allocate(64, %d)", a))
		unchanged(c, sp, before, fmt.Sprintf("Allocate(64, %d)", a))
		usable(c, sp, fmt.Sprintf("Allocate(64, %d)", a))
	}
}

func spaceHuge(c *tcase, sp memspace.Space) {
	for _, size := range []int{1 << 62, math.MaxInt, math.MaxInt - 4095, math.MaxInt / 2} {
		before, _ := stats(sp)
		b, err := sp.Allocate(size, 0)
		if err == nil {
			_ = sp.Free(b)
		}
		assert.ErrorIs(c, err, memspace.ErrOutOfMemory, "Allocate(%d, 0)", size)
		unchanged(c, sp, before, fmt.Sprintf("Allocate(%d, 0)", size))
		usable(c, sp, fmt.Sprintf("Allocate(%d, 0)", size))
	}
	// A huge size with a large alignment must not overflow into a small one.
	b, err := sp.Allocate(math.MaxInt-10, 1<<20)
	if err == nil {
		_ = sp.Free(b)
	}
	assert.ErrorIs(c, err, memspace.ErrOutOfMemory, "Allocate(MaxInt-10, 1 MiB)")
	usable(c, sp, "Allocate(MaxInt-10, 1 MiB)")
}

// sortedOverlap returns a description of the first overlap among blocks,
// or "".
func sortedOverlap(blocks []memspace.Block) string {
	s := append([]memspace.Block(nil), blocks...)
	sort.Slice(s, func(i, j int) bool { return s[i].Addr() < s[j].Addr() })
	for i := 1; i < len(s); i++ {
		if memspace.Overlaps(s[i-1], s[i]) || s[i-1].Addr()+memspace.Addr(s[i-1].Len()) > s[i].Addr() {
			return fmt.Sprintf("live blocks %v and %v overlap", s[i-1], s[i])
		}
	}
	return ""
}

func spaceNoOverlap(c *tcase, sp memspace.Space) {
	rng := rand.New(rand.NewPCG(1, 2))
	var live []memspace.Block
	alloc := func(k int) {
		for range k {
			size := 1 + rng.IntN(3000)
			align := 0
			if rng.IntN(3) == 0 {
				align = 1 << rng.IntN(13)
			}
			b, err := sp.Allocate(size, align)
			require.NoError(c, err, "Allocate(%d, %d)", size, align)
			live = append(live, b)
		}
	}
	defer func() {
		for _, b := range live {
			assert.NoError(c, sp.Free(b))
		}
	}()
	alloc(300)
	require.Empty(c, sortedOverlap(live))
	// Free every other block and allocate into the holes.
	kept := live[:0]
	for i, b := range live {
		if i%2 == 0 {
			require.NoError(c, sp.Free(b))
		} else {
			kept = append(kept, b)
		}
	}
	live = kept
	alloc(200)
	require.Empty(c, sortedOverlap(live))
}

func spaceTyped(c *tcase, sp memspace.Space) {
	if _, noIO := newBlockIO(sp); noIO != "" {
		c.Skip(noIO)
	}
	// A struct element type.
	vb, err := memspace.Alloc[vec4](sp, 33)
	require.NoError(c, err, "Alloc[vec4]")
	assert.Equal(c, 33, vb.Len())
	assert.Equal(c, 33*16, vb.Bytes())
	assert.Zero(c, uintptr(vb.Block().Addr())%unsafe.Alignof(vec4{}), "Alloc[vec4] alignment")
	want := make([]vec4, 33)
	for i := range want {
		want[i] = vec4{float32(i), float32(-i), float32(i) / 3, float32(i * i)}
	}
	got := make([]vec4, 33)
	roundTrip(c, vb, want, got)
	assert.Equal(c, want, got, "vec4 round trip")
	require.NoError(c, vb.Free())
	assert.ErrorIs(c, vb.Free(), memspace.ErrDoubleFree, "second Free of a Buffer")

	// complex128, with an explicit alignment.
	cb, err := memspace.AllocAligned[complex128](sp, 1001, 256)
	require.NoError(c, err, "AllocAligned[complex128]")
	assert.Zero(c, uintptr(cb.Block().Addr())%256, "AllocAligned[complex128](…, 256) alignment")
	wantC := make([]complex128, 1001)
	for i := range wantC {
		wantC[i] = complex(float64(i)/7, -float64(i)*1e300)
	}
	gotC := make([]complex128, 1001)
	roundTrip(c, cb, wantC, gotC)
	assert.Equal(c, wantC, gotC, "complex128 round trip")
	require.NoError(c, cb.Free())
}

// roundTrip writes want into buf and reads it back into got, through the
// host view when there is one, else through transfer.Copy.
func roundTrip[T any](c *tcase, buf *memspace.Buffer[T], want, got []T) {
	c.Helper()
	if buf.Space().Properties().HostAccessible {
		h, err := buf.Host()
		require.NoError(c, err, "Host view of a buffer in host-accessible space %s", buf.Space().Name())
		require.Len(c, h, len(want))
		copy(h, want)
		copy(got, h)
		return
	}
	src, err := memspace.FromSlice(want)
	require.NoError(c, err)
	require.NoError(c, transfer.Copy(c.ctx, buf, src), "copy host -> %s", buf.Space().Name())
	dst, err := memspace.FromSlice(got)
	require.NoError(c, err)
	require.NoError(c, transfer.Copy(c.ctx, dst, buf), "copy %s -> host", buf.Space().Name())
}

// spreadSizes are the sizes the free and properties cases try: every power
// of four from 1 byte to 64 MiB and one byte more. A space that serves
// sizes by class — slabs for small blocks and mappings of their own for
// large ones, a pool's small and large heaps and the segments of its
// largest requests — has each class spanning a factor of four or more
// tried, near both of its ends, without the suite knowing where the classes
// end.
var spreadSizes = func() []int {
	var out []int
	for n := 1; n <= 64<<20; n *= 4 {
		out = append(out, n)
		if n > 1 && n < 64<<20 {
			out = append(out, n+1)
		}
	}
	return out
}()

// eachSize calls f for each size of spreadSizes, after the size first
// (the one the case used before it tried every path), while the space has
// room: a space out of memory at a size ends the spread, said in the log.
func eachSize(c *tcase, sp memspace.Space, first int, f func(size int) (ok bool)) {
	c.Helper()
	for _, size := range fitOf(sp).sizes(c, append([]int{first}, spreadSizes...)) {
		if !f(size) {
			return
		}
	}
}

// allocOrStop allocates size bytes of sp, or returns false when sp has no
// room for them (after logging it): larger sizes are not tried.
func allocOrStop(c *tcase, sp memspace.Space, size int) (memspace.Block, bool) {
	c.Helper()
	b, err := sp.Allocate(size, 0)
	if errors.Is(err, memspace.ErrOutOfMemory) {
		c.Logf("space %s has no room for %d bytes; larger sizes not tried: %v", sp.Name(), size, err)
		return memspace.Block{}, false
	}
	require.NoError(c, err, "Allocate(%d, 0)", size)
	return b, true
}

// spaceDoubleFree frees a block twice and more, at every size, and checks
// the refusals matched ErrDoubleFree, changed no count and corrupted no
// live block.
func spaceDoubleFree(c *tcase, sp memspace.Space) {
	io, noIO := newBlockIO(sp)
	eachSize(c, sp, 256, func(size int) bool {
		b, ok := allocOrStop(c, sp, size)
		if !ok {
			return false
		}
		keep, ok := allocOrStop(c, sp, size)
		if !ok {
			require.NoError(c, sp.Free(b))
			return false
		}
		if noIO == "" {
			require.NoError(c, writeProbe(c.ctx, io, keep, size))
		}
		require.NoError(c, sp.Free(b))
		before, _ := stats(sp)
		for i := range 3 {
			err := sp.Free(b)
			assert.ErrorIs(c, err, memspace.ErrDoubleFree, "Free #%d of a freed block (%d bytes)", i+2, size)
			assert.ErrorIs(c, err, memspace.ErrInvalidArgument, "ErrDoubleFree matches ErrInvalidArgument (%d bytes)", size)
		}
		unchanged(c, sp, before, fmt.Sprintf("a double Free of a %d-byte block", size))
		usable(c, sp, fmt.Sprintf("a double Free of a %d-byte block", size))
		// The double free corrupted nothing: another live block is intact.
		if noIO == "" {
			d, err := checkProbe(c.ctx, io, keep, size)
			require.NoError(c, err)
			assert.Empty(c, d, "a live %d-byte block after a double Free of another", size)
		}
		require.NoError(c, sp.Free(keep))
		assert.ErrorIs(c, sp.Free(keep), memspace.ErrDoubleFree, "Free of a freed block (%d bytes)", size)
		return !c.Failed()
	})
}

// spaceSubSlice frees parts of an allocation, at every size, and checks
// they are refused with ErrDoubleFree, and a forged longer block with
// ErrInvalidArgument, leaving the allocation live.
func spaceSubSlice(c *tcase, sp memspace.Space) {
	eachSize(c, sp, 4096, func(size int) bool {
		b, ok := allocOrStop(c, sp, size)
		if !ok {
			return false
		}
		type part struct {
			off, n int
			what   string
		}
		var cases []part
		if size >= 4 {
			cases = append(cases, part{size / 4, size / 2, "an interior sub-slice"})
		}
		if size >= 2 {
			cases = append(cases,
				part{0, size / 2, "a prefix (same address, shorter)"},
				part{size / 2, size - size/2, "a suffix"},
				part{1, size - 1, "a slice one byte in"})
		}
		for _, tc := range cases {
			sub, err := b.Slice(tc.off, tc.n)
			require.NoError(c, err)
			before, _ := stats(sp)
			err = sp.Free(sub)
			assert.ErrorIs(c, err, memspace.ErrDoubleFree, "Free of %s [%d, +%d) of %v", tc.what, tc.off, tc.n, b)
			unchanged(c, sp, before, fmt.Sprintf("Free of %s of a %d-byte block", tc.what, size))
		}
		// A forged block: the allocation's address with a longer length.
		forged := memspace.NewBlock(sp, b.Addr(), b.Len()+4096, b.HostPointer())
		assert.ErrorIs(c, sp.Free(forged), memspace.ErrInvalidArgument, "Free of a block longer than the allocation at its address (%d bytes)", size)
		usable(c, sp, fmt.Sprintf("Free of a sub-slice of a %d-byte block", size))
		require.NoError(c, sp.Free(b), "Free of the whole %d-byte allocation after failed frees of its slices", size)
		return !c.Failed()
	})
}

// spaceForeign frees, at every size, blocks that are not the space's — of
// another sort of space at the address of a live block, of Go memory, of
// another instance — and checks they are refused with ErrForeignBlock and
// the live block is intact.
func spaceForeign(c *tcase, sp, other memspace.Space) {
	io, noIO := newBlockIO(sp)
	fake := &opaqueSpace{name: "conformance-foreign"}
	try := func(fb memspace.Block, what string, target error) {
		c.Helper()
		before, _ := stats(sp)
		err := sp.Free(fb)
		assert.ErrorIs(c, err, target, "Free of %s", what)
		unchanged(c, sp, before, "Free of "+what)
	}
	try(memspace.Block{}, "the zero Block", memspace.ErrInvalidArgument)
	eachSize(c, sp, 128, func(size int) bool {
		b, ok := allocOrStop(c, sp, size)
		if !ok {
			return false
		}
		if noIO == "" {
			require.NoError(c, writeProbe(c.ctx, io, b, size+9))
		}
		// A block of a space of another sort, at the very address of a live
		// block of sp: the space must check the block's space, not the
		// address.
		try(memspace.NewBlock(fake, b.Addr(), b.Len(), nil),
			fmt.Sprintf("a block of another space at the address of a live %d-byte block", size), memspace.ErrForeignBlock)
		hb, err := memspace.FromSlice(make([]byte, min(size, 1<<20)))
		require.NoError(c, err)
		try(hb.Block(), fmt.Sprintf("a %d-byte Go-heap block", hb.Len()), memspace.ErrForeignBlock)
		if !sameSpace(sp, other) {
			ob, ok := allocOrStop(c, other, size)
			if ok {
				try(ob, fmt.Sprintf("a %d-byte block of another instance", size), memspace.ErrForeignBlock)
				require.NoError(c, other.Free(ob), "the other instance frees its own %d-byte block after it was refused elsewhere", size)
			}
		}
		usable(c, sp, fmt.Sprintf("Free of a foreign block (%d bytes)", size))
		if noIO == "" {
			d, err := checkProbe(c.ctx, io, b, size+9)
			require.NoError(c, err)
			assert.Empty(c, d, "a live %d-byte block after frees of foreign blocks", size)
		}
		require.NoError(c, sp.Free(b))
		return !c.Failed()
	})
}

func spaceReadback(c *tcase, sp memspace.Space) {
	io, noIO := newBlockIO(sp)
	if noIO != "" {
		c.Skip(noIO)
	}
	for i, size := range fitOf(sp).sizes(c, []int{1, 3, 4095, 1 << 20}) {
		b, err := sp.Allocate(size, 0)
		require.NoError(c, err)
		for round := range 2 { // rewrite: the second write must replace the first
			want := bigPattern(i*2+round, size)
			require.NoError(c, io.write(c.ctx, b, want))
			got, err := io.read(c.ctx, b)
			require.NoError(c, err)
			assert.Empty(c, diff(want, got), "read back %d bytes, write #%d", size, round+1)
		}
		require.NoError(c, sp.Free(b))
	}
}

func spaceIndependent(c *tcase, sp memspace.Space) {
	io, noIO := newBlockIO(sp)
	if noIO != "" {
		c.Skip(noIO)
	}
	const k = 24
	blocks := make([]memspace.Block, k)
	for i := range blocks {
		b, err := sp.Allocate(100+i*37, 0)
		require.NoError(c, err)
		blocks[i] = b
		require.NoError(c, io.write(c.ctx, b, pattern(100+i, b.Len())))
	}
	for i, b := range blocks {
		got, err := io.read(c.ctx, b)
		require.NoError(c, err)
		assert.Empty(c, diff(pattern(100+i, b.Len()), got), "block %d of %d live blocks was written over by another", i, k)
	}
	// Free half and reuse: the survivors keep their data.
	for i := 0; i < k; i += 2 {
		require.NoError(c, sp.Free(blocks[i]))
		b, err := sp.Allocate(blocks[i].Len(), 0)
		require.NoError(c, err)
		require.NoError(c, io.write(c.ctx, b, pattern(500+i, b.Len())))
		blocks[i] = b
	}
	for i, b := range blocks {
		seed := 100 + i
		if i%2 == 0 {
			seed = 500 + i
		}
		got, err := io.read(c.ctx, b)
		require.NoError(c, err)
		assert.Empty(c, diff(pattern(seed, b.Len()), got), "block %d after frees and new allocations", i)
		require.NoError(c, sp.Free(b))
	}
}

func spaceStats(c *tcase, sp memspace.Space) {
	ss, ok := memspace.As[memspace.StatsSpace](sp)
	if !ok {
		c.Skipf("space %s keeps no ledger (it is not a memspace.StatsSpace)", sp.Name())
	}
	base := ss.Stats()
	assert.GreaterOrEqual(c, base.Peak, base.InUse, "Peak >= InUse")
	peak := base.Peak
	observe := func(what string) memspace.Stats {
		c.Helper()
		st := ss.Stats()
		assert.GreaterOrEqual(c, st.Peak, st.InUse, "Peak >= InUse %s", what)
		assert.GreaterOrEqual(c, st.Peak, peak, "Peak never falls (%s)", what)
		peak = max(peak, st.Peak)
		assert.GreaterOrEqual(c, st.InUse, int64(0), what)
		assert.GreaterOrEqual(c, st.Live, int64(0), what)
		assert.GreaterOrEqual(c, st.Fragmented, int64(0), what)
		if st.Reserved != 0 {
			assert.GreaterOrEqual(c, st.Reserved, st.InUse, "Reserved (cached + in use) >= InUse %s", what)
		}
		return st
	}
	sizes := fitOf(sp).sizes(c, []int{1, 100, 4096, 5000, 1 << 20})
	var blocks []memspace.Block
	var sum int64
	maxInUse := base.InUse
	for i, size := range sizes {
		b, err := sp.Allocate(size, 0)
		require.NoError(c, err)
		blocks = append(blocks, b)
		sum += int64(size)
		st := observe(fmt.Sprintf("after %d allocations", i+1))
		assert.Equal(c, base.Live+int64(i+1), st.Live, "Live after %d allocations", i+1)
		assert.Equal(c, base.Allocs+int64(i+1), st.Allocs, "Allocs after %d allocations", i+1)
		assert.GreaterOrEqual(c, st.InUse-base.InUse, sum, "InUse counts at least the bytes asked for")
		maxInUse = max(maxInUse, st.InUse)
	}
	for i, b := range blocks {
		require.NoError(c, sp.Free(b))
		st := observe(fmt.Sprintf("after %d frees", i+1))
		assert.Equal(c, base.Live+int64(len(blocks)-i-1), st.Live, "Live after %d frees", i+1)
		assert.Equal(c, base.Frees+int64(i+1), st.Frees, "Frees after %d frees", i+1)
	}
	end := observe("at the end")
	assert.Equal(c, base.InUse, end.InUse, "InUse returns to its start")
	assert.Equal(c, base.Live, end.Live, "Live returns to its start")
	assert.GreaterOrEqual(c, end.Peak, maxInUse, "Peak >= the largest InUse seen")
	// Failed calls count nothing.
	_, _ = sp.Allocate(0, 0)
	_, _ = sp.Allocate(64, 3)
	if len(blocks) > 0 {
		_ = sp.Free(blocks[0])
	}
	unchanged(c, sp, end, "failed calls")
}

func spaceLookup(c *tcase, sp memspace.Space) {
	lk, ok := memspace.As[memspace.Lookuper](sp)
	if !ok {
		c.Skipf("space %s does not implement memspace.Lookuper", sp.Name())
	}
	blocks := make([]memspace.Block, 3)
	for i := range blocks {
		b, err := sp.Allocate(4096+i*100, 0)
		require.NoError(c, err)
		blocks[i] = b
	}
	same := func(got, want memspace.Block) bool {
		return got.Addr() == want.Addr() && got.Len() == want.Len() && sameSpace(got.Space(), want.Space())
	}
	for _, b := range blocks {
		for _, off := range []int{0, 1, b.Len() / 2, b.Len() - 1} {
			addr := b.Addr() + memspace.Addr(off)
			got, ok := lk.Lookup(addr)
			if assert.True(c, ok, "Lookup(%#x) of an address %d bytes into %v", uintptr(addr), off, b) {
				assert.True(c, same(got, b), "Lookup(%#x) = %v, want the whole allocation %v", uintptr(addr), got, b)
			}
		}
		// Just past the end: any allocation found must contain the address.
		end := b.Addr() + memspace.Addr(b.Len())
		if got, ok := lk.Lookup(end); ok {
			assert.True(c, got.Addr() <= end && end < got.Addr()+memspace.Addr(got.Len()),
				"Lookup(%#x) = %v, which does not contain the address", uintptr(end), got)
			assert.False(c, same(got, b), "Lookup of the address just past %v found it", b)
		}
	}
	freed := blocks[1]
	require.NoError(c, sp.Free(freed))
	for _, off := range []int{0, freed.Len() / 2} {
		addr := freed.Addr() + memspace.Addr(off)
		got, ok := lk.Lookup(addr)
		assert.False(c, ok, "Lookup(%#x) of a freed allocation found %v", uintptr(addr), got)
	}
	require.NoError(c, sp.Free(blocks[0]))
	require.NoError(c, sp.Free(blocks[2]))
}

func spaceAvailability(c *tcase, sp memspace.Space) {
	av, ok := memspace.As[memspace.Availability](sp)
	if !ok {
		c.Skipf("space %s does not implement memspace.Availability", sp.Name())
	}
	free, total, err := av.Available()
	require.NoError(c, err, "Available")
	assert.True(c, free >= -1, "free %d", free)
	assert.True(c, total == -1 || total > 0, "total %d is neither unknown (-1) nor positive", total)
	if free >= 0 && total > 0 {
		assert.LessOrEqual(c, free, total, "free <= total")
	}
}

func spaceClose(c *tcase, sp memspace.Space) {
	cl, ok := memspace.As[memspace.Closer](sp)
	if !ok {
		c.Skipf("space %s does not implement memspace.Closer", sp.Name())
	}
	b, err := sp.Allocate(64, 0)
	require.NoError(c, err)
	require.NoError(c, sp.Free(b))
	require.NoError(c, cl.Close(), "Close")
	_, err = sp.Allocate(64, 0)
	assert.ErrorIs(c, err, memspace.ErrClosed, "Allocate after Close")
	_, err = memspace.Alloc[float64](sp, 8)
	assert.ErrorIs(c, err, memspace.ErrClosed, "Alloc[float64] after Close")
	err = cl.Close()
	assert.True(c, err == nil || errors.Is(err, memspace.ErrClosed), "second Close returned %v, want nil or ErrClosed", err)
}

func spaceConcurrent(c *tcase, sp memspace.Space) {
	io, noIO := newBlockIO(sp)
	const workers, iters = 8, 150
	var wg sync.WaitGroup
	errs := make([]error, workers)
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(uint64(w), 7))
			type live struct {
				b    memspace.Block
				seed int
			}
			var held []live
			check := func(l live) error {
				if noIO != "" {
					return nil
				}
				got, err := io.read(c.ctx, l.b)
				if err != nil {
					return err
				}
				if d := diff(pattern(l.seed, l.b.Len()), got); d != "" {
					return fmt.Errorf("block %v written over while live (another goroutine got overlapping memory?): %s", l.b, d)
				}
				return nil
			}
			defer func() {
				for _, l := range held {
					_ = sp.Free(l.b)
				}
			}()
			for i := range iters {
				size := 1 + rng.IntN(4096)
				align := 0
				if rng.IntN(2) == 0 {
					align = 1 << rng.IntN(12)
				}
				b, err := sp.Allocate(size, align)
				if err != nil {
					errs[w] = fmt.Errorf("goroutine %d: Allocate(%d, %d): %w", w, size, align, err)
					return
				}
				l := live{b, w*iters + i}
				if noIO == "" {
					if err := io.write(c.ctx, b, pattern(l.seed, size)); err != nil {
						errs[w] = err
						return
					}
				}
				held = append(held, l)
				if len(held) > 4 || rng.IntN(2) == 0 {
					k := rng.IntN(len(held))
					old := held[k]
					held = append(held[:k], held[k+1:]...)
					if err := check(old); err != nil {
						errs[w] = fmt.Errorf("goroutine %d: %w", w, err)
						return
					}
					if err := sp.Free(old.b); err != nil {
						errs[w] = fmt.Errorf("goroutine %d: Free(%v): %w", w, old.b, err)
						return
					}
				}
			}
		}()
	}
	wg.Wait()
	require.NoError(c, errors.Join(errs...))
}

// reuseMost is the most memory the case "free/reuse" fills: a space that
// holds more (a host's memory, a large device) is not filled.
const reuseMost = 256 << 20

// spaceReuse fills the space with blocks of a sixteenth of what it says is
// free, until it runs out; frees them; and does it twice more. Each round
// must fit as many blocks as the first, less one: a space whose Free keeps
// its ledger right but never gives the memory back runs out at once in the
// second round.
func spaceReuse(c *tcase, sp memspace.Space) {
	av, ok := memspace.As[memspace.Availability](sp)
	if !ok {
		c.Skipf("space %s does not say how much it holds (memspace.Availability): reuse up to its capacity is not checked", sp.Name())
	}
	free, total, err := av.Available()
	require.NoError(c, err, "Available of %s", sp.Name())
	held := free
	if held <= 0 {
		held = total
	}
	switch {
	case held <= 0:
		c.Skipf("space %s reports neither its free nor its total memory", sp.Name())
	case held > reuseMost:
		c.Skipf("space %s has %d bytes free: filling it is left out above %d", sp.Name(), held, reuseMost)
	}
	size := max(int(held/16), 4096)
	const most = 64 // blocks a round takes before it calls the space unbounded
	var first int
	for round := range 3 {
		var blocks []memspace.Block
		for len(blocks) < most {
			b, err := sp.Allocate(size, 0)
			if errors.Is(err, memspace.ErrOutOfMemory) {
				break
			}
			require.NoError(c, err, "round %d: Allocate(%d, 0) with %d blocks live", round+1, size, len(blocks))
			blocks = append(blocks, b)
		}
		n := len(blocks)
		for _, b := range blocks {
			require.NoError(c, sp.Free(b), "round %d: Free of %v", round+1, b)
		}
		if round == 0 {
			first = n
			require.Positive(c, n, "space %s says %d bytes are free, but gave no block of %d bytes", sp.Name(), held, size)
			require.Less(c, n, most, "space %s says %d bytes are free, but gave %d blocks of %d bytes without running out", sp.Name(), held, n, size)
			continue
		}
		require.GreaterOrEqual(c, n, first-1, "round %d: space %s ran out after %d blocks of %d bytes, the first round after %d: "+
			"memory that Free took back is not allocated again (a Free that keeps the ledger right but keeps the memory)",
			round+1, sp.Name(), n, size, first)
	}
}

// namesSpace checks that err, the error of sp refusing a call (what), says
// whose it is: it holds the space's name, or the name's first word (its
// backend's: "cuda" of "cuda:1", "pool" of "pool(arena)"). The checks of
// package impl return errors without a name, for the space to wrap.
func namesSpace(c *tcase, sp memspace.Space, err error, what string) {
	c.Helper()
	if err == nil {
		return
	}
	name, msg := sp.Name(), err.Error()
	word := name
	if i := strings.IndexFunc(name, func(r rune) bool { return !unicode.IsLetter(r) && !unicode.IsDigit(r) }); i > 0 {
		word = name[:i]
	}
	if !strings.Contains(msg, name) && !strings.Contains(msg, word) {
		c.Errorf("%s: the error %q does not name space %s: wrap the errors of impl's checks with the space's name "+
			"(xerr.Op(name, \"alloc\", err))", what, msg, name)
	}
}
