package comm

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"unsafe"

	"github.com/xpu-go/xpu/flight"
	"github.com/xpu-go/xpu/impl"
	"github.com/xpu-go/xpu/memspace"
)

// This file holds the collective operations: typed functions over
// memspace.Buffer (Allreduce[T], …) and their Block-level forms
// (AllreduceBlock, …). Both validate their arguments, then use the
// communicator's Collectives method when it has one (found through
// wrappers) and the shared algorithms over Isend/Irecv otherwise, or when
// the method returns ErrFallback.
//
// A wrapper or backend that implements Collectives by delegating must call
// the Block-level function on the communicator it wraps, never on itself.

// Barrier returns once every rank of c has called it.
func Barrier(ctx context.Context, c Comm) (err error) {
	p, _, err := checkComm(ctx, c, "barrier")
	if err != nil {
		return err
	}
	t := postColl(c, flight.OpBarrier, flight.NoPeer, 0, "byte", "")
	defer func() { endFlight(t, err) }()
	if nc, ok := native(c); ok {
		if err := nc.Barrier(ctx); !isFallback(err) {
			return err
		}
	}
	if p == 1 {
		return nil
	}
	return barrierShared(ctx, c)
}

// BcastBlock copies buf on rank root into buf on every rank. Every rank
// passes a block of the same length.
//
// Buffers the host cannot touch (device memory) that no native collective
// takes are staged through host memory (see Device memory in the package
// documentation).
func BcastBlock(ctx context.Context, c Comm, buf memspace.Block, root int) (err error) {
	const op = "bcast"
	p, rank, err := checkComm(ctx, c, op)
	if err != nil {
		return err
	}
	if err := checkRoot(p, root, op); err != nil {
		return err
	}
	if buf.Len() == 0 {
		return nil
	}
	t := postColl(c, flight.OpBcast, root, int64(buf.Len()), "byte", "")
	defer func() { endFlight(t, err) }()
	if k := piecesOf(c); k > 0 && p > 1 && buf.Len() > k {
		return bcastPipelined(ctx, buf, root, rank, k, func(ctx context.Context, b memspace.Block) error {
			return bcastRun(ctx, c, p, b, root, rank)
		})
	}
	return bcastRun(ctx, c, p, buf, root, rank)
}

// bcastRun runs a broadcast whose arguments have been checked: natively,
// else staged whole when the host cannot touch buf, else shared.
func bcastRun(ctx context.Context, c Comm, p int, buf memspace.Block, root, rank int) error {
	// Bytes, a call, reads the block where the caller left it; an inlined
	// HostPointer would copy it first, and wait for the copy (ADR 47).
	if hc, ok := c.(HostCollectives); ok {
		if b, err := buf.Bytes(); err == nil && b != nil {
			if err := hc.BcastBytes(ctx, b, root); !isFallback(err) {
				return err
			}
		}
	}
	return bcastRest(ctx, c, p, buf, root, rank)
}

// bcastRest is bcastRun past HostCollectives.
func bcastRest(ctx context.Context, c Comm, p int, buf memspace.Block, root, rank int) error {
	if nc, ok := native(c); ok {
		if err := nc.Bcast(ctx, buf, root); !isFallback(err) {
			return err
		}
	}
	if p == 1 {
		return nil
	}
	if needsStage(buf) {
		return bcastPipelined(ctx, buf, root, rank, 0, func(ctx context.Context, b memspace.Block) error {
			return BcastBlock(ctx, c, b, root)
		})
	}
	return bcastShared(ctx, c, buf, root)
}

