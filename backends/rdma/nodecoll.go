package rdma

import (
	"context"
	"errors"

	"github.com/xpu-go/xpu/backends/tcp"
	"github.com/xpu-go/xpu/comm"
	"github.com/xpu-go/xpu/memspace"
	"github.com/xpu-go/xpu/xerr"
)

// Collectives of one machine.
//
// The ranks of a job join through a job of the tcp backend (join.go). When
// every rank runs on one machine, that job's collectives run in a region of
// shared memory that all of them map (backends/tcp, nodecoll.go), with no
// message at all: 64 MiB summed over 4 processes in a tenth of the time of
// a ring over soft-RoCE, as shared memory beats the loopback of any
// network device (the processes of one machine would otherwise move every
// byte through the NIC and back). A rank then keeps the tcp job and runs
// its collectives there (Comm's comm.Collectives methods), as MPI
// libraries run a node's collectives in shared memory whatever their
// network; its point-to-point messages and one-sided transfers stay on the
// queue pairs. Otherwise — ranks on more than one machine, links forced to
// TCP (XPU_LINKS=tcp, which therefore also keeps the collectives on the
// queue pairs), a region that could not be mapped, an in-process group —
// the tcp job is closed once the queue pairs are connected, and the
// collectives run the shared algorithms of package comm over the queue
// pairs (comm.ErrFallback).
//
// A kept job's collectives fail as the tcp backend's do: with ErrPeerLost
// when a peer dies (its links end) or freezes (its heartbeats stop). They
// also fail once this rank revokes its collectives (a peer lost on the
// queue pairs, or another rank's revocation): revoke cancels the one
// running, so that a rank never waits in the region for a rank that has
// given up on the collective.

// nodeJob is the tcp job a rank of a one-machine job keeps.
type nodeJob struct {
	tc *tcp.Comm
	// revoked ends, with the revocation as its cause, when the rank
	// revokes its collectives (with ErrClosed when it closes); cancel
	// ends it.
	revoked context.Context
	cancel  context.CancelCauseFunc
}

func newNodeJob(tc *tcp.Comm) *nodeJob {
	ctx, cancel := context.WithCancelCause(context.Background())
	return &nodeJob{tc: tc, revoked: ctx, cancel: cancel}
}

// errOnQueuePairs declines a collective to package comm's shared
// algorithms, which run it over the queue pairs.
var errOnQueuePairs = xerr.Detail(comm.ErrFallback, "rdma: collectives over the queue pairs")

// OneNode reports whether c runs its collectives in shared memory: every
// rank of its job runs on this machine, and the ranks mapped a region for
// them (see the package documentation).
func (c *Comm) OneNode() bool { return c.node != nil }

// onNode runs a collective f on the kept tcp job, or declines it when
// there is none.
func (c *Comm) onNode(ctx context.Context, op string, f func(context.Context, *tcp.Comm) error) error {
	n := c.node
	if n == nil {
		return errOnQueuePairs
	}
	c.mu.Lock()
	closed, revoked := c.closed, c.revoked
	c.mu.Unlock()
	switch {
	case closed:
		return c.closedErr(op)
	case revoked != nil:
		return revoked
	}
	run, cancel := context.WithCancelCause(ctx)
	stop := context.AfterFunc(n.revoked, func() { cancel(context.Cause(n.revoked)) })
	err := f(run, n.tc)
	stop()
	cancel(nil)
	if err != nil {
		c.mu.Lock()
		revoked = c.revoked
		c.mu.Unlock()
		if revoked != nil && ctx.Err() == nil && !errors.Is(err, comm.ErrFallback) {
			return revoked
		}
	}
	return err
}

// Barrier blocks until every rank has called it.
func (c *Comm) Barrier(ctx context.Context) error {
	return c.onNode(ctx, "barrier", func(ctx context.Context, t *tcp.Comm) error { return t.Barrier(ctx) })
}

// Bcast copies buf of rank root into buf of every rank.
func (c *Comm) Bcast(ctx context.Context, buf memspace.Block, root int) error {
	return c.onNode(ctx, "bcast", func(ctx context.Context, t *tcp.Comm) error { return t.Bcast(ctx, buf, root) })
}

// Reduce combines send of every rank with op into recv of rank root.
func (c *Comm) Reduce(ctx context.Context, send, recv memspace.Block, dt comm.DType, op comm.Op, root int) error {
	return c.onNode(ctx, "reduce", func(ctx context.Context, t *tcp.Comm) error { return t.Reduce(ctx, send, recv, dt, op, root) })
}

// Allreduce combines send of every rank with op into recv of every rank.
func (c *Comm) Allreduce(ctx context.Context, send, recv memspace.Block, dt comm.DType, op comm.Op) error {
	return c.onNode(ctx, "allreduce", func(ctx context.Context, t *tcp.Comm) error { return t.Allreduce(ctx, send, recv, dt, op) })
}

// Gather concatenates send of every rank, in rank order, into recv of
// rank root.
func (c *Comm) Gather(ctx context.Context, send, recv memspace.Block, root int) error {
	return c.onNode(ctx, "gather", func(ctx context.Context, t *tcp.Comm) error { return t.Gather(ctx, send, recv, root) })
}

// Scatter sends part r of send of rank root into recv of rank r.
func (c *Comm) Scatter(ctx context.Context, send, recv memspace.Block, root int) error {
	return c.onNode(ctx, "scatter", func(ctx context.Context, t *tcp.Comm) error { return t.Scatter(ctx, send, recv, root) })
}

// Allgather concatenates send of every rank, in rank order, into recv of
// every rank.
func (c *Comm) Allgather(ctx context.Context, send, recv memspace.Block) error {
	return c.onNode(ctx, "allgather", func(ctx context.Context, t *tcp.Comm) error { return t.Allgather(ctx, send, recv) })
}

// Alltoall sends part j of send of every rank into part r of recv of rank j,
// r being the sender.
func (c *Comm) Alltoall(ctx context.Context, send, recv memspace.Block) error {
	return c.onNode(ctx, "alltoall", func(ctx context.Context, t *tcp.Comm) error { return t.Alltoall(ctx, send, recv) })
}

// ReduceScatter combines send of every rank with op and leaves part r of
// the result in recv of rank r.
func (c *Comm) ReduceScatter(ctx context.Context, send, recv memspace.Block, dt comm.DType, op comm.Op) error {
	return c.onNode(ctx, "reducescatter", func(ctx context.Context, t *tcp.Comm) error {
		return t.ReduceScatter(ctx, send, recv, dt, op)
	})
}

var _ comm.Collectives = (*Comm)(nil)
