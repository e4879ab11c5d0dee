//go:build !amd64 || race

package order

import "sync/atomic"

// Release stores v in *p with release order: atomically, a release on
// every port and an order the race detector sees.
func Release(p *uint64, v uint64) { atomic.StoreUint64(p, v) }

// ReleaseRecord writes a record of five words guarded by its first, a
// sequence word, as a seqlock's writer does: w[0] = mark, then w[1..4] =
// a, b, c, d, then w[0] = done, each atomically, in that order.
func ReleaseRecord(w *[5]uint64, mark, a, b, c, d, done uint64) {
	atomic.StoreUint64(&w[0], mark)
	atomic.StoreUint64(&w[1], a)
	atomic.StoreUint64(&w[2], b)
	atomic.StoreUint64(&w[3], c)
	atomic.StoreUint64(&w[4], d)
	atomic.StoreUint64(&w[0], done)
}

// ReleasePair stores v in *p, then w in *q, each atomically.
func ReleasePair(p *uint64, v uint64, q *uint64, w uint64) {
	atomic.StoreUint64(p, v)
	atomic.StoreUint64(q, w)
}
