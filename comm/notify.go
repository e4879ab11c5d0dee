package comm

import (
	"context"

	"github.com/xpu-go/xpu/memspace"
	"github.com/xpu-go/xpu/xerr"
)

// Notifications: a rank that wrote into another's region, or read from
// it, tells that rank so with a small message the target receives after
// the bytes are in place, without a receive posted for the data — NIXL's
// notifications, NCCL's put with signal, a Put followed by a message in
// MPI. They are not messages: they match no receive, take no tag, and
// are read with WaitNotification.

// MaxNotification is the longest notification, in bytes.
const MaxNotification = 4096

// Notification is a notification a rank received.
type Notification struct {
	Source int    // the rank that sent it
	Msg    []byte // its bytes, the receiver's to keep
}

// Notifier is a OneSided communicator whose ranks notify each other of
// transfers done. Its methods are safe for concurrent use.
type Notifier interface {
	OneSided
	// Notify sends msg (at most MaxNotification bytes; empty is allowed)
	// to rank, which receives it after every Put and Get this rank
	// started to it before the call is complete there: the Puts' bytes in
	// place in its regions, the Gets' read out of them. It returns once
	// msg is on its way; ctx bounds the wait for transfers it must wait
	// for first. A bad rank or a msg too long fails with
	// ErrInvalidArgument, a lost rank with ErrPeerLost. A rank may
	// notify itself.
	Notify(ctx context.Context, rank int, msg []byte) error
	// WaitNotification returns the oldest notification received and not
	// yet returned, waiting for one until ctx ends. With a context that
	// has ended it returns one that has arrived, or ctx's error: a poll.
	// After Close it fails with ErrClosed.
	WaitNotification(ctx context.Context) (Notification, error)
}

// PutNotify writes src into the region dst names, off bytes into it,
// and notifies dst's rank with msg once the bytes are there: a Put, then
// Notify. It returns the Put's request.
func PutNotify(ctx context.Context, c Notifier, src memspace.Block, dst RemoteKey, off int, msg []byte) (Request, error) {
	if err := checkNotification(c, msg); err != nil {
		return nil, err
	}
	r, err := c.Put(src, dst, off)
	if err != nil {
		return nil, err
	}
	if err := c.Notify(ctx, dst.Rank, msg); err != nil {
		_, _ = r.Wait(ctx)
		return nil, err
	}
	return r, nil
}

// checkNotification checks msg before any transfer starts, so that a
// notification too long fails the call and moves nothing.
func checkNotification(c Comm, msg []byte) error {
	if !validComm(c) {
		return xerr.Detail(ErrInvalidArgument, "comm: a nil communicator")
	}
	if len(msg) > MaxNotification {
		return xerr.Detail(ErrInvalidArgument, "comm: a notification of %d bytes, more than %d", len(msg), MaxNotification)
	}
	return nil
}
