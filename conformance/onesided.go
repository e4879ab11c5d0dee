package conformance

import (
	"context"
	"errors"
	"fmt"

	"github.com/xpu-go/xpu/comm"
	"github.com/xpu-go/xpu/memspace"
)

// One-sided communication (comm.OneSided): the cases of the section
// "onesided", run on communicators that implement it and skipped, saying
// so, on the others.

// needsOneSided says why a case of one-sided communication cannot run on
// cm, "" when it can.
func needsOneSided(cm comm.Comm) string {
	if _, ok := cm.(comm.OneSided); ok {
		return ""
	}
	return fmt.Sprintf("%s does not implement comm.OneSided", goTypeName(cm))
}

// oneSidedCases are the cases of the section "onesided".
func oneSidedCases(regionSpaces []memspace.Space) []rankCase {
	return []rankCase{
		{name: "put-get", ns: []int{2, 3}, capped: true, needs: needsOneSided, body: osPutGet, stall: rulePutGet},
		{name: "self", ns: []int{1, 2}, needs: needsOneSided, body: osSelf, stall: rulePutGet},
		{name: "flush-then-send", ns: []int{2}, span: 2, needs: needsOneSided, body: osFlushThenSend, stall: ruleFlush},
		{name: "concurrent", ns: []int{3, 4}, capped: true, needs: needsOneSided, body: osConcurrent, stall: rulePutGet},
		{name: "invalid", ns: []int{2}, span: 2, needs: needsOneSided, body: osInvalid, stall: ruleOneSidedInvalid},
		{name: "batch", ns: []int{2}, span: 2, needs: needsOneSided, body: osBatch, stall: rulePutGet},
		{name: "regions", ns: []int{2, 3}, capped: true, needs: needsRegionSpaces(regionSpaces), body: osRegions(regionSpaces), stall: rulePutGet},
		{name: "stale-keys", ns: []int{2}, span: 2, needs: needsOneSided, body: osStaleKeys, stall: ruleOneSidedInvalid},
		{name: "notify", ns: []int{2}, span: 2, needs: needsNotifier, body: osNotify, stall: ruleNotify},
		{name: "notify-batch", ns: []int{2}, span: 2, needs: needsNotifier, body: osNotifyBatch, stall: ruleNotify},
		{name: "peer-lost", single: true, needs: needsOneSided, groupOnly: needsClose,
			group: func(c *tcase, g groupFactory, _ int) { osPeerLost(c, g.open(c, 2)) }},
	}
}

// guard is how many bytes of a known pattern surround every exposed
// region: a transfer that writes outside its range changes them.
const guard = 64

// guarded is memory with an exposed region in its middle, between guards.
type guarded struct {
	all    []byte // guard, region, guard
	region comm.Region
}

// exposeGuarded exposes n bytes of seed's pattern, between guards of the
// pattern seed+1000, and returns them with their region.
func exposeGuarded(one comm.OneSided, n, seed int) (*guarded, error) {
	all := append(append(pattern(seed+1000, guard), pattern(seed, n)...), pattern(seed+1000, guard)...)
	mid, err := blk(all).Slice(guard, n)
	if err != nil {
		return nil, err
	}
	reg, err := one.Expose(mid)
	if err != nil {
		return nil, fmt.Errorf("Expose of %d bytes: %w", n, err)
	}
	if k := reg.Key(); k.Rank != one.Rank() || k.Len != n {
		_ = reg.Close()
		return nil, fmt.Errorf("Expose of %d bytes on rank %d: key %v, want rank %d and %d bytes", n, one.Rank(), k, one.Rank(), n)
	}
	return &guarded{all: all, region: reg}, nil
}

// bytes is the region's memory.
func (g *guarded) bytes() []byte { return g.all[guard : len(g.all)-guard] }

// guardsIntact says which guard a transfer wrote into, "" when none.
func (g *guarded) guardsIntact(seed int) string {
	if d := diff(pattern(seed+1000, guard), g.all[:guard]); d != "" {
		return "the guard before the region: " + d
	}
	if d := diff(pattern(seed+1000, guard), g.all[len(g.all)-guard:]); d != "" {
		return "the guard after the region: " + d
	}
	return ""
}

