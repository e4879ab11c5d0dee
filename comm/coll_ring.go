package comm

import (
	"context"

	"github.com/xpu-go/xpu/memspace"
)

// ringUnit is one chunk a ring algorithm receives: step s of the ring,
// bytes [off, off+n) of the vector.
type ringUnit struct{ s, off, n int }

// ringUnits lists, in the order they travel, the chunks rank r receives
// when in step s it receives block blockAt(s) of the vector split at offs.
// The left neighbour sends exactly this list, in this order, so both sides
// agree on every message, empty blocks (fewer elements than ranks)
// included: they are not sent at all.
func ringUnits(p int, offs []int, chunk int, blockAt func(s int) int) []ringUnit {
	var us []ringUnit
	for s := 0; s < p-1; s++ {
		b := blockAt(s)
		lo, hi := offs[b], offs[b+1]
		for off := lo; off < hi; off += chunk {
			us = append(us, ringUnit{s: s, off: off, n: min(chunk, hi-off)})
		}
	}
	return us
}

// chunkFor rounds the ring chunk down to whole elements of size unit.
func chunkFor(unit int) int {
	return max(unit, ringChunk/unit*unit)
}

// ringReduceScatter reduces the vector send (blocks at offs) over all
// ranks, leaving block r of the result in out on rank r. In step s
// (0..p-2) rank r sends the partial result of block r-s-1 to its right
// neighbour and receives that of block r-s-2 from its left, which it folds
// with its own contribution: after p-1 steps block r has every
// contribution. Blocks travel in chunks: a chunk is received into one of a
// few scratch slots, folded into acc (a vector like send, which may be send
// itself: in place) and forwarded from there at once, so transfers overlap
// the reductions. Only out and the blocks of acc other than r-1 and r are
// written; out may be acc's block r. No wait depends on a send completing,
// only on receives whose sends come from an earlier step, so the ring
// cannot deadlock even when every send waits for its receive. Sends may be
// outstanding on return.
func ringReduceScatter(ctx context.Context, f *inflight, tag int, send, acc, out memspace.Block, offs []int, dt DType, op Op) error {
	p, r := f.c.Size(), f.c.Rank()
	sendB, err := hostBytes(send)
	if err != nil {
		return err
	}
	accB, err := hostBytes(acc)
	if err != nil {
		return err
	}
	outB, err := hostBytes(out)
	if err != nil {
		return err
	}
	if p == 1 {
		copy(outB, sendB)
		return nil
	}
	right, left := mod(r+1, p), mod(r-1, p)
	chunk := chunkFor(dt.Size())

	// Step 0: this rank's own contribution to block r-1, as it is.
	b := mod(r-1, p)
	for off := offs[b]; off < offs[b+1]; off += chunk {
		if _, err := f.send(sub(send, off, min(chunk, offs[b+1]-off)), right, tag); err != nil {
			return err
		}
	}

	units := ringUnits(p, offs, chunk, func(s int) int { return mod(r-s-2, p) })
	if len(units) == 0 {
		return nil
	}
	slotSize := 0
	for _, u := range units {
		slotSize = max(slotSize, u.n)
	}
	// Unit k is received into slot k%ringWindow, free again once folded.
	scratch, scratchB := f.alloc(ringWindow * slotSize)
	var recvs [ringWindow]Request
	post := func(k int) error {
		sl := k % ringWindow
		rr, err := f.recv(sub(scratch, sl*slotSize, units[k].n), left, tag)
		recvs[sl] = rr
		return err
	}
	for k := range min(ringWindow, len(units)) {
		if err := post(k); err != nil {
			return err
		}
	}
	mine := offs[r]
	for k, u := range units {
		sl := k % ringWindow
		if err := f.wait(ctx, recvs[sl], u.n); err != nil {
			return err
		}
		slot := scratchB[sl*slotSize : sl*slotSize+u.n]
		own := sendB[u.off : u.off+u.n]
		if u.s == p-2 {
			// Last step: this is block r, complete once folded.
			reduceBytes(outB[u.off-mine:u.off-mine+u.n], own, slot, dt, op)
		} else {
			reduceBytes(accB[u.off:u.off+u.n], own, slot, dt, op)
			if _, err := f.send(sub(acc, u.off, u.n), right, tag); err != nil {
				return err
			}
		}
		if k+ringWindow < len(units) {
			if err := post(k + ringWindow); err != nil {
				return err
			}
		}
	}
	return nil
}

// ringAllgather completes buf (blocks at offs) on every rank, when rank r
// holds block r on entry (and rank full, unless negative, holds every
// block). In step s (0..p-2) rank r sends block r-s to its right neighbour
// and receives block r-s-1 from its left, each block in chunks forwarded
// as soon as they arrive. Receives go straight into buf. Sends may be
// outstanding on return.
func ringAllgather(ctx context.Context, f *inflight, tag int, buf memspace.Block, offs []int, full int) error {
	p, r := f.c.Size(), f.c.Rank()
	if p == 1 {
		return nil
	}
	right, left := mod(r+1, p), mod(r-1, p)
	chunk := chunkFor(1)
	sendRight := right != full
	if r == full {
		// Everything is here: send what the right neighbour expects, in
		// its order, and receive nothing.
		if !sendRight {
			return nil
		}
		for _, u := range ringUnits(p, offs, chunk, func(s int) int { return mod(r-s, p) }) {
			if _, err := f.send(sub(buf, u.off, u.n), right, tag); err != nil {
				return err
			}
		}
		return nil
	}
	if sendRight {
		for off := offs[r]; off < offs[r+1]; off += chunk {
			if _, err := f.send(sub(buf, off, min(chunk, offs[r+1]-off)), right, tag); err != nil {
				return err
			}
		}
	}
	units := ringUnits(p, offs, chunk, func(s int) int { return mod(r-s-1, p) })
	const window = 2 * ringWindow
	var recvs [window]Request
	post := func(k int) error {
		rr, err := f.recv(sub(buf, units[k].off, units[k].n), left, tag)
		recvs[k%window] = rr
		return err
	}
	for k := range min(window, len(units)) {
		if err := post(k); err != nil {
			return err
		}
	}
	for k, u := range units {
		if err := f.wait(ctx, recvs[k%window], u.n); err != nil {
			return err
		}
		if u.s < p-2 && sendRight {
			if _, err := f.send(sub(buf, u.off, u.n), right, tag); err != nil {
				return err
			}
		}
		if k+window < len(units) {
			if err := post(k + window); err != nil {
				return err
			}
		}
	}
	return nil
}
