package local

import (
	"context"
	"math/rand/v2"
	"sync"
	"unsafe"

	"github.com/xpu-go/xpu/comm"
	"github.com/xpu-go/xpu/impl"
	"github.com/xpu-go/xpu/memspace"
	"github.com/xpu-go/xpu/xerr"
)

// One-sided communication (comm.OneSided). The ranks share this process,
// so a Put or a Get is one copy, between the origin's buffer and the
// target's exposed block, made by the origin's goroutine at once: the
// target takes no part, and the request has completed when Put or Get
// returns. Flush therefore has nothing to wait for; it reports a rank
// that is lost. A key names its group (a random number drawn when the
// group was made), its rank, the region's address and length, and the
// region's number in the group: a key of another group, of a closed
// region, or altered in any field is refused with ErrInvalidArgument
// before a byte moves.

var _ comm.OneSided = (*Comm)(nil)

// exposed is the state of one-sided communication a rank keeps: its open
// regions, by their number.
type exposed struct {
	regions map[uint32]*region // guarded by the rank's mu
}

// region is an exposed block of one rank.
type region struct {
	c    *Comm
	blk  memspace.Block
	data []byte
	key  comm.RemoteKey
	// busy counts copies under way into or out of data: Close waits for
	// them. It is added to under c.mu while the region is open.
	busy sync.WaitGroup
	once sync.Once
}

var _ comm.Region = (*region)(nil)

func (g *region) Block() memspace.Block { return g.blk }
func (g *region) Key() comm.RemoteKey   { return g.key }

// Close withdraws the region: later transfers with its key fail with
// ErrInvalidArgument, and Close returns once the copies under way into or
// out of it are done. It is idempotent and returns nil.
func (g *region) Close() error {
	g.once.Do(func() {
		c := g.c
		c.mu.Lock()
		delete(c.one.regions, uint32(g.key.Key))
		c.mu.Unlock()
		g.busy.Wait()
	})
	return nil
}

// Expose makes buf, which must be host memory and not empty, reachable by
// the group's Put and Get until the Region is closed, or this rank closes.
func (c *Comm) Expose(buf memspace.Block) (comm.Region, error) {
	data, err := hostBytes(buf)
	if err != nil {
		return nil, xerr.Op(Name, "expose", err)
	}
	if len(data) == 0 {
		return nil, xerr.Errorf(Name, "expose", comm.ErrInvalidArgument, "rank %d: an empty buffer", c.rank)
	}
	g := &region{c: c, blk: buf, data: data}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed.Load() {
		return nil, xerr.Errorf(Name, "expose", comm.ErrClosed, "rank %d", c.rank)
	}
	if c.one.regions == nil {
		c.one.regions = map[uint32]*region{}
	}
	seq := c.g.regionSeq.Add(1)
	g.key = comm.RemoteKey{Rank: c.rank, Addr: uint64(uintptr(unsafe.Pointer(&data[0]))), Len: len(data),
		Key: uint64(c.g.id)<<32 | uint64(seq)}
	c.one.regions[seq] = g
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
	g, err := c.g.ranks[key.Rank].take(op, key, c.rank)
	if err != nil {
		return nil, err
	}
	at := g.data[off:]
	if op == "put" {
		copy(at, data)
	} else {
		copy(data, at)
	}
	g.busy.Done()
	r := &request{owner: c}
	r.complete(comm.Status{Source: key.Rank, Count: len(data)}, nil)
	return r, nil
}

// take finds the open region of t that key names, for a copy by rank from
// (its busy count raised), or says why not.
func (t *Comm) take(op string, key comm.RemoteKey, from int) (*region, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.closed.Load() {
		return nil, xerr.Errorf(Name, op, comm.ErrPeerLost, "rank %d: rank %d left the group", from, t.rank)
	}
	g := t.one.regions[uint32(key.Key)]
	switch {
	case key.Key>>32 != uint64(t.g.id):
		return nil, xerr.Errorf(Name, op, comm.ErrInvalidArgument, "rank %d: %v is a key of another communicator", from, key)
	case g == nil:
		return nil, xerr.Errorf(Name, op, comm.ErrInvalidArgument, "rank %d: %v names no open region (closed, or never exposed)", from, key)
	case g.key != key:
		return nil, xerr.Errorf(Name, op, comm.ErrInvalidArgument, "rank %d: %v does not match the region it names", from, key)
	}
	g.busy.Add(1)
	return g, nil
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

// withdraw closes every region of c as it leaves. c.mu is held; the
// copies under way are waited for by the caller, after it lets go of mu.
func (c *Comm) withdraw() []*region {
	var out []*region
	for seq, g := range c.one.regions {
		delete(c.one.regions, seq)
		out = append(out, g)
	}
	return out
}

// newGroupID draws the number that the keys of a new group carry.
func newGroupID() uint32 { return rand.Uint32() }