// exposeAll exposes size bytes on each of ranks 0 to n-1 (guarded, seeded
// by the rank) and gives each of them the others' keys; cm is a
// comm.OneSided (the case's needs said so).
func exposeAll(ctx context.Context, cm comm.Comm, n, size int) (comm.OneSided, *guarded, []comm.RemoteKey, error) {
	one := cm.(comm.OneSided)
	g, err := exposeGuarded(one, size, one.Rank())
	if err != nil {
		return nil, nil, nil, err
	}
	keys, err := swapKeys(ctx, one, n, g.region.Key())
	if err != nil {
		_ = g.region.Close()
		return nil, nil, nil, err
	}
	return one, g, keys, nil
}

// Tags of the one-sided cases' own messages.
const (
	tagKeys = 12 + iota
	tagStep
	tagGo
	tagDone
)

// swapKeys gives each of ranks 0 to n-1 every one's key, by messages: the
// case may run on the first ranks of a larger job, where a collective
// (comm.ExchangeKeys) would wait for the others.
func swapKeys(ctx context.Context, cm comm.Comm, n int, mine comm.RemoteKey) ([]comm.RemoteKey, error) {
	me := cm.Rank()
	out, _ := mine.MarshalBinary()
	all := make([]byte, n*comm.RemoteKeySize)
	var reqs []comm.Request
	for j := range n {
		if j == me {
			continue
		}
		r, err := cm.Irecv(blk(all[j*comm.RemoteKeySize:(j+1)*comm.RemoteKeySize]), j, tagKeys)
		if err != nil {
			return nil, err
		}
		s, err := cm.Isend(blk(out), j, tagKeys)
		if err != nil {
			return nil, err
		}
		reqs = append(reqs, r, s)
	}
	if err := comm.WaitAll(ctx, reqs...); err != nil {
		return nil, fmt.Errorf("exchanging keys: %w", err)
	}
	keys := make([]comm.RemoteKey, n)
	for j := range n {
		if j == me {
			keys[j] = mine
			continue
		}
		if err := keys[j].UnmarshalBinary(all[j*comm.RemoteKeySize : (j+1)*comm.RemoteKeySize]); err != nil {
			return nil, err
		}
	}
	return keys, nil
}

// inStepN returns once each of ranks 0 to n-1 has called it: a barrier of
// messages through rank 0.
func inStepN(ctx context.Context, cm comm.Comm, n int) error {
	if cm.Rank() != 0 {
		if err := signal(ctx, cm, 0, tagStep); err != nil {
			return err
		}
		return await(ctx, cm, 0, tagGo)
	}
	for j := 1; j < n; j++ {
		if err := await(ctx, cm, j, tagStep); err != nil {
			return err
		}
	}
	for j := 1; j < n; j++ {
		if err := signal(ctx, cm, j, tagGo); err != nil {
			return err
		}
	}
	return nil
}

// oneTransfer runs one Put (or Get) and waits for it.
func oneTransfer(ctx context.Context, one comm.OneSided, put bool, local memspace.Block, key comm.RemoteKey, off int) error {
	what, start := "Get", one.Get
	if put {
		what, start = "Put", one.Put
	}
	r, err := start(local, key, off)
	if err != nil {
		return fmt.Errorf("%s of %d bytes at offset %d of %v: %w", what, local.Len(), off, key, err)
	}
	st, err := r.Wait(ctx)
	if err != nil {
		return fmt.Errorf("Wait of a %s of %d bytes at offset %d of %v: %w", what, local.Len(), off, key, err)
	}
	if st.Count != local.Len() {
		return fmt.Errorf("%s of %d bytes at offset %d of %v: status %+v, want Count %d", what, local.Len(), off, key, st, local.Len())
	}
	return nil
}

// osSizes are the transfer sizes put-get moves, each at an odd offset:
// empty, one byte, odd, a page, more than a page, several MiB.
var osSizes = []int{0, 1, 7, 4096, 4096 + 3, 2<<20 + 5}

