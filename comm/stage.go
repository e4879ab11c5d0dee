package comm

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/xpu-go/xpu/internal/stage"
	"github.com/xpu-go/xpu/memspace"
	"github.com/xpu-go/xpu/transfer"
	"github.com/xpu-go/xpu/xerr"
)

// This file holds the staging of buffers the host cannot touch (GPU device
// memory) by the blocking calls: Send, Recv, Sendrecv and the collectives
// copy such a buffer to a host stand-in, run on the stand-in, and copy the
// result back (see "Device memory" in the package documentation and ADRs
// 21 and 42). A host-accessible block never comes here, save in the
// pipeline of a communicator that stages in pieces (StageInPieces), which
// cuts host buffers in the same pieces and copies nothing.

// stageSlots is the number of host stand-ins a pipeline rotates through:
// the piece being copied in, the one in the collective and the one being
// copied out.
const stageSlots = 3

// stageName is the component that staging errors name.
const stageName = "comm"

// needsStage reports whether a collective must stage b: it has bytes and
// the host cannot touch them. (Collectives return before this test for
// empty buffers; the zero Block of an unused argument is empty.)
func needsStage(b memspace.Block) bool {
	return b.Len() > 0 && !b.HostAccessible()
}

// stageErr is a staging error of the call name: an *xerr.Error whose
// cause matches the sentinel of err.
func stageErr(name, format string, args ...any) error {
	return xerr.Op(stageName, name, fmt.Errorf(format, args...))
}

// checkPath reports an error matching ErrNotSupported when no transfer
// path copies from space src to space dst.
func checkPath(name string, dst, src memspace.Space) error {
	if _, err := transfer.Lookup(dst, src); err != nil {
		return stageErr(name, "staging: %w", err)
	}
	return nil
}

// copyIn copies the caller's src into the stand-in dst.
func copyIn(ctx context.Context, name string, dst, src memspace.Block) error {
	if err := transfer.CopyBlock(ctx, dst, src); err != nil {
		return stageErr(name, "staging %v in: %w", src, err)
	}
	return nil
}

// copyOut copies the stand-in src into the caller's dst. It runs once the
// operation has completed, so it ignores the end of ctx: the data has
// arrived and is delivered.
func copyOut(ctx context.Context, name string, dst, src memspace.Block) error {
	if err := transfer.CopyBlock(context.WithoutCancel(ctx), dst, src); err != nil {
		return stageErr(name, "staging %v out: %w", dst, err)
	}
	return nil
}

// piece returns the n bytes of b from off, or b itself when it is the zero
// Block (an unused argument).
func piece(b memspace.Block, off, n int) memspace.Block {
	if b.IsZero() {
		return b
	}
	p, err := b.Slice(off, n)
	if err != nil {
		// The callers cut pieces inside blocks whose lengths they checked.
		panic(err)
	}
	return p
}

// staging is the host stand-ins of one call: the blocks it allocated, the
// copies to make into them before the operation and out of them after.
type staging struct {
	name string
	held []memspace.Block
	ins  []copyPair
	outs []copyPair
}

type copyPair struct{ dst, src memspace.Block }

// standIn allocates a stand-in for b in b's staging space.
func (s *staging) standIn(b memspace.Block) (memspace.Block, error) {
	h, err := stage.Alloc(stage.Space(b.Space()), b.Len())
	if err != nil {
		return memspace.Block{}, stageErr(s.name, "staging %v: %w", b, err)
	}
	if h.Len() > 0 {
		s.held = append(s.held, h)
	}
	return h, nil
}

// in records that src is copied into its stand-in dst before the
// operation (an empty block needs no copy, nor a path).
func (s *staging) in(dst, src memspace.Block) {
	if src.Len() > 0 {
		s.ins = append(s.ins, copyPair{dst, src})
	}
}

// out records that the stand-in src is copied into dst after the
// operation.
func (s *staging) out(dst, src memspace.Block) {
	if src.Len() > 0 {
		s.outs = append(s.outs, copyPair{dst, src})
	}
}

// start checks that a path serves every copy, then copies in. On an error
// nothing has been sent: the call fails on this rank alone.
func (s *staging) start(ctx context.Context) error {
	for _, c := range s.ins {
		if err := checkPath(s.name, c.dst.Space(), c.src.Space()); err != nil {
			return err
		}
	}
	for _, c := range s.outs {
		if err := checkPath(s.name, c.dst.Space(), c.src.Space()); err != nil {
			return err
		}
	}
	for _, c := range s.ins {
		if err := copyIn(ctx, s.name, c.dst, c.src); err != nil {
			return err
		}
	}
	return nil
}

