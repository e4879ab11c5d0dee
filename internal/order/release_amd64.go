//go:build amd64 && !race

package order

// Release stores v in *p with release order: a plain store, which x86
// orders after every earlier load and store. Readers load *p atomically.
//
//go:noescape
func Release(p *uint64, v uint64)

// ReleaseRecord writes a record of five words guarded by its first, a
// sequence word, as a seqlock's writer does: w[0] = mark, then w[1..4] =
// a, b, c, d, then w[0] = done, each a plain store, in that order.
// Readers load each word atomically, the sequence word before and after
// the others. One call writes the record, where a loop of stores and a
// Release paid two calls and the loop (~3 ns of a record of ~17, ADR 50).
//
//go:noescape
func ReleaseRecord(w *[5]uint64, mark, a, b, c, d, done uint64)

// ReleasePair stores v in *p, then w in *q, each with release order: two
// plain stores, in one call.
//
//go:noescape
func ReleasePair(p *uint64, v uint64, q *uint64, w uint64)
