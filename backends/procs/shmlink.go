package procs

import (
	"context"
	"fmt"
	"log/slog"
	"net"

	"github.com/xpu-go/xpu/internal/join"
	"github.com/xpu-go/xpu/internal/shm"
	"github.com/xpu-go/xpu/xerr"
)

// LinkMode says which kind of link a rank may use to a peer.
type LinkMode uint8

const (
	// LinkAuto, the default, links ranks of one node through shared memory
	// and the others through TCP.
	LinkAuto LinkMode = iota
	// LinkTCP links every peer through TCP.
	LinkTCP
	// LinkShm links every peer through shared memory, and fails Dial when
	// a peer is on another node or its segment cannot be shared.
	LinkShm
)

// String returns the mode's name, as EnvLinks and the option "links"
// spell it.
func (m LinkMode) String() string {
	switch m {
	case LinkAuto:
		return "auto"
	case LinkTCP:
		return "tcp"
	case LinkShm:
		return "shm"
	}
	return fmt.Sprintf("LinkMode(%d)", uint8(m))
}

// ParseLinkMode reads "auto", "tcp" or "shm".
func ParseLinkMode(s string) (LinkMode, error) {
	m, err := shm.ParseLinks(s)
	if err != nil {
		return 0, xerr.Op(Name, "config", err)
	}
	return LinkMode(m), nil
}

// Kinds of link, as Comm.Transport names them.
const (
	TransportSelf = "self"
	TransportTCP  = "tcp"
	TransportShm  = "shm"
)

// Transport says how this rank reaches peer: TransportShm, TransportTCP,
// or TransportSelf for its own rank; "" for a peer out of range or not
// linked (yet).
func (c *Comm) Transport(peer int) string {
	if peer == c.rank {
		return TransportSelf
	}
	if peer < 0 || peer >= c.size {
		return ""
	}
	c.mu.Lock()
	l := c.links[peer]
	c.mu.Unlock()
	switch {
	case l == nil:
		return ""
	case l.shm != nil:
		return TransportShm
	default:
		return TransportTCP
	}
}

// linkConn negotiates the link's kind on conn, just authenticated with
// peer, within the bounds of the handshake (ctx, Config.Timeout), and
// returns the link's connection: conn itself, or a shared-memory stream
// with conn as its doorbell (package internal/shm).
func (c *Comm) linkConn(ctx context.Context, conn net.Conn, peer int, dialer bool) (net.Conn, error) {
	stop := join.Bound(ctx, conn, c.cfg.Timeout)
	terms := shm.Terms{Links: shm.Links(c.cfg.Links), Ring: c.cfg.ShmRing, Node: c.node}
	got, err := shm.Negotiate(conn, c.rank, peer, terms, dialer, EnvLinks)
	stop()
	if err != nil {
		return conn, err
	}
	if got.Failed != nil && c.cfg.Logf != nil {
		c.cfg.Logf("tcp: rank %d links rank %d through TCP: shared memory failed: %v", c.rank, peer, got.Failed)
	}
	if got.Segment == nil {
		c.logger().Debug("tcp: link through TCP", "rank", c.rank, "peer", peer)
		return conn, nil
	}
	seg := got.Segment
	sc, err := shm.NewConn(seg, shm.Options{Bell: conn, Spin: c.cfg.ShmSpin, PeerPID: got.PeerPID})
	if err != nil {
		seg.Close()
		return nil, err
	}
	c.logger().Debug("tcp: link through shared memory", "rank", c.rank, "peer", peer, "ring", seg.RingSize())
	return sc, nil
}

// tuneShm sets how the shared-memory links poll once the job has formed:
// as configured while the ranks of this node fit the processors they may
// run on; when more ranks share them (nodeCrowded: this rank's processors
// and its node peers', so that ranks bound one to a processor are not
// taken for crowded), every poll yields the processor (sched_yield), so
// that a peer waiting for a processor to answer gets this one at once, as
// Open MPI does when it sees a node oversubscribed.
func (c *Comm) tuneShm() {
	var pids []int
	for _, l := range c.links {
		if l != nil && l.shm != nil {
			pids = append(pids, l.shm.PeerPID())
		}
	}
	if len(pids) > 0 && nodeCrowded(pids) {
		c.shmYield.Store(true)
		for _, l := range c.links {
			if l != nil && l.shm != nil {
				l.shm.SetSpin(c.cfg.ShmSpin, true)
			}
		}
	}
}

// logger returns Config.Logger, or slog's default.
func (c *Comm) logger() *slog.Logger {
	if c.cfg.Logger != nil {
		return c.cfg.Logger
	}
	return slog.Default()
}
