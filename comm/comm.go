package comm

import (
	"context"

	"github.com/xpu-go/xpu/memspace"
	"github.com/xpu-go/xpu/xerr"
)

// Errors returned by communicators; the values of package xerr.
var (
	ErrInvalidArgument = xerr.ErrInvalidArgument
	ErrNotSupported    = xerr.ErrNotSupported
	ErrClosed          = xerr.ErrClosed
	ErrPeerLost        = xerr.ErrPeerLost
	ErrTruncated       = xerr.ErrTruncated
	ErrCanceled        = xerr.ErrCanceled
	// ErrFallback is returned by a method of Collectives to ask the generic
	// function to run the shared algorithm instead (for a type, an op or a
	// memory space the native path does not handle). It is never returned
	// to users.
	ErrFallback = xerr.NewKind("native collective declined; use the shared algorithm", xerr.ErrNotSupported)
)

const (
	// AnySource as the source of a receive matches a message from any rank.
	AnySource = -1
	// AnyTag as the tag of a receive matches any user tag (never a
	// reserved one).
	AnyTag = -1
	// MaxTag is the largest user tag. Tags above it, up to MaxReservedTag,
	// are reserved for the collective algorithms of this package: backends
	// must carry them like any tag, and AnyTag must never match them.
	MaxTag = 1<<30 - 1
	// MaxReservedTag is the largest tag a backend must carry.
	MaxReservedTag = 1<<31 - 1
)

// Status describes a completed operation.
type Status struct {
	Source int // rank the message came from (receives); the destination (sends)
	Tag    int // tag of the message
	Count  int // bytes received or sent
}

// Request is a nonblocking operation in flight. Its buffer must not be
// touched (written for a send, read or written for a receive) until the
// request completes.
//
// Requests are safe for concurrent use.
type Request interface {
	// Wait blocks until the request completes and returns its status. On
	// ctx done it returns ctx.Err() and the request stays pending: wait
	// again, or Cancel it.
	Wait(ctx context.Context) (Status, error)
	// Test reports without blocking whether the request has completed, and
	// if so its status and error.
	Test() (st Status, done bool, err error)
	// Cancel asks for the request to be canceled. Afterwards Wait returns
	// promptly: either the request completed before the cancel took hold,
	// or it failed with ErrCanceled and its buffer is no longer used.
	Cancel() error
}

// Comm is a communicator: a group of Size ranks of which this is Rank,
// exchanging messages point to point.
//
// Messages match receives by (source, tag); AnySource and AnyTag are
// wildcards. Messages from one source with one tag are never overtaken: they
// match receives in the order they were sent. A message longer than the
// receive buffer fails the receive with ErrTruncated (and the message is
// consumed). Bad ranks and tags are ErrInvalidArgument, use after Close is
// ErrClosed, and an operation that involves a rank that died or closed fails
// with ErrPeerLost — never a hang.
//
// A collective involves the whole group, so failures revoke collectives (as
// ULFM's MPI_Comm_revoke does): once a collective operation (a reserved tag)
// meets a lost peer, or a rank crashes (dies without Close, or its link is
// lost), or closes after seeing a peer lost, or closes in the middle of a
// collective, every pending and later reserved-tag operation that would
// have to wait fails with ErrPeerLost on every rank the failure reaches —
// so no survivor waits for its context to expire. Messages already
// delivered can still be received, user tags are not revoked, and a rank
// that closes after finishing its part of every collective revokes nothing.
//
// A Comm is safe for concurrent use by many goroutines. The blocking forms
// are package functions (Send, Recv) built on Isend/Irecv; a backend that
// has faster blocking calls implements Blocking. The package functions
// Isend and Irecv are the methods that also take device memory.
type Comm interface {
	Rank() int
	Size() int
	// Isend starts sending buf to rank dest with tag. The send may complete
	// before a matching receive is posted (buffered) or only when one is.
	// A buf the backend cannot reach (device memory, for a host
	// transport) fails with an error matching ErrNotSupported that names
	// it (memspace.ErrNotHostAccessible, for local and tcp): the method
	// does not stage. Users call the package function Isend, which stages
	// such a buf through host memory and passes every other buf here
	// unchanged (see Device memory in the package documentation).
	Isend(buf memspace.Block, dest, tag int) (Request, error)
	// Irecv starts receiving into buf from source (or AnySource) with tag
	// (or AnyTag). A buf the backend cannot reach fails as for Isend; the
	// package function Irecv stages it.
	Irecv(buf memspace.Block, source, tag int) (Request, error)
	// Close leaves the group: pending requests of this rank fail with
	// ErrClosed, peers see ErrPeerLost for operations that need this rank.
	// Close always returns.
	Close() error
}

// Blocking is a Comm with native blocking calls, used by Send and Recv.
type Blocking interface {
	Send(ctx context.Context, buf memspace.Block, dest, tag int) error
	Recv(ctx context.Context, buf memspace.Block, source, tag int) (Status, error)
}

// DeviceNative is a communicator that moves some blocks the host cannot
// touch itself: device memory through CUDA IPC between processes of one
// machine, or a CUDA-aware MPI. Send, Recv, Sendrecv and the package
// functions Isend and Irecv hand it such a block as it is, where they
// would otherwise stage it through host memory
// (see Device memory in the package documentation). Found with As through
// wrappers.
type DeviceNative interface {
	// TakesDevice reports whether Isend and Irecv take b, a block the host
	// cannot touch, as it is. It must be cheap: it is asked per call.
	TakesDevice(b memspace.Block) bool
}

// takesDevice reports whether c moves b itself: a block the host can
// touch, an empty one, or a device block c is DeviceNative for.
// It inlines, and a block with a host mapping is answered without a call:
// a host block costs its callers (Send, Recv, Isend, Irecv, Put, Get)
// nothing.
func takesDevice(c Comm, b memspace.Block) bool {
	return b.HostPointer() != nil || takesOther(c, b)
}

// takesOther is takesDevice for a block with no host mapping: an empty
// one, or device memory c is DeviceNative for.
func takesOther(c Comm, b memspace.Block) bool {
	if b.HostAccessible() || b.IsZero() {
		return true
	}
	d, ok := As[DeviceNative](c)
	return ok && d.TakesDevice(b)
}

// Unwrapper is implemented by wrappers (fault injectors, tracers) so that
// capabilities are found through them.
type Unwrapper interface {
	Unwrap() Comm
}

// As finds the first communicator in the Unwrap chain of c that implements T.
func As[T any](c Comm) (T, bool) {
	for c != nil {
		if t, ok := c.(T); ok {
			return t, true
		}
		u, ok := c.(Unwrapper)
		if !ok {
			break
		}
		c = u.Unwrap()
	}
	var zero T
	return zero, false
}

// GroupFunc makes a group of n ranks in this process, for tests and for
// single-process multi-device programs. Rank i of the group is element i.
type GroupFunc func(ctx context.Context, n int) ([]Comm, error)
