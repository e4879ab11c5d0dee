//go:build !amd64 || race

package order

import "sync/atomic"

// Release stores v in *p with release order: atomically, a release on
// every port and an order the race detector sees.
func Release(p *uint64, v uint64) { atomic.StoreUint64(p, v) }

// ReleaseWords stores the words of src into dst, as many as the shorter
// holds, in order, each atomically: with release order on every port and
// an order the race detector sees.
func ReleaseWords(dst, src []uint64) {
	for i := range min(len(dst), len(src)) {
		atomic.StoreUint64(&dst[i], src[i])
	}
}