// ReduceBlock reduces send (elements of dt) element-wise with op over every
// rank into recv on rank root. recv must have send's length at the root,
// where it may be send itself (in place); it is ignored on the other ranks
// (pass the zero Block).
//
// Buffers the host cannot touch (device memory) that no native collective
// takes are staged through host memory (see Device memory in the package
// documentation).
func ReduceBlock(ctx context.Context, c Comm, send, recv memspace.Block, dt DType, op Op, root int) (err error) {
	const name = "reduce"
	p, rank, err := checkComm(ctx, c, name)
	if err != nil {
		return err
	}
	if err := checkRoot(p, root, name); err != nil {
		return err
	}
	sn := send.Len()
	if err := checkElems(name, dt, op, sn); err != nil {
		return err
	}
	if rank == root {
		if err := checkSameLen(name, sn, recv.Len()); err != nil {
			return err
		}
		if maybeShared(send.Addr(), sn, send.HostPointer(), recv.Addr(), recv.Len(), recv.HostPointer()) {
			if err := checkInPlace(name, send, recv); err != nil {
				return err
			}
		}
	} else {
		recv = memspace.Block{}
	}
	if send.Len() == 0 {
		return nil
	}
	t := postColl(c, flight.OpReduce, root, int64(send.Len()/dt.Size()), dt.String(), op.String())
	defer func() { endFlight(t, err) }()
	if k := piecesOf(c); k > 0 && sn > k {
		return pipelined(ctx, name, sn, dt.Size(), k, send, recv, func(ctx context.Context, s, d memspace.Block) error {
			return reduceRun(ctx, c, p, s, d, dt, op, root)
		})
	}
	return reduceRun(ctx, c, p, send, recv, dt, op, root)
}

// reduceRun runs a reduction whose arguments have been checked: natively,
// else staged whole when the host cannot touch a buffer, else shared.
func reduceRun(ctx context.Context, c Comm, p int, send, recv memspace.Block, dt DType, op Op, root int) error {
	if nc, ok := native(c); ok {
		if err := nc.Reduce(ctx, send, recv, dt, op, root); !isFallback(err) {
			return err
		}
	}
	if needsStage(send) || needsStage(recv) {
		return reduceStaged(ctx, c, send, recv, dt, op, root)
	}
	if p == 1 {
		return copyBlock(recv, send)
	}
	return reduceShared(ctx, c, send, recv, dt, op, root)
}

// AllreduceBlock reduces send (elements of dt) element-wise with op over
// every rank into recv on every rank. recv has send's length and may be
// send itself (in place). Every rank gets the bitwise-same result.
//
// Buffers the host cannot touch (device memory) that no native collective
// takes are staged through host memory (see Device memory in the package
// documentation).
func AllreduceBlock(ctx context.Context, c Comm, send, recv memspace.Block, dt DType, op Op) (err error) {
	const name = "allreduce"
	p, _, err := checkComm(ctx, c, name)
	if err != nil {
		return err
	}
	sn := send.Len()
	if err := checkElems(name, dt, op, sn); err != nil {
		return err
	}
	if err := checkSameLen(name, sn, recv.Len()); err != nil {
		return err
	}
	if maybeShared(send.Addr(), sn, send.HostPointer(), recv.Addr(), recv.Len(), recv.HostPointer()) {
		if err := checkInPlace(name, send, recv); err != nil {
			return err
		}
	}
	if send.Len() == 0 {
		return nil
	}
	t := postColl(c, flight.OpAllreduce, flight.NoPeer, int64(send.Len()/dt.Size()), dt.String(), op.String())
	defer func() { endFlight(t, err) }()
	if k := piecesOf(c); k > 0 && sn > k {
		return pipelined(ctx, name, sn, dt.Size(), k, send, recv, func(ctx context.Context, s, d memspace.Block) error {
			return allreduceRun(ctx, c, p, s, d, dt, op)
		})
	}
	return allreduceRun(ctx, c, p, send, recv, dt, op)
}

// allreduceRun runs an allreduce whose arguments have been checked:
// natively, else staged whole when the host cannot touch a buffer, else
// shared.
func allreduceRun(ctx context.Context, c Comm, p int, send, recv memspace.Block, dt DType, op Op) error {
	// Bytes, as in bcastRun; recv is asked only when send is on the host.
	if hc, ok := c.(HostCollectives); ok {
		if sb, err := send.Bytes(); err == nil && sb != nil {
			if rb, err := recv.Bytes(); err == nil && rb != nil {
				if err := hc.AllreduceBytes(ctx, sb, rb, dt, op); !isFallback(err) {
					return err
				}
			}
		}
	}
	return allreduceRest(ctx, c, p, send, recv, dt, op)
}

// allreduceRest is allreduceRun past HostCollectives.
func allreduceRest(ctx context.Context, c Comm, p int, send, recv memspace.Block, dt DType, op Op) error {
	if nc, ok := native(c); ok {
		if err := nc.Allreduce(ctx, send, recv, dt, op); !isFallback(err) {
			return err
		}
	}
	if needsStage(send) || needsStage(recv) {
		return allreduceStaged(ctx, c, send, recv, dt, op)
	}
	if p == 1 {
		return copyBlock(recv, send)
	}
	return allreduceShared(ctx, c, send, recv, dt, op)
}

