package p2p

import (
	"github.com/xpu-go/xpu/comm"
	"github.com/xpu-go/xpu/xerr"
)

// SendStatus is the status of a completed send of n bytes to dest with tag.
func SendStatus(dest, tag, n int) comm.Status {
	return comm.Status{Source: dest, Tag: tag, Count: n}
}

// Outcome is the status of a receive by rank of a size-byte message from
// src with tag, of which k bytes were taken, with an error of backend's
// recv matching comm.ErrTruncated when k < size: the first k bytes are
// delivered, the rest never sent or dropped.
func Outcome(backend string, rank, src, tag, size, k int) (comm.Status, error) {
	st := comm.Status{Source: src, Tag: tag, Count: k}
	if k < size {
		return st, xerr.Errorf(backend, "recv", comm.ErrTruncated, "rank %d: %d-byte message from %d tag %d into a %d-byte buffer",
			rank, size, src, tag, k)
	}
	return st, nil
}

// Self is the eager budget of a rank's sends to itself: a send to this
// rank that no receive waits for is copied and completes at once while it
// fits (Take), or waits for its receive as a rendezvous would.
type Self struct {
	held int // bytes of eager messages to itself held
}

// Take reports whether an n-byte message to this rank goes eagerly within
// limit (negative: none) and budget, and counts it held if so.
func (s *Self) Take(n, limit, budget int) bool {
	if limit < 0 || n > limit || s.held+n > budget {
		return false
	}
	s.held += n
	return true
}

// Give counts n held bytes taken by their receive (or dropped).
func (s *Self) Give(n int) { s.held -= n }
