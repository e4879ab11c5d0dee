// Package hostcopy holds the split points of transfer.ParallelHost, the path
// that copies between host spaces in pieces spread over an executor's
// workers. Package transfer cuts copies with them, and the conformance suite
// chooses the sizes it copies from them (Sizes), so that a split point that
// moves cannot leave a piece size untested.
package hostcopy

// When ParallelHost splits a copy. Measured on an idle 2-core host
// (internal/tooling/bench, copy.* against memmove.*): one memmove wins below
// 256 KiB, where handing a piece to a worker costs more than it saves; the
// split copy is 2.3x Go's copy at 1 MiB, 1.6x at 16 MiB and 1.5x at
// 256 MiB. Part of the gain at 1-16 MiB is that Go's memmove switches to
// non-temporal stores at 1 MiB — right for streams larger than the cache,
// slow for data that fits it — so those copies go in 512 KiB pieces. On a
// host whose cores are taken by other processes the split copy falls back
// towards one memmove, as any fork-join does.
const (
	// SplitMin is the smallest copy that is split.
	SplitMin = 256 << 10
	// Piece is the piece size of copies below StreamMin: under the 1 MiB
	// at which Go's memmove turns to non-temporal stores, so data that fits
	// the cache stays there.
	Piece = 512 << 10
	// StreamMin: from here a copy is cut into one contiguous piece per
	// worker (a multiple of PieceAlign bytes), each copied with non-temporal
	// stores.
	StreamMin = 16 << 20
	// PieceAlign is what the pieces of a copy of StreamMin bytes or more are
	// rounded up to: a cache line.
	PieceAlign = 64
)

// Grain returns the size of the pieces a copy of n bytes is cut into over w
// workers (the last piece may be shorter), or 0 when the copy is one
// memmove.
func Grain(n, w int) int {
	switch {
	case n < SplitMin:
		return 0
	case n < StreamMin:
		return Piece
	}
	w = max(1, w)
	return (n/w + min(1, n%w) + PieceAlign - 1) &^ (PieceAlign - 1)
}

// Size is a copy size a test of ParallelHost (or of any path that splits
// at these points) must try, and what it exercises.
type Size struct {
	N    int
	What string
}

// Sizes returns the copy sizes on both sides of every split point: the
// largest single memmove, the smallest split copy, copies in fixed pieces
// whose last piece is a single byte and a short odd one, and a copy cut
// into one piece per worker with an odd tail. The odd sizes leave a short
// last piece for every worker count, since pieces are multiples of Piece or
// of PieceAlign. Sizes are derived from the constants, so they follow the
// split points when those move; each mode is tried once, as copies of tens
// of MiB are slow under the race detector.
func Sizes() []Size {
	whole := max(1, (SplitMin+Piece-1)/Piece) // whole pieces of the smallest piece-mode copy that can end in a 1-byte piece
	return []Size{
		{SplitMin - 1, "the largest copy done in one memmove"},
		{SplitMin, "the smallest split copy"},
		{whole*Piece + 1, "whole pieces and a 1-byte last piece"},
		{(whole+2)*Piece + 13, "several pieces and an odd last piece"},
		{StreamMin + 5, "a copy cut into one piece per worker, with an odd tail"},
	}
}
