package local

import (
	"context"

	"github.com/xpu-go/xpu/comm"
	"github.com/xpu-go/xpu/impl"
	"github.com/xpu-go/xpu/internal/onesided"
	"github.com/xpu-go/xpu/memspace"
	"github.com/xpu-go/xpu/xerr"
)

// One-sided communication (comm.OneSided). The ranks share this process,
// so a Put or a Get is one copy, between the origin's buffer and the
// target's exposed block, made by the origin's goroutine at once: the
// target takes no part, and the request has completed when Put or Get
// returns. Flush therefore has nothing to wait for; it reports a rank
// that is lost. Each rank keeps its regions in an onesided.Table: a key of
// another group, of a closed region, or altered in any field is refused
// with ErrInvalidArgument before a byte moves.

var _ comm.Notifier = (*Comm)(nil)

// Expose makes buf, not empty, reachable by the group's Put and Get until
// the Region is closed, or this rank closes. buf is host memory, or memory
// the host cannot touch that package transfer copies to and from the host
// (device memory): Put and Get copy into and out of that with its space's
// copies (onesided.HostView).
func (c *Comm) Expose(buf memspace.Block) (comm.Region, error) {
	if buf.Len() == 0 {
		return nil, xerr.Errorf(Name, "expose", comm.ErrInvalidArgument, "rank %d: an empty buffer", c.rank)
	}
	data, err := onesided.HostView(buf)
	if err != nil {
		return nil, xerr.Op(Name, "expose", err)
	}
	g := c.one.Expose(c.rank, buf, data)
	if g == nil || c.closed.Load() {
		return nil, xerr.Errorf(Name, "expose", comm.ErrClosed, "rank %d", c.rank)
	}
	return g, nil
}

// Put copies src into the region dst names, off bytes into it.
func (c *Comm) Put(src memspace.Block, dst comm.RemoteKey, off int) (comm.Request, error) {
	return c.oneSided("put", src, dst, off)
}

// Get copies the region src names, from off bytes into it, into dst.
func (c *Comm) Get(dst memspace.Block, src comm.RemoteKey, off int) (comm.Request, error) {
	return c.oneSided("get", dst, src, off)
}

// oneSided makes one Put or Get: it checks the arguments, finds the
// region, and copies.
func (c *Comm) oneSided(op string, local memspace.Block, key comm.RemoteKey, off int) (comm.Request, error) {
	data, err := hostBytes(local)
	if err != nil {
		return nil, xerr.Op(Name, op, err)
	}
	if err := impl.CheckRank(key.Rank, len(c.g.ranks), false); err != nil {
		return nil, xerr.Op(Name, op, err)
	}
	if c.closed.Load() {
		return nil, xerr.Errorf(Name, op, comm.ErrClosed, "rank %d", c.rank)
	}
	if off < 0 || off > key.Len || len(data) > key.Len-off {
		return nil, xerr.Errorf(Name, op, comm.ErrInvalidArgument, "rank %d: %d bytes at offset %d of %v", c.rank, len(data), off, key)
	}
	t := c.g.ranks[key.Rank]
	g, closed := t.one.Find(key, off, len(data))
	switch {
	case closed || (g == nil && t.closed.Load()):
		return nil, xerr.Errorf(Name, op, comm.ErrPeerLost, "rank %d: rank %d left the group", c.rank, t.rank)
	case g == nil:
		return nil, xerr.Errorf(Name, op, comm.ErrInvalidArgument, "rank %d: %v names no open region of rank %d, or does not match it", c.rank, key, t.rank)
	}
	if op == "put" {
		err = g.Store(context.Background(), off, data)
	} else {
		err = g.Load(context.Background(), off, data)
	}
	g.Done()
	if err != nil {
		return nil, xerr.Op(Name, op, err)
	}
	r := &request{owner: c}
	r.complete(comm.Status{Source: key.Rank, Count: len(data)}, nil)
	return r, nil
}

// Flush returns nil for a rank of the group that is still in it (every
// transfer has completed when Put or Get returned), ErrPeerLost for one
// that has left, and ErrInvalidArgument for no rank of the group.
// comm.AnySource names every rank.
func (c *Comm) Flush(ctx context.Context, rank int) error {
	if ctx == nil {
		return xerr.Errorf(Name, "flush", comm.ErrInvalidArgument, "nil context")
	}
	if err := impl.CheckRank(rank, len(c.g.ranks), true); err != nil {
		return xerr.Op(Name, "flush", err)
	}
	if c.closed.Load() {
		return xerr.Errorf(Name, "flush", comm.ErrClosed, "rank %d", c.rank)
	}
	if rank != comm.AnySource && c.g.ranks[rank].closed.Load() {
		return xerr.Errorf(Name, "flush", comm.ErrPeerLost, "rank %d: rank %d left the group", c.rank, rank)
	}
	return ctx.Err()
}

// Notify queues msg for rank: every transfer this rank started has
// completed already, so the notification follows them.
func (c *Comm) Notify(ctx context.Context, rank int, msg []byte) error {
	if ctx == nil {
		return xerr.Errorf(Name, "notify", comm.ErrInvalidArgument, "nil context")
	}
	if err := impl.CheckRank(rank, len(c.g.ranks), false); err != nil {
		return xerr.Op(Name, "notify", err)
	}
	if len(msg) > comm.MaxNotification {
		return xerr.Errorf(Name, "notify", comm.ErrInvalidArgument, "rank %d: a notification of %d bytes, more than %d", c.rank, len(msg), comm.MaxNotification)
	}
	if c.closed.Load() {
		return xerr.Errorf(Name, "notify", comm.ErrClosed, "rank %d", c.rank)
	}
	if !c.g.ranks[rank].notes.Push(c.rank, append([]byte(nil), msg...)) {
		return xerr.Errorf(Name, "notify", comm.ErrPeerLost, "rank %d: rank %d left the group", c.rank, rank)
	}
	return nil
}

// WaitNotification returns the oldest notification sent to this rank
// and not yet taken, waiting for one until ctx ends.
func (c *Comm) WaitNotification(ctx context.Context) (comm.Notification, error) {
	if ctx == nil {
		return comm.Notification{}, xerr.Errorf(Name, "wait notification", comm.ErrInvalidArgument, "nil context")
	}
	return c.notes.Wait(ctx)
}
