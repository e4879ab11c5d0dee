package conformance

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/xpu-go/xpu/executor"
	"github.com/xpu-go/xpu/internal/hostcopy"
	"github.com/xpu-go/xpu/memspace"
	"github.com/xpu-go/xpu/transfer"
)

// The transfer cases of large copies: every size a path distinguishes
// ("copy/sizes"), separate blocks at offsets ("copy/offsets") and large
// overlapping copies ("copy/overlap"). Copies of tens of MiB are slow under
// the race detector, so these cases copy each size once per path rather
// than once per pair of spaces (pathPairs), write their patterns once and
// compare host-accessible memory in place.

// pathKey is what chooses the path of a copy and what it copies between:
// the kinds of both sides (which key transfer paths) and their devices (a
// copy within a device and one between two devices go different ways).
type pathKey struct {
	srcKind, dstKind string
	srcDev, dstDev   int
}

// pathPairs returns the ordered pairs (i, j), copies from eps[i] to eps[j],
// one for each path: pairs with the same pathKey go through the same path
// in the same way, and Go memory to Go memory is nothing of the backend's.
func pathPairs(eps []endpoint) [][2]int {
	seen := map[pathKey]bool{}
	var out [][2]int
	for i, src := range eps {
		for j, dst := range eps {
			if sameSpace(src.sp, memspace.GoHeap) && sameSpace(dst.sp, memspace.GoHeap) {
				continue
			}
			sp, dp := src.sp.Properties(), dst.sp.Properties()
			k := pathKey{sp.Kind, dp.Kind, sp.Device, dp.Device}
			if !seen[k] {
				seen[k] = true
				out = append(out, [2]int{i, j})
			}
		}
	}
	return out
}

// pairUsable skips the case when src and dst have no path between them or
// cannot be read and written from the host.
func pairUsable(c *tcase, src, dst endpoint) {
	c.Helper()
	if _, err := transfer.Lookup(dst.sp, src.sp); err != nil {
		c.Skipf("no path: %v", err)
	}
	for _, e := range []endpoint{src, dst} {
		if e.noIO != "" {
			c.Skip(e.noIO)
		}
	}
}

// forPaths runs body as a subtest for one pair of spaces per path.
func forPaths(c *tcase, sps []memspace.Space, body func(c *tcase, src, dst endpoint)) {
	eps := endpoints(sps)
	for _, p := range pathPairs(eps) {
		src, dst := eps[p[0]], eps[p[1]]
		c.Run(pairName(eps, p[0], p[1]), func(t *testing.T) {
			c := &tcase{T: t, ctx: c.ctx, name: c.name, cfg: c.cfg}
			pairUsable(c, src, dst)
			body(c, src, dst)
		})
	}
}

// differs describes how the bytes of b differ from want, or returns "":
// in place for host-accessible memory, else through a copy into scratch
// (reused, so that no large buffer is allocated per check).
func differs(c *tcase, io blockIO, b memspace.Block, want []byte, scratch *[]byte) string {
	c.Helper()
	if io.direct {
		v, err := b.Bytes()
		require.NoError(c, err, "host view of %v", b)
		return diff(want, v)
	}
	if cap(*scratch) < b.Len() {
		*scratch = make([]byte, b.Len())
	}
	got := (*scratch)[:b.Len()]
	host, err := memspace.FromSlice(got)
	require.NoError(c, err)
	require.NoError(c, transfer.CopyBlock(c.ctx, host.Block(), b), "copy %v -> host", b)
	return diff(want, got)
}

// copyOn copies src into dst, synchronously when st is nil, else on st and
// waiting for the copy's event.
func copyOn(c *tcase, st executor.Stream, dst, src memspace.Block, what string) {
	c.Helper()
	if st == nil {
		require.NoError(c, transfer.CopyBlock(c.ctx, dst, src), what)
		return
	}
	ev, err := transfer.CopyBlockAsync(st, dst, src)
	require.NoError(c, err, what)
	require.NotNil(c, ev, "%s returned no event", what)
	require.NoError(c, ev.Wait(c.ctx), "Wait of the event of a %s", what)
}

// transferSizes copies, for each path between the spaces, blocks of each
// size on either side of the split points of the host path (hostcopy.Sizes:
// one memmove, fixed pieces with short last pieces, one piece per worker),
// synchronously and on st when it is given. The sizes come from the split
// points themselves, so they follow them when they move; a device path that
// splits copies at points of its own meets odd tails here all the same.
func transferSizes(c *tcase, sps []memspace.Space, st executor.Stream) {
	sizes := hostcopy.Sizes()
	streams := []executor.Stream{nil}
	if st != nil {
		streams = append(streams, st)
	}
	// Each copy of the case takes its bytes at another offset of one
	// pattern, so that a block that reuses the memory of an earlier one
	// never holds them already: a copy that does nothing is seen without
	// writing the destination first.
	const step = 7
	rounds := len(sizes) * len(streams) * len(sps) * len(sps) // at most
	src := bigPattern(3, sizes[len(sizes)-1].N+step*rounds)
	round := 0
	forPaths(c, sps, func(c *tcase, src0, dst endpoint) {
		var scratch []byte
		f := fitAll([]memspace.Space{src0.sp, dst.sp})
		for _, sz := range sizes {
			if !f.ok(sz.N) {
				c.Logf("sizes from %d bytes left out: %s", sz.N, f.why)
				break
			}
			for _, s := range streams {
				how := "CopyBlock"
				if s != nil {
					how = "CopyBlockAsync"
				}
				what := fmt.Sprintf("%s of %d bytes (%s) %s -> %s", how, sz.N, sz.What, src0.sp.Name(), dst.sp.Name())
				want := src[round*step : round*step+sz.N]
				round++
				sb, freeS := src0.alloc(c, sz.N)
				db, freeD := dst.alloc(c, sz.N)
				require.NoError(c, src0.io.write(c.ctx, sb, want))
				copyOn(c, s, db, sb, what)
				assert.Empty(c, differs(c, dst.io, db, want, &scratch), what)
				// The source, at its ends: enough to see a copy made the
				// wrong way round.
				for _, r := range probeRanges(sz.N) {
					sub, err := sb.Slice(r[0], r[1]-r[0])
					require.NoError(c, err)
					assert.Empty(c, differs(c, src0.io, sub, want[r[0]:r[1]], &scratch), "the source of a %s changed (at %d)", what, r[0])
				}
				freeD()
				freeS()
				if c.Failed() {
					return // one size shows it; the larger ones take time
				}
			}
		}
	})
}