// GatherBlock concatenates send of every rank, in rank order, into recv on
// rank root. recv has Size() times send's length at the root, where send
// may be the root's own slot of recv (in place); it is ignored on the
// other ranks (pass the zero Block).
//
// Buffers the host cannot touch (device memory) that no native collective
// takes are staged through host memory (see Device memory in the package
// documentation).
func GatherBlock(ctx context.Context, c Comm, send, recv memspace.Block, root int) (err error) {
	const name = "gather"
	p, rank, err := checkComm(ctx, c, name)
	if err != nil {
		return err
	}
	if recv, err = rootedArgs(name, "receive", recv, send, p, rank, root); err != nil {
		return err
	}
	if send.Len() == 0 {
		return nil
	}
	t := postColl(c, flight.OpGather, root, int64(send.Len()), "byte", "")
	defer func() { endFlight(t, err) }()
	return rootedRun(ctx, c, send, recv, root, Collectives.Gather, gatherStaged, gatherShared)
}

// ScatterBlock splits send on rank root into Size() equal parts and hands
// part i to rank i in recv. send has Size() times recv's length at the
// root, where recv may be the root's own slot of send (in place); it is
// ignored on the other ranks (pass the zero Block).
//
// Buffers the host cannot touch (device memory) that no native collective
// takes are staged through host memory (see Device memory in the package
// documentation).
func ScatterBlock(ctx context.Context, c Comm, send, recv memspace.Block, root int) (err error) {
	const name = "scatter"
	p, rank, err := checkComm(ctx, c, name)
	if err != nil {
		return err
	}
	if send, err = rootedArgs(name, "send", send, recv, p, rank, root); err != nil {
		return err
	}
	if recv.Len() == 0 {
		return nil
	}
	t := postColl(c, flight.OpScatter, root, int64(recv.Len()), "byte", "")
	defer func() { endFlight(t, err) }()
	return rootedRun(ctx, c, send, recv, root, Collectives.Scatter, scatterStaged, scatterShared)
}

// rootedRun runs a gather or scatter whose arguments have been checked:
// c's native collective (call) unless it declines with ErrFallback, else
// staged through host memory when a block needs it, else shared.
func rootedRun(ctx context.Context, c Comm, send, recv memspace.Block, root int,
	call func(Collectives, context.Context, memspace.Block, memspace.Block, int) error,
	staged, shared func(context.Context, Comm, memspace.Block, memspace.Block, int) error,
) error {
	if nc, ok := native(c); ok {
		if err := call(nc, ctx, send, recv, root); !isFallback(err) {
			return err
		}
	}
	if needsStage(send) || needsStage(recv) {
		return staged(ctx, c, send, recv, root)
	}
	return shared(ctx, c, send, recv, root)
}

// rootedArgs checks the buffers of a rooted gather or scatter on this
// rank. At the root, whole (the buffer in role wholeRole) holds Size()
// parts of part's length, and part may overlap it only as the root's own
// slot (in place). Elsewhere whole is unused: rootedArgs returns the zero
// Block in its place.
func rootedArgs(name, wholeRole string, whole, part memspace.Block, p, rank, root int) (memspace.Block, error) {
	if err := checkRoot(p, root, name); err != nil {
		return whole, err
	}
	if rank != root {
		return memspace.Block{}, nil
	}
	if err := checkMultiple(name, wholeRole, whole.Len(), part.Len(), p); err != nil {
		return whole, err
	}
	if maybeOverlap(part.Addr(), part.Len(), whole.Addr(), whole.Len()) {
		if err := checkSlot(name, part, whole, root); err != nil {
			return whole, err
		}
	}
	return whole, nil
}

