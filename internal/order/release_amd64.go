//go:build amd64 && !race

package order

// Release stores v in *p with release order: a plain store, which x86
// orders after every earlier load and store. Readers load *p atomically.
//
//go:noescape
func Release(p *uint64, v uint64)

// ReleaseWords stores the words of src into dst, as many as the shorter
// holds, in order, each with release order: plain stores. Readers load
// each word atomically. One call writes a record of several words, where
// a Release per word pays a call per word.
//
//go:noescape
func ReleaseWords(dst, src []uint64)

// ReleaseRecord writes a record of five words guarded by its first, a
// sequence word, as a seqlock's writer does: w[0] = mark, then w[1..4] =
// a, b, c, d, then w[0] = done, each a plain store, in that order.
// Readers load each word atomically, the sequence word before and after
// the others. One call writes the record, where ReleaseWords and a
// Release pay two calls and a loop (~3 ns of a record of ~17, ADR 50).
//
//go:noescape
func ReleaseRecord(w *[5]uint64, mark, a, b, c, d, done uint64)

// ReleasePair stores v in *p, then w in *q, each with release order: two
// plain stores, in one call.
//
//go:noescape
func ReleasePair(p *uint64, v uint64, q *uint64, w uint64)
