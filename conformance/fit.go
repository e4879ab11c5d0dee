package conformance

import (
	"fmt"

	"github.com/xpu-go/xpu/memspace"
)

// Fitting the space. The cases allocate blocks of up to tens of MiB, which
// a small device, a memory-limited container or an embedded accelerator
// does not have. A space that says how much it holds (memspace.Availability,
// found through wrappers: its total, else what is free) gets its cases'
// blocks scaled to it: no block larger than a quarter of it (fitShare), so
// that two live blocks, a probe and what the space keeps for itself
// (headers, a pool's segments) fit at once; each case says in its output
// which sizes it left out and why. A space that does not say gets every
// size, and one that runs out of memory on a large block is reported as
// full, not as broken (allocOrStop). Every case runs on a space of
// MinCapacity bytes.

// fitShare is the part of a space's capacity that one block of a case
// may take.
const fitShare = 4

// MinCapacity is the smallest capacity, in bytes, at which every case of
// the space, pool and transfer suites runs on a space that reports it
// (memspace.Availability): the largest blocks are scaled down to fit, and
// none is scaled away.
const MinCapacity = 1 << 20

// fit is the largest block a case allocates of a space, and why.
type fit struct {
	limit int    // 0: no limit
	why   string // the space's capacity, for the output
}

// fitOf reads what sp holds.
func fitOf(sp memspace.Space) fit {
	av, ok := memspace.As[memspace.Availability](sp)
	if !ok {
		return fit{}
	}
	free, total, err := av.Available()
	if err != nil {
		return fit{}
	}
	held, what := total, "in total"
	if held <= 0 {
		held, what = free, "free"
	}
	if held <= 0 {
		return fit{}
	}
	return fit{limit: int(min(held/fitShare, int64(^uint(0)>>1))),
		why: fmt.Sprintf("space %s has %d bytes %s (memspace.Availability); a case's blocks take at most a %dth of it", sp.Name(), held, what, fitShare)}
}

// fitAll is the tightest fit of several spaces.
func fitAll(sps []memspace.Space) fit {
	var f fit
	for _, sp := range sps {
		g := fitOf(sp)
		if g.limit != 0 && (f.limit == 0 || g.limit < f.limit) {
			f = g
		}
	}
	return f
}

// ok reports whether a block of size bytes fits.
func (f fit) ok(size int) bool { return f.limit == 0 || size <= f.limit }

// sizes returns the sizes that fit, logging the first left out.
func (f fit) sizes(c *tcase, sizes []int) []int {
	c.Helper()
	out := make([]int, 0, len(sizes))
	var left []int
	for _, s := range sizes {
		if f.ok(s) {
			out = append(out, s)
		} else {
			left = append(left, s)
		}
	}
	if len(left) > 0 {
		c.Logf("sizes %v left out: %s", left, f.why)
	}
	return out
}
