package memspace

import "math/bits"

// Free chunks of a pool heap are filed in two-level segregated bins (TLSF,
// Masmano et al. 2004). Sizes are counted in units of MinBlock. Units below
// 32 each have a bin of their own (level 0). Above, level fl covers
// [2^(fl+4), 2^(fl+5)) units in 32 equal steps. A bitmap of non-empty levels
// and one of non-empty bins per level find the smallest non-empty bin at or
// above a size with two count-trailing-zeros.

const (
	slBits  = 5
	slCount = 1 << slBits // steps per level
	flCount = 64          // levels; sizes below 2^60 bytes need at most 57
)

// poolHeap is the free index of one heap (small or large requests).
type poolHeap struct {
	large bool
	flMap uint64
	slMap [flCount]uint32
	bins  [flCount][slCount]*chunk
}

// binOf returns the bin of a size of u units.
func binOf(u uint) (fl, sl int) {
	if u < slCount {
		return 0, int(u)
	}
	f := bits.Len(u) - 1
	return f - slBits + 1, int(u>>(f-slBits)) & (slCount - 1)
}

func (h *poolHeap) insert(c *chunk, shift uint) {
	fl, sl := binOf(uint(c.size) >> shift)
	c.fl, c.sl = uint8(fl), uint8(sl)
	head := h.bins[fl][sl]
	c.fprev, c.fnext = nil, head
	if head != nil {
		head.fprev = c
	}
	h.bins[fl][sl] = c
	h.slMap[fl] |= 1 << sl
	h.flMap |= 1 << fl
}

func (h *poolHeap) remove(c *chunk) {
	fl, sl := c.fl, c.sl
	if c.fprev != nil {
		c.fprev.fnext = c.fnext
	} else {
		h.bins[fl][sl] = c.fnext
	}
	if c.fnext != nil {
		c.fnext.fprev = c.fprev
	}
	c.fprev, c.fnext = nil, nil
	if h.bins[fl][sl] == nil {
		h.slMap[fl] &^= 1 << sl
		if h.slMap[fl] == 0 {
			h.flMap &^= 1 << fl
		}
	}
}

// ownBinScan bounds the first-fit scan of a request's own bin.
const ownBinScan = 8

// find returns a free chunk of at least size bytes (a multiple of 1<<shift),
// or nil: first a fit in the request's own bin, else the head of the
// smallest bin whose every chunk fits.
func (h *poolHeap) find(size int, shift uint) *chunk {
	u := uint(size) >> shift
	fl, sl := binOf(u)
	if fl > 0 {
		n := 0
		for c := h.bins[fl][sl]; c != nil && n < ownBinScan; c = c.fnext {
			if c.size >= size {
				return c
			}
			n++
		}
		// Every chunk in the next bin up is large enough.
		if sl++; sl == slCount {
			fl, sl = fl+1, 0
		}
	}
	return h.firstFrom(fl, sl)
}

// firstFrom returns the head of the first non-empty bin at or after (fl, sl).
func (h *poolHeap) firstFrom(fl, sl int) *chunk {
	if fl >= flCount {
		return nil
	}
	m := h.slMap[fl] & (^uint32(0) << sl)
	if m == 0 {
		if fl+1 >= flCount {
			return nil
		}
		fm := h.flMap & (^uint64(0) << (fl + 1))
		if fm == 0 {
			return nil
		}
		fl = bits.TrailingZeros64(fm)
		m = h.slMap[fl]
	}
	return h.bins[fl][bits.TrailingZeros32(m)]
}

// findAligned returns a free chunk holding size bytes at a multiple of
// align, or nil. It scans the bins from the request's own upwards, so it
// prefers the smallest chunk that fits.
func (h *poolHeap) findAligned(size, align int, shift uint) *chunk {
	fl, sl := binOf(uint(size) >> shift)
	for fl < flCount {
		m := h.slMap[fl] & (^uint32(0) << sl)
		for m != 0 {
			s := bits.TrailingZeros32(m)
			for c := h.bins[fl][s]; c != nil; c = c.fnext {
				if start := alignUp(c.addr, align); start >= c.addr && uint64(start-c.addr)+uint64(size) <= uint64(c.size) {
					return c
				}
			}
			m &= m - 1
		}
		if fl+1 >= flCount {
			break
		}
		fm := h.flMap & (^uint64(0) << (fl + 1))
		if fm == 0 {
			break
		}
		fl, sl = bits.TrailingZeros64(fm), 0
	}
	return nil
}

// largest returns the size of the largest free chunk, or 0.
func (h *poolHeap) largest() int64 {
	if h.flMap == 0 {
		return 0
	}
	fl := 63 - bits.LeadingZeros64(h.flMap)
	sl := 31 - bits.LeadingZeros32(h.slMap[fl])
	var n int
	for c := h.bins[fl][sl]; c != nil; c = c.fnext {
		n = max(n, c.size)
	}
	return int64(n)
}
