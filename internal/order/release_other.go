//go:build !amd64 || race

package order

import "sync/atomic"

// Release stores v in *p with release order: atomically, a release on
// every port and an order the race detector sees.
func Release(p *uint64, v uint64) { atomic.StoreUint64(p, v) }