// osPutGet: every rank Puts each size into the next rank's region at an
// odd offset, flushes, and after a barrier checks what landed in its own
// region and Gets it back from the rank before it.
func osPutGet(ctx context.Context, me, n int, cm comm.Comm) error {
	const off = 3
	span := off + osSizes[len(osSizes)-1]
	one, g, keys, err := exposeAll(ctx, cm, n, span)
	if err != nil {
		return err
	}
	defer g.region.Close()
	next, prev := (me+1)%n, (me+n-1)%n
	for _, size := range osSizes {
		src := pattern(me*7+size, size)
		if err := oneTransfer(ctx, one, true, blk(src), keys[next], off); err != nil {
			return err
		}
		if err := one.Flush(ctx, next); err != nil {
			return fmt.Errorf("Flush(%d) after a Put of %d bytes: %w", next, size, err)
		}
		if err := inStepN(ctx, cm, n); err != nil {
			return err
		}
		// prev wrote its pattern at off: the bytes before and after kept
		// this rank's own.
		want := append(append(pattern(me, span)[:off:off], pattern(prev*7+size, size)...), pattern(me, span)[off+size:]...)
		if d := diff(want, g.bytes()); d != "" {
			return fmt.Errorf("rank %d's region after rank %d's Put of %d bytes at offset %d: %s: %v", me, prev, size, off, d, rulePutGet)
		}
		if d := g.guardsIntact(me); d != "" {
			return fmt.Errorf("rank %d's Put of %d bytes wrote outside the region: %s: %v", prev, size, d, rulePutGet)
		}
		// What this rank Put into next, read back (at an odd offset in a
		// larger buffer, to see that Get writes only its range).
		back := pattern(99, size+2)
		local, _ := blk(back).Slice(1, size)
		if err := oneTransfer(ctx, one, false, local, keys[next], off); err != nil {
			return err
		}
		wantBack := append(append(pattern(99, size+2)[:1:1], src...), pattern(99, size+2)[size+1:]...)
		if d := diff(wantBack, back); d != "" {
			return fmt.Errorf("a Get of %d bytes back from rank %d: %s: %v", size, next, d, rulePutGet)
		}
		// Every rank has read before the next size is written.
		if err := inStepN(ctx, cm, n); err != nil {
			return err
		}
		copy(g.bytes(), pattern(me, span)) // this rank's own memory again
		if err := inStepN(ctx, cm, n); err != nil {
			return err
		}
	}
	return nil
}

// osSelf: a rank Puts into and Gets from its own region.
func osSelf(ctx context.Context, me, n int, cm comm.Comm) error {
	const size = 5000
	one, g, keys, err := exposeAll(ctx, cm, n, size)
	if err != nil {
		return err
	}
	defer g.region.Close()
	src := pattern(me+50, 1000)
	if err := oneTransfer(ctx, one, true, blk(src), keys[me], 1001); err != nil {
		return err
	}
	if err := one.Flush(ctx, me); err != nil {
		return fmt.Errorf("Flush(%d) of this rank: %w", me, err)
	}
	want := pattern(me, size)
	copy(want[1001:], src)
	if d := diff(want, g.bytes()); d != "" {
		return fmt.Errorf("rank %d's own region after its Put to itself: %s: %v", me, d, rulePutGet)
	}
	got := make([]byte, 1000)
	if err := oneTransfer(ctx, one, false, blk(got), keys[me], 1001); err != nil {
		return err
	}
	if d := diff(src, got); d != "" {
		return fmt.Errorf("a Get from this rank's own region: %s: %v", d, rulePutGet)
	}
	return inStepN(ctx, cm, n)
}

