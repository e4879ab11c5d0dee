package rdma

import (
	"encoding/binary"

	"github.com/xpu-go/xpu/xerr"
)

// The wire: every SEND between two ranks starts with a header of hdrLen
// bytes; an eager message's payload follows it in the same SEND. All
// integers are little-endian.
//
//	0  kind     u8   what the message is (kEager, kRTS, …)
//	1  flags    u8   kind-specific (fCanceled, fRevoke, …)
//	2  credits  u16  receive slots the sender has posted again for the peer
//	4  tag      u32  the message tag (reserved tags included)
//	8  size     u64  rendezvous: the message length
//	16 budget   u32  eager bytes the sender's receives have taken
//	20 rkey     u32  rendezvous: the key of the sender's buffer
//	24 id       u64  rendezvous: the sender's name for the message
//	32 addr     u64  rendezvous: the address of the sender's buffer
//
// A notification (kNotify) carries its bytes after the header, as an
// eager message does. The key messages (kKeyQuery, kKeyAnswer, kKeyGone)
// name a region by its key: addr, size (its length) and rkey.
//
// Credits and budget ride on every message (and on kCredit alone when
// nothing else goes back): a rank never sends a SEND the peer has no
// receive posted for, and never more eager bytes than the peer will hold
// unmatched.
const hdrLen = 40

// Message kinds.
const (
	kEager     = 1 + iota // payload follows
	kRTS                  // a large message announced: read it at addr/rkey
	kFin                  // the receiver is done with the RTS id (read, refused or canceled)
	kCancel               // the sender asks to cancel the RTS id
	kCredit               // credits and budget only
	kBye                  // the sender leaves the group (fRevoke: revoking collectives)
	kRevoke               // collectives are revoked
	kNotify               // a notification (comm.Notifier); its bytes follow
	kKeyQuery             // does the receiver expose the region addr/size/rkey?
	kKeyAnswer            // the answer to kKeyQuery: fValid when it does
	kKeyGone              // the receiver's region addr/size/rkey, answered valid, is closed
	kMaxKind
)

// Flags.
const (
	fCanceled = 1 << 0 // kFin: the message was canceled before any receive took it
	fRevoke   = 1 << 1 // kBye: the leaving rank revokes collectives; kFin: refused by a revocation
	fClosed   = 1 << 2 // kFin: refused because the receiver is closing
	fValid    = 1 << 3 // kKeyAnswer: the region is exposed
)

type header struct {
	kind    uint8
	flags   uint8
	credits uint16
	tag     uint32
	size    uint64
	budget  uint32
	rkey    uint32
	id      uint64
	addr    uint64
}

func (h *header) put(b []byte) {
	_ = b[hdrLen-1]
	b[0] = h.kind
	b[1] = h.flags
	binary.LittleEndian.PutUint16(b[2:], h.credits)
	binary.LittleEndian.PutUint32(b[4:], h.tag)
	binary.LittleEndian.PutUint64(b[8:], h.size)
	binary.LittleEndian.PutUint32(b[16:], h.budget)
	binary.LittleEndian.PutUint32(b[20:], h.rkey)
	binary.LittleEndian.PutUint64(b[24:], h.id)
	binary.LittleEndian.PutUint64(b[32:], h.addr)
}

// ErrProtocol reports a message that breaks the protocol: the link to its
// sender is cut, so the operations with it fail with comm.ErrPeerLost and
// this cause. It is every backend's (xerr.ErrProtocol), and matches
// comm.ErrInvalidArgument.
var ErrProtocol = xerr.ErrProtocol

// parseHeader decodes the header of a received message of n bytes. It
// checks what can be checked without the communicator's state: the
// length, the kind, and that only an eager message carries a payload.
func parseHeader(b []byte, n int) (header, error) {
	var h header
	if n < hdrLen || n > len(b) {
		return h, xerr.Detail(ErrProtocol, "a %d-byte message (header %d, slot %d)", n, hdrLen, len(b))
	}
	h.kind = b[0]
	h.flags = b[1]
	h.credits = binary.LittleEndian.Uint16(b[2:])
	h.tag = binary.LittleEndian.Uint32(b[4:])
	h.size = binary.LittleEndian.Uint64(b[8:])
	h.budget = binary.LittleEndian.Uint32(b[16:])
	h.rkey = binary.LittleEndian.Uint32(b[20:])
	h.id = binary.LittleEndian.Uint64(b[24:])
	h.addr = binary.LittleEndian.Uint64(b[32:])
	if h.kind == 0 || h.kind >= kMaxKind {
		return h, xerr.Detail(ErrProtocol, "unknown message kind %d", h.kind)
	}
	if h.kind != kEager && h.kind != kNotify && n != hdrLen {
		return h, xerr.Detail(ErrProtocol, "a kind-%d message with %d bytes of payload", h.kind, n-hdrLen)
	}
	if h.tag > 1<<31-1 {
		return h, xerr.Detail(ErrProtocol, "tag %d out of range", h.tag)
	}
	return h, nil
}
