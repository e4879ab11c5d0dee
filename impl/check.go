package impl

import (
	"context"

	"github.com/xpu-go/xpu/xerr"
)

// The values of comm's and memspace's constants of the same names; a test
// keeps them equal. impl cannot import those packages, which import it.
const (
	anySource      = -1
	anyTag         = -1
	maxTag         = 1<<30 - 1
	maxReservedTag = 1<<31 - 1
	maxAlign       = 1 << 30
)

// CheckRank validates a rank of a group of n ranks; wildcard allows
// comm.AnySource.
func CheckRank(rank, n int, wildcard bool) error {
	if rank == anySource && wildcard {
		return nil
	}
	if rank < 0 || rank >= n {
		return xerr.Detail(xerr.ErrInvalidArgument, "rank %d outside [0, %d)", rank, n)
	}
	return nil
}

// CheckTag validates a user tag (0 … comm.MaxTag), as the blocking Send and
// Recv take; wildcard allows comm.AnyTag.
func CheckTag(tag int, wildcard bool) error { return checkTag(tag, wildcard, maxTag) }

// CheckWireTag validates a tag as Isend and Irecv take it, where the
// reserved tags of the collective algorithms (up to comm.MaxReservedTag)
// are allowed; wildcard allows comm.AnyTag.
func CheckWireTag(tag int, wildcard bool) error { return checkTag(tag, wildcard, maxReservedTag) }

func checkTag(tag int, wildcard bool, hi int) error {
	if tag == anyTag && wildcard {
		return nil
	}
	if tag < 0 || tag > hi {
		return xerr.Detail(xerr.ErrInvalidArgument, "tag %d outside [0, %d]", tag, hi)
	}
	return nil
}

// MatchTag reports whether a message with tag matches a receive posted with
// want: equal tags, or comm.AnyTag and a user tag (never a reserved one).
func MatchTag(want, tag int) bool {
	if want == anyTag {
		return tag <= maxTag
	}
	return want == tag
}

// CheckAlloc validates the arguments of memspace.Space.Allocate — a positive
// size, an alignment that is zero or a power of two up to
// memspace.MaxAlign — and returns the alignment to use: def for zero, and
// never less than def. A space calls it first in Allocate and wraps its
// error: xerr.Op(name, "alloc", err).
func CheckAlloc(size, align, def int) (int, error) {
	if size <= 0 {
		return 0, xerr.Detail(xerr.ErrInvalidArgument, "size %d is not positive", size)
	}
	if align == 0 {
		align = def
	}
	if align < 0 || align&(align-1) != 0 || align > maxAlign {
		return 0, xerr.Detail(xerr.ErrInvalidArgument, "alignment %d is not a power of two in [1, 1 GiB]", align)
	}
	return max(align, def), nil
}

// WaitDone waits until done is closed or ctx ends. It returns nil when done
// is closed — also when ctx has ended by then, so a completion that raced
// with the context is reported as the completion — and ctx.Err() when ctx
// ended first. A request's Wait is WaitDone on the channel its completion
// closes.
func WaitDone(ctx context.Context, done <-chan struct{}) error {
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		select {
		case <-done:
			return nil
		default:
			return ctx.Err()
		}
	}
}