// transferOffsets copies, for each path between the spaces, between
// separate blocks at non-zero offsets on both sides (odd, and different on
// each side) and of odd lengths, small ones and ones the host path splits
// into pieces, and checks that the bytes around the copied range are
// untouched: a path that copies from or to the start of an allocation, or
// rounds a length or an offset, is seen.
func transferOffsets(c *tcase, sps []memspace.Space) {
	cases := []struct{ n, srcOff, dstOff int }{
		{1, 1, 7},
		{3, 13, 2},
		{4093, 3, 4097},
		{hostcopy.SplitMin + 3, 4099, 63},
		{3*hostcopy.Piece + 5, 65, 1},
	}
	const guard = 61 // bytes after the copied range
	var most int
	for _, tc := range cases {
		most = max(most, max(tc.srcOff, tc.dstOff)+tc.n+guard)
	}
	srcData, dstData := bigPattern(5, most), bigPattern(6, most)
	forPaths(c, sps, func(c *tcase, src, dst endpoint) {
		var scratch []byte
		f := fitAll([]memspace.Space{src.sp, dst.sp})
		for _, tc := range cases {
			if !f.ok(max(tc.srcOff, tc.dstOff) + tc.n + guard) {
				c.Logf("copies of %d bytes and more left out: %s", tc.n, f.why)
				break
			}
			what := fmt.Sprintf("CopyBlock of %d bytes from offset %d of a %s block to offset %d of a %s block",
				tc.n, tc.srcOff, src.sp.Name(), tc.dstOff, dst.sp.Name())
			sb, freeS := src.alloc(c, tc.srcOff+tc.n+guard)
			db, freeD := dst.alloc(c, tc.dstOff+tc.n+guard)
			require.NoError(c, src.io.write(c.ctx, sb, srcData[:sb.Len()]))
			require.NoError(c, dst.io.write(c.ctx, db, dstData[:db.Len()]))
			from, err := sb.Slice(tc.srcOff, tc.n)
			require.NoError(c, err)
			to, err := db.Slice(tc.dstOff, tc.n)
			require.NoError(c, err)
			require.NoError(c, transfer.CopyBlock(c.ctx, to, from), what)
			// The destination: its own bytes before and after the range,
			// the source's range in it.
			for _, part := range []struct {
				off, n int
				want   []byte
				what   string
			}{
				{0, tc.dstOff, dstData[:tc.dstOff], "the bytes before the copied range"},
				{tc.dstOff, tc.n, srcData[tc.srcOff : tc.srcOff+tc.n], "the copied range"},
				{tc.dstOff + tc.n, guard, dstData[tc.dstOff+tc.n : db.Len()], "the bytes after the copied range"},
			} {
				sub, err := db.Slice(part.off, part.n)
				require.NoError(c, err)
				assert.Empty(c, differs(c, dst.io, sub, part.want, &scratch), "%s: %s of the destination block (at %d)", what, part.what, part.off)
			}
			assert.Empty(c, differs(c, src.io, sb, srcData[:sb.Len()], &scratch), "%s: the source block changed", what)
			freeD()
			freeS()
			if c.Failed() {
				return
			}
		}
	})
}

// largeOverlap copies within a block of e's space between overlapping
// ranges of sizes above the host path's split points, shifted by a byte
// and by more than a piece, both ways, and checks each is a memmove: a path
// that splits a large copy into pieces without minding the overlap
// overwrites the source before it has read it.
func largeOverlap(c *tcase, e endpoint) {
	c.Helper()
	sizes := hostcopy.Sizes()
	const far = hostcopy.Piece + 3
	for _, l := range []struct {
		n      int
		shifts []int
	}{
		{sizes[len(sizes)-2].N, []int{1, -1, far, -far}},
		{sizes[len(sizes)-1].N, []int{1, -far}},
	} {
		var scratch []byte
		if f := fitOf(e.sp); !f.ok(l.n + 2*far + 1) {
			c.Logf("overlapping copies of %d bytes and more left out: %s", l.n, f.why)
			break
		}
		b, free := e.alloc(c, l.n+2*far+1)
		// mirror is what b must hold: Go's copy is a memmove.
		mirror := bigPattern(l.n, b.Len())
		require.NoError(c, e.io.write(c.ctx, b, mirror))
		for _, shift := range l.shifts {
			so, do := far, far+shift
			sb, err := b.Slice(so, l.n)
			require.NoError(c, err)
			db, err := b.Slice(do, l.n)
			require.NoError(c, err)
			require.NoError(c, transfer.CopyBlock(c.ctx, db, sb), "overlapping CopyBlock of %d bytes shifted by %d", l.n, shift)
			copy(mirror[do:do+l.n], mirror[so:so+l.n])
			if d := differs(c, e.io, b, mirror, &scratch); d != "" {
				assert.Empty(c, d, "overlapping copy of %d bytes shifted by %d is not a memmove", l.n, shift)
				free()
				return
			}
		}
		free()
	}
}
