package nodecoll

import (
	"context"

	"github.com/xpu-go/xpu/comm"
	"github.com/xpu-go/xpu/memspace"
)

// Ring is how many small steps a rank may run ahead of its slowest reader,
// and Tiny the largest step that goes through the ring (Bcast and Reduce
// up to Tiny bytes).
const (
	Ring = nodeRing
	Tiny = nodeTiny
)

// The collectives a host hands to a Node, each a collective of the host
// (Host.Collective) over host-accessible blocks. Barrier, Bcast and
// Allreduce serve every job; Reduce, Allgather and Alltoall only a job of
// one node (OneNode): the host runs its own otherwise.

// Barrier returns once every rank of the job has called it.
func (n *Node) Barrier(ctx context.Context) error {
	return n.run(ctx, "barrier", n.jobBarrier)
}

// Bcast copies buf on rank root to every rank of the job.
func (n *Node) Bcast(ctx context.Context, buf memspace.Block, root int) error {
	return n.run(ctx, "bcast", func(ctx context.Context, run abort) error { return n.jobBcast(ctx, run, buf, root) })
}

// Allreduce reduces send over every rank of the job into recv on every
// rank, with the same bits on every rank.
func (n *Node) Allreduce(ctx context.Context, send, recv memspace.Block, dt comm.DType, op comm.Op) error {
	return n.run(ctx, "allreduce", func(ctx context.Context, run abort) error {
		return n.jobAllreduce(ctx, run, send, recv, dt, op)
	})
}

// Reduce reduces send over every rank of a one-node job into recv on
// rank root.
func (n *Node) Reduce(ctx context.Context, send, recv memspace.Block, dt comm.DType, op comm.Op, root int) error {
	return n.run(ctx, "reduce", func(ctx context.Context, run abort) error {
		return n.reduce(ctx, run, send, recv, dt, op, n.index(root))
	})
}

// Allgather concatenates send of every rank of a one-node job into recv.
func (n *Node) Allgather(ctx context.Context, send, recv memspace.Block) error {
	return n.run(ctx, "allgather", func(ctx context.Context, run abort) error { return n.allgather(ctx, run, send, recv) })
}

// Alltoall sends part j of send to rank j of a one-node job.
func (n *Node) Alltoall(ctx context.Context, send, recv memspace.Block) error {
	return n.run(ctx, "alltoall", func(ctx context.Context, run abort) error { return n.alltoall(ctx, run, send, recv) })
}

// AllreduceBytes is Allreduce over host bytes, for a one-node job only
// (OneNode): send and recv have the same length and are the same bytes or
// disjoint.
func (n *Node) AllreduceBytes(ctx context.Context, send, recv []byte, dt comm.DType, op comm.Op) error {
	return n.run(ctx, "allreduce", func(ctx context.Context, run abort) error {
		return n.allreduceBytes(ctx, run, send, recv, dt, op)
	})
}

// BcastBytes is Bcast over host bytes, for a one-node job only (OneNode).
func (n *Node) BcastBytes(ctx context.Context, buf []byte, root int) error {
	return n.run(ctx, "bcast", func(ctx context.Context, run abort) error { return n.bcast(ctx, run, buf, n.index(root)) })
}