// osFlushThenSend: rank 0 Puts 1 MiB into rank 1's region, without waiting
// for the Put itself, flushes and sends a message; rank 1 receives it and
// finds the bytes in place.
func osFlushThenSend(ctx context.Context, me, n int, cm comm.Comm) error {
	const size = 1 << 20
	one, g, keys, err := exposeAll(ctx, cm, n, size)
	if err != nil {
		return err
	}
	defer g.region.Close()
	if me == 0 {
		var reqs []comm.Request
		for part := range 4 {
			r, err := one.Put(blk(pattern(500+part, size/4)), keys[1], part*size/4)
			if err != nil {
				return fmt.Errorf("Put of part %d: %w", part, err)
			}
			reqs = append(reqs, r)
		}
		if err := one.Flush(ctx, 1); err != nil {
			return fmt.Errorf("Flush(1): %w", err)
		}
		for i, r := range reqs {
			if _, done, err := r.Test(); !done || err != nil {
				return fmt.Errorf("Put of part %d after Flush returned: done %v, error %v; want done: %v", i, done, err, ruleFlush)
			}
		}
		// Flush(AnySource) waits for the transfers to every rank: parts 2
		// and 3 again, and a Get of part 0.
		back := make([]byte, size/4)
		reqs = reqs[:0]
		for part := 2; part < 4; part++ {
			r, err := one.Put(blk(pattern(500+part, size/4)), keys[1], part*size/4)
			if err != nil {
				return fmt.Errorf("Put of part %d: %w", part, err)
			}
			reqs = append(reqs, r)
		}
		r, err := one.Get(blk(back), keys[1], 0)
		if err != nil {
			return fmt.Errorf("Get of part 0: %w", err)
		}
		reqs = append(reqs, r)
		if err := one.Flush(ctx, comm.AnySource); err != nil {
			return fmt.Errorf("Flush(AnySource): %w", err)
		}
		for i, r := range reqs {
			if _, done, err := r.Test(); !done || err != nil {
				return fmt.Errorf("transfer %d (Puts of parts 2 and 3, then a Get of part 0) after Flush(AnySource) returned: done %v, error %v; want done: %v", i, done, err, ruleFlush)
			}
		}
		if d := diff(pattern(500, size/4), back); d != "" {
			return fmt.Errorf("a Get of part 0 after Flush(AnySource): %s: %v", d, rulePutGet)
		}
		if err := signal(ctx, cm, 1, tagGo); err != nil {
			return err
		}
		return await(ctx, cm, 1, tagDone)
	}
	if err := await(ctx, cm, 0, tagGo); err != nil {
		return err
	}
	for part := range 4 {
		if d := diff(pattern(500+part, size/4), g.bytes()[part*size/4:(part+1)*size/4]); d != "" {
			return fmt.Errorf("part %d of rank 0's Puts, read on receipt of the message rank 0 sent after Flush: %s: %v", part, d, ruleFlush)
		}
	}
	return signal(ctx, cm, 0, tagDone)
}

// osConcurrent: every rank but 0 Puts its slices of rank 0's region, all
// in flight at once, while rank 0 does the same; then everyone checks.
func osConcurrent(ctx context.Context, me, n int, cm comm.Comm) error {
	const slices, slice = 16, 4099
	size := n * slices * slice
	one, g, keys, err := exposeAll(ctx, cm, n, size)
	if err != nil {
		return err
	}
	defer g.region.Close()
	var reqs []comm.Request
	for s := range slices {
		r, err := one.Put(blk(pattern(me*100+s, slice)), keys[0], (s*n+me)*slice)
		if err != nil {
			return fmt.Errorf("Put of slice %d: %w", s, err)
		}
		reqs = append(reqs, r)
	}
	if err := one.Flush(ctx, comm.AnySource); err != nil {
		return fmt.Errorf("Flush(AnySource): %w", err)
	}
	if err := comm.WaitAll(ctx, reqs...); err != nil {
		return err
	}
	if err := inStepN(ctx, cm, n); err != nil {
		return err
	}
	if me == 0 {
		for s := range slices {
			for w := range n {
				at := (s*n + w) * slice
				if d := diff(pattern(w*100+s, slice), g.bytes()[at:at+slice]); d != "" {
					return fmt.Errorf("slice %d of rank %d in rank 0's region: %s: %v", s, w, d, rulePutGet)
				}
			}
		}
		if d := g.guardsIntact(0); d != "" {
			return fmt.Errorf("concurrent Puts wrote outside rank 0's region: %s: %v", d, rulePutGet)
		}
	}
	return inStepN(ctx, cm, n)
}

