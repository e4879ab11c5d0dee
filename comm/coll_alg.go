package comm

import (
	"context"

	"github.com/xpu-go/xpu/internal/collalg"
	"github.com/xpu-go/xpu/internal/doubling"
	"github.com/xpu-go/xpu/memspace"
)

// The shared algorithms, over Isend and Irecv only. Each runs inside run,
// which settles every request it starts. Arguments have been validated by
// the package functions of coll.go.

// The size thresholds at which the algorithms switch, and the choice
// itself, are in package collalg, which the conformance suite reads too: it
// tries the sizes on both sides of each, so that a threshold that moves
// cannot leave an algorithm untested.

// ringChunk is the size of the pieces the ring algorithms pipeline
// (collalg.RingChunk). A variable so that the tests can shrink it and run
// every path of the rings over small vectors.
var ringChunk = collalg.RingChunk

// ringWindow is how many chunk receives the ring algorithms keep posted.
const ringWindow = collalg.RingWindow

// barrierShared is the dissemination barrier: in round k every rank
// signals rank+2^k and waits for rank-2^k, ceil(log2 p) rounds.
func barrierShared(ctx context.Context, c Comm) error {
	return run(ctx, c, "barrier", func(f *inflight) error {
		p, r := c.Size(), c.Rank()
		tag := collTag(kindBarrier, 0)
		for k := 1; k < p; k <<= 1 {
			rr, err := f.recv(emptyBlock, mod(r-k, p), tag)
			if err != nil {
				return err
			}
			sr, err := f.send(emptyBlock, mod(r+k, p), tag)
			if err != nil {
				return err
			}
			if err := f.wait(ctx, rr, 0); err != nil {
				return err
			}
			if err := f.wait(ctx, sr, -1); err != nil {
				return err
			}
		}
		return nil
	})
}

// bcastShared broadcasts buf from root.
func bcastShared(ctx context.Context, c Comm, buf memspace.Block, root int) error {
	p := c.Size()
	if collalg.Choose(collalg.Bcast, buf.Len(), 1, p).Alg == collalg.BcastScatterAllgather {
		return bcastScatterAllgather(ctx, c, buf, root)
	}
	return bcastBinomial(ctx, c, buf, root)
}

// bcastBinomial: a rank receives from its parent in the binomial tree
// rooted at root, then sends to its children, largest subtree first.
func bcastBinomial(ctx context.Context, c Comm, buf memspace.Block, root int) error {
	return run(ctx, c, "bcast", func(f *inflight) error {
		p, r := c.Size(), c.Rank()
		tag := collTag(kindBcast, 0)
		vr := mod(r-root, p)
		mask := 1
		for ; mask < p; mask <<= 1 {
			if vr&mask != 0 {
				rr, err := f.recv(buf, mod(vr-mask+root, p), tag)
				if err != nil {
					return err
				}
				if err := f.wait(ctx, rr, buf.Len()); err != nil {
					return err
				}
				break
			}
		}
		for mask >>= 1; mask > 0; mask >>= 1 {
			if vr+mask < p {
				if _, err := f.send(buf, mod(vr+mask+root, p), tag); err != nil {
					return err
				}
			}
		}
		return nil
	})
}

// bcastScatterAllgather: the root sends block i of buf to rank i, then a
// ring allgather completes every copy. It moves about 2n bytes per rank
// instead of n log p.
func bcastScatterAllgather(ctx context.Context, c Comm, buf memspace.Block, root int) error {
	return run(ctx, c, "bcast", func(f *inflight) error {
		p, r := c.Size(), c.Rank()
		offs := partition(buf.Len(), p, 1)
		tag := collTag(kindBcast, 1)
		if r == root {
			for i := range p {
				if i != root && offs[i+1] > offs[i] {
					if _, err := f.send(sub(buf, offs[i], offs[i+1]-offs[i]), i, tag); err != nil {
						return err
					}
				}
			}
		} else if n := offs[r+1] - offs[r]; n > 0 {
			rr, err := f.recv(sub(buf, offs[r], n), root, tag)
			if err != nil {
				return err
			}
			if err := f.wait(ctx, rr, n); err != nil {
				return err
			}
		}
		// The root's sends read blocks the allgather does not write (the
		// root holds every block and receives none), so they may still be
		// in flight.
		return ringAllgather(ctx, f, collTag(kindBcast, 2), buf, offs, root)
	})
}

