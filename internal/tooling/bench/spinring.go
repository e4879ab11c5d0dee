package bench

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"sync/atomic"
	"time"
	"unsafe"

	"github.com/xpu-go/xpu/comm"
	"github.com/xpu-go/xpu/internal/order"
)

// SpinRing is the floor of a ping-pong between two processes of one
// machine, measured by the processes under test: one shared mapping of two
// slots, each a sequence word and 8 bytes on a cache line of its own, and
// nothing else. A side writes its bytes, publishes the sequence with a
// release store, and spins on the other slot's sequence. It does what
// shm_ring_ref.c's ping-pong does, so the two read alike; what it adds is
// that tcpbench runs it in the same processes as the communicator's
// ping-pong, run for run alternately (tcpbench's paired), so each round's
// ratio compares the two at the same moment of the machine: the C ring,
// run apart, samples another moment, and on a virtual machine the cost of
// moving a line between processors moves by half from one moment to the
// next (docs/adr/0049-the-floor-at-the-same-moment.md).
//
// One SpinRing is used by one goroutine on each side. Every wait is
// bounded: a side that sees no answer within the stall limit returns
// ErrSpinStall.
type SpinRing struct {
	mem   []byte
	seq   uint64 // round trips begun by this side
	stall time.Duration
	fd    int // side 0's memory file until Attached, else -1
	close func() error
}

// ErrSpinStall reports a spin ring whose peer published nothing within the
// stall limit: it died, or it stopped taking part.
var ErrSpinStall = errors.New("bench: spin ring: the peer answered nothing")

// spinRingSize is the mapping's length: a page.
const spinRingSize = 4096

// Offsets of the two slots (side 0 writes ping, side 1 writes pong), each
// on a line pair of its own (128 bytes: a line and its prefetched
// neighbour), so that a side's writes never touch the line the other
// side writes.
const (
	spinPing = 0
	spinPong = 128
)

// spinCheckEvery is how many spins pass between looks at the clock.
const spinCheckEvery = 4096

// DefaultSpinStall is how long a side of a SpinRing waits for its peer.
const DefaultSpinStall = 10 * time.Second

func newSpinRing(mem []byte, close func() error) *SpinRing {
	return &SpinRing{mem: mem, stall: DefaultSpinStall, fd: -1, close: close}
}

// SetStall sets how long a side waits for its peer before ErrSpinStall.
func (s *SpinRing) SetStall(d time.Duration) { s.stall = d }

func (s *SpinRing) word(off int) *uint64 { return (*uint64)(unsafe.Pointer(&s.mem[off])) }

// PingPong is one round trip on side 0 or 1: side 0 sends buf's 8 bytes and
// reads the answer into buf; side 1 waits for them, copies them into buf,
// and sends them back. It returns ErrSpinStall when the peer does not
// answer within the stall limit, and an error for a side other than 0 and
// 1 or a buf other than 8 bytes.
func (s *SpinRing) PingPong(side int, buf []byte) error {
	if len(buf) != 8 || side&^1 != 0 {
		return fmt.Errorf("bench: spin ring: side %d with %d bytes: want side 0 or 1 and 8 bytes", side, len(buf))
	}
	s.seq++
	mine, theirs := spinPing, spinPong
	if side == 1 {
		mine, theirs = theirs, mine
		if err := s.await(theirs); err != nil {
			return err
		}
		copy(buf, s.mem[theirs+8:theirs+16])
	}
	copy(s.mem[mine+8:mine+16], buf)
	order.Release(s.word(mine), s.seq)
	if side == 0 {
		if err := s.await(theirs); err != nil {
			return err
		}
		copy(buf, s.mem[theirs+8:theirs+16])
	}
	return nil
}

// await spins until the slot at off holds this round trip's sequence.
func (s *SpinRing) await(off int) error {
	p := s.word(off)
	var deadline time.Time
	for n := 1; atomic.LoadUint64(p) != s.seq; n++ {
		if n%spinCheckEvery != 0 {
			continue
		}
		switch now := time.Now(); {
		case deadline.IsZero():
			deadline = now.Add(s.stall)
		case now.After(deadline):
			return fmt.Errorf("%w in %v (round trip %d)", ErrSpinStall, s.stall, s.seq)
		}
	}
	return nil
}

// Close unmaps the ring.
func (s *SpinRing) Close() error {
	if s.close == nil {
		return nil
	}
	err := s.close()
	s.close, s.mem = nil, nil
	return err
}

// SpinOffer is what the peer needs to map a SpinRing: the creating
// process and the descriptor of the memory file in it.
type SpinOffer struct {
	PID, FD int
}

// Encode returns the offer as 16 bytes.
func (o SpinOffer) Encode() []byte {
	b := make([]byte, 16)
	binary.LittleEndian.PutUint64(b, uint64(o.PID))
	binary.LittleEndian.PutUint64(b[8:], uint64(o.FD))
	return b
}

// DecodeSpinOffer reads an offer Encode wrote.
func DecodeSpinOffer(b []byte) (SpinOffer, error) {
	if len(b) != 16 {
		return SpinOffer{}, fmt.Errorf("bench: spin ring offer of %d bytes, want 16", len(b))
	}
	return SpinOffer{PID: int(binary.LittleEndian.Uint64(b)), FD: int(binary.LittleEndian.Uint64(b[8:]))}, nil
}

// ShareSpinRing maps a SpinRing between ranks 0 and 1 of c, which must
// both call it, on one machine: rank 0 makes it and sends its offer, rank
// 1 maps it and says whether it could, and rank 0 then closes its
// descriptor. Rank 0 is side 0 of the ring, rank 1 side 1.
func ShareSpinRing(ctx context.Context, c comm.Comm) (*SpinRing, error) {
	const tag = 10
	var ack [1]byte
	switch c.Rank() {
	case 0:
		ring, offer, err := NewSpinRing()
		if err != nil {
			return nil, err
		}
		if err := comm.Send(ctx, c, Block(offer.Encode()), 1, tag); err != nil {
			_ = ring.Close()
			return nil, err
		}
		if _, err := comm.Recv(ctx, c, Block(ack[:]), 1, tag); err != nil {
			_ = ring.Close()
			return nil, err
		}
		ring.Attached()
		if ack[0] != 1 {
			_ = ring.Close()
			return nil, errors.New("bench: spin ring: rank 1 could not map it")
		}
		return ring, nil
	case 1:
		b := make([]byte, 16)
		if _, err := comm.Recv(ctx, c, Block(b), 0, tag); err != nil {
			return nil, err
		}
		offer, err := DecodeSpinOffer(b)
		var ring *SpinRing
		if err == nil {
			ring, err = AttachSpinRing(offer)
		}
		if err == nil {
			ack[0] = 1
		}
		if serr := comm.Send(ctx, c, Block(ack[:]), 0, tag); serr != nil && err == nil {
			_ = ring.Close()
			return nil, serr
		}
		return ring, err
	}
	return nil, fmt.Errorf("bench: spin ring: rank %d: only ranks 0 and 1 share one", c.Rank())
}