// osInvalid: transfers outside the region or to no rank fail with
// ErrInvalidArgument, at the call or from Wait, and change no byte.
func osInvalid(ctx context.Context, me, n int, cm comm.Comm) error {
	const size = 4096
	one, g, keys, err := exposeAll(ctx, cm, n, size)
	if err != nil {
		return err
	}
	defer g.region.Close()
	if me == 0 {
		k := keys[1]
		world := cm.Size() // the first rank that is none: the case may run on the first ranks of a job
		noRank := k
		noRank.Rank = world
		negRank := k
		negRank.Rank = -1
		for _, tc := range []struct {
			what string
			len  int
			key  comm.RemoteKey
			off  int
		}{
			{"past the end", 2, k, size - 1},
			{"larger than the region", size + 1, k, 0},
			{"at a negative offset", 1, k, -1},
			{"at an offset past the end", 0, k, size + 1},
			{fmt.Sprintf("to rank %d of %d", world, world), 1, noRank, 0},
			{"to rank -1", 1, negRank, 0},
		} {
			for _, put := range []bool{true, false} {
				buf := pattern(7, tc.len)
				if err := refused(ctx, one, put, blk(buf), tc.key, tc.off); err != nil {
					return fmt.Errorf("a transfer %s: %w", tc.what, err)
				}
				if !put {
					if d := diff(pattern(7, tc.len), buf); d != "" {
						return fmt.Errorf("a refused Get %s wrote into its buffer: %s: %v", tc.what, d, ruleOneSidedInvalid)
					}
				}
			}
		}
		if err := one.Flush(ctx, world); !errors.Is(err, comm.ErrInvalidArgument) {
			return fmt.Errorf("Flush of rank %d of %d: error %v, want ErrInvalidArgument: %v", world, world, err, ruleInvalid)
		}
	}
	if err := inStepN(ctx, cm, n); err != nil {
		return err
	}
	if d := diff(pattern(me, size), g.bytes()); d != "" {
		return fmt.Errorf("rank %d's region after refused transfers: %s: %v", me, d, ruleOneSidedInvalid)
	}
	if d := g.guardsIntact(me); d != "" {
		return fmt.Errorf("refused transfers wrote around rank %d's region: %s: %v", me, d, ruleOneSidedInvalid)
	}
	return nil
}

// refused checks that a transfer fails with ErrInvalidArgument, at the
// call or from Wait.
func refused(ctx context.Context, one comm.OneSided, put bool, local memspace.Block, key comm.RemoteKey, off int) error {
	return failsWith(ctx, one, put, local, key, off, comm.ErrInvalidArgument, ruleOneSidedInvalid)
}

// failsWith checks that a transfer fails with want, at the call or from
// Wait within the failure bound; r is the rule it breaks otherwise.
func failsWith(ctx context.Context, one comm.OneSided, put bool, local memspace.Block, key comm.RemoteKey, off int, want error, r rule) error {
	what, start := "Get", one.Get
	if put {
		what, start = "Put", one.Put
	}
	q, err := start(local, key, off)
	if err == nil {
		bctx, cancel := context.WithTimeout(ctx, lostBound)
		defer cancel()
		_, err = q.Wait(bctx)
	}
	if !errors.Is(err, want) {
		return fmt.Errorf("%s of %d bytes at offset %d of %v: error %v, want %v: %v", what, local.Len(), off, key, err, want, r)
	}
	return nil
}