// reduceShared reduces send over all ranks into recv at root.
func reduceShared(ctx context.Context, c Comm, send, recv memspace.Block, dt DType, op Op, root int) error {
	p := c.Size()
	if collalg.Choose(collalg.Reduce, send.Len()/dt.Size(), dt.Size(), p).Alg == collalg.ReduceRingGather {
		return reduceRingGather(ctx, c, send, recv, dt, op, root)
	}
	return reduceBinomial(ctx, c, send, recv, dt, op, root)
}

// reduceBinomial: a rank receives the partial results of its children in
// the binomial tree rooted at root, folds them into its own and sends the
// result to its parent.
func reduceBinomial(ctx context.Context, c Comm, send, recv memspace.Block, dt DType, op Op, root int) error {
	return run(ctx, c, "reduce", func(f *inflight) error {
		p, r := c.Size(), c.Rank()
		n := send.Len()
		tag := collTag(kindReduce, 0)
		vr := mod(r-root, p)
		// Children are vr|mask for the masks below the lowest set bit of vr.
		var children []int
		mask := 1
		for ; mask < p; mask <<= 1 {
			if vr&mask != 0 {
				break
			}
			if vr|mask < p {
				children = append(children, mod((vr|mask)+root, p))
			}
		}
		acc := send
		if r == root {
			if err := copyBlock(recv, send); err != nil {
				return err
			}
			acc = recv
		} else if len(children) > 0 {
			acc, _ = f.alloc(n)
			if err := copyBlock(acc, send); err != nil {
				return err
			}
		}
		if len(children) > 0 {
			tmp, _ := f.alloc(n * len(children))
			reqs := make([]Request, len(children))
			for i, ch := range children {
				rr, err := f.recv(sub(tmp, i*n, n), ch, tag)
				if err != nil {
					return err
				}
				reqs[i] = rr
			}
			accB, err := hostBytes(acc)
			if err != nil {
				return err
			}
			tmpB, _ := hostBytes(tmp)
			for i, rr := range reqs {
				if err := f.wait(ctx, rr, n); err != nil {
					return err
				}
				reduceBytes(accB, accB, tmpB[i*n:(i+1)*n], dt, op)
			}
		}
		if r != root {
			if _, err := f.send(acc, mod(vr-mask+root, p), tag); err != nil {
				return err
			}
		}
		return nil
	})
}

// reduceRingGather: a ring reduce-scatter leaves block i of the result on
// rank i, then the root gathers the blocks (Rabenseifner's reduce).
func reduceRingGather(ctx context.Context, c Comm, send, recv memspace.Block, dt DType, op Op, root int) error {
	return run(ctx, c, "reduce", func(f *inflight) error {
		p, r := c.Size(), c.Rank()
		offs := partition(send.Len(), p, dt.Size())
		mine := offs[r+1] - offs[r]
		acc := recv
		if r != root {
			acc, _ = f.alloc(send.Len())
		}
		out := sub(acc, offs[r], mine)
		if err := ringReduceScatter(ctx, f, collTag(kindReduce, 1), send, acc, out, offs, dt, op); err != nil {
			return err
		}
		// At the root, send may be recv (in place): the reduce-scatter must
		// have stopped reading it before the gather overwrites it.
		if err := f.waitAll(ctx); err != nil {
			return err
		}
		tag := collTag(kindReduce, 2)
		if r != root {
			if mine > 0 {
				_, err := f.send(out, root, tag)
				return err
			}
			return nil
		}
		// Every block at once; empty blocks are not sent.
		reqs := make([]Request, p)
		for i := range p {
			if n := offs[i+1] - offs[i]; i != root && n > 0 {
				rr, err := f.recv(sub(recv, offs[i], n), i, tag)
				if err != nil {
					return err
				}
				reqs[i] = rr
			}
		}
		for i, rr := range reqs {
			if rr != nil {
				if err := f.wait(ctx, rr, offs[i+1]-offs[i]); err != nil {
					return err
				}
			}
		}
		return nil
	})
}

// allreduceShared reduces send over all ranks into recv on every rank.
func allreduceShared(ctx context.Context, c Comm, send, recv memspace.Block, dt DType, op Op) error {
	p := c.Size()
	if collalg.Choose(collalg.Allreduce, send.Len()/dt.Size(), dt.Size(), p).Alg == collalg.AllreduceRing {
		return allreduceRing(ctx, c, send, recv, dt, op)
	}
	return allreduceRecursiveDoubling(ctx, c, send, recv, dt, op)
}

