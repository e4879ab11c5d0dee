package local

import (
	"math/bits"
	"sync"
)

// The private buffers of eager messages of at least 1 << minPooledShift
// bytes are recycled, by power-of-two size class up to 1 << maxPooledShift:
// a sender that runs ahead of its receiver would otherwise allocate (and
// the garbage collector reclaim) a buffer per message. Smaller messages are
// cheaper to allocate than to pool. This is Go heap memory, never handed to
// foreign code, so sync.Pool's silent drops are harmless.
const (
	minPooledShift = 10 // 1 KiB
	maxPooledShift = 26 // 64 MiB
)

var pools [maxPooledShift - minPooledShift + 1]sync.Pool

// eagerCopy returns a private copy of p, and the pool handle to give back
// with release once the copy is no longer used (nil when not pooled).
func eagerCopy(p []byte) ([]byte, *[]byte) {
	k := bits.Len(uint(len(p) - 1))
	if len(p) < 1<<minPooledShift || k > maxPooledShift {
		return append([]byte(nil), p...), nil
	}
	h, _ := pools[k-minPooledShift].Get().(*[]byte)
	if h == nil {
		b := make([]byte, 1<<k)
		h = &b
	}
	b := (*h)[:len(p)]
	copy(b, p)
	return b, h
}

// release gives a pooled buffer back.
func release(h *[]byte) {
	if h == nil {
		return
	}
	k := bits.Len(uint(cap(*h) - 1))
	pools[k-minPooledShift].Put(h)
}