// osStaleKeys: a key whose address, length or access key was altered, and
// the key of a region that was closed, are refused with
// ErrInvalidArgument, and no byte of the target changes.
func osStaleKeys(ctx context.Context, me, n int, cm comm.Comm) error {
	const size = 4096
	one, g, keys, err := exposeAll(ctx, cm, n, size)
	if err != nil {
		return err
	}
	defer g.region.Close()
	// Rank 1 exposes a second region and closes it: its key is stale.
	var closedKey comm.RemoteKey
	if me == 1 {
		old, err := exposeGuarded(one, size, 77)
		if err != nil {
			return err
		}
		closedKey = old.region.Key()
		if err := old.region.Close(); err != nil {
			return fmt.Errorf("Close of a region: %w", err)
		}
		if d := diff(pattern(77, size), old.bytes()); d != "" {
			return fmt.Errorf("the closed region changed: %s", d)
		}
	}
	stale, err := swapKeys(ctx, cm, n, closedKey)
	if err != nil {
		return err
	}
	if me == 0 {
		k := keys[1]
		moved, shrunk, forged := k, k, k
		moved.Addr += 1 << 20
		shrunk.Addr += 8
		forged.Key ^= 0x5a5a5a5a
		for _, tc := range []struct {
			what string
			key  comm.RemoteKey
		}{
			{"with an address the region does not have", moved},
			{"with an address inside the region", shrunk},
			{"with a forged access key", forged},
			{"of a closed region", stale[1]},
		} {
			for _, put := range []bool{true, false} {
				if err := refused(ctx, one, put, blk(pattern(8, 16)), tc.key, 0); err != nil {
					return fmt.Errorf("a transfer %s: %w", tc.what, err)
				}
			}
		}
		// The link still works.
		if err := oneTransfer(ctx, one, true, blk(pattern(9, 16)), k, 0); err != nil {
			return fmt.Errorf("a good Put after refused ones: %w", err)
		}
		if err := one.Flush(ctx, 1); err != nil {
			return err
		}
	}
	if err := inStepN(ctx, cm, n); err != nil {
		return err
	}
	want := pattern(me, size)
	if me == 1 {
		copy(want, pattern(9, 16))
	}
	if d := diff(want, g.bytes()); d != "" {
		return fmt.Errorf("rank %d's region after refused transfers and one good Put: %s: %v", me, d, ruleOneSidedInvalid)
	}
	if d := g.guardsIntact(me); d != "" {
		return fmt.Errorf("transfers wrote around rank %d's region: %s: %v", me, d, ruleOneSidedInvalid)
	}
	return nil
}

// osPeerLost: rank 1 exposes a region and closes; rank 0's transfers to
// it and its Flush fail with ErrPeerLost within the bound.
func osPeerLost(c *tcase, ranks []comm.Comm) {
	if why := needsOneSided(ranks[0]); why != "" {
		c.Skip(why)
	}
	runRanks(c, ranks, ruleOneSidedLost, func(ctx context.Context, me int, cm comm.Comm) error {
		one, g, keys, err := exposeAll(ctx, cm, 2, 4096)
		if err != nil {
			return err
		}
		defer g.region.Close()
		if me == 1 {
			if err := await(ctx, cm, 0, tagGo); err != nil {
				return err
			}
			return cm.Close()
		}
		// Rank 1 closes as soon as it has this message, which may fail the
		// send's own completion: that is the loss this case is about.
		if err := signal(ctx, cm, 1, tagGo); err != nil && !errors.Is(err, comm.ErrPeerLost) {
			return err
		}
		bctx, cancel := context.WithTimeout(ctx, lostBound)
		defer cancel()
		for {
			r, err := one.Put(blk(pattern(3, 4096)), keys[1], 0)
			if err == nil {
				_, err = r.Wait(bctx)
			}
			if err != nil {
				if !errors.Is(err, comm.ErrPeerLost) {
					return fmt.Errorf("a Put to rank 1, which closed: error %v, want ErrPeerLost: %v", err, ruleOneSidedLost)
				}
				break
			}
			// Delivered before rank 1 closed: try again, within the bound.
		}
		if err := one.Flush(bctx, 1); !errors.Is(err, comm.ErrPeerLost) && err != nil {
			return fmt.Errorf("Flush of rank 1, which closed: error %v, want nil or ErrPeerLost: %v", err, ruleOneSidedLost)
		}
		if nt, ok := one.(comm.Notifier); ok {
			if err := nt.Notify(bctx, 1, []byte("lost")); !errors.Is(err, comm.ErrPeerLost) {
				return fmt.Errorf("Notify of rank 1, which closed, after a Put to it failed: error %v, want ErrPeerLost: %v", err, ruleOneSidedLost)
			}
		}
		return failsWith(ctx, one, false, blk(make([]byte, 8)), keys[1], 0, comm.ErrPeerLost, ruleOneSidedLost)
	})
}