// finish copies out when the operation succeeded (err is nil) and frees
// the stand-ins. It returns err, else the first error of its own.
func (s *staging) finish(ctx context.Context, err error) error {
	if err == nil {
		for _, c := range s.outs {
			if err = copyOut(ctx, s.name, c.dst, c.src); err != nil {
				break
			}
		}
	}
	if ferr := s.free(); err == nil {
		err = ferr
	}
	return err
}

// free frees the stand-ins and returns the first error.
func (s *staging) free() error {
	var first error
	for _, h := range s.held {
		if err := stage.Free(h); err != nil && first == nil {
			first = stageErr(s.name, "freeing stand-in %v: %w", h, err)
		}
	}
	s.held = nil
	return first
}

// freeWhenSettled frees the stand-ins once every request in reqs has
// completed: at once when they have (the usual case, since Await and
// waitAll2 let canceled requests settle), else when they do. A send the
// backend could not cancel within the grace (MPI) still reads its
// stand-in, which must stay allocated until the receiver takes it or the
// communicator closes.
func (s *staging) freeWhenSettled(reqs ...Request) {
	for _, r := range reqs {
		if r == nil {
			continue
		}
		if _, done, _ := r.Test(); !done {
			go func() {
				for _, r := range reqs {
					if r != nil {
						_, _ = r.Wait(context.Background())
					}
				}
				_ = s.free()
			}()
			return
		}
	}
	_ = s.free()
}

// sendStaged is Send of a buffer the host cannot touch: it sends a host
// copy. The request is its own (Isend, not Blocking.Send), so that the
// copy is freed only once the send has settled.
func sendStaged(ctx context.Context, c Comm, buf memspace.Block, dest, tag int) error {
	return stagedFrom(ctx, "send", buf, func(h memspace.Block) (Request, error) { return c.Isend(h, dest, tag) })
}

// stagedFrom copies buf, which the host cannot touch, into a host
// stand-in, starts the operation of the call name that reads it (start),
// and waits for it; the stand-in is freed once the request has settled.
func stagedFrom(ctx context.Context, name string, buf memspace.Block, start func(h memspace.Block) (Request, error)) error {
	s := &staging{name: name}
	h, err := s.standIn(buf)
	if err != nil {
		return err
	}
	s.in(h, buf)
	if err := s.start(ctx); err != nil {
		_ = s.free()
		return err
	}
	r, err := start(h)
	if err != nil {
		_ = s.free()
		return err
	}
	_, err = Await(ctx, r)
	s.freeWhenSettled(r)
	return err
}

// recvStaged is Recv into a buffer the host cannot touch: it receives into
// a host stand-in and copies what arrived (Status.Count bytes, the
// delivered prefix of a truncated message included) into buf.
func recvStaged(ctx context.Context, c Comm, buf memspace.Block, source, tag int) (Status, error) {
	s := &staging{name: "recv"}
	h, err := s.standIn(buf)
	if err != nil {
		return Status{}, err
	}
	if buf.Len() > 0 {
		if err := checkPath(s.name, buf.Space(), h.Space()); err != nil {
			_ = s.free()
			return Status{}, err
		}
	}
	r, err := c.Irecv(h, source, tag)
	if err != nil {
		_ = s.free()
		return Status{}, err
	}
	st, err := Await(ctx, r)
	st, err = deliverStaged(ctx, s.name, buf, h, st, err)
	s.freeWhenSettled(r)
	return st, err
}

// deliverStaged copies the bytes a receive into the stand-in h delivered
// (the whole message, or the prefix of a truncated one) into buf.
func deliverStaged(ctx context.Context, name string, buf, h memspace.Block, st Status, err error) (Status, error) {
	if err != nil && !errors.Is(err, ErrTruncated) {
		return st, err
	}
	if n := min(st.Count, h.Len()); n > 0 {
		if cerr := copyOut(ctx, name, piece(buf, 0, n), piece(h, 0, n)); cerr != nil {
			return Status{}, cerr
		}
	}
	return st, err
}

