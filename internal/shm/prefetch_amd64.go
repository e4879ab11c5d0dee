package shm

// PrefetchWrite asks the processor to take the cache line of p for
// writing, ahead of the write: a hint (PREFETCHW), which changes no byte,
// never faults, and lets the line leave the other processors' caches
// while this one does something else. A writer that will soon write a
// line its peers read long ago (a ring's entry one lap on) takes it early,
// so that the write itself need not wait for the peers to drop it.
//
//go:noescape
func PrefetchWrite(p *byte)
