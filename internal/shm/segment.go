package shm

import (
	"encoding/binary"
	"fmt"
)

// Segment is a mapped shared-memory segment: its two rings and, on the
// creator's side until the peer has attached (Attached), the memory
// file's descriptor.
type Segment struct {
	mem     []byte
	size    int // of one ring
	creator bool
	fd      int // the memory file, -1 once closed
	nonce   [nonceSize]byte
}

// Offer is what the attacher needs to find and check a segment: the
// creator's PID and descriptor, the ring size and the nonce. The creator
// sends it over an authenticated connection.
type Offer struct {
	PID, FD  int
	RingSize int
	Nonce    [nonceSize]byte
}

// RingSize returns the size of each ring.
func (s *Segment) RingSize() int { return s.size }

// rings returns the producer and consumer of this side.
func (s *Segment) rings() (producer, consumer) {
	out, in := 0, 1
	if !s.creator {
		out, in = 1, 0
	}
	// A segment starts with both rings empty: the indexes start at zero,
	// never read back from shared memory.
	return producer{r: ringAt(s.mem, out, s.size)}, consumer{r: ringAt(s.mem, in, s.size)}
}

// OfferSize is the length of an encoded Offer.
const OfferSize = 32

// Encode returns o as OfferSize bytes.
func (o Offer) Encode() []byte {
	b := make([]byte, OfferSize)
	binary.LittleEndian.PutUint32(b[0:], uint32(o.PID))
	binary.LittleEndian.PutUint32(b[4:], uint32(o.FD))
	binary.LittleEndian.PutUint32(b[8:], uint32(o.RingSize))
	copy(b[16:], o.Nonce[:])
	return b
}

// DecodeOffer parses an encoded Offer.
func DecodeOffer(b []byte) (Offer, error) {
	if len(b) != OfferSize {
		return Offer{}, fmt.Errorf("%w: offer of %d bytes, want %d", ErrCorrupt, len(b), OfferSize)
	}
	if binary.LittleEndian.Uint32(b[12:]) != 0 {
		return Offer{}, fmt.Errorf("%w: offer with nonzero padding", ErrCorrupt)
	}
	o := Offer{
		PID:      int(binary.LittleEndian.Uint32(b[0:])),
		FD:       int(binary.LittleEndian.Uint32(b[4:])),
		RingSize: int(binary.LittleEndian.Uint32(b[8:])),
	}
	copy(o.Nonce[:], b[16:])
	return o, nil
}
