package shm

import (
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"strings"
	"sync"

	"github.com/xpu-go/xpu/xerr"
)

// Links says which kind of link a rank allows to a peer.
type Links uint8

const (
	// Auto links ranks of one node through shared memory and the others
	// through the socket.
	Auto Links = iota
	// SocketOnly keeps every link on its socket.
	SocketOnly
	// SharedOnly links every peer through shared memory; a peer on
	// another node, or one that allows only its socket, is an error.
	SharedOnly
)

// ParseLinks reads "auto" (or ""), "tcp" or "shm", the values of
// XPU_LINKS and of the option links.
func ParseLinks(s string) (Links, error) {
	switch strings.ToLower(strings.TrimSpace(s)) {
	case "", "auto":
		return Auto, nil
	case "tcp":
		return SocketOnly, nil
	case "shm":
		return SharedOnly, nil
	}
	return 0, xerr.Detail(xerr.ErrInvalidArgument, "link mode %q is not auto, tcp or shm", s)
}

// Negotiation of a link, right after its connection has been
// authenticated: each side says what it allows and where it runs (the
// dialer first), both choose alike, and for shared memory the dialer
// creates the segment and offers it, the acceptor attaches and answers.
// The connection then stays as the segment's doorbell.
const (
	negoSize    = 48
	negoVersion = 1
)

var negoMagic = [4]byte{'X', 'P', 'U', 'L'}

// Terms are what one side of a link allows and where it runs.
type Terms struct {
	Links Links
	// Ring is the size of each ring this side wants; a link takes the
	// larger of its two sides'.
	Ring int
	// Node is NodeKey of this side's node.
	Node [32]byte
	// pid is the sender's process, for single copies.
	pid uint32
}

func (n Terms) encode() []byte {
	b := make([]byte, negoSize)
	copy(b, negoMagic[:])
	b[4] = negoVersion
	b[5] = byte(n.Links)
	binary.LittleEndian.PutUint32(b[8:], uint32(n.Ring))
	binary.LittleEndian.PutUint32(b[12:], n.pid)
	copy(b[16:], n.Node[:])
	return b
}

func decodeTerms(b []byte) (Terms, error) {
	if len(b) != negoSize || [4]byte(b[:4]) != negoMagic || b[4] != negoVersion {
		return Terms{}, xerr.Detail(xerr.ErrProtocol, "not a link negotiation of version %d", negoVersion)
	}
	n := Terms{Links: Links(b[5]), Ring: int(binary.LittleEndian.Uint32(b[8:])), pid: binary.LittleEndian.Uint32(b[12:]),
		Node: [32]byte(b[16:48])}
	if n.Links > SharedOnly || b[6] != 0 || b[7] != 0 {
		return Terms{}, xerr.Detail(xerr.ErrProtocol, "link negotiation with mode %d or nonzero padding", n.Links)
	}
	return n, nil
}

// NodeKey identifies the machine and PID namespace this process runs in,
// and node, a name the job gives (XPU_NODE): two processes with the same
// key can open each other's descriptors under /proc, so they share memory.
// A machine whose /proc says nothing gets a key of its own.
func NodeKey(node string) [32]byte {
	boot, err1 := os.ReadFile("/proc/sys/kernel/random/boot_id")
	pidns, err2 := os.Readlink("/proc/self/ns/pid")
	h := sha256.New()
	fmt.Fprintf(h, "xpu-go node\x00%s\x00%s\x00%s", strings.TrimSpace(string(boot)), pidns, node)
	if err1 != nil || err2 != nil {
		fmt.Fprintf(h, "\x00pid %d", os.Getpid())
	}
	return [32]byte(h.Sum(nil))
}

// Choose decides, alike on both sides, whether the link between rank
// (mine) and peer (theirs) goes through shared memory. Terms that force
// what cannot be are an error: ErrInvalidArgument when one side forces
// shared memory and the other its socket, ErrUnavailable when shared
// memory is forced between nodes. env names the setting, for the message.
func Choose(rank, peer int, mine, theirs Terms, env string) (bool, error) {
	forced := mine.Links == SharedOnly || theirs.Links == SharedOnly
	switch {
	case mine.Links == SocketOnly || theirs.Links == SocketOnly:
		if forced {
			return false, xerr.Detail(xerr.ErrInvalidArgument,
				"rank %d and rank %d disagree: one forces shared memory, the other TCP (%s)", rank, peer, env)
		}
		return false, nil
	case mine.Node != theirs.Node:
		if forced {
			return false, xerr.Detail(xerr.ErrUnavailable,
				"rank %d and rank %d are on different nodes: no shared memory between them (%s=shm)", rank, peer, env)
		}
		return false, nil
	}
	return true, nil
}