// sendrecvStaged is Sendrecv with one buffer or both the host cannot
// touch: each such buffer is staged as by Send and Recv.
func sendrecvStaged(ctx context.Context, c Comm, sbuf memspace.Block, dest, stag int,
	rbuf memspace.Block, source, rtag int) (Status, error) {
	s := &staging{name: "sendrecv"}
	hs, hr := sbuf, rbuf
	var err error
	if !hostOK(sbuf) {
		if hs, err = s.standIn(sbuf); err != nil {
			return Status{}, err
		}
		s.in(hs, sbuf)
	}
	rStaged := !hostOK(rbuf)
	if rStaged {
		if hr, err = s.standIn(rbuf); err != nil {
			_ = s.free()
			return Status{}, err
		}
		if rbuf.Len() > 0 {
			if err := checkPath(s.name, rbuf.Space(), hr.Space()); err != nil {
				_ = s.free()
				return Status{}, err
			}
		}
	}
	if err := s.start(ctx); err != nil {
		_ = s.free()
		return Status{}, err
	}
	rr, err := c.Irecv(hr, source, rtag)
	if err != nil {
		_ = s.free()
		return Status{}, err
	}
	sr, err := c.Isend(hs, dest, stag)
	if err != nil {
		_ = rr.Cancel()
		_, _ = rr.Wait(context.Background())
		_ = s.free()
		return Status{}, err
	}
	st, err := waitAll2(ctx, rr, sr)
	if rStaged {
		st, err = deliverStaged(ctx, s.name, rbuf, hr, st, err)
	}
	s.freeWhenSettled(rr, sr)
	return st, err
}

// hostOK reports whether a point-to-point call takes b as it is: the host
// can touch it, or it is the zero Block (an empty buffer).
func hostOK(b memspace.Block) bool {
	return b.HostAccessible() || b.IsZero()
}

// wholeStaged runs a collective that is not staged in pieces: it copies in
// what the staging s recorded, runs op on the stand-ins and copies out.
func wholeStaged(ctx context.Context, s *staging, op func() error) error {
	if err := s.start(ctx); err != nil {
		_ = s.free()
		return err
	}
	return s.finish(ctx, op())
}

// gatherStaged is GatherBlock with a buffer the host cannot touch. At the
// root, recv is staged whole (copied out after) and send, when it is the
// root's slot of recv (in place), is that slot of recv's stand-in.
func gatherStaged(ctx context.Context, c Comm, send, recv memspace.Block, root int) error {
	s := &staging{name: "gather"}
	hs, hr, err := s.slotted(send, recv, root, true)
	if err != nil {
		return err
	}
	return wholeStaged(ctx, s, func() error { return GatherBlock(ctx, c, hs, hr, root) })
}

// allgatherStaged is AllgatherBlock with a buffer the host cannot touch.
func allgatherStaged(ctx context.Context, c Comm, send, recv memspace.Block, rank int) error {
	s := &staging{name: "allgather"}
	hs, hr, err := s.slotted(send, recv, rank, true)
	if err != nil {
		return err
	}
	return wholeStaged(ctx, s, func() error { return AllgatherBlock(ctx, c, hs, hr) })
}

// scatterStaged is ScatterBlock with a buffer the host cannot touch. At
// the root, send is staged whole (copied in), and recv, when it is the
// root's slot of send (in place), is that slot of send's stand-in.
func scatterStaged(ctx context.Context, c Comm, send, recv memspace.Block, root int) error {
	s := &staging{name: "scatter"}
	hr, hs, err := s.slotted(recv, send, root, false)
	if err != nil {
		return err
	}
	return wholeStaged(ctx, s, func() error { return ScatterBlock(ctx, c, hs, hr, root) })
}

// slotted stages part and whole, a block and the larger one of which it
// may be slot i (in place). With gather, whole is written (copied out) and
// part read (copied in); without, whole is read and part written. In
// place, part's stand-in is slot i of whole's, and only whole is copied:
// its slot i holds part.
func (s *staging) slotted(part, whole memspace.Block, i int, gather bool) (hp, hw memspace.Block, err error) {
	hp, hw = part, whole
	inPlace := memspace.Overlaps(part, whole) // the checks allow a slot alone
	if needsStage(whole) {
		if hw, err = s.standIn(whole); err != nil {
			return hp, hw, err
		}
		if gather {
			s.out(whole, hw)
		} else {
			s.in(hw, whole)
		}
		if inPlace {
			n := part.Len()
			hp = piece(hw, i*n, n)
			if gather {
				s.in(hp, part) // the root's own contribution
			}
			return hp, hw, nil
		}
	}
	if needsStage(part) {
		if hp, err = s.standIn(part); err != nil {
			_ = s.free()
			return hp, hw, err
		}
		if gather {
			s.in(hp, part)
		} else {
			s.out(part, hp)
		}
	}
	return hp, hw, nil
}

// pairStaged stages the send (read) and recv (written) of a collective
// whose buffers do not overlap (Alltoall, ReduceScatter).
func pairStaged(ctx context.Context, name string, send, recv memspace.Block, op func(hs, hr memspace.Block) error) error {
	s := &staging{name: name}
	hs, hr := send, recv
	var err error
	if needsStage(send) {
		if hs, err = s.standIn(send); err != nil {
			return err
		}
		s.in(hs, send)
	}
	if needsStage(recv) {
		if hr, err = s.standIn(recv); err != nil {
			_ = s.free()
			return err
		}
		s.out(recv, hr)
	}
	return wholeStaged(ctx, s, func() error { return op(hs, hr) })
}