// AllgatherBlock concatenates send of every rank, in rank order, into recv
// on every rank. recv has Size() times send's length; send may be this
// rank's own slot of recv (in place).
//
// Buffers the host cannot touch (device memory) that no native collective
// takes are staged through host memory (see Device memory in the package
// documentation).
func AllgatherBlock(ctx context.Context, c Comm, send, recv memspace.Block) (err error) {
	const name = "allgather"
	p, rank, err := checkComm(ctx, c, name)
	if err != nil {
		return err
	}
	if err := checkMultiple(name, "receive", recv.Len(), send.Len(), p); err != nil {
		return err
	}
	if maybeOverlap(send.Addr(), send.Len(), recv.Addr(), recv.Len()) {
		if err := checkSlot(name, send, recv, rank); err != nil {
			return err
		}
	}
	if send.Len() == 0 {
		return nil
	}
	t := postColl(c, flight.OpAllgather, flight.NoPeer, int64(send.Len()), "byte", "")
	defer func() { endFlight(t, err) }()
	if nc, ok := native(c); ok {
		if err := nc.Allgather(ctx, send, recv); !isFallback(err) {
			return err
		}
	}
	if needsStage(send) || needsStage(recv) {
		return allgatherStaged(ctx, c, send, recv, rank)
	}
	return allgatherShared(ctx, c, send, recv)
}

// AlltoallBlock sends part j of send (split in Size() equal parts) to rank
// j, which stores it as part i of its recv, where i is this rank. send and
// recv have the same length, a multiple of Size(), and do not overlap.
//
// Buffers the host cannot touch (device memory) that no native collective
// takes are staged through host memory (see Device memory in the package
// documentation).
func AlltoallBlock(ctx context.Context, c Comm, send, recv memspace.Block) (err error) {
	const name = "alltoall"
	p, _, err := checkComm(ctx, c, name)
	if err != nil {
		return err
	}
	n := send.Len()
	if err := checkSameLen(name, n, recv.Len()); err != nil {
		return err
	}
	if n%p != 0 {
		return notMultipleErr(name, n, p)
	}
	if maybeOverlap(send.Addr(), send.Len(), recv.Addr(), recv.Len()) {
		if err := checkDisjoint(name, send, recv); err != nil {
			return err
		}
	}
	if send.Len() == 0 {
		return nil
	}
	t := postColl(c, flight.OpAlltoall, flight.NoPeer, int64(send.Len()), "byte", "")
	defer func() { endFlight(t, err) }()
	if nc, ok := native(c); ok {
		if err := nc.Alltoall(ctx, send, recv); !isFallback(err) {
			return err
		}
	}
	if needsStage(send) || needsStage(recv) {
		return alltoallStaged(ctx, c, send, recv)
	}
	return alltoallShared(ctx, c, send, recv)
}

// ReduceScatterBlock reduces send (elements of dt, Size() blocks of recv's
// length) element-wise with op over every rank, and leaves block i of the
// result in recv on rank i. send and recv do not overlap.
//
// Buffers the host cannot touch (device memory) that no native collective
// takes are staged through host memory (see Device memory in the package
// documentation).
func ReduceScatterBlock(ctx context.Context, c Comm, send, recv memspace.Block, dt DType, op Op) (err error) {
	const name = "reduce-scatter"
	p, _, err := checkComm(ctx, c, name)
	if err != nil {
		return err
	}
	if err := checkElems(name, dt, op, recv.Len()); err != nil {
		return err
	}
	if err := checkMultiple(name, "send", send.Len(), recv.Len(), p); err != nil {
		return err
	}
	if maybeOverlap(send.Addr(), send.Len(), recv.Addr(), recv.Len()) {
		if err := checkDisjoint(name, send, recv); err != nil {
			return err
		}
	}
	if recv.Len() == 0 {
		return nil
	}
	t := postColl(c, flight.OpReduceScatter, flight.NoPeer, int64(recv.Len()/dt.Size()), dt.String(), op.String())
	defer func() { endFlight(t, err) }()
	if nc, ok := native(c); ok {
		if err := nc.ReduceScatter(ctx, send, recv, dt, op); !isFallback(err) {
			return err
		}
	}
	if needsStage(send) || needsStage(recv) {
		return reduceScatterStaged(ctx, c, send, recv, dt, op)
	}
	return reduceScatterShared(ctx, c, send, recv, dt, op)
}

// Bcast copies buf on rank root into buf on every rank. Every rank passes a
// buffer of the same length.
func Bcast[T any](ctx context.Context, c Comm, buf *memspace.Buffer[T], root int) error {
	if err := checkElem[T]("bcast"); err != nil {
		return err
	}
	if hc, ok := c.(HostCollectives); ok {
		if err, done := bcastHost(ctx, c, hc, buf, root); done {
			return err
		}
	}
	if err := checkBufOf("bcast", "buffer", buf); err != nil {
		return err
	}
	return BcastBlock(ctx, c, buf.Block(), root)
}

