package procs

import (
	"math/bits"
	"sync"
)

// Payloads of unexpected eager messages of 1 KiB and more are recycled by
// power-of-two size class: a sender that runs ahead of its receiver would
// otherwise allocate a buffer per message. It is Go heap memory, never
// handed to foreign code, so sync.Pool's silent drops are harmless.
const (
	minPooledShift = 10
	maxPooledShift = 30
)

var pools [maxPooledShift - minPooledShift + 1]sync.Pool

// getBuf returns a buffer of n bytes and its pool handle (nil when not
// pooled), to give back with putBuf.
func getBuf(n int) ([]byte, *[]byte) {
	if n < 1<<minPooledShift {
		return make([]byte, n), nil
	}
	k := bits.Len(uint(n - 1))
	if k > maxPooledShift {
		return make([]byte, n), nil
	}
	h, _ := pools[k-minPooledShift].Get().(*[]byte)
	if h == nil {
		b := make([]byte, 1<<k)
		h = &b
	}
	return (*h)[:n], h
}

// putBuf gives a pooled buffer back.
func putBuf(h *[]byte) {
	if h == nil {
		return
	}
	k := bits.Len(uint(cap(*h) - 1))
	pools[k-minPooledShift].Put(h)
}