// allreduceRecursiveDoubling: log2 p rounds in which partners exchange
// and fold their whole vectors, in the schedule of doubling.Schedule (with p not a
// power of two, some ranks hand their vector over and sit out). Partners
// fold the same two vectors in either order, so every rank ends with the
// bitwise-same result.
func allreduceRecursiveDoubling(ctx context.Context, c Comm, send, recv memspace.Block, dt DType, op Op) error {
	return run(ctx, c, "allreduce", func(f *inflight) error {
		p, r := c.Size(), c.Rank()
		n := send.Len()
		tag := collTag(kindAllreduce, 0)
		if err := copyBlock(recv, send); err != nil {
			return err
		}
		acc, err := hostBytes(recv)
		if err != nil {
			return err
		}
		tmp, tmpB := f.alloc(n)
		d := doubling.New(p, r)
		if h := d.HandsTo(); h >= 0 {
			if err := f.exchange(ctx, recv, h, memspace.Block{}, -1, tag); err != nil {
				return err
			}
			return f.exchange(ctx, memspace.Block{}, -1, recv, h, tag)
		}
		if from := d.FoldsFrom(); from >= 0 {
			if err := f.exchange(ctx, memspace.Block{}, -1, tmp, from, tag); err != nil {
				return err
			}
			reduceBytes(acc, acc, tmpB, dt, op)
		}
		for i := range d.Steps() {
			peer := d.Partner(i)
			if err := f.exchange(ctx, recv, peer, tmp, peer, tag); err != nil {
				return err
			}
			reduceBytes(acc, acc, tmpB, dt, op)
		}
		if from := d.FoldsFrom(); from >= 0 {
			_, err := f.send(recv, from, tag)
			return err
		}
		return nil
	})
}

// exchange sends sb to dest (unless dest < 0) and receives rb from source
// (unless source < 0), and waits for both.
func (f *inflight) exchange(ctx context.Context, sb memspace.Block, dest int, rb memspace.Block, source, tag int) error {
	var rr, sr Request
	var err error
	if source >= 0 {
		if rr, err = f.recv(rb, source, tag); err != nil {
			return err
		}
	}
	if dest >= 0 {
		if sr, err = f.send(sb, dest, tag); err != nil {
			return err
		}
	}
	if rr != nil {
		if err := f.wait(ctx, rr, rb.Len()); err != nil {
			return err
		}
	}
	if sr != nil {
		return f.wait(ctx, sr, -1)
	}
	return nil
}

// allreduceRing: a ring reduce-scatter leaves block i of the result on
// rank i, then a ring allgather hands every block to every rank. Each rank
// sends and receives about 2n bytes whatever p, in chunks so that the
// transfer of one chunk overlaps the reduction of the previous.
func allreduceRing(ctx context.Context, c Comm, send, recv memspace.Block, dt DType, op Op) error {
	return run(ctx, c, "allreduce", func(f *inflight) error {
		p, r := c.Size(), c.Rank()
		offs := partition(send.Len(), p, dt.Size())
		out := sub(recv, offs[r], offs[r+1]-offs[r])
		if err := ringReduceScatter(ctx, f, collTag(kindAllreduce, 1), send, recv, out, offs, dt, op); err != nil {
			return err
		}
		// In place, the reduce-scatter's sends read blocks the allgather
		// overwrites: let them finish first.
		if err := f.waitAll(ctx); err != nil {
			return err
		}
		return ringAllgather(ctx, f, collTag(kindAllreduce, 2), recv, offs, -1)
	})
}

// gatherShared: linear, the root posts a receive per rank at once.
func gatherShared(ctx context.Context, c Comm, send, recv memspace.Block, root int) error {
	return run(ctx, c, "gather", func(f *inflight) error {
		p, r := c.Size(), c.Rank()
		m := send.Len()
		tag := collTag(kindGather, 0)
		if r != root {
			_, err := f.send(send, root, tag)
			return err
		}
		reqs := make([]Request, 0, p-1)
		for i := range p {
			if i == root {
				continue
			}
			rr, err := f.recv(sub(recv, i*m, m), i, tag)
			if err != nil {
				return err
			}
			reqs = append(reqs, rr)
		}
		if err := copyBlock(sub(recv, root*m, m), send); err != nil {
			return err
		}
		for _, rr := range reqs {
			if err := f.wait(ctx, rr, m); err != nil {
				return err
			}
		}
		return nil
	})
}