// Reduce reduces send element-wise with op over every rank into recv on
// rank root. recv has send's length at the root, where it may be send
// itself (in place); on the other ranks it is ignored and may be nil.
func Reduce[T Number](ctx context.Context, c Comm, send, recv *memspace.Buffer[T], op Op, root int) error {
	if err := checkBufOf("reduce", "send", send); err != nil {
		return err
	}
	var rb memspace.Block
	if isRoot(c, root) {
		if err := checkBufOf("reduce", "receive", recv); err != nil {
			return err
		}
		if recv.Len() != send.Len() {
			return lenErr("reduce", send.Len(), recv.Len())
		}
		rb = recv.Block()
	}
	return ReduceBlock(ctx, c, send.Block(), rb, DTypeOf[T](), op, root)
}

// Allreduce reduces send element-wise with op over every rank into recv on
// every rank. recv has send's length and may be send itself (in place).
// Every rank gets the bitwise-same result.
func Allreduce[T Number](ctx context.Context, c Comm, send, recv *memspace.Buffer[T], op Op) error {
	if hc, ok := c.(HostCollectives); ok {
		if err, done := allreduceHost(ctx, c, hc, send, recv, op); done {
			return err
		}
	}
	if err := checkNumbers("allreduce", send, recv); err != nil {
		return err
	}
	if recv.Len() != send.Len() {
		return lenErr("allreduce", send.Len(), recv.Len())
	}
	return AllreduceBlock(ctx, c, send.Block(), recv.Block(), DTypeOf[T](), op)
}

// Gather concatenates send of every rank, in rank order, into recv on rank
// root. recv has Size()×send.Len() elements at the root; on the other ranks
// it is ignored and may be nil.
func Gather[T any](ctx context.Context, c Comm, send, recv *memspace.Buffer[T], root int) error {
	if err := checkBuf("gather", "send", send); err != nil {
		return err
	}
	var rb memspace.Block
	if isRoot(c, root) {
		if err := checkBuf("gather", "receive", recv); err != nil {
			return err
		}
		rb = recv.Block()
	}
	return GatherBlock(ctx, c, send.Block(), rb, root)
}

// Scatter splits send on rank root into Size() equal parts and hands part i
// to rank i in recv. send has Size()×recv.Len() elements at the root; on
// the other ranks it is ignored and may be nil.
func Scatter[T any](ctx context.Context, c Comm, send, recv *memspace.Buffer[T], root int) error {
	if err := checkBuf("scatter", "receive", recv); err != nil {
		return err
	}
	var sb memspace.Block
	if isRoot(c, root) {
		if err := checkBuf("scatter", "send", send); err != nil {
			return err
		}
		sb = send.Block()
	}
	return ScatterBlock(ctx, c, sb, recv.Block(), root)
}

// Allgather concatenates send of every rank, in rank order, into recv on
// every rank. recv has Size()×send.Len() elements.
func Allgather[T any](ctx context.Context, c Comm, send, recv *memspace.Buffer[T]) error {
	if err := checkPair("allgather", send, recv); err != nil {
		return err
	}
	return AllgatherBlock(ctx, c, send.Block(), recv.Block())
}

// Alltoall sends part j of send (split in Size() equal parts) to rank j,
// which stores it as part i of its recv, where i is this rank. send and
// recv have the same length, a multiple of Size(), and do not overlap.
func Alltoall[T any](ctx context.Context, c Comm, send, recv *memspace.Buffer[T]) error {
	if err := checkPair("alltoall", send, recv); err != nil {
		return err
	}
	if validComm(c) && c.Size() > 0 && send.Len()%c.Size() != 0 {
		return fmt.Errorf("comm: alltoall of %d elements, not a multiple of %d ranks: %w", send.Len(), c.Size(), ErrInvalidArgument)
	}
	return AlltoallBlock(ctx, c, send.Block(), recv.Block())
}

// ReduceScatter reduces send element-wise with op over every rank and
// leaves block i of the result in recv on rank i: send has
// Size()×recv.Len() elements.
func ReduceScatter[T Number](ctx context.Context, c Comm, send, recv *memspace.Buffer[T], op Op) error {
	if err := checkNumbers("reduce-scatter", send, recv); err != nil {
		return err
	}
	return ReduceScatterBlock(ctx, c, send.Block(), recv.Block(), DTypeOf[T](), op)
}

