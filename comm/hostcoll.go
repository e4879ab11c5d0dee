package comm

import (
	"context"
	"unsafe"

	"github.com/xpu-go/xpu/flight"
	"github.com/xpu-go/xpu/memspace"
)

// HostCollectives is implemented by a communicator whose native
// collectives also take host memory as bytes. The typed collectives that
// it covers (Allreduce, Bcast) hand it the bytes of buffers the host can
// touch, after the checks every collective makes, instead of their Blocks:
// a Block is five words, and passed through the layers of a small
// collective it is copied through memory at each, which costs more than
// the checks (ADR 45).
//
// A method returns ErrFallback to decline: the collective then runs as if
// the communicator had no HostCollectives (its Collectives method, else
// the shared algorithms), under the same flight record. Only the
// communicator's own methods count: a wrapper that does not implement
// HostCollectives itself is called through Collectives, so that it sees
// every collective. A wrapper struct that embeds such a communicator (a
// pointer to it, not the Comm interface) has these methods promoted: if it
// overrides Allreduce or Bcast to observe or change them, it must override
// these too.
type HostCollectives interface {
	// AllreduceBytes is Collectives.Allreduce over host bytes: send and
	// recv have the same nonzero length, a whole number of dt, and are
	// the same bytes or disjoint.
	AllreduceBytes(ctx context.Context, send, recv []byte, dt DType, op Op) error
	// BcastBytes is Collectives.Bcast over host bytes: buf is not empty,
	// and root is a rank of the communicator.
	BcastBytes(ctx context.Context, buf []byte, root int) error
}

// bufferBytes returns the host bytes of b, nil when b is nil, freed, empty
// or not host-accessible: the general path reports or handles those.
func bufferBytes[T any](b *memspace.Buffer[T]) []byte {
	if b == nil {
		return nil
	}
	s, err := b.Host()
	if err != nil || len(s) == 0 {
		return nil
	}
	return unsafe.Slice((*byte)(unsafe.Pointer(unsafe.SliceData(s))), len(s)*int(unsafe.Sizeof(s[0])))
}

// allreduceHost runs Allreduce through hc when the buffers' bytes allow it
// (done), else leaves it to the general path, which reports what is wrong.
func allreduceHost[T Number](ctx context.Context, c Comm, hc HostCollectives, send, recv *memspace.Buffer[T], op Op) (err error, done bool) {
	const name = "allreduce"
	sb, rb := bufferBytes(send), bufferBytes(recv)
	if sb == nil || rb == nil || len(sb) != len(rb) || bytesPartly(sb, rb) {
		return nil, false
	}
	p, _, err := checkComm(ctx, c, name)
	if err != nil {
		return err, true
	}
	dt := DTypeOf[T]()
	if err := checkElems(name, dt, op, len(sb)); err != nil {
		return err, true
	}
	t := postColl(c, flight.OpAllreduce, flight.NoPeer, int64(send.Len()), dt.String(), op.String())
	defer func() { endFlight(t, err) }()
	if err := hc.AllreduceBytes(ctx, sb, rb, dt, op); !isFallback(err) {
		return err, true
	}
	return allreduceRest(ctx, c, p, send.Block(), recv.Block(), dt, op), true
}

// bcastHost runs Bcast through hc when the buffer's bytes allow it (done),
// else leaves it to the general path, which reports what is wrong.
func bcastHost[T any](ctx context.Context, c Comm, hc HostCollectives, buf *memspace.Buffer[T], root int) (err error, done bool) {
	const name = "bcast"
	b := bufferBytes(buf)
	if b == nil {
		return nil, false
	}
	p, rank, err := checkComm(ctx, c, name)
	if err != nil {
		return err, true
	}
	if err := checkRoot(p, root, name); err != nil {
		return err, true
	}
	t := postColl(c, flight.OpBcast, root, int64(len(b)), "byte", "")
	defer func() { endFlight(t, err) }()
	if err := hc.BcastBytes(ctx, b, root); !isFallback(err) {
		return err, true
	}
	return bcastRest(ctx, c, p, buf.Block(), root, rank), true
}

// bytesPartly reports whether a and b share bytes without being the same
// bytes (an allreduce runs in place or between disjoint buffers): the
// test AllreduceBlock makes of two blocks, on host bytes.
func bytesPartly(a, b []byte) bool {
	pa, pb := unsafe.Pointer(unsafe.SliceData(a)), unsafe.Pointer(unsafe.SliceData(b))
	return maybeShared(memspace.Addr(uintptr(pa)), len(a), pa, memspace.Addr(uintptr(pb)), len(b), pb)
}
