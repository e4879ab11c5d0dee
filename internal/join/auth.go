package join

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"

	"github.com/xpu-go/xpu/xerr"
)

// ErrAuth reports a connection that could not prove membership of the job:
// a wrong secret, a garbled or foreign handshake, or a rank or world size
// that does not fit. It matches xerr.ErrInvalidArgument too.
var ErrAuth = xerr.ErrAuth

// ErrProtocol reports bytes from a peer that break the wire protocol. It
// matches xerr.ErrInvalidArgument too.
var ErrProtocol = xerr.ErrProtocol

// Connection purposes, announced in the hello.
const (
	purposePeer  uint8 = 1 // a link between two ranks
	purposeStore uint8 = 2 // a client of the rendezvous store on rank 0
)

// Terms are two numbers a rank announces to each peer in its hello, under
// the MAC, for the transport's own use (the procs engine: the largest eager
// message it accepts and the eager bytes it holds per peer).
type Terms struct {
	Limit  uint32
	Budget uint64
}

const (
	helloSize    = 64
	macSize      = sha256.Size
	wireVersion  = 1
	authContext  = "xpu-go/backends/tcp auth v1" // the package's name when the wire was made; the MAC covers it
	roleDialer   = 'D'
	roleAcceptor = 'A'
)

var helloMagic = [4]byte{'X', 'P', 'U', 'T'}

// hello is the first message each side of a connection sends.
type hello struct {
	purpose uint8
	rank    uint32
	size    uint32
	terms   Terms
	nonce   [32]byte
}

func (h *hello) encode() []byte {
	b := make([]byte, helloSize)
	copy(b, helloMagic[:])
	b[4] = wireVersion
	b[5] = h.purpose
	binary.LittleEndian.PutUint32(b[8:], h.rank)
	binary.LittleEndian.PutUint32(b[12:], h.size)
	binary.LittleEndian.PutUint32(b[16:], h.terms.Limit)
	binary.LittleEndian.PutUint64(b[24:], h.terms.Budget)
	copy(b[32:], h.nonce[:])
	return b
}

func decodeHello(b []byte) (hello, error) {
	var h hello
	if len(b) != helloSize || [4]byte(b[:4]) != helloMagic {
		return h, xerr.Detail(ErrAuth, "not an xpu tcp hello")
	}
	if b[4] != wireVersion {
		return h, xerr.Detail(ErrAuth, "wire version %d, want %d", b[4], wireVersion)
	}
	if b[6] != 0 || b[7] != 0 || binary.LittleEndian.Uint32(b[20:]) != 0 {
		return h, xerr.Detail(ErrAuth, "nonzero reserved bytes in hello")
	}
	h.purpose = b[5]
	h.rank = binary.LittleEndian.Uint32(b[8:])
	h.size = binary.LittleEndian.Uint32(b[12:])
	h.terms.Limit = binary.LittleEndian.Uint32(b[16:])
	h.terms.Budget = binary.LittleEndian.Uint64(b[24:])
	copy(h.nonce[:], b[32:])
	if h.purpose != purposePeer && h.purpose != purposeStore {
		return h, xerr.Detail(ErrAuth, "unknown purpose %d", h.purpose)
	}
	return h, nil
}

// proof is the MAC one side sends: HMAC-SHA256 under the job secret of both
// hellos (dialer's first) and the sender's role, so that neither a replay
// (fresh nonces on both sides) nor a reflection (the role) passes.
func proof(secret, dialerHello, acceptorHello []byte, role byte) []byte {
	m := hmac.New(sha256.New, secret)
	m.Write([]byte(authContext))
	m.Write(dialerHello)
	m.Write(acceptorHello)
	m.Write([]byte{role})
	return m.Sum(nil)
}

// handshake runs the mutual challenge-response on conn, which the caller
// has given a deadline. dialer says which side this is. It returns the
// peer's hello once the peer has proved that it holds secret; check is
// called on the peer's hello before any proof is sent, to refuse a rank,
// size or purpose that does not fit. The acceptor's hello takes the
// dialer's purpose.
func handshake(conn net.Conn, secret []byte, mine hello, dialer bool, check func(hello) error) (hello, error) {
	if _, err := rand.Read(mine.nonce[:]); err != nil {
		return hello{}, fmt.Errorf("handshake nonce: %w", err)
	}
	// The dialer speaks first; the acceptor answers with the purpose the
	// dialer asked for, once it has checked the dialer's hello.
	var out []byte
	if dialer {
		out = mine.encode()
		if _, err := conn.Write(out); err != nil {
			return hello{}, fmt.Errorf("handshake: %w", err)
		}
	}
	in := make([]byte, helloSize)
	if _, err := io.ReadFull(conn, in); err != nil {
		return hello{}, xerr.Detail(ErrAuth, "reading the peer's hello: %w", err)
	}
	peer, err := decodeHello(in)
	if err != nil {
		return hello{}, err
	}
	if peer.nonce == mine.nonce {
		return hello{}, xerr.Detail(ErrAuth, "the peer echoed this side's nonce")
	}
	if err := check(peer); err != nil {
		return hello{}, err
	}
	if !dialer {
		mine.purpose = peer.purpose
		out = mine.encode()
		if _, err := conn.Write(out); err != nil {
			return hello{}, fmt.Errorf("handshake: %w", err)
		}
	}
	dh, ah, myRole, peerRole := out, in, byte(roleDialer), byte(roleAcceptor)
	if !dialer {
		dh, ah, myRole, peerRole = in, out, roleAcceptor, roleDialer
	}
	if _, err := conn.Write(proof(secret, dh, ah, myRole)); err != nil {
		return hello{}, fmt.Errorf("handshake: %w", err)
	}
	got := make([]byte, macSize)
	if _, err := io.ReadFull(conn, got); err != nil {
		if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
			return hello{}, xerr.Detail(ErrAuth, "the peer hung up before proving membership (does it hold another secret?)")
		}
		return hello{}, xerr.Detail(ErrAuth, "reading the peer's proof: %w", err)
	}
	if !hmac.Equal(got, proof(secret, dh, ah, peerRole)) {
		return hello{}, xerr.Detail(ErrAuth, "the peer's proof does not match this job's secret")
	}
	return peer, nil
}

// checkHello returns a check for handshake that wants a peer of world size
// size with a rank that okRank accepts for the purpose announced.
func checkHello(size int, okRank func(purpose uint8, rank int) bool) func(hello) error {
	return func(h hello) error {
		if int(h.size) != size {
			return xerr.Detail(ErrAuth, "peer of a job of %d ranks, this job has %d", h.size, size)
		}
		if int(h.rank) >= size || !okRank(h.purpose, int(h.rank)) {
			return xerr.Detail(ErrAuth, "unexpected rank %d for purpose %d", h.rank, h.purpose)
		}
		return nil
	}
}