// validComm reports whether c is neither nil nor a nil pointer.
func validComm(c Comm) bool {
	if c == nil {
		return false
	}
	v := reflect.ValueOf(c)
	return v.Kind() != reflect.Pointer || !v.IsNil()
}

// isRoot reports whether c is a valid communicator whose rank is root.
func isRoot(c Comm, root int) bool { return validComm(c) && c.Rank() == root }

// The checks below run on every call, before a native collective that may
// take well under a microsecond (MPI's on small vectors), so each keeps
// its success path short: plain comparisons on values already at hand
// (addresses and lengths before spaces, which are compared through an
// interface), and the error, with its formatting, built out of line.

// native returns the native collectives of c: its own methods when it has
// them (a type assertion that the compiler caches per call site), else
// the first found through wrappers.
func native(c Comm) (Collectives, bool) {
	if nc, ok := c.(Collectives); ok {
		return nc, true
	}
	return As[Collectives](c)
}

// checkComm validates the context and communicator, and fails early when
// ctx is already done. It returns the communicator's size and this rank.
func checkComm(ctx context.Context, c Comm, name string) (p, rank int, err error) {
	if ctx == nil || !validComm(c) {
		return 0, 0, commErr(ctx, c, name)
	}
	p, rank = c.Size(), c.Rank()
	if p <= 0 || uint(rank) >= uint(p) {
		return 0, 0, sizeErr(name, p, rank)
	}
	if err := ctx.Err(); err != nil {
		return 0, 0, ctxErr(name, err)
	}
	return p, rank, nil
}

//go:noinline
func commErr(ctx context.Context, c Comm, name string) error {
	if ctx == nil {
		return fmt.Errorf("comm: %s with a nil context: %w", name, ErrInvalidArgument)
	}
	return fmt.Errorf("comm: %s on a nil communicator %T: %w", name, c, ErrInvalidArgument)
}

//go:noinline
func sizeErr(name string, p, rank int) error {
	return fmt.Errorf("comm: %s on a communicator of size %d, rank %d: %w", name, p, rank, ErrInvalidArgument)
}

//go:noinline
func ctxErr(name string, err error) error { return fmt.Errorf("comm: %s: %w", name, err) }

// checkRoot validates a root rank of a group of p ranks.
func checkRoot(p, root int, name string) error {
	if uint(root) < uint(p) {
		return nil
	}
	return rootErr(name, root, p)
}

//go:noinline
func rootErr(name string, root, p int) error {
	return fmt.Errorf("comm: %s root: %w", name, impl.CheckRank(root, p, false))
}

// checkElems validates a reduction's element type and op, and that n
// bytes are a whole number of elements.
func checkElems(name string, dt DType, op Op, n int) error {
	// Element sizes are powers of two (1 to 16 bytes): a mask tests the
	// remainder.
	if sz := dt.Size(); sz > 0 && op >= Sum && op <= Max && n&(sz-1) == 0 && ((op != Min && op != Max) || !dt.IsComplex()) {
		return nil
	}
	return elemsErr(name, dt, op, n)
}

//go:noinline
func elemsErr(name string, dt DType, op Op, n int) error {
	if err := op.Check(dt); err != nil {
		return fmt.Errorf("comm: %s: %w", name, err)
	}
	return fmt.Errorf("comm: %s of %d bytes, not a whole number of %v: %w", name, n, dt, ErrInvalidArgument)
}

// The checks of blocks come in two parts: a test on a block's address and
// length, inlined where the Block-level function holds them, and the full
// check, a call made only when the test cannot settle the case. (A Block
// is five words: handed to a helper, even an inlined one, or addressed, it
// is copied through memory, which costs more than the tests.)

func checkSameLen(name string, send, recv int) error {
	if send != recv {
		return sameLenErr(name, send, recv)
	}
	return nil
}

//go:noinline
func sameLenErr(name string, send, recv int) error {
	return fmt.Errorf("comm: %s from %d bytes into %d: %w", name, send, recv, ErrInvalidArgument)
}

func lenErr(name string, send, recv int) error {
	return fmt.Errorf("comm: %s from %d elements into %d: %w", name, send, recv, ErrInvalidArgument)
}

//go:noinline
func notMultipleErr(name string, n, p int) error {
	return fmt.Errorf("comm: %s of %d bytes, not a multiple of %d ranks: %w", name, n, p, ErrInvalidArgument)
}

