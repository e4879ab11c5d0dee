package shm

import (
	"encoding/binary"
	"fmt"
	"math"
)

// Region is a shared-memory region that several processes of a node map:
// memory and nothing else, for callers that lay out their own control
// words (the procs backend's node collectives). It is made and attached as
// a Segment is (anonymous memory file, sealed, /proc, nonce).
type Region struct {
	mem   []byte
	fd    int // the creator's memory file until Attached; -1 after
	nonce [nonceSize]byte
}

// RegionOffer is what a process needs to attach a Region.
type RegionOffer struct {
	PID, FD int
	Size    int // bytes usable (Region.Bytes)
	Nonce   [nonceSize]byte
}

// regionHeader is the part of a region's memory before Bytes: magic, size,
// nonce.
const (
	regionHeader = 64
	regionMagic  = 0x58505552_45470001 // "XPUREG", then 0 and 1
	// MaxRegion is the largest region.
	MaxRegion = math.MaxUint32 - regionHeader
)

// Bytes returns the region's memory, shared with every process that has
// attached it. Words in it are read and written with sync/atomic by
// whoever shares them.
func (r *Region) Bytes() []byte { return r.mem[regionHeader:] }

// Encode returns o as OfferSize bytes: a segment's Offer with the size in
// place of the ring size.
func (o RegionOffer) Encode() []byte {
	return Offer{PID: o.PID, FD: o.FD, RingSize: o.Size, Nonce: o.Nonce}.Encode()
}

// DecodeRegionOffer parses an encoded RegionOffer.
func DecodeRegionOffer(b []byte) (RegionOffer, error) {
	o, err := DecodeOffer(b)
	if err != nil {
		return RegionOffer{}, err
	}
	return RegionOffer{PID: o.PID, FD: o.FD, Size: o.RingSize, Nonce: o.Nonce}, nil
}

func writeRegionHeader(mem []byte, size int, nonce [nonceSize]byte) {
	binary.LittleEndian.PutUint64(mem[0:], regionMagic)
	binary.LittleEndian.PutUint64(mem[8:], uint64(size))
	copy(mem[16:], nonce[:])
}

func checkRegionHeader(mem []byte, size int, nonce [nonceSize]byte) error {
	if binary.LittleEndian.Uint64(mem[0:]) != regionMagic || binary.LittleEndian.Uint64(mem[8:]) != uint64(size) {
		return fmt.Errorf("%w: not a region of %d bytes", ErrCorrupt, size)
	}
	if [nonceSize]byte(mem[16:16+nonceSize]) != nonce {
		return fmt.Errorf("%w: not the region offered (nonce differs)", ErrCorrupt)
	}
	return nil
}
