package procs

import "github.com/xpu-go/xpu/xerr"

// credit is a link's eager flow control, both ways. A rank sends a message
// eagerly only while it fits the peer's eager limit and the eager bytes
// sent and not yet given back fit the peer's budget; past that it sends by
// rendezvous. The receiving rank holds at most its own budget of a peer's
// eager bytes, and gives bytes back in a credit frame once its receives
// have taken at least a quarter of the budget. It also bounds the
// announcements of rendezvous messages it holds unmatched (maxHeldRTS):
// a peer past either bound breaks the protocol.
//
// peerLimit, peerBudget and budget are set before the link starts. out is
// guarded by the link's writer.mu, since the sender spends it where it
// decides how a message goes; in, due and rtsHeld are guarded by Comm.mu,
// since the matching engine takes what they count.
type credit struct {
	peerLimit  int // largest eager message the peer accepts
	peerBudget int // eager bytes the peer holds for this rank
	budget     int // eager bytes this rank holds for the peer (Config.EagerBudget)

	out int // eager bytes sent and not given back by the peer

	in      int // eager bytes received and not given back yet
	due     int // of in, the bytes receives have taken, not yet given back
	rtsHeld int // announcements held unmatched
}

// fits reports whether a message of n bytes may go eagerly. writer.mu is
// held.
func (cr *credit) fits(n int) bool {
	return n <= cr.peerLimit && cr.out+n <= cr.peerBudget
}

// refund takes back n bytes the peer gave back. writer.mu is held.
func (cr *credit) refund(n int) error {
	if n > cr.out {
		return xerr.Detail(ErrProtocol, "credit of %d bytes where %d are outstanding", n, cr.out)
	}
	cr.out -= n
	return nil
}

// receive counts an eager message of n bytes; false, counting nothing,
// when it does not fit this rank's budget. Comm.mu is held.
func (cr *credit) receive(n int) bool {
	if cr.in+n > cr.budget {
		return false
	}
	cr.in += n
	return true
}

// overBudget is the error of an eager message of n bytes from peer that
// receive refused.
func (cr *credit) overBudget(peer, n int) error {
	return xerr.Detail(ErrProtocol, "rank %d sent %d eager bytes beyond the budget of %d", peer, cr.in+n-cr.budget, cr.budget)
}

// giveBackAt is how many eager bytes taken make a credit frame: a quarter
// of the budget.
func (cr *credit) giveBackAt() int { return max(1, cr.budget/4) }

// consume records that a receive took n eager bytes, and returns the bytes
// to give back now: none until at least a quarter of the budget is due.
// Comm.mu is held.
func (cr *credit) consume(n int) (giveBack int) {
	cr.due += n
	if cr.due < cr.giveBackAt() {
		return 0
	}
	giveBack, cr.due = cr.due, 0
	cr.in -= giveBack
	return giveBack
}
