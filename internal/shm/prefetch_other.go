//go:build !amd64

package shm

// PrefetchWrite is a hint to take the cache line of p for writing; it
// does nothing on this port.
func PrefetchWrite(p *byte) { _ = p }
