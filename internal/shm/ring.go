package shm

import (
	"encoding/binary"
	"errors"
	"fmt"
	"sync/atomic"
	"unsafe"

	"github.com/xpu-go/xpu/internal/order"
)

// ErrCorrupt reports a ring whose shared indexes are impossible: a head or
// tail that moved backwards or past the other, or a header that is not a
// segment of this version. The stream cannot go on.
var ErrCorrupt = errors.New("shm: corrupt ring")

// Segment layout. The header page holds the identity of the segment and
// the control words of the two rings, each word on a line of its own (128
// bytes: a cache line and its prefetched neighbour); the rings' bytes
// follow, ring 0 (creator to attacher) then ring 1, and then the two
// directories (dir.go), the creator's then the attacher's.
const (
	headerSize = 4096
	magic      = 0x58505553484d0001 // "XPUSHM", then 0 and 1
	version    = 2
	nonceSize  = 16

	offMagic    = 0
	offVersion  = 8
	offRingSize = 12
	offNonce    = 16

	ctrlBase = 256 // control block of ring 0; ring 1's follows
	ctrlSize = 512
	line     = 128
	// Offsets within a control block.
	offHead     = line     // bytes consumed by the consumer (the producer's position is in its records)
	offSleeping = 2 * line // the consumer sleeps: ring the doorbell
	offWaiting  = 3 * line // the producer waits for space: ring it
)

// Ring sizes: powers of two in [MinRing, MaxRing].
const (
	MinRing     = 4 << 10
	MaxRing     = 64 << 20
	DefaultRing = 1 << 20
)

// segmentSize is the length of a segment whose rings hold ringSize bytes.
func segmentSize(ringSize int) int { return headerSize + 2*ringSize + 2*dirSize }

// ring is one direction of a segment as one side sees it: the control
// words and the bytes, in shared memory.
type ring struct {
	head     *atomic.Uint64
	sleeping *atomic.Uint32
	waiting  *atomic.Uint32
	data     []byte
	mask     uint64
}

// ringAt returns ring i (0 or 1) of the segment mem, whose rings hold
// size bytes (a power of two, len(mem) == segmentSize(size)).
func ringAt(mem []byte, i, size int) ring {
	ctl := ctrlBase + i*ctrlSize
	off := headerSize + i*size
	return ring{
		head:     (*atomic.Uint64)(unsafe.Pointer(&mem[ctl+offHead])),
		sleeping: (*atomic.Uint32)(unsafe.Pointer(&mem[ctl+offSleeping])),
		waiting:  (*atomic.Uint32)(unsafe.Pointer(&mem[ctl+offWaiting])),
		data:     mem[off : off+size : off+size],
		mask:     uint64(size - 1),
	}
}

// Records. Every write publishes a record at the producer's position: a
// header of two words — the record's position plus one, then its length —
// and the bytes, padded to recAlign. The consumer polls the header at its
// own position, so a small message costs it one cache line (header and
// bytes together) where a separate tail would cost two; a header whose
// position is not the consumer's is older than the record awaited (or not
// yet written), so nothing needs clearing.
const (
	recAlign  = 64
	recHeader = 16
)

// FrameHeader is the length of the header TryWriteFrame writes before a
// payload: a frame header of the procs wire.
const FrameHeader = 32

func recSize(n uint64) uint64 { return (recHeader + n + recAlign - 1) &^ (recAlign - 1) }

// producer writes a ring. tail is its own count of bytes published, never
// read back from shared memory; head is the last consumer index it saw.
type producer struct {
	r        ring
	tail     uint64
	head     uint64
	reserved uint64 // the length of the record reserve returned, for commit
	// next is tail, stored after each record with a release and loaded
	// atomically by Conn.PrepareWrite, which does not hold the writer's
	// side: the place of the next record, for a hint.
	next uint64
}

// refresh loads the consumer's index, when the last one seen leaves too
// little room; ErrCorrupt when it moved backwards or past the producer.
func (w *producer) refresh() error {
	h := w.r.head.Load()
	if h-w.head > w.tail-w.head {
		return fmt.Errorf("%w: consumer index %d outside [%d, %d]", ErrCorrupt, h, w.head, w.tail)
	}
	w.head = h
	return nil
}