// Negotiated is the outcome of Negotiate.
type Negotiated struct {
	// Segment is the link's segment; nil when the link stays on its
	// socket.
	Segment *Segment
	// PeerPID is the peer's process, for single copies.
	PeerPID int
	// Failed says why shared memory was chosen but could not be made, the
	// link then staying on its socket; nil otherwise.
	Failed error
}

// Negotiate runs the negotiation on conn, authenticated with peer, which
// the caller has given a deadline; dialer says which side this is, env
// names the setting of Links for messages. A link that chose shared
// memory but could not make it stays on its socket (Negotiated.Failed
// says why) unless one side forced shared memory: that is an error
// matching ErrUnavailable.
func Negotiate(conn net.Conn, rank, peer int, mine Terms, dialer bool, env string) (Negotiated, error) {
	mine.pid = uint32(os.Getpid())
	var in [negoSize]byte
	if dialer {
		if _, err := conn.Write(mine.encode()); err != nil {
			return Negotiated{}, fmt.Errorf("link negotiation: %w", err)
		}
	}
	if _, err := io.ReadFull(conn, in[:]); err != nil {
		return Negotiated{}, fmt.Errorf("link negotiation: %w", err)
	}
	theirs, err := decodeTerms(in[:])
	if err != nil {
		return Negotiated{}, err
	}
	if !dialer {
		if _, err := conn.Write(mine.encode()); err != nil {
			return Negotiated{}, fmt.Errorf("link negotiation: %w", err)
		}
	}
	out := Negotiated{PeerPID: int(theirs.pid)}
	use, err := Choose(rank, peer, mine, theirs, env)
	if err != nil || !use {
		return out, err
	}
	var seg *Segment
	if dialer {
		seg, err = offerSegment(conn, max(mine.Ring, theirs.Ring))
	} else {
		seg, err = attachSegment(conn, mine.Ring)
	}
	if err != nil {
		if mine.Links == SharedOnly || theirs.Links == SharedOnly {
			return out, xerr.Detail(xerr.ErrUnavailable, "shared memory with rank %d (%s=shm): %w", peer, env, err)
		}
		out.Failed = err
		return out, nil
	}
	out.Segment = seg
	return out, nil
}

// Answers of the acceptor to an offer.
const (
	offerTaken   = 1
	offerRefused = 2
)

// offerSegment creates a segment and offers it on conn (the dialer's
// side).
func offerSegment(conn net.Conn, ring int) (*Segment, error) {
	seg, cerr := Create(ring)
	var o Offer // zero: none
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
		return nil, errors.New("the peer could not attach the segment")
	}
	seg.Close()
	return nil, xerr.Detail(xerr.ErrProtocol, "answer %d to the offer", ans[0])
}

// attachSegment reads the peer's offer on conn and attaches (the
// acceptor's side); ring is this side's size of ring, below which an
// offer is refused.
func attachSegment(conn net.Conn, ring int) (*Segment, error) {
	var b [OfferSize]byte
	if _, err := io.ReadFull(conn, b[:]); err != nil {
		return nil, fmt.Errorf("offer: %w", err)
	}
	o, err := DecodeOffer(b[:])
	if err != nil {
		return nil, xerr.Detail(xerr.ErrProtocol, "%w", err)
	}
	if o.PID == 0 {
		return nil, errors.New("the peer could not make a segment")
	}
	if o.RingSize != max(ring, o.RingSize) {
		return nil, xerr.Detail(xerr.ErrProtocol, "offer of rings of %d bytes, below this rank's %d", o.RingSize, ring)
	}
	seg, aerr := Attach(o)
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

// Probe says whether this machine can link processes through shared
// memory: a segment made and attached by this process, and if not, why.
// Its result is kept.
var Probe = sync.OnceValues(func() (bool, string) {
	seg, err := Create(MinRing)
	if err != nil {
		return false, err.Error()
	}
	defer seg.Close()
	peer, err := Attach(seg.Offer())
	if err != nil {
		return false, err.Error()
	}
	peer.Close()
	return true, "memfd rings, attached through /proc"
})
