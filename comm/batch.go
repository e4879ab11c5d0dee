package comm

import (
	"context"
	"errors"
	"fmt"

	"github.com/xpu-go/xpu/memspace"
	"github.com/xpu-go/xpu/xerr"
)

// Batched one-sided transfers: a list of Puts (or Gets) checked once and
// started many times, as NIXL's prepared descriptor lists, Mooncake's
// batches and StepMesh's push and pull of registered tensors are — a
// server that pulls the same thousand pages every step pays for their
// checks once.

// Xfer is one transfer of a batch: Local's bytes, to or from the region
// Remote names, RemoteOff bytes into it. Its length is Local's.
type Xfer struct {
	Local     memspace.Block
	Remote    RemoteKey
	RemoteOff int
}

// XferError is the error of the transfer at Index of a batch. It unwraps
// to the transfer's error, so errors.Is matches its sentinel.
type XferError struct {
	Index int
	Err   error
}

func (e *XferError) Error() string {
	return fmt.Sprintf("transfer %d of the batch: %v", e.Index, e.Err)
}

// Unwrap returns the transfer's error.
func (e *XferError) Unwrap() error { return e.Err }

// Batch is a list of Puts or Gets of one communicator, checked by
// PrepareBatch and started together by Post, as often as needed. It is
// safe for concurrent use; its transfers, like any others, are not
// ordered among themselves.
type Batch struct {
	c      OneSided
	put    bool
	xfers  []Xfer
	native PreparedXfers // the communicator's own form, if it has one
	ranks  []int         // the ranks the batch reaches, each once
}

// Batcher is a OneSided communicator that prepares batches itself — it
// checks and encodes the list once and moves it as one — rather than as
// one Put or Get per descriptor. PrepareBatch uses it when c has it.
type Batcher interface {
	OneSided
	// PrepareXfers prepares xfers, which PrepareBatch has checked, for
	// Puts (put) or Gets. It may keep the slice.
	PrepareXfers(put bool, xfers []Xfer) (PreparedXfers, error)
}

// PreparedXfers is a list of transfers a Batcher prepared.
type PreparedXfers interface {
	// Post starts every transfer, as Batch.Post does: its request
	// completes once every one has, and its errors are *XferError.
	Post(ctx context.Context) (Request, error)
}

// PrepareBatch checks xfers for a batch of Puts (put) or Gets on c: every
// remote key names a rank of c, every range lies within its region, and
// every local block is memory c can reach (host memory). A bad descriptor
// is an *XferError naming its index, matching ErrInvalidArgument (or
// ErrNotSupported for memory c cannot reach). The batch keeps its own copy
// of the list.
func PrepareBatch(c OneSided, put bool, xfers []Xfer) (*Batch, error) {
	if !validComm(c) {
		return nil, xerr.Detail(ErrInvalidArgument, "comm: PrepareBatch: a nil communicator")
	}
	for i, x := range xfers {
		if err := checkXfer(c, x); err != nil {
			return nil, &XferError{Index: i, Err: err}
		}
	}
	b := &Batch{c: c, put: put, xfers: append([]Xfer(nil), xfers...)}
	seen := make(map[int]bool)
	for _, x := range b.xfers {
		if !seen[x.Remote.Rank] {
			seen[x.Remote.Rank] = true
			b.ranks = append(b.ranks, x.Remote.Rank)
		}
	}
	if nb, ok := c.(Batcher); ok {
		p, err := nb.PrepareXfers(put, b.xfers)
		if err != nil {
			return nil, err
		}
		b.native = p
	}
	return b, nil
}

// checkXfer checks one descriptor of a batch.
func checkXfer(c Comm, x Xfer) error {
	n := x.Local.Len()
	switch {
	case x.Remote.Rank < 0 || x.Remote.Rank >= c.Size():
		return xerr.Detail(ErrInvalidArgument, "comm: %v is a key of no rank of %d", x.Remote, c.Size())
	case x.RemoteOff < 0 || x.RemoteOff > x.Remote.Len || n > x.Remote.Len-x.RemoteOff:
		return xerr.Detail(ErrInvalidArgument, "comm: %d bytes at offset %d of %v", n, x.RemoteOff, x.Remote)
	case n > 0 && !x.Local.HostAccessible():
		return xerr.Detail(memspace.ErrNotHostAccessible, "comm: local block %v", x.Local)
	}
	return nil
}

// Len returns the number of transfers of the batch.
func (b *Batch) Len() int { return len(b.xfers) }

// Post starts every transfer of the batch. The request completes once
// every one has; its error is the first transfer's that failed, as an
// *XferError. When a transfer cannot start, Post waits for those it
// started, within ctx, and returns that one's error, as an *XferError.
func (b *Batch) Post(ctx context.Context) (Request, error) {
	if b.native != nil {
		return b.native.Post(ctx)
	}
	reqs := make([]Request, 0, len(b.xfers))
	for i, x := range b.xfers {
		var r Request
		var err error
		if b.put {
			r, err = b.c.Put(x.Local, x.Remote, x.RemoteOff)
		} else {
			r, err = b.c.Get(x.Local, x.Remote, x.RemoteOff)
		}
		if err != nil {
			_ = WaitAll(ctx, reqs...)
			return nil, &XferError{Index: i, Err: err}
		}
		reqs = append(reqs, r)
	}
	return &batchRequest{reqs: reqs}, nil
}

// Run posts the batch and waits for it within ctx.
func (b *Batch) Run(ctx context.Context) error {
	r, err := b.Post(ctx)
	if err != nil {
		return err
	}
	_, err = r.Wait(ctx)
	return err
}

// PostNotify posts the batch, then notifies every rank it reaches with
// msg (Notifier.Notify), which that rank receives once the batch's
// transfers to it are complete there. The batch's communicator must be a
// Notifier. It returns the batch's request; a failed notification fails
// the call after the batch has been waited for, within ctx.
func (b *Batch) PostNotify(ctx context.Context, msg []byte) (Request, error) {
	nt, ok := b.c.(Notifier)
	if !ok {
		return nil, xerr.Detail(ErrNotSupported, "comm: PostNotify: the batch's communicator (%T) has no notifications", b.c)
	}
	if err := checkNotification(nt, msg); err != nil {
		return nil, err
	}
	r, err := b.Post(ctx)
	if err != nil {
		return nil, err
	}
	for _, rank := range b.ranks {
		if err := nt.Notify(ctx, rank, msg); err != nil {
			_, _ = r.Wait(ctx)
			return nil, err
		}
	}
	return r, nil
}

// batchRequest is the request of a posted batch.
type batchRequest struct{ reqs []Request }

// Wait waits for every transfer; on ctx done it returns ctx.Err() and the
// batch stays under way.
func (r *batchRequest) Wait(ctx context.Context) (Status, error) {
	var first error
	n := 0
	for i, q := range r.reqs {
		st, err := q.Wait(ctx)
		if err != nil {
			if ctx.Err() != nil && errors.Is(err, ctx.Err()) {
				return Status{}, err
			}
			if first == nil {
				first = &XferError{Index: i, Err: err}
			}
			continue
		}
		n += st.Count
	}
	if first != nil {
		return Status{}, first
	}
	return Status{Source: AnySource, Count: n}, nil
}

// Test reports whether every transfer has completed.
func (r *batchRequest) Test() (Status, bool, error) {
	for _, q := range r.reqs {
		if _, done, _ := q.Test(); !done {
			return Status{}, false, nil
		}
	}
	st, err := r.Wait(context.Background())
	return st, true, err
}

// Cancel does nothing: transfers cannot be taken back once started.
func (r *batchRequest) Cancel() error { return nil }
