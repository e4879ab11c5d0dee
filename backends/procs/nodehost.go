package procs

import (
	"context"

	"github.com/xpu-go/xpu/comm"
	"github.com/xpu-go/xpu/internal/nodecoll"
)

// Collectives of a node in shared memory (package internal/nodecoll).
//
// The first collective of a rank — its first Barrier, Bcast, Reduce,
// Allreduce, Allgather or Alltoall, which every rank makes at the same
// point — sets them up as a collective of its own: the ranks linked
// through shared memory are this rank's node, and nodecoll maps a region
// into each node's ranks. Should the setup fail on a rank (a lost peer,
// the context's end), that rank runs its collectives over the links; a
// group that lost a peer has its later collectives aborted anyway.

// nodeHost is c as the host of its node's collectives: their runs follow
// c's abort protocol (coll.go).
type nodeHost struct {
	*Comm
	// lightSeq is the number of a one-node job's collective in progress
	// (lightBegin), and lightAborted is Aborted, bound once.
	lightSeq     uint64
	lightAborted func() error
	// full and fullCtx are the run of a collective of a job that spans
	// nodes, and the context an abort cancels.
	full    *collRun
	fullCtx context.Context
}

func newNodeHost(c *Comm) *nodeHost {
	h := &nodeHost{Comm: c}
	h.lightAborted = h.Aborted
	return h
}

var _ nodecoll.Host = (*nodeHost)(nil)

// Begin numbers the collective and registers its run for aborts.
func (h *nodeHost) Begin(ctx context.Context, name string, light bool) (context.Context, error) {
	if light {
		seq, err := h.lightBegin(name)
		h.lightSeq = seq
		return ctx, err
	}
	cctx, cancel := context.WithCancelCause(ctx)
	run := &collRun{cancel: cancel}
	if err := h.collBegin(name, run); err != nil {
		cancel(nil)
		return nil, err
	}
	h.full, h.fullCtx = run, cctx
	return cctx, nil
}

// End unregisters the run and turns a failure caused by a lost peer into
// an abort of this and every later collective.
func (h *nodeHost) End(ctx context.Context, name string, light bool, err error) error {
	if light {
		// The light run was never registered (lightBegin): an abort or
		// close that lands later is the next collective's to see.
		if err == nil {
			return nil
		}
		return h.collFailed(ctx, name, h.lightSeq, err, h.lightAborted)
	}
	run, cctx := h.full, h.fullCtx
	h.full, h.fullCtx = nil, nil
	defer func() {
		h.unwatch(cctx.Done())
		run.cancel(nil)
	}()
	return h.collEnd(ctx, name, run, err, func() error { return context.Cause(cctx) })
}

// Aborted returns why the light run's collective must stop: an abort of
// it or of an earlier collective, or this rank's Close; nil otherwise.
// The node's waits call it every few polls: it is two loads while neither
// has happened.
func (h *nodeHost) Aborted() error {
	if err := h.coll.abortOf(h.lightSeq); err != nil {
		return err
	}
	if h.shut.Load() {
		return comm.ErrClosed
	}
	return nil
}

// Lost returns why a peer is lost, or nil.
func (h *nodeHost) Lost() error {
	if !h.anyLost.Load() {
		return nil
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, e := range h.lost {
		if e != nil {
			return e
		}
	}
	return nil
}

// Closed is the error of a collective after Close.
func (h *nodeHost) Closed() error { return h.closedErr() }

// Idle does nothing: a link's reader goroutine, which hears of a lost
// peer, needs no waking (it takes a free read role back within idleCheck).
func (h *nodeHost) Idle() {}

// nodeColls returns the nodes' collectives, nil when collectives run over
// the links; the first call sets them up (see above), as part of the
// collective op the program called, whose name a failure of the setup
// carries (the setup is nothing the program called).
func (c *Comm) nodeColls(ctx context.Context, op string) (*nodecoll.Node, error) {
	if c.nodeReady.Load() {
		return c.nodeColl, nil
	}
	c.nodeMu.Lock()
	defer c.nodeMu.Unlock()
	if c.nodeDone {
		return c.nodeColl, nil
	}
	c.nodeDone = true
	err := c.collective(ctx, op, func(ctx context.Context) error {
		if c.size < 2 {
			return nil
		}
		var members []int
		for j, l := range c.links {
			if j == c.rank || (l != nil && l.shm != nil) {
				members = append(members, j)
			}
		}
		n, err := nodecoll.Setup(ctx, newNodeHost(c), members, nodecoll.Options{
			Spin: c.cfg.ShmSpin, Yield: &c.shmYield, Logf: c.nodeLogf()})
		c.nodeColl = n
		return err
	})
	if n := c.nodeColl; n != nil && !n.SpansNodes() {
		c.oneNodeColl = n
	}
	c.nodeReady.Store(true)
	return c.nodeColl, err
}

// nodeLogf returns Config.Logf with this backend's name before the line.
func (c *Comm) nodeLogf() func(string, ...any) {
	if c.cfg.Logf == nil {
		return nil
	}
	return func(format string, args ...any) { c.cfg.Logf(Name+": "+format, args...) }
}

// OneNode reports whether every rank of c runs on this machine and c's
// collectives run in a region of shared memory that they all map. It is
// known from c's first collective on (every rank's is the same call);
// before it, and for a job of one rank, OneNode is false.
func (c *Comm) OneNode() bool {
	if !c.nodeReady.Load() {
		return false
	}
	return c.nodeColl != nil && c.nodeColl.OneNode()
}
