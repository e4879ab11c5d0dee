package tcp

import (
	"context"

	"github.com/xpu-go/xpu/comm"
	"github.com/xpu-go/xpu/memspace"
)

// tagSmall is the reserved tag of the small allreduce's messages: next to
// tagRing, above the range of the shared algorithms.
const tagSmall = tagRing + 1

// allreduceSmall is the allreduce below ringMin: recursive doubling, in
// which partners exchange their whole vectors log2(p) times, each folding
// the partner's vector into its own. With p not a power of two, the first
// 2(p-pof2) ranks pair up first: the even one hands its vector to the odd
// one and waits for the result (MPICH's scheme).
//
// It does what the shared algorithm does with less around it: it runs as
// a light collective (no derived context), a receive folds what it reads
// from the socket straight into a second buffer (acc op incoming) instead
// of landing in scratch memory for a separate pass, and the two buffers
// trade places after each exchange. Partners fold the same two vectors,
// each with its own on the right, so for the commutative operators every
// rank ends with the bitwise-same result.
func (c *Comm) allreduceSmall(ctx context.Context, run *collRun, send, recv memspace.Block, dt comm.DType, op comm.Op) error {
	p, r := c.size, c.rank
	n := send.Len()
	recvB, err := hostBytes(recv)
	if err != nil {
		return err
	}
	if send.Addr() != recv.Addr() || send.Space() != recv.Space() {
		sendB, err := hostBytes(send)
		if err != nil {
			return err
		}
		copy(recvB, sendB)
	}
	// The scratch vector goes back to the pool once every request that
	// may touch it has completed (settle below).
	tmpB, pooled := getBuf(n)
	tmpBuf, err := memspace.FromSlice(tmpB)
	if err != nil {
		putBuf(pooled)
		return err
	}
	acc, accB := recv, recvB
	other, otherB := tmpBuf.Block(), tmpB

	var live [2]*request
	defer func() {
		settle(live[:])
		putBuf(pooled)
	}()
	recvFrom := func(src int, buf []byte, red *reduction) (*request, error) {
		q, err := c.irecv(&request{c: c, kind: kindRecv, peer: src, tag: tagSmall, buf: buf, red: red})
		live[0] = q
		return q, err
	}
	sendTo := func(dest int, buf []byte) (*request, error) {
		q, err := c.isend(buf, dest, tagSmall)
		live[1] = q
		return q, err
	}
	done := func() { live = [2]*request{} }

	pof2 := 1
	for pof2*2 <= p {
		pof2 *= 2
	}
	rem := p - pof2
	newRank := r - rem
	if r < 2*rem {
		if r%2 == 0 {
			// Hand the vector to r+1, then take the result from it.
			q, err := sendTo(r+1, accB)
			if err != nil {
				return err
			}
			if err := run.wait(ctx, q, -1); err != nil {
				return err
			}
			q, err = recvFrom(r+1, recvB, nil)
			if err != nil {
				return err
			}
			if err := run.wait(ctx, q, n); err != nil {
				return err
			}
			done()
			return nil
		}
		// Fold r-1's vector into this one, in place: nothing reads it.
		q, err := recvFrom(r-1, accB, &reduction{dst: acc, own: acc, dt: dt, op: op})
		if err != nil {
			return err
		}
		if err := run.wait(ctx, q, n); err != nil {
			return err
		}
		done()
		newRank = r / 2
	}
	for mask := 1; mask < pof2; mask <<= 1 {
		peer := newRank ^ mask
		if peer < rem {
			peer = peer*2 + 1
		} else {
			peer += rem
		}
		// other = incoming op acc while acc is sent: the send only reads
		// acc, and the receive writes other.
		q, err := recvFrom(peer, otherB, &reduction{dst: other, own: acc, dt: dt, op: op})
		if err != nil {
			return err
		}
		s, err := sendTo(peer, accB)
		if err != nil {
			return err
		}
		if err := run.wait(ctx, q, n); err != nil {
			return err
		}
		if err := run.wait(ctx, s, -1); err != nil {
			return err
		}
		done()
		acc, other = other, acc
		accB, otherB = otherB, accB
	}
	if &accB[0] != &recvB[0] {
		copy(recvB, accB)
	}
	if r < 2*rem {
		q, err := sendTo(r-1, recvB)
		if err != nil {
			return err
		}
		if err := run.wait(ctx, q, -1); err != nil {
			return err
		}
		done()
	}
	return nil
}

// settle cancels the requests of qs still pending and waits for each to
// complete, which a canceled request does within a round trip to its peer
// or once the link is declared lost (Config.Timeout); a request touches
// its buffer no more once complete.
func settle(qs []*request) {
	for _, q := range qs {
		if q != nil && !q.fin.Load() {
			_ = q.Cancel()
		}
	}
	for _, q := range qs {
		if q != nil {
			<-q.done
		}
	}
}