// checkMultiple checks that big bytes (of the buffer named what) are p
// times small.
func checkMultiple(name, what string, big, small, p int) error {
	if big != p*small {
		return multipleErr(name, what, big, small, p)
	}
	return nil
}

//go:noinline
func multipleErr(name, what string, big, small, p int) error {
	return fmt.Errorf("comm: %s: %s buffer of %d bytes, want %d ranks × %d: %w",
		name, what, big, p, small, ErrInvalidArgument)
}

// maybeOverlap reports whether the a bytes at aa and the b bytes at ba
// may share a byte: memspace.Overlaps without its comparison of spaces,
// so that !maybeOverlap implies !memspace.Overlaps.
func maybeOverlap(aa memspace.Addr, a int, ba memspace.Addr, b int) bool {
	return a != 0 && b != 0 && aa < ba+memspace.Addr(b) && ba < aa+memspace.Addr(a)
}

// maybeShared reports whether checkInPlace has anything to say about
// blocks a and b, given their addresses, lengths and host mappings: they
// may share a byte and are not plainly the same block. Two blocks with the
// same address, length and host mapping are the same block, or are in
// different spaces and share nothing; either is allowed.
func maybeShared(aa memspace.Addr, a int, ah unsafe.Pointer, ba memspace.Addr, b int, bh unsafe.Pointer) bool {
	return maybeOverlap(aa, a, ba, b) && !(aa == ba && a == b && ah == bh)
}

// checkInPlace allows send and recv to be the same block or disjoint.
//
//go:noinline
func checkInPlace(name string, send, recv memspace.Block) error {
	if !sameBlock(send, recv) && memspace.Overlaps(send, recv) {
		return fmt.Errorf("comm: %s: send %v partially overlaps receive %v: %w", name, send, recv, ErrInvalidArgument)
	}
	return nil
}

// checkSlot allows part to be slot i of whole (in place) or disjoint from
// it; len(whole) is a multiple of len(part).
//
//go:noinline
func checkSlot(name string, part, whole memspace.Block, i int) error {
	if !memspace.Overlaps(part, whole) {
		return nil
	}
	n := part.Len()
	if slot, err := whole.Slice(i*n, n); err == nil && sameBlock(part, slot) {
		return nil
	}
	return fmt.Errorf("comm: %s: %v overlaps %v other than as slot %d: %w", name, part, whole, i, ErrInvalidArgument)
}

//go:noinline
func checkDisjoint(name string, send, recv memspace.Block) error {
	if memspace.Overlaps(send, recv) {
		return fmt.Errorf("comm: %s: send %v overlaps receive %v: %w", name, send, recv, ErrInvalidArgument)
	}
	return nil
}

// checkPair validates a send and a receive buffer.
func checkPair[T any](name string, send, recv *memspace.Buffer[T]) error {
	if err := checkBuf(name, "send", send); err != nil {
		return err
	}
	return checkBufOf(name, "receive", recv)
}

// checkNumbers is checkPair for buffers of a Number type, which is a
// valid element type: only the buffers are checked (the type's check, a
// type switch through the instantiation's dictionary, costs a small
// reduction several nanoseconds).
func checkNumbers[T Number](name string, send, recv *memspace.Buffer[T]) error {
	if err := checkBufOf(name, "send", send); err != nil {
		return err
	}
	return checkBufOf(name, "receive", recv)
}

// checkBuf validates the element type and a buffer (named what): it may
// be neither nil nor freed.
func checkBuf[T any](name, what string, b *memspace.Buffer[T]) error {
	if err := checkElem[T](name); err != nil {
		return err
	}
	return checkBufOf(name, what, b)
}

// checkElem validates the element type T of collective name.
func checkElem[T any](name string) error {
	if err := memspace.CheckElem[T](); err != nil {
		return fmt.Errorf("comm: %s: %w", name, err)
	}
	return nil
}

// checkBufOf is checkBuf for a buffer whose element type has been
// checked.
func checkBufOf[T any](name, what string, b *memspace.Buffer[T]) error {
	if b == nil {
		return fmt.Errorf("comm: %s: nil %s buffer: %w", name, what, ErrInvalidArgument)
	}
	if _, err := b.Host(); errors.Is(err, ErrClosed) {
		return fmt.Errorf("comm: %s: %s buffer: %w", name, what, err)
	}
	return nil
}
