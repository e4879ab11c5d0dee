package rdma

import (
	"context"
	"errors"
	"runtime"
	"sync/atomic"

	"github.com/xpu-go/xpu/comm"
	"github.com/xpu-go/xpu/internal/nodecoll"
	"github.com/xpu-go/xpu/internal/shm"
	"github.com/xpu-go/xpu/memspace"
	"github.com/xpu-go/xpu/xerr"
)

// Collectives of one machine.
//
// When every rank of a job runs on this machine, its collectives run in a
// region of shared memory that all of them map (package internal/nodecoll),
// with no message at all: 64 MiB summed over 4 processes in a tenth of the
// time of a ring over soft-RoCE, as shared memory beats the loopback of any
// network device (the processes of one machine would otherwise move every
// byte through the NIC and back). The ranks set the region up as they join
// (joinJob), over their own queue pairs: they exchange the keys of their
// nodes (shm.NodeKey of XPU_NODE), and the lowest rank offers the region to
// the others. Point-to-point messages and one-sided transfers stay on the
// queue pairs, as MPI libraries run a node's collectives in shared memory
// whatever their network. Otherwise — ranks on more than one machine,
// XPU_LINKS=tcp (which keeps the collectives on the queue pairs), a region
// that could not be mapped, an in-process group — the collectives run the
// shared algorithms of package comm over the queue pairs (comm.ErrFallback),
// and so do Gather, Scatter and ReduceScatter in every case.
//
// A collective in the region fails with ErrPeerLost once a rank of the job
// is lost, whether it said goodbye or failed, or this rank revokes its
// collectives (another rank's revocation): linkFailed and revoke cancel the
// one running, so that a rank never waits in the region for a rank that
// has left or given up on the collective, and later collectives fail at
// once. A wait about to sleep arms the completion queue (Idle), so that the
// news reaches the progress engine at once.

// nodeJob is a one-machine job's collectives in its region, hosted by the
// rank itself.
type nodeJob struct {
	c *Comm
	n *nodecoll.Node
	// revoked ends, with the revocation as its cause, when the rank
	// revokes its collectives (with ErrClosed when it closes); cancel
	// ends it.
	revoked context.Context
	cancel  context.CancelCauseFunc
	// run is the collective in progress (one at a time): its context's
	// cancel and the stop of its link to revoked.
	runCancel context.CancelCauseFunc
	runStop   func() bool
	yield     atomic.Bool
}

var _ nodecoll.Host = (*nodeJob)(nil)

// setupNode sets up the collectives of a job of one machine, or leaves
// them to the queue pairs (nil).
func setupNode(ctx context.Context, c *Comm, jc jobConfig) (*nodeJob, error) {
	if !jc.shared || c.size < 2 {
		return nil, nil
	}
	rctx, cancel := context.WithCancelCause(context.Background())
	j := &nodeJob{c: c, revoked: rctx, cancel: cancel}
	members, err := nodecoll.Members(ctx, j, shm.NodeKey(jc.node))
	if err == nil && len(members) == c.size {
		j.yield.Store(len(members) > runtime.NumCPU())
		j.n, err = nodecoll.Setup(ctx, j, members, nodecoll.Options{Spin: jc.shmSpin, Yield: &j.yield})
	}
	if err != nil || j.n == nil || !j.n.OneNode() {
		if j.n != nil {
			j.n.Close()
		}
		cancel(nil)
		return nil, err
	}
	return j, nil
}

func (j *nodeJob) Rank() int { return j.c.rank }
func (j *nodeJob) Size() int { return j.c.size }
func (j *nodeJob) Isend(b memspace.Block, dest, tag int) (comm.Request, error) {
	return j.c.Isend(b, dest, tag)
}
func (j *nodeJob) Irecv(b memspace.Block, src, tag int) (comm.Request, error) {
	return j.c.Irecv(b, src, tag)
}

// Begin refuses a collective of a closed or revoked rank, and runs the
// others under a context that the revocation cancels.
func (j *nodeJob) Begin(ctx context.Context, name string, light bool) (context.Context, error) {
	c := j.c
	c.mu.Lock()
	closed, revoked := c.closed, c.revoked
	c.mu.Unlock()
	switch {
	case closed:
		return nil, c.closedErr(name)
	case revoked != nil:
		return nil, revoked
	}
	run, cancel := context.WithCancelCause(ctx)
	j.runCancel = cancel
	j.runStop = context.AfterFunc(j.revoked, func() { cancel(context.Cause(j.revoked)) })
	return run, nil
}

// End returns the revocation for a collective that failed because of it.
func (j *nodeJob) End(ctx context.Context, name string, light bool, err error) error {
	j.runStop()
	j.runCancel(nil)
	if err == nil {
		return nil
	}
	c := j.c
	c.mu.Lock()
	revoked := c.revoked
	c.mu.Unlock()
	if revoked != nil && ctx.Err() == nil && !errors.Is(err, comm.ErrFallback) {
		return revoked
	}
	var xe *xerr.Error
	if errors.As(err, &xe) && xe.Backend == Name {
		return err
	}
	return xerr.Op(Name, name, err)
}

