package conformance

import (
	"context"
	"fmt"

	"github.com/xpu-go/xpu/comm"
	"github.com/xpu-go/xpu/memspace"
	"github.com/xpu-go/xpu/transfer"
)

// Regions in other spaces than Go memory: the case "comm/onesided/regions"
// exposes blocks of the spaces that RegionSpaces gives — device memory,
// which the host cannot touch, above all — and moves bytes into and out of
// them from host memory and from blocks of the same space.

// RegionSpaces gives the case "comm/onesided/regions" spaces to expose
// regions in, besides the Go memory of the other one-sided cases: a GPU's
// device memory, pinned memory, a third party's space. In round i rank r
// exposes a block of spaces[(i+r) % len(spaces)], so that with two spaces
// (two devices, say) neighbouring ranks use different ones. The spaces
// stay the caller's: open for the whole suite, and closed by the caller.
// Without the option the case is skipped, saying so.
//
// The case requires Expose to take a block of each space: a communicator
// that cannot reach some memory declares the case (Declare) with its
// reason — an error matching ErrNotSupported is not accepted on its own.
func RegionSpaces(spaces ...memspace.Space) Option {
	return Option{func(c *config) { c.regionSpaces = append([]memspace.Space(nil), spaces...) }}
}

// needsRegionSpaces says why "regions" cannot run on cm with spaces.
func needsRegionSpaces(spaces []memspace.Space) func(comm.Comm) string {
	return func(cm comm.Comm) string {
		if len(spaces) == 0 {
			return "no space to expose regions in: pass conformance.RegionSpaces (device memory, say) to test regions outside Go memory"
		}
		return needsOneSided(cm)
	}
}

// Ranges of the case "regions", in a region of regionSpan bytes: more
// than a chunk of most transports and more than the size at which a
// transport may switch to another path (a single copy, say).
const (
	regionSpan  = 300<<10 + 11
	regionSmall = 1 // 5 bytes Put from host memory
	regionLarge = 8 // regionLargeN bytes Put from host memory
	// regionLargeN is the large Put's length.
	regionLargeN = 280 << 10
	// regionSpaced is where regionSpacedN bytes are Put from a block of
	// the region's own space (comm.Put, which stages it when the host
	// cannot touch it).
	regionSpaced  = regionLarge + regionLargeN + 1
	regionSpacedN = 1000
	// regionSelf is where each rank Puts regionSelfN bytes into its own
	// region.
	regionSelf  = regionSpan - 100
	regionSelfN = 64
)

// osRegions runs osRegionsIn for each space, in turn.
func osRegions(spaces []memspace.Space) func(ctx context.Context, me, n int, cm comm.Comm) error {
	return func(ctx context.Context, me, n int, cm comm.Comm) error {
		for i := range spaces {
			sp := spaces[(i+me)%len(spaces)]
			if err := osRegionsIn(ctx, me, n, cm, sp, i); err != nil {
				return fmt.Errorf("a region in space %s (round %d): %w", sp.Name(), i, err)
			}
		}
		return nil
	}
}

// spaceRegion is a block of a space with an exposed region in its
// middle, between guards.
type spaceRegion struct {
	all    memspace.Block
	region comm.Region
	seed   int
}

// exposeIn allocates guard+n+guard bytes of sp, fills them with seed's
// pattern between guards of the pattern seed+1000, and exposes the middle.
func exposeIn(ctx context.Context, one comm.OneSided, sp memspace.Space, n, seed int) (*spaceRegion, error) {
	all, err := sp.Allocate(guard+n+guard, 0)
	if err != nil {
		return nil, fmt.Errorf("Allocate(%d): %w", guard+n+guard, err)
	}
	init := append(append(pattern(seed+1000, guard), pattern(seed, n)...), pattern(seed+1000, guard)...)
	mid, err := all.Slice(guard, n)
	if err == nil {
		err = transfer.CopyBlock(ctx, all, blk(init))
	}
	if err != nil {
		_ = sp.Free(all)
		return nil, err
	}
	reg, err := one.Expose(mid)
	if err != nil {
		_ = sp.Free(all)
		return nil, fmt.Errorf("Expose of %d bytes of space %s: %w", n, sp.Name(), err)
	}
	if k := reg.Key(); k.Rank != one.Rank() || k.Len != n {
		_ = reg.Close()
		_ = sp.Free(all)
		return nil, fmt.Errorf("Expose of %d bytes of space %s on rank %d: key %v, want rank %d and %d bytes", n, sp.Name(), one.Rank(), k, one.Rank(), n)
	}
	return &spaceRegion{all: all, region: reg, seed: seed}, nil
}

// close withdraws the region and frees its block.
func (s *spaceRegion) close() error {
	err := s.region.Close()
	if ferr := s.all.Space().Free(s.all); err == nil {
		err = ferr
	}
	return err
}

// check copies the whole block to the host and compares it with want
// between intact guards.
func (s *spaceRegion) check(ctx context.Context, want []byte) (string, error) {
	got := make([]byte, s.all.Len())
	if err := transfer.CopyBlock(ctx, blk(got), s.all); err != nil {
		return "", fmt.Errorf("reading the region back: %w", err)
	}
	g := pattern(s.seed+1000, guard)
	switch {
	case diff(g, got[:guard]) != "":
		return "the guard before the region: " + diff(g, got[:guard]), nil
	case diff(g, got[len(got)-guard:]) != "":
		return "the guard after the region: " + diff(g, got[len(got)-guard:]), nil
	}
	return diff(want, got[guard:len(got)-guard]), nil
}