// write copies as much of p as fits in one record and publishes it; it
// never blocks. It returns ErrCorrupt when the consumer's index is
// impossible.
func (w *producer) write(p []byte) (int, error) {
	size := uint64(len(w.r.data))
	if size-(w.tail-w.head) < recAlign {
		if err := w.refresh(); err != nil {
			return 0, err
		}
	}
	free := (size - (w.tail - w.head)) &^ (recAlign - 1)
	if free < recAlign || len(p) == 0 {
		return 0, nil
	}
	n := min(uint64(len(p)), free-recHeader)
	at := w.tail & w.r.mask
	binary.LittleEndian.PutUint64(w.r.data[at+8:], n)
	from := (at + recHeader) & w.r.mask
	k := copy(w.r.data[from:], p[:n])
	copy(w.r.data, p[k:n])
	RaceRelease() // after the copy, before the record can be seen
	// Swap, not Store: the writer loads the reader's sleeping flag next
	// (fence; see fence in conn.go).
	(*atomic.Uint64)(unsafe.Pointer(&w.r.data[at])).Swap(w.tail + 1)
	w.tail += recSize(n)
	order.Release(&w.next, w.tail)
	return int(n), nil
}

// writeFrame publishes hdr then p as one record when the ring has room
// for both now, as writeAll does; hdr is stored with one assignment (a
// record's first 48 bytes never wrap), not copied through memmove.
func (w *producer) writeFrame(hdr *[FrameHeader]byte, p []byte) (bool, error) {
	a, b, ok, err := w.reserve(FrameHeader + len(p))
	if !ok {
		return false, err
	}
	*(*[FrameHeader]byte)(a) = *hdr
	Fill(a, b, FrameHeader, p)
	w.commit()
	return true, nil
}

// Fill copies src into p and q joined, from byte off: into the two pieces
// of a record (reserve).
func Fill(p, q []byte, off int, src []byte) {
	if off < len(p) {
		k := copy(p[off:], src)
		copy(q, src[k:])
		return
	}
	copy(q[off-len(p):], src)
}

// Gather fills dst with the bytes of p and q joined, from byte off: out of
// the two pieces of a record (Next). It returns how many it copied.
func Gather(dst, p, q []byte, off int) int {
	if off < len(p) {
		k := copy(dst, p[off:])
		return k + copy(dst[k:], q)
	}
	return copy(dst, q[off-len(p):])
}

// reserve returns the bytes of a record of n bytes at the producer's
// position, in p and in q what wraps past the ring's end, when the ring
// has room for it now; commit publishes the record once they are written.
// ok is false, and nothing reserved, when the room is not there. It
// returns ErrCorrupt when the consumer's index is impossible.
func (w *producer) reserve(n int) (p, q []byte, ok bool, err error) {
	size := uint64(len(w.r.data))
	need := recSize(uint64(n))
	if n <= 0 || need > size {
		return nil, nil, false, nil
	}
	if need > size-(w.tail-w.head) {
		if err := w.refresh(); err != nil {
			return nil, nil, false, err
		}
		if need > size-(w.tail-w.head) {
			return nil, nil, false, nil
		}
	}
	w.reserved = uint64(n)
	// A record starts on a line of recAlign bytes, and the ring is
	// longer than one: its header and the first recAlign-recHeader
	// bytes never wrap.
	from := (w.tail + recHeader) & w.r.mask
	end := from + uint64(n)
	if end <= size {
		return w.r.data[from:end:end], nil, true, nil
	}
	return w.r.data[from:], w.r.data[: end-size : end-size], true, nil
}

// commit publishes the record reserve returned.
func (w *producer) commit() {
	at := w.tail & w.r.mask
	binary.LittleEndian.PutUint64(w.r.data[at+8:], w.reserved)
	RaceRelease() // after the copy, before the record can be seen
	// Swap, not Store: see write.
	(*atomic.Uint64)(unsafe.Pointer(&w.r.data[at])).Swap(w.tail + 1)
	w.tail += recSize(w.reserved)
	order.Release(&w.next, w.tail)
	w.reserved = 0
}

// room reports whether n bytes fit in one record now, so that a write of
// them returns without waiting.
func (w *producer) room(n int) bool {
	size := uint64(len(w.r.data))
	need := recSize(uint64(n))
	if need <= size-(w.tail-w.head) {
		// Enough by the last index seen: the consumer's line stays in its
		// cache.
		return true
	}
	h := w.r.head.Load()
	used := w.tail - h
	return used <= size && need <= size-used
}

// full reports whether the ring has no room for a record, as last seen:
// for the wait for space, after which write looks again.
func (w *producer) full() bool {
	h := w.r.head.Load()
	return w.tail-h > uint64(len(w.r.data))-recAlign && h-w.head <= w.tail-w.head
}

// consumer reads a ring. head is its own count of bytes consumed, never
// read back from shared memory; pub is the count last published to the
// writer (done); left and off describe the record being read.
type consumer struct {
	r    ring
	head uint64
	pub  uint64
	left uint64 // bytes of the current record not yet read; 0: none
	off  uint64 // bytes of it read
	size uint64 // its size in the ring
}