// osBatch: rank 1 pulls a scattered list of rank 0's pages with one
// prepared batch of Gets, posted twice (rank 0 changes its pages in
// between), and writes them back elsewhere with a batch of Puts; a batch
// with one bad descriptor is refused naming it.
func osBatch(ctx context.Context, me, n int, cm comm.Comm) error {
	const page, pages, pulled = 4096, 96, 37
	one, g, keys, err := exposeAll(ctx, cm, n, page*pages)
	if err != nil {
		return err
	}
	defer g.region.Close()
	// Rank 1 pulls pages 5, 7, 9, … of rank 0 into its buffer's pages in
	// reverse order, and puts each back two pages on.
	from := func(i int) int { return 5 + 2*i }
	into := func(i int) int { return pulled - 1 - i }
	var pull *pager
	if me == 1 {
		if pull, err = newPager(one, keys[0], page, pulled, from, into); err != nil {
			return err
		}
	}
	for round := range 2 {
		if me == 0 {
			for p := range pages {
				copy(g.bytes()[p*page:], pattern(1000*round+p, page))
			}
		}
		if err := inStepN(ctx, cm, n); err != nil {
			return err
		}
		if me == 1 {
			if err := pull.round(ctx, round); err != nil {
				return err
			}
		}
		if err := inStepN(ctx, cm, n); err != nil {
			return err
		}
	}
	if me == 0 {
		for i := range pulled {
			at := (from(i) + 2) * page
			if d := diff(pattern(1000+from(i), page), g.bytes()[at:at+page]); d != "" {
				return fmt.Errorf("page %d of rank 0, written back by rank 1's batch of Puts from page %d: %s: %v", from(i)+2, from(i), d, rulePutGet)
			}
		}
	}
	return nil
}

// pager is rank 1's part of osBatch: its pages and its two batches,
// prepared once.
type pager struct {
	local      []byte
	page       int
	from, into func(int) int
	gets, puts *comm.Batch
}

func newPager(one comm.OneSided, key comm.RemoteKey, page, pulled int, from, into func(int) int) (*pager, error) {
	p := &pager{local: make([]byte, pulled*page), page: page, from: from, into: into}
	lb := blk(p.local)
	gets := make([]comm.Xfer, pulled)
	puts := make([]comm.Xfer, pulled)
	for i := range pulled {
		b, _ := lb.Slice(into(i)*page, page)
		gets[i] = comm.Xfer{Local: b, Remote: key, RemoteOff: from(i) * page}
		puts[i] = comm.Xfer{Local: b, Remote: key, RemoteOff: (from(i) + 2) * page}
	}
	bad := append([]comm.Xfer(nil), gets...)
	bad[11].RemoteOff = key.Len - page + 1
	var xe *comm.XferError
	if _, err := comm.PrepareBatch(one, false, bad); !errors.As(err, &xe) || xe.Index != 11 || !errors.Is(err, comm.ErrInvalidArgument) {
		return nil, fmt.Errorf("PrepareBatch with descriptor 11 past the region: error %v, want an *XferError of index 11 matching ErrInvalidArgument", err)
	}
	var err error
	if p.gets, err = comm.PrepareBatch(one, false, gets); err != nil {
		return nil, fmt.Errorf("PrepareBatch of %d Gets: %w", pulled, err)
	}
	if p.puts, err = comm.PrepareBatch(one, true, puts); err != nil {
		return nil, fmt.Errorf("PrepareBatch of %d Puts: %w", pulled, err)
	}
	return p, nil
}

// round posts the batch of Gets and checks the pages; in the second
// round it then posts the batch of Puts.
func (p *pager) round(ctx context.Context, round int) error {
	if err := p.gets.Run(ctx); err != nil {
		return fmt.Errorf("round %d: a batch of %d Gets: %w", round, p.gets.Len(), err)
	}
	for i := range p.gets.Len() {
		at := p.into(i) * p.page
		if d := diff(pattern(1000*round+p.from(i), p.page), p.local[at:at+p.page]); d != "" {
			return fmt.Errorf("round %d: transfer %d of a batch of Gets (page %d of rank 0): %s: %v", round, i, p.from(i), d, rulePutGet)
		}
	}
	if round == 0 {
		return nil
	}
	if err := p.puts.Run(ctx); err != nil {
		return fmt.Errorf("a batch of %d Puts: %w", p.puts.Len(), err)
	}
	return nil
}