// Aborted is nil: an abort cancels the collective's context.
func (j *nodeJob) Aborted() error { return nil }

// Lost returns the revocation once this rank has revoked its collectives.
func (j *nodeJob) Lost() error {
	if j.revoked.Err() == nil {
		return nil
	}
	return context.Cause(j.revoked)
}

// Closed is the error of a collective after Close.
func (j *nodeJob) Closed() error { return j.c.closedErr("collective") }

// Idle arms the completion queue before a wait in the region sleeps: the
// progress engine, which leaves it unarmed while no request is under way,
// then wakes for the goodbye or the revocation that ends the wait, where
// otherwise it would look only at its next timed look (up to calmWait).
func (j *nodeJob) Idle() { j.c.armForWaiter() }

// close ends the node's collectives: the one running fails with cause,
// then the region is unmapped.
func (j *nodeJob) close(cause error) {
	j.cancel(cause)
	j.n.Close()
}

// errOnQueuePairs declines a collective to package comm's shared
// algorithms, which run it over the queue pairs.
var errOnQueuePairs = xerr.Detail(comm.ErrFallback, "rdma: collectives over the queue pairs")

// OneNode reports whether c runs its collectives in shared memory: every
// rank of its job runs on this machine, and the ranks mapped a region for
// them (see the package documentation).
func (c *Comm) OneNode() bool { return c.node != nil }

// nodeColl returns the node's collectives, or declines when there are none.
func (c *Comm) nodeColl() (*nodecoll.Node, error) {
	if c.node == nil {
		return nil, errOnQueuePairs
	}
	return c.node.n, nil
}

// Barrier blocks until every rank has called it.
func (c *Comm) Barrier(ctx context.Context) error {
	n, err := c.nodeColl()
	if err != nil {
		return err
	}
	return n.Barrier(ctx)
}

// Bcast copies buf of rank root into buf of every rank.
func (c *Comm) Bcast(ctx context.Context, buf memspace.Block, root int) error {
	n, err := c.nodeColl()
	if err != nil || !hostBlock(buf) {
		return cmpFallback(err)
	}
	return n.Bcast(ctx, buf, root)
}

// Reduce combines send of every rank with op into recv of rank root.
func (c *Comm) Reduce(ctx context.Context, send, recv memspace.Block, dt comm.DType, op comm.Op, root int) error {
	n, err := c.nodeColl()
	if err != nil || !hostBlock(send) || !hostBlock(recv) {
		return cmpFallback(err)
	}
	return n.Reduce(ctx, send, recv, dt, op, root)
}

// Allreduce combines send of every rank with op into recv of every rank.
func (c *Comm) Allreduce(ctx context.Context, send, recv memspace.Block, dt comm.DType, op comm.Op) error {
	n, err := c.nodeColl()
	if err != nil || !hostBlock(send) || !hostBlock(recv) {
		return cmpFallback(err)
	}
	return n.Allreduce(ctx, send, recv, dt, op)
}

// Gather declines to the shared algorithms over the queue pairs.
func (c *Comm) Gather(ctx context.Context, send, recv memspace.Block, root int) error {
	return errOnQueuePairs
}

// Scatter declines to the shared algorithms over the queue pairs.
func (c *Comm) Scatter(ctx context.Context, send, recv memspace.Block, root int) error {
	return errOnQueuePairs
}

// Allgather concatenates send of every rank, in rank order, into recv of
// every rank.
func (c *Comm) Allgather(ctx context.Context, send, recv memspace.Block) error {
	n, err := c.nodeColl()
	if err != nil || !hostBlock(send) || !hostBlock(recv) {
		return cmpFallback(err)
	}
	return n.Allgather(ctx, send, recv)
}

// Alltoall sends part j of send of every rank into part r of recv of rank j,
// r being the sender.
func (c *Comm) Alltoall(ctx context.Context, send, recv memspace.Block) error {
	n, err := c.nodeColl()
	if err != nil || !hostBlock(send) || !hostBlock(recv) {
		return cmpFallback(err)
	}
	return n.Alltoall(ctx, send, recv)
}

// ReduceScatter declines to the shared algorithms over the queue pairs.
func (c *Comm) ReduceScatter(ctx context.Context, send, recv memspace.Block, dt comm.DType, op comm.Op) error {
	return errOnQueuePairs
}

// hostBlock reports whether b is empty or host-accessible: the region's
// collectives copy with the host.
func hostBlock(b memspace.Block) bool { return b.Len() == 0 || b.HostAccessible() }

// cmpFallback is err, or errOnQueuePairs for a block the region cannot take.
func cmpFallback(err error) error {
	if err != nil {
		return err
	}
	return errOnQueuePairs
}

var _ comm.Collectives = (*Comm)(nil)
