package tcp

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"runtime"
	"strings"
	"sync"

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
	switch strings.ToLower(strings.TrimSpace(s)) {
	case "", "auto":
		return LinkAuto, nil
	case "tcp":
		return LinkTCP, nil
	case "shm":
		return LinkShm, nil
	}
	return 0, xerr.Errorf(Name, "config", xerr.ErrInvalidArgument, "link mode %q is not auto, tcp or shm", s)
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

// nodeKey identifies the machine and PID namespace this process runs in,
// and Config.Node: two ranks with the same key can open each other's
// descriptors under /proc, so they share memory. A machine whose /proc
// says nothing gets a key of its own.
func nodeKey(node string) [32]byte {
	boot, err1 := os.ReadFile("/proc/sys/kernel/random/boot_id")
	pidns, err2 := os.Readlink("/proc/self/ns/pid")
	h := sha256.New()
	fmt.Fprintf(h, "xpu-go node\x00%s\x00%s\x00%s", strings.TrimSpace(string(boot)), pidns, node)
	if err1 != nil || err2 != nil {
		fmt.Fprintf(h, "\x00pid %d", os.Getpid())
	}
	return [32]byte(h.Sum(nil))
}

// Negotiation of the link, right after the handshake: each side says what
// it allows and where it runs (the dialer first), both choose alike, and
// for shared memory the dialer creates the segment and offers it, the
// acceptor attaches and answers. The TCP connection then stays as the
// segment's doorbell.
const (
	negoSize    = 48
	negoVersion = 1
)

var negoMagic = [4]byte{'X', 'P', 'U', 'L'}

type nego struct {
	mode LinkMode
	ring uint32
	pid  uint32 // the sender's process, for single-copy transfers
	node [32]byte
}

func (n nego) encode() []byte {
	b := make([]byte, negoSize)
	copy(b, negoMagic[:])
	b[4] = negoVersion
	b[5] = byte(n.mode)
	binary.LittleEndian.PutUint32(b[8:], n.ring)
	binary.LittleEndian.PutUint32(b[12:], n.pid)
	copy(b[16:], n.node[:])
	return b
}

func decodeNego(b []byte) (nego, error) {
	if len(b) != negoSize || [4]byte(b[:4]) != negoMagic || b[4] != negoVersion {
		return nego{}, xerr.Detail(ErrProtocol, "not a link negotiation of version %d", negoVersion)
	}
	n := nego{mode: LinkMode(b[5]), ring: binary.LittleEndian.Uint32(b[8:]), pid: binary.LittleEndian.Uint32(b[12:]),
		node: [32]byte(b[16:48])}
	if n.mode > LinkShm || b[6] != 0 || b[7] != 0 {
		return nego{}, xerr.Detail(ErrProtocol, "link negotiation with mode %d or nonzero padding", n.mode)
	}
	return n, nil
}

// chooseShm decides, alike on both sides, whether the link between this
// rank (mine) and peer (theirs) goes through shared memory. A mode that
// forces what cannot be is an error.
func chooseShm(rank, peer int, mine, theirs nego) (bool, error) {
	forced := mine.mode == LinkShm || theirs.mode == LinkShm
	switch {
	case mine.mode == LinkTCP || theirs.mode == LinkTCP:
		if forced {
			return false, xerr.Errorf(Name, "dial", xerr.ErrInvalidArgument,
				"rank %d and rank %d disagree: one forces shared memory, the other TCP (%s)", rank, peer, EnvLinks)
		}
		return false, nil
	case mine.node != theirs.node:
		if forced {
			return false, xerr.Errorf(Name, "dial", xerr.ErrUnavailable,
				"rank %d and rank %d are on different nodes: no shared memory between them (%s=shm)", rank, peer, EnvLinks)
		}
		return false, nil
	}
	return true, nil
}

// linkConn negotiates the link's kind on conn, just authenticated with
// peer, within the bounds of the handshake (ctx, Config.Timeout), and
// returns the link's connection: conn itself, or a shared-memory stream
// with conn as its doorbell.
func (c *Comm) linkConn(ctx context.Context, conn net.Conn, peer int, dialer bool) (net.Conn, error) {
	stop := join.Bound(ctx, conn, c.cfg.Timeout)
	seg, theirs, err := c.negotiate(conn, peer, dialer)
	stop()
	if err != nil {
		return conn, err
	}
	if seg == nil {
		c.logger().Debug("tcp: link through TCP", "rank", c.rank, "peer", peer)
		return conn, nil
	}
	sc, err := shm.NewConn(seg, shm.Options{Bell: conn, Spin: c.cfg.ShmSpin, PeerPID: int(theirs.pid)})
	if err != nil {
		seg.Close()
		return nil, err
	}
	c.logger().Debug("tcp: link through shared memory", "rank", c.rank, "peer", peer, "ring", seg.RingSize())
	return sc, nil
}

