package comm

import (
	"context"
	"errors"
	"fmt"
	"reflect"

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
func Barrier(ctx context.Context, c Comm) error {
	if err := checkComm(ctx, c, "barrier"); err != nil {
		return err
	}
	if nc, ok := As[Collectives](c); ok {
		if err := nc.Barrier(ctx); !isFallback(err) {
			return err
		}
	}
	if c.Size() == 1 {
		return nil
	}
	return barrierShared(ctx, c)
}

// BcastBlock copies buf on rank root into buf on every rank. Every rank
// passes a block of the same length.
func BcastBlock(ctx context.Context, c Comm, buf memspace.Block, root int) error {
	const op = "bcast"
	if err := checkComm(ctx, c, op); err != nil {
		return err
	}
	if err := checkRoot(c, root, op); err != nil {
		return err
	}
	if buf.Len() == 0 {
		return nil
	}
	if nc, ok := As[Collectives](c); ok {
		if err := nc.Bcast(ctx, buf, root); !isFallback(err) {
			return err
		}
	}
	if err := checkHost(op, buf); err != nil {
		return err
	}
	if c.Size() == 1 {
		return nil
	}
	return bcastShared(ctx, c, buf, root)
}

// ReduceBlock reduces send (elements of dt) element-wise with op over every
// rank into recv on rank root. recv must have send's length at the root,
// where it may be send itself (in place); it is ignored on the other ranks
// (pass the zero Block).
func ReduceBlock(ctx context.Context, c Comm, send, recv memspace.Block, dt DType, op Op, root int) error {
	const name = "reduce"
	if err := checkComm(ctx, c, name); err != nil {
		return err
	}
	if err := checkRoot(c, root, name); err != nil {
		return err
	}
	if err := checkElems(name, dt, op, send); err != nil {
		return err
	}
	if c.Rank() == root {
		if err := checkSameLen(name, send, recv); err != nil {
			return err
		}
		if err := checkInPlace(name, send, recv); err != nil {
			return err
		}
	} else {
		recv = memspace.Block{}
	}
	if send.Len() == 0 {
		return nil
	}
	if nc, ok := As[Collectives](c); ok {
		if err := nc.Reduce(ctx, send, recv, dt, op, root); !isFallback(err) {
			return err
		}
	}
	if err := checkHost(name, send, recv); err != nil {
		return err
	}
	if c.Size() == 1 {
		return copyBlock(recv, send)
	}
	return reduceShared(ctx, c, send, recv, dt, op, root)
}

// AllreduceBlock reduces send (elements of dt) element-wise with op over
// every rank into recv on every rank. recv has send's length and may be
// send itself (in place). Every rank gets the bitwise-same result.
func AllreduceBlock(ctx context.Context, c Comm, send, recv memspace.Block, dt DType, op Op) error {
	const name = "allreduce"
	if err := checkComm(ctx, c, name); err != nil {
		return err
	}
	if err := checkElems(name, dt, op, send); err != nil {
		return err
	}
	if err := checkSameLen(name, send, recv); err != nil {
		return err
	}
	if err := checkInPlace(name, send, recv); err != nil {
		return err
	}
	if send.Len() == 0 {
		return nil
	}
	if nc, ok := As[Collectives](c); ok {
		if err := nc.Allreduce(ctx, send, recv, dt, op); !isFallback(err) {
			return err
		}
	}
	if err := checkHost(name, send, recv); err != nil {
		return err
	}
	if c.Size() == 1 {
		return copyBlock(recv, send)
	}
	return allreduceShared(ctx, c, send, recv, dt, op)
}

// GatherBlock concatenates send of every rank, in rank order, into recv on
// rank root. recv has Size() times send's length at the root, where send
// may be the root's own slot of recv (in place); it is ignored on the
// other ranks (pass the zero Block).
func GatherBlock(ctx context.Context, c Comm, send, recv memspace.Block, root int) error {
	const name = "gather"
	if err := checkComm(ctx, c, name); err != nil {
		return err
	}
	if err := checkRoot(c, root, name); err != nil {
		return err
	}
	if c.Rank() == root {
		if err := checkMultiple(name, "receive", recv, send, c.Size()); err != nil {
			return err
		}
		if err := checkSlot(name, send, recv, root); err != nil {
			return err
		}
	} else {
		recv = memspace.Block{}
	}
	if send.Len() == 0 {
		return nil
	}
	if nc, ok := As[Collectives](c); ok {
		if err := nc.Gather(ctx, send, recv, root); !isFallback(err) {
			return err
		}
	}
	if err := checkHost(name, send, recv); err != nil {
		return err
	}
	return gatherShared(ctx, c, send, recv, root)
}

// ScatterBlock splits send on rank root into Size() equal parts and hands
// part i to rank i in recv. send has Size() times recv's length at the
// root, where recv may be the root's own slot of send (in place); it is
// ignored on the other ranks (pass the zero Block).
func ScatterBlock(ctx context.Context, c Comm, send, recv memspace.Block, root int) error {
	const name = "scatter"
	if err := checkComm(ctx, c, name); err != nil {
		return err
	}
	if err := checkRoot(c, root, name); err != nil {
		return err
	}
	if c.Rank() == root {
		if err := checkMultiple(name, "send", send, recv, c.Size()); err != nil {
			return err
		}
		if err := checkSlot(name, recv, send, root); err != nil {
			return err
		}
	} else {
		send = memspace.Block{}
	}
	if recv.Len() == 0 {
		return nil
	}
	if nc, ok := As[Collectives](c); ok {
		if err := nc.Scatter(ctx, send, recv, root); !isFallback(err) {
			return err
		}
	}
	if err := checkHost(name, send, recv); err != nil {
		return err
	}
	return scatterShared(ctx, c, send, recv, root)
}

// AllgatherBlock concatenates send of every rank, in rank order, into recv
// on every rank. recv has Size() times send's length; send may be this
// rank's own slot of recv (in place).
func AllgatherBlock(ctx context.Context, c Comm, send, recv memspace.Block) error {
	const name = "allgather"
	if err := checkComm(ctx, c, name); err != nil {
		return err
	}
	if err := checkMultiple(name, "receive", recv, send, c.Size()); err != nil {
		return err
	}
	if err := checkSlot(name, send, recv, c.Rank()); err != nil {
		return err
	}
	if send.Len() == 0 {
		return nil
	}
	if nc, ok := As[Collectives](c); ok {
		if err := nc.Allgather(ctx, send, recv); !isFallback(err) {
			return err
		}
	}
	if err := checkHost(name, send, recv); err != nil {
		return err
	}
	return allgatherShared(ctx, c, send, recv)
}

// AlltoallBlock sends part j of send (split in Size() equal parts) to rank
// j, which stores it as part i of its recv, where i is this rank. send and
// recv have the same length, a multiple of Size(), and do not overlap.
func AlltoallBlock(ctx context.Context, c Comm, send, recv memspace.Block) error {
	const name = "alltoall"
	if err := checkComm(ctx, c, name); err != nil {
		return err
	}
	if err := checkSameLen(name, send, recv); err != nil {
		return err
	}
	if p := c.Size(); send.Len()%p != 0 {
		return fmt.Errorf("comm: %s of %d bytes, not a multiple of %d ranks: %w", name, send.Len(), p, ErrInvalidArgument)
	}
	if err := checkDisjoint(name, send, recv); err != nil {
		return err
	}
	if send.Len() == 0 {
		return nil
	}
	if nc, ok := As[Collectives](c); ok {
		if err := nc.Alltoall(ctx, send, recv); !isFallback(err) {
			return err
		}
	}
	if err := checkHost(name, send, recv); err != nil {
		return err
	}
	return alltoallShared(ctx, c, send, recv)
}

// ReduceScatterBlock reduces send (elements of dt, Size() blocks of recv's
// length) element-wise with op over every rank, and leaves block i of the
// result in recv on rank i. send and recv do not overlap.
func ReduceScatterBlock(ctx context.Context, c Comm, send, recv memspace.Block, dt DType, op Op) error {
	const name = "reduce-scatter"
	if err := checkComm(ctx, c, name); err != nil {
		return err
	}
	if err := checkElems(name, dt, op, recv); err != nil {
		return err
	}
	if err := checkMultiple(name, "send", send, recv, c.Size()); err != nil {
		return err
	}
	if err := checkDisjoint(name, send, recv); err != nil {
		return err
	}
	if recv.Len() == 0 {
		return nil
	}
	if nc, ok := As[Collectives](c); ok {
		if err := nc.ReduceScatter(ctx, send, recv, dt, op); !isFallback(err) {
			return err
		}
	}
	if err := checkHost(name, send, recv); err != nil {
		return err
	}
	return reduceScatterShared(ctx, c, send, recv, dt, op)
}

// Bcast copies buf on rank root into buf on every rank. Every rank passes a
// buffer of the same length.
func Bcast[T any](ctx context.Context, c Comm, buf *memspace.Buffer[T], root int) error {
	if err := checkBuf("bcast", "buffer", buf); err != nil {
		return err
	}
	return BcastBlock(ctx, c, buf.Block(), root)
}

// Reduce reduces send element-wise with op over every rank into recv on
// rank root. recv has send's length at the root, where it may be send
// itself (in place); on the other ranks it is ignored and may be nil.
func Reduce[T Number](ctx context.Context, c Comm, send, recv *memspace.Buffer[T], op Op, root int) error {
	if err := checkBuf("reduce", "send", send); err != nil {
		return err
	}
	var rb memspace.Block
	if isRoot(c, root) {
		if err := checkBuf("reduce", "receive", recv); err != nil {
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
	if err := checkPair("allreduce", send, recv); err != nil {
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
	if err := checkPair("reduce-scatter", send, recv); err != nil {
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

// checkComm validates the context and communicator, and fails early when
// ctx is already done.
func checkComm(ctx context.Context, c Comm, name string) error {
	if ctx == nil {
		return fmt.Errorf("comm: %s with a nil context: %w", name, ErrInvalidArgument)
	}
	if !validComm(c) {
		return fmt.Errorf("comm: %s on a nil communicator %T: %w", name, c, ErrInvalidArgument)
	}
	if p := c.Size(); p <= 0 || c.Rank() < 0 || c.Rank() >= p {
		return fmt.Errorf("comm: %s on a communicator of size %d, rank %d: %w", name, p, c.Rank(), ErrInvalidArgument)
	}
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("comm: %s: %w", name, err)
	}
	return nil
}

func checkRoot(c Comm, root int, name string) error {
	if err := CheckRank(root, c.Size(), false); err != nil {
		return fmt.Errorf("comm: %s root: %w", name, err)
	}
	return nil
}

// checkElems validates a reduction's element type and op, and that b is a
// whole number of elements.
func checkElems(name string, dt DType, op Op, b memspace.Block) error {
	if err := CheckOp(op, dt); err != nil {
		return fmt.Errorf("comm: %s: %w", name, err)
	}
	if b.Len()%dt.Size() != 0 {
		return fmt.Errorf("comm: %s of %d bytes, not a whole number of %v: %w", name, b.Len(), dt, ErrInvalidArgument)
	}
	return nil
}

func checkSameLen(name string, send, recv memspace.Block) error {
	if send.Len() != recv.Len() {
		return fmt.Errorf("comm: %s from %d bytes into %d: %w", name, send.Len(), recv.Len(), ErrInvalidArgument)
	}
	return nil
}

func lenErr(name string, send, recv int) error {
	return fmt.Errorf("comm: %s from %d elements into %d: %w", name, send, recv, ErrInvalidArgument)
}

// checkMultiple checks that big (named what) is p times small.
func checkMultiple(name, what string, big, small memspace.Block, p int) error {
	if big.Len() != p*small.Len() {
		return fmt.Errorf("comm: %s: %s buffer of %d bytes, want %d ranks × %d: %w",
			name, what, big.Len(), p, small.Len(), ErrInvalidArgument)
	}
	return nil
}

// checkInPlace allows send and recv to be the same block or disjoint.
func checkInPlace(name string, send, recv memspace.Block) error {
	if !sameBlock(send, recv) && memspace.Overlaps(send, recv) {
		return fmt.Errorf("comm: %s: send %v partially overlaps receive %v: %w", name, send, recv, ErrInvalidArgument)
	}
	return nil
}

// checkSlot allows part to be slot i of whole (in place) or disjoint from
// it; len(whole) is a multiple of len(part).
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

func checkDisjoint(name string, send, recv memspace.Block) error {
	if memspace.Overlaps(send, recv) {
		return fmt.Errorf("comm: %s: send %v overlaps receive %v: %w", name, send, recv, ErrInvalidArgument)
	}
	return nil
}

// checkHost reports ErrNotSupported for blocks the shared algorithms
// cannot run on (device memory, when no native collective took them).
func checkHost(name string, bs ...memspace.Block) error {
	for _, b := range bs {
		if b.Len() > 0 && !b.HostAccessible() {
			return fmt.Errorf("comm: %s: no native collective for %v, and the shared algorithms need host-accessible memory: %w",
				name, b, ErrNotSupported)
		}
	}
	return nil
}

// checkPair validates a send and a receive buffer.
func checkPair[T any](name string, send, recv *memspace.Buffer[T]) error {
	if err := checkBuf(name, "send", send); err != nil {
		return err
	}
	return checkBuf(name, "receive", recv)
}

// checkBuf validates the element type and a buffer (named what): it may
// be neither nil nor freed.
func checkBuf[T any](name, what string, b *memspace.Buffer[T]) error {
	if err := memspace.CheckElem[T](); err != nil {
		return fmt.Errorf("comm: %s: %w", name, err)
	}
	if b == nil {
		return fmt.Errorf("comm: %s: nil %s buffer: %w", name, what, ErrInvalidArgument)
	}
	if _, err := b.Host(); errors.Is(err, ErrClosed) {
		return fmt.Errorf("comm: %s: %s buffer: %w", name, what, err)
	}
	return nil
}
