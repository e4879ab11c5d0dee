package memspace

import (
	"errors"
	"fmt"
)

// CheckInvariants verifies the pool's internal structure, for tests: the
// segments are sorted and disjoint; each segment's chunks tile it exactly,
// with consistent links and no two free neighbours; the bins hold exactly the
// free chunks, in the right bin, with consistent bitmaps; the live map holds
// exactly the live chunks; every counter matches a recount.
func (p *Pool) CheckInvariants() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	var errs []error
	fail := func(format string, args ...any) { errs = append(errs, fmt.Errorf(format, args...)) }

	var reserved, held, inUse, cached int64
	freeChunks := map[*chunk]bool{}
	liveChunks := 0
	for i, seg := range p.segs {
		if i > 0 {
			prev := p.segs[i-1]
			if prev.blk.addr+Addr(prev.blk.size) > seg.blk.addr {
				fail("segments %v and %v overlap or are unsorted", prev.blk, seg.blk)
			}
		}
		if seg.heap != &p.small && seg.heap != &p.large {
			fail("segment %v has no heap", seg.blk)
		}
		reserved += int64(seg.blk.size)
		if seg.first == nil || seg.first.addr != seg.blk.addr || seg.first.prev != nil {
			fail("segment %v: bad first chunk", seg.blk)
			continue
		}
		at := seg.blk.addr
		var prev *chunk
		for c := seg.first; c != nil; c = c.next {
			switch {
			case c.seg != seg:
				fail("chunk %#x: wrong segment", c.addr)
			case c.addr != at:
				fail("chunk %#x: expected at %#x", c.addr, at)
			case c.prev != prev:
				fail("chunk %#x: bad prev link", c.addr)
			case c.size <= 0 || c.size%p.minBlock != 0:
				fail("chunk %#x: size %d", c.addr, c.size)
			case c.addr%Addr(p.minBlock) != 0:
				fail("chunk %#x: misaligned", c.addr)
			}
			if c.free {
				if prev != nil && prev.free {
					fail("chunks %#x and %#x are free neighbours", prev.addr, c.addr)
				}
				if c.req != 0 {
					fail("free chunk %#x has req %d", c.addr, c.req)
				}
				freeChunks[c] = true
				if c == seg.first && c.size == seg.blk.size {
					cached += int64(c.size)
				}
			} else {
				liveChunks++
				if c.req <= 0 || c.req > c.size {
					fail("live chunk %#x: req %d of size %d", c.addr, c.req, c.size)
				}
				if p.live.get(c.addr) != c {
					fail("live chunk %#x missing from the live map", c.addr)
				}
				held += int64(c.size)
				inUse += int64(c.req)
			}
			at += Addr(c.size)
			prev = c
		}
		if at != seg.blk.addr+Addr(seg.blk.size) {
			fail("segment %v: chunks end at %#x", seg.blk, at)
		}
	}
	if liveChunks != p.live.n {
		fail("%d live chunks, %d in the live map", liveChunks, p.live.n)
	}
	binned := 0
	for _, h := range []*poolHeap{&p.small, &p.large} {
		for fl := range flCount {
			if (h.flMap>>fl)&1 != boolBit(h.slMap[fl] != 0) {
				fail("level %d: level bitmap disagrees", fl)
			}
			for sl := range slCount {
				if uint64(h.slMap[fl]>>sl)&1 != boolBit(h.bins[fl][sl] != nil) {
					fail("bin %d/%d: bitmap disagrees", fl, sl)
				}
				var fprev *chunk
				for c := h.bins[fl][sl]; c != nil; c = c.fnext {
					binned++
					wfl, wsl := binOf(uint(c.size) >> p.shift)
					if !freeChunks[c] || c.seg.heap != h || wfl != fl || wsl != sl || c.fprev != fprev {
						fail("chunk %#x (size %d) misfiled in bin %d/%d", c.addr, c.size, fl, sl)
					}
					fprev = c
				}
			}
		}
	}
	if binned != len(freeChunks) {
		fail("%d chunks binned, %d free", binned, len(freeChunks))
	}
	want := []struct {
		name      string
		got, want int64
	}{
		{"reserved", p.reserved, reserved},
		{"held", p.held, held},
		{"inUse", p.inUse, inUse},
		{"live", p.nlive, int64(p.live.n)},
		{"cached", p.cached, cached},
		{"allocs-frees", p.allocs - p.frees, p.nlive},
	}
	for _, w := range want {
		if w.got != w.want {
			fail("%s = %d, recount %d", w.name, w.got, w.want)
		}
	}
	return errors.Join(errs...)
}

func boolBit(b bool) uint64 {
	if b {
		return 1
	}
	return 0
}

// BinOf exposes the bin mapping to tests.
func BinOf(u uint) (fl, sl int) { return binOf(u) }
