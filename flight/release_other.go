//go:build !amd64 || race

package flight

import "sync/atomic"

// release stores v in *p with release order: atomically here (the race
// detector sees the order it gives; other processors' atomic stores are
// releases); a plain store on amd64 without the race detector.
func release(p *uint64, v uint64) { atomic.StoreUint64(p, v) }