// pipelined runs an element-wise collective (Allreduce, Reduce, Bcast) on
// host stand-ins of src (the n bytes it reads, or the zero Block) and dst
// (the n bytes it writes, or the zero Block), either of which, or both,
// the host cannot touch; src and dst may be the same block (in place).
// op runs the collective on host blocks of one piece: s read, d written,
// either the zero Block where src or dst is, and s == d in place.
//
// The n bytes go in pieces of chunk bytes rounded down to a multiple of
// unit (at least one unit; chunk 0: one piece of n bytes), so that a long
// buffer needs three pieces of host memory, not its length. Every rank
// cuts the same pieces, the sizes being equal on every rank: the callers
// pass a chunk only on a communicator every rank made with StageInPieces,
// and pipeline host buffers too (their pieces need no stand-in). Piece i
// runs in this goroutine while the copy in of piece i+1 and
// the copy out of piece i-1 run in two others; all three are done before
// piece i+1 starts. The three pieces use distinct stand-ins (slot i mod 3)
// or distinct ranges of the caller's buffers, so they never share a byte.
func pipelined(ctx context.Context, name string, n, unit, chunk int, src, dst memspace.Block,
	op func(ctx context.Context, s, d memspace.Block) error) error {
	p := newPipeline(name, n, unit, chunk, src, dst)
	slotSpace, err := p.check()
	if err != nil {
		return err
	}
	defer p.free()
	if err := p.alloc(slotSpace); err != nil {
		return err
	}
	return p.run(ctx, op)
}

// pipeline is one call of pipelined: how n bytes are cut into pieces, and
// where each piece runs.
type pipeline struct {
	name                 string
	n, chunk, pieces     int
	src, dst             memspace.Block
	srcStaged, dstStaged bool
	slots                []memspace.Block // the stand-ins; nil when the pieces run in dst
}

func newPipeline(name string, n, unit, chunk int, src, dst memspace.Block) *pipeline {
	if chunk > 0 {
		chunk = max(chunk/unit, 1) * unit
	} else {
		chunk = n
	}
	if chunk == 0 {
		chunk = 1
	}
	return &pipeline{
		name: name, n: n, chunk: chunk, pieces: (n + chunk - 1) / chunk,
		src: src, dst: dst,
		srcStaged: needsStage(src), dstStaged: needsStage(dst),
	}
}

// check returns where each piece runs: in a stand-in slot of the space it
// returns when dst (or, with no dst, src) needs staging, else (nil) in the
// host blocks themselves: dst, into which a staged src is copied, or src
// and dst as they are when neither needs staging (a host rank on a
// communicator that stages in pieces). It checks every path before
// anything is allocated or sent.
func (p *pipeline) check() (slotSpace memspace.Space, err error) {
	switch {
	case p.dstStaged:
		slotSpace = stage.Space(p.dst.Space())
	case p.dst.IsZero() && p.srcStaged:
		slotSpace = stage.Space(p.src.Space())
	}
	inDst := slotSpace
	if inDst == nil {
		inDst = p.dst.Space()
	}
	if p.srcStaged {
		if err := checkPath(p.name, inDst, p.src.Space()); err != nil {
			return nil, err
		}
	}
	if p.dstStaged {
		if err := checkPath(p.name, p.dst.Space(), slotSpace); err != nil {
			return nil, err
		}
	}
	return slotSpace, nil
}

// alloc allocates the stand-in slots in slotSpace, if not nil; free frees
// those allocated, also when alloc failed.
func (p *pipeline) alloc(slotSpace memspace.Space) error {
	if slotSpace == nil {
		return nil
	}
	slotLen := min(p.chunk, p.n)
	for range min(stageSlots, p.pieces) {
		b, err := stage.Alloc(slotSpace, slotLen)
		if err != nil {
			return stageErr(p.name, "staging %d bytes in %s: %w", slotLen, slotSpace.Name(), err)
		}
		p.slots = append(p.slots, b)
	}
	return nil
}

func (p *pipeline) free() {
	for _, b := range p.slots {
		_ = stage.Free(b)
	}
}

// at returns the offset and length of piece i.
func (p *pipeline) at(i int) (off, k int) { return i * p.chunk, min(p.chunk, p.n-i*p.chunk) }