// scatterShared: linear, the root posts a send per rank at once.
func scatterShared(ctx context.Context, c Comm, send, recv memspace.Block, root int) error {
	return run(ctx, c, "scatter", func(f *inflight) error {
		p, r := c.Size(), c.Rank()
		m := recv.Len()
		tag := collTag(kindScatter, 0)
		if r != root {
			rr, err := f.recv(recv, root, tag)
			if err != nil {
				return err
			}
			return f.wait(ctx, rr, m)
		}
		for i := range p {
			if i == root {
				continue
			}
			if _, err := f.send(sub(send, i*m, m), i, tag); err != nil {
				return err
			}
		}
		return copyBlock(recv, sub(send, root*m, m))
	})
}

// allgatherShared gathers every rank's send into recv on every rank.
func allgatherShared(ctx context.Context, c Comm, send, recv memspace.Block) error {
	if collalg.Choose(collalg.Allgather, send.Len(), 1, c.Size()).Alg == collalg.AllgatherRing {
		return allgatherRing(ctx, c, send, recv)
	}
	return allgatherBruck(ctx, c, send, recv)
}

// allgatherRing: p-1 steps in which every rank passes the block it got
// last to its right neighbour, pipelined in chunks.
func allgatherRing(ctx context.Context, c Comm, send, recv memspace.Block) error {
	return run(ctx, c, "allgather", func(f *inflight) error {
		p, r := c.Size(), c.Rank()
		m := send.Len()
		if err := copyBlock(sub(recv, r*m, m), send); err != nil {
			return err
		}
		return ringAllgather(ctx, f, collTag(kindAllgather, 1), recv, uniform(m, p), -1)
	})
}

// allgatherBruck: ceil(log2 p) rounds; in round k every rank sends the
// blocks it holds (its own and those of the next ranks) to rank-k and gets
// as many from rank+k, then rotates them into place.
func allgatherBruck(ctx context.Context, c Comm, send, recv memspace.Block) error {
	return run(ctx, c, "allgather", func(f *inflight) error {
		p, r := c.Size(), c.Rank()
		m := send.Len()
		tag := collTag(kindAllgather, 0)
		tmp, tmpB := f.alloc(p * m)
		if err := copyBlock(sub(tmp, 0, m), send); err != nil {
			return err
		}
		for k := 1; k < p; k <<= 1 {
			cnt := min(k, p-k)
			if err := f.exchange(ctx, sub(tmp, 0, cnt*m), mod(r-k, p), sub(tmp, k*m, cnt*m), mod(r+k, p), tag); err != nil {
				return err
			}
		}
		out, err := hostBytes(recv)
		if err != nil {
			return err
		}
		// tmp holds blocks r, r+1, …, r+p-1 (mod p).
		split := (p - r) * m
		copy(out[r*m:], tmpB[:split])
		copy(out[:r*m], tmpB[split:])
		return nil
	})
}

// alltoallShared: pairwise exchange, in step s rank r sends its block for
// rank r+s and receives the block of rank r-s, with a few steps in flight.
func alltoallShared(ctx context.Context, c Comm, send, recv memspace.Block) error {
	return run(ctx, c, "alltoall", func(f *inflight) error {
		p, r := c.Size(), c.Rank()
		m := send.Len() / p
		tag := collTag(kindAlltoall, 0)
		if err := copyBlock(sub(recv, r*m, m), sub(send, r*m, m)); err != nil {
			return err
		}
		const window = 4
		type step struct{ rr, sr Request }
		steps := make([]step, p)
		for s := 1; s < p; s++ {
			if s > window {
				if err := f.wait(ctx, steps[s-window].rr, m); err != nil {
					return err
				}
				if err := f.wait(ctx, steps[s-window].sr, -1); err != nil {
					return err
				}
			}
			src, dst := mod(r-s, p), mod(r+s, p)
			rr, err := f.recv(sub(recv, src*m, m), src, tag)
			if err != nil {
				return err
			}
			sr, err := f.send(sub(send, dst*m, m), dst, tag)
			if err != nil {
				return err
			}
			steps[s] = step{rr, sr}
		}
		for s := max(1, p-window); s < p; s++ {
			if err := f.wait(ctx, steps[s].rr, m); err != nil {
				return err
			}
		}
		return nil
	})
}

// reduceScatterShared: a ring reduce-scatter over blocks of recv's size.
func reduceScatterShared(ctx context.Context, c Comm, send, recv memspace.Block, dt DType, op Op) error {
	return run(ctx, c, "reduce-scatter", func(f *inflight) error {
		// The partial results of the other ranks' blocks need a vector's
		// worth of scratch; send is only read.
		acc, _ := f.alloc(send.Len())
		return ringReduceScatter(ctx, f, collTag(kindReduceScatter, 0), send, acc, recv, uniform(recv.Len(), c.Size()), dt, op)
	})
}