// ready reports whether a record is there to read, checking its length.
func (rd *consumer) ready() (bool, error) {
	if rd.left > 0 {
		return true, nil
	}
	at := rd.head & rd.r.mask
	if (*atomic.Uint64)(unsafe.Pointer(&rd.r.data[at])).Load() != rd.head+1 {
		return false, nil
	}
	n := binary.LittleEndian.Uint64(rd.r.data[at+8:])
	if n == 0 || n > uint64(len(rd.r.data))-recHeader {
		return false, fmt.Errorf("%w: record of %d bytes at %d in a ring of %d", ErrCorrupt, n, rd.head, len(rd.r.data))
	}
	rd.left, rd.off, rd.size = n, 0, recSize(n)
	return true, nil
}

// read copies up to len(p) published bytes into p, frees the room of a
// record read to its end; it never blocks.
func (rd *consumer) read(p []byte) (int, error) {
	ok, err := rd.ready()
	if !ok || len(p) == 0 {
		return 0, err
	}
	n := min(rd.left, uint64(len(p)))
	from := (rd.head + recHeader + rd.off) & rd.r.mask
	k := copy(p[:n], rd.r.data[from:])
	copy(p[k:n], rd.r.data)
	rd.off += n
	rd.left -= n
	if rd.left == 0 {
		rd.done()
	}
	return int(n), nil
}

// done frees the record just read to its end. The writer learns of it at
// once when a quarter of the ring or more is freed and not yet published,
// else at the next look that finds no record to read (flush): a message's
// reader does not pay the publication, a locked instruction, between the
// message and its caller, and a stream pays it once a quarter ring. The
// caller loads the writer's waiting flag next (wakeWriter).
func (rd *consumer) done() {
	rd.head += rd.size
	if rd.head-rd.pub >= uint64(len(rd.r.data))/4 {
		rd.publish()
	}
}

// flush publishes the records done has freed and not published, and
// reports whether there were any: the caller then loads the writer's
// waiting flag (wakeWriter). Every wait for a record flushes before it
// sleeps, so a writer waiting for room is never kept waiting by a reader
// that has nothing to read.
func (rd *consumer) flush() bool {
	if rd.pub == rd.head {
		return false
	}
	rd.publish()
	return true
}

func (rd *consumer) publish() {
	rd.pub = rd.head
	rd.r.head.Swap(rd.head) // the writer's waiting flag is loaded next (fence)
}

// view returns the unread bytes of the record ready() found, in place: in
// a, and in b what wraps past the ring's end (else empty).
func (rd *consumer) view() (a, b []byte) {
	from := (rd.head + recHeader + rd.off) & rd.r.mask
	end := from + rd.left
	if end <= uint64(len(rd.r.data)) {
		return rd.r.data[from:end:end], nil
	}
	return rd.r.data[from:], rd.r.data[:end-uint64(len(rd.r.data))]
}

// skip frees the record ready() found, read or not (done).
func (rd *consumer) skip() {
	rd.off += rd.left
	rd.left = 0
	rd.done()
}

// writeHeader writes the identity of a new segment into mem.
func writeHeader(mem []byte, ringSize int, nonce [nonceSize]byte) {
	binary.LittleEndian.PutUint64(mem[offMagic:], magic)
	binary.LittleEndian.PutUint32(mem[offVersion:], version)
	binary.LittleEndian.PutUint32(mem[offRingSize:], uint32(ringSize))
	copy(mem[offNonce:], nonce[:])
}

// checkHeader checks that mem is a segment of this version with the nonce
// and returns its ring size.
func checkHeader(mem []byte, nonce [nonceSize]byte) (int, error) {
	if len(mem) < headerSize {
		return 0, fmt.Errorf("%w: %d bytes, smaller than a header", ErrCorrupt, len(mem))
	}
	if m := binary.LittleEndian.Uint64(mem[offMagic:]); m != magic {
		return 0, fmt.Errorf("%w: magic %#x", ErrCorrupt, m)
	}
	if v := binary.LittleEndian.Uint32(mem[offVersion:]); v != version {
		return 0, fmt.Errorf("%w: version %d, want %d", ErrCorrupt, v, version)
	}
	if [nonceSize]byte(mem[offNonce:offNonce+nonceSize]) != nonce {
		return 0, fmt.Errorf("%w: not the segment offered (nonce differs)", ErrCorrupt)
	}
	size := int(binary.LittleEndian.Uint32(mem[offRingSize:]))
	if err := checkRingSize(size); err != nil {
		return 0, fmt.Errorf("%w: %w", ErrCorrupt, err)
	}
	if len(mem) != segmentSize(size) {
		return 0, fmt.Errorf("%w: %d bytes for rings of %d", ErrCorrupt, len(mem), size)
	}
	return size, nil
}

// checkRingSize checks a ring size: a power of two in [MinRing, MaxRing].
func checkRingSize(size int) error {
	if size < MinRing || size > MaxRing || size&(size-1) != 0 {
		return fmt.Errorf("ring size %d is not a power of two in [%d, %d]", size, MinRing, MaxRing)
	}
	return nil
}