// work returns the blocks piece i runs on: s (read) and d (written).
func (p *pipeline) work(i int) (s, d memspace.Block) {
	off, k := p.at(i)
	if p.slots == nil { // host blocks: a staged src is copied into dst
		d = piece(p.dst, off, k)
		if p.srcStaged {
			return d, d
		}
		return piece(p.src, off, k), d
	}
	w := piece(p.slots[i%len(p.slots)], 0, k)
	s = piece(p.src, off, k)
	if p.srcStaged {
		s = w
	}
	if !p.dst.IsZero() {
		d = w
	}
	return s, d
}

// in copies piece i of a staged src in.
func (p *pipeline) in(ctx context.Context, i int) error {
	if !p.srcStaged {
		return nil
	}
	off, k := p.at(i)
	s, _ := p.work(i)
	return copyIn(ctx, p.name, s, piece(p.src, off, k))
}

// out copies piece i out to a staged dst.
func (p *pipeline) out(ctx context.Context, i int) error {
	if !p.dstStaged {
		return nil
	}
	off, k := p.at(i)
	_, d := p.work(i)
	return copyOut(ctx, p.name, piece(p.dst, off, k), d)
}

// run runs op on each piece in turn, the copy in of the next and the copy
// out of the previous alongside.
func (p *pipeline) run(ctx context.Context, op func(ctx context.Context, s, d memspace.Block) error) error {
	if err := p.in(ctx, 0); err != nil {
		return err
	}
	for i := range p.pieces {
		if err := ctx.Err(); err != nil {
			return stageErr(p.name, "piece %d of %d: %w", i, p.pieces, err)
		}
		var wg sync.WaitGroup
		var inErr, outErr error
		if p.srcStaged && i+1 < p.pieces {
			wg.Go(func() { inErr = p.in(ctx, i+1) })
		}
		if p.dstStaged && i > 0 {
			wg.Go(func() { outErr = p.out(ctx, i-1) })
		}
		s, d := p.work(i)
		err := op(ctx, s, d)
		wg.Wait()
		for _, e := range []error{err, outErr, inErr} {
			if e != nil {
				return e
			}
		}
	}
	return p.out(ctx, p.pieces-1)
}

// allreduceStaged is AllreduceBlock with a buffer the host cannot touch,
// staged whole.
func allreduceStaged(ctx context.Context, c Comm, send, recv memspace.Block, dt DType, op Op) error {
	return pipelined(ctx, "allreduce", send.Len(), dt.Size(), 0, send, recv, func(ctx context.Context, s, d memspace.Block) error {
		return AllreduceBlock(ctx, c, s, d, dt, op)
	})
}

// reduceStaged is ReduceBlock with a buffer the host cannot touch, staged
// whole; recv is the zero Block away from the root.
func reduceStaged(ctx context.Context, c Comm, send, recv memspace.Block, dt DType, op Op, root int) error {
	return pipelined(ctx, "reduce", send.Len(), dt.Size(), 0, send, recv, func(ctx context.Context, s, d memspace.Block) error {
		return ReduceBlock(ctx, c, s, d, dt, op, root)
	})
}

// bcastPipelined is BcastBlock of buf in pieces of chunk bytes (one piece
// for chunk 0), staged where the host cannot touch buf: read at the root,
// written elsewhere. run runs the broadcast of one piece, on host memory.
func bcastPipelined(ctx context.Context, buf memspace.Block, root, rank, chunk int, run func(ctx context.Context, b memspace.Block) error) error {
	if rank == root {
		return pipelined(ctx, "bcast", buf.Len(), 1, chunk, buf, memspace.Block{}, func(ctx context.Context, s, _ memspace.Block) error {
			return run(ctx, s)
		})
	}
	return pipelined(ctx, "bcast", buf.Len(), 1, chunk, memspace.Block{}, buf, func(ctx context.Context, _, d memspace.Block) error {
		return run(ctx, d)
	})
}

// alltoallStaged is AlltoallBlock with a buffer the host cannot touch.
func alltoallStaged(ctx context.Context, c Comm, send, recv memspace.Block) error {
	return pairStaged(ctx, "alltoall", send, recv, func(hs, hr memspace.Block) error {
		return AlltoallBlock(ctx, c, hs, hr)
	})
}

// reduceScatterStaged is ReduceScatterBlock with a buffer the host cannot
// touch.
func reduceScatterStaged(ctx context.Context, c Comm, send, recv memspace.Block, dt DType, op Op) error {
	return pairStaged(ctx, "reduce-scatter", send, recv, func(hs, hr memspace.Block) error {
		return ReduceScatterBlock(ctx, c, hs, hr, dt, op)
	})
}
