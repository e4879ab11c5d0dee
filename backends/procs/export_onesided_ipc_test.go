package procs

import (
	"github.com/xpu-go/xpu/comm"
	"github.com/xpu-go/xpu/memspace"
	"github.com/xpu-go/xpu/xerr"
)

// PutMappedUnchecked starts a Put (or a Get) of the device block dev
// through the target's mapping without the origin's check of the range,
// as a peer that does not check would send it: the target's check alone
// stands between the frame and its region.
func PutMappedUnchecked(c *Comm, put bool, dev memspace.Block, key comm.RemoteKey, off int) (comm.Request, error) {
	l := c.links[key.Rank]
	if l == nil || l.shm == nil {
		return nil, xerr.Detail(comm.ErrInvalidArgument, "no shared-memory link to rank %d", key.Rank)
	}
	s, ok := c.share(dev, key.Rank)
	if !ok {
		return nil, xerr.Detail(memspace.ErrNotShareable, "block %v", dev)
	}
	r := &oneOp{put: put, peer: key.Rank, dev: dev, via: l}
	if err := l.startMapped(r, s, key, off); err != nil {
		return nil, err
	}
	return r, nil
}