// regionWrites are the bytes rank seed writes into its next rank's region
// (small, large, from its space) and into its own (self), by offset.
func regionWrites(seed int) map[int][]byte {
	return map[int][]byte{
		regionSmall:  pattern(seed+50, 5),
		regionLarge:  pattern(seed+60, regionLargeN),
		regionSpaced: pattern(seed+70, regionSpacedN),
	}
}

// osRegionsIn: every rank exposes a region of sp; it Puts from host memory
// a few bytes and more than 256 KiB, and from a block of sp 1,000 bytes,
// into the next rank's region, and some bytes into its own; flushes; after
// a barrier finds in its own region exactly what the rank before it and
// itself wrote, between intact guards; then Gets back what it wrote, into
// host memory and into a block of sp.
func osRegionsIn(ctx context.Context, me, n int, cm comm.Comm, sp memspace.Space, round int) error {
	one := cm.(comm.OneSided)
	seed := me + 100*round
	sr, err := exposeIn(ctx, one, sp, regionSpan, seed)
	if err != nil {
		return err
	}
	defer sr.close()
	keys, err := swapKeys(ctx, one, n, sr.region.Key())
	if err != nil {
		return err
	}
	next, prev := (me+1)%n, (me+n-1)%n
	writes := regionWrites(seed)
	for _, off := range []int{regionSmall, regionLarge} {
		if err := oneTransfer(ctx, one, true, blk(writes[off]), keys[next], off); err != nil {
			return err
		}
	}
	spaced, err := sp.Allocate(regionSpacedN, 0)
	if err != nil {
		return fmt.Errorf("Allocate(%d): %w", regionSpacedN, err)
	}
	defer sp.Free(spaced)
	if err := transfer.CopyBlock(ctx, spaced, blk(writes[regionSpaced])); err != nil {
		return err
	}
	if err := comm.Put(ctx, one, spaced, keys[next], regionSpaced); err != nil {
		return fmt.Errorf("comm.Put of %d bytes of space %s at offset %d of %v: %w", regionSpacedN, sp.Name(), regionSpaced, keys[next], err)
	}
	self := pattern(seed+80, regionSelfN)
	if err := oneTransfer(ctx, one, true, blk(self), keys[me], regionSelf); err != nil {
		return err
	}
	if err := one.Flush(ctx, comm.AnySource); err != nil {
		return fmt.Errorf("Flush(AnySource): %w", err)
	}
	if err := inStepN(ctx, cm, n); err != nil {
		return err
	}
	want := pattern(seed, regionSpan)
	for off, b := range regionWrites(prev + 100*round) {
		copy(want[off:], b)
	}
	copy(want[regionSelf:], self)
	if d, err := sr.check(ctx, want); err != nil || d != "" {
		if err != nil {
			return err
		}
		return fmt.Errorf("rank %d's region of space %s after the Puts of rank %d and its own: %s: %v", me, sp.Name(), prev, d, rulePutGet)
	}
	// Get back what this rank wrote: into host memory, and into a block
	// of the space (comm.Get stages it when the host cannot touch it).
	got := make([]byte, regionLargeN)
	if err := oneTransfer(ctx, one, false, blk(got), keys[next], regionLarge); err != nil {
		return err
	}
	if d := diff(writes[regionLarge], got); d != "" {
		return fmt.Errorf("a Get of %d bytes from rank %d's region of space %s: %s: %v", regionLargeN, next, sp.Name(), d, rulePutGet)
	}
	if err := comm.Get(ctx, one, spaced, keys[next], regionSpaced-regionSpacedN/2); err != nil {
		return fmt.Errorf("comm.Get into %d bytes of space %s: %w", regionSpacedN, sp.Name(), err)
	}
	back := make([]byte, regionSpacedN)
	if err := transfer.CopyBlock(ctx, blk(back), spaced); err != nil {
		return err
	}
	// The range read spans the end of the large Put, the byte between the
	// two Puts (still the next rank's own) and the first half of the
	// Put from the space.
	mine := pattern(next+100*round, regionSpan)
	copy(mine[regionSmall:], writes[regionSmall])
	copy(mine[regionLarge:], writes[regionLarge])
	copy(mine[regionSpaced:], writes[regionSpaced])
	if d := diff(mine[regionSpaced-regionSpacedN/2:regionSpaced+regionSpacedN/2], back); d != "" {
		return fmt.Errorf("comm.Get from rank %d's region into a block of space %s: %s: %v", next, sp.Name(), d, rulePutGet)
	}
	gotSelf := make([]byte, regionSelfN)
	if err := oneTransfer(ctx, one, false, blk(gotSelf), keys[me], regionSelf); err != nil {
		return err
	}
	if d := diff(self, gotSelf); d != "" {
		return fmt.Errorf("a Get from this rank's own region of space %s: %s: %v", sp.Name(), d, rulePutGet)
	}
	// No rank closes its region while another may still Get from it.
	return inStepN(ctx, cm, n)
}