// negotiate runs the negotiation on conn and returns the segment of a
// shared-memory link, nil for TCP, and what the peer said (its process ID).
func (c *Comm) negotiate(conn net.Conn, peer int, dialer bool) (*shm.Segment, nego, error) {
	var theirs nego
	mine := nego{mode: c.cfg.Links, ring: uint32(c.cfg.ShmRing), pid: uint32(os.Getpid()), node: c.node}
	var in [negoSize]byte
	if dialer {
		if _, err := conn.Write(mine.encode()); err != nil {
			return nil, theirs, fmt.Errorf("link negotiation: %w", err)
		}
	}
	if _, err := io.ReadFull(conn, in[:]); err != nil {
		return nil, theirs, fmt.Errorf("link negotiation: %w", err)
	}
	theirs, err := decodeNego(in[:])
	if err != nil {
		return nil, theirs, err
	}
	if !dialer {
		if _, err := conn.Write(mine.encode()); err != nil {
			return nil, theirs, fmt.Errorf("link negotiation: %w", err)
		}
	}
	use, err := chooseShm(c.rank, peer, mine, theirs)
	if err != nil || !use {
		return nil, theirs, err
	}
	forced := mine.mode == LinkShm || theirs.mode == LinkShm
	var seg *shm.Segment
	if dialer {
		seg, err = c.offerSegment(conn, int(max(mine.ring, theirs.ring)))
	} else {
		seg, err = c.attachSegment(conn)
	}
	if err != nil {
		if forced {
			return nil, theirs, xerr.Errorf(Name, "dial", xerr.ErrUnavailable, "shared memory with rank %d (%s=shm): %w", peer, EnvLinks, err)
		}
		if c.cfg.Logf != nil {
			c.cfg.Logf("tcp: rank %d links rank %d through TCP: shared memory failed: %v", c.rank, peer, err)
		}
		return nil, theirs, nil
	}
	return seg, theirs, nil
}

// Answers of the acceptor to an offer.
const (
	offerTaken   = 1
	offerRefused = 2
)

// offerSegment creates a segment and offers it on conn (the dialer's
// side); a nil segment with a nil error means the dialer could not make
// one and said so.
func (c *Comm) offerSegment(conn net.Conn, ring int) (*shm.Segment, error) {
	seg, cerr := shm.Create(ring)
	var o shm.Offer // zero: none
	if cerr == nil {
		o = seg.Offer()
	}
	if _, err := conn.Write(o.Encode()); err != nil {
		if seg != nil {
			seg.Close()
		}
		return nil, fmt.Errorf("offer: %w", err)
	}
	if cerr != nil {
		return nil, cerr
	}
	var ans [1]byte
	if _, err := io.ReadFull(conn, ans[:]); err != nil {
		seg.Close()
		return nil, fmt.Errorf("answer to the offer: %w", err)
	}
	switch ans[0] {
	case offerTaken:
		seg.Attached()
		return seg, nil
	case offerRefused:
		seg.Close()
		return nil, fmt.Errorf("the peer could not attach the segment")
	}
	seg.Close()
	return nil, xerr.Detail(ErrProtocol, "answer %d to the offer", ans[0])
}

// attachSegment reads the peer's offer on conn and attaches (the
// acceptor's side).
func (c *Comm) attachSegment(conn net.Conn) (*shm.Segment, error) {
	var b [shm.OfferSize]byte
	if _, err := io.ReadFull(conn, b[:]); err != nil {
		return nil, fmt.Errorf("offer: %w", err)
	}
	o, err := shm.DecodeOffer(b[:])
	if err != nil {
		return nil, xerr.Detail(ErrProtocol, "%v", err)
	}
	if o.PID == 0 {
		return nil, fmt.Errorf("the peer could not make a segment")
	}
	if o.RingSize != max(c.cfg.ShmRing, o.RingSize) {
		return nil, xerr.Detail(ErrProtocol, "offer of rings of %d bytes, below this rank's %d", o.RingSize, c.cfg.ShmRing)
	}
	seg, aerr := shm.Attach(o)
	ans := byte(offerTaken)
	if aerr != nil {
		ans = offerRefused
	}
	if _, err := conn.Write([]byte{ans}); err != nil {
		if seg != nil {
			seg.Close()
		}
		return nil, fmt.Errorf("answer to the offer: %w", err)
	}
	return seg, aerr
}

// tuneShm sets how the shared-memory links poll once the job has formed:
// as configured while the ranks of this node fit its processors; when they
// are more, every poll yields the processor (sched_yield), so that a peer
// waiting for a processor to answer gets this one at once, as Open MPI
// does when it sees a node oversubscribed.
func (c *Comm) tuneShm() {
	local := 1
	for _, l := range c.links {
		if l != nil && l.shm != nil {
			local++
		}
	}
	if local > runtime.NumCPU() {
		c.shmYield.Store(true)
		for _, l := range c.links {
			if l != nil && l.shm != nil {
				l.shm.SetSpin(c.cfg.ShmSpin, true)
			}
		}
	}
}

// shmProbe says whether this machine can link ranks through shared memory:
// a segment made and attached by this process. Its result is kept.
var shmProbe = sync.OnceValues(func() (bool, string) {
	seg, err := shm.Create(shm.MinRing)
	if err != nil {
		return false, err.Error()
	}
	defer seg.Close()
	peer, err := shm.Attach(seg.Offer())
	if err != nil {
		return false, err.Error()
	}
	peer.Close()
	return true, "memfd rings, attached through /proc"
})

// logger returns Config.Logger, or slog's default.
func (c *Comm) logger() *slog.Logger {
	if c.cfg.Logger != nil {
		return c.cfg.Logger
	}
	return slog.Default()
}
