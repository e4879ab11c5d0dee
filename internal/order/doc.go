// Package order has the memory-ordering primitive that package sync/atomic
// lacks: a release store that is not a full fence (Release), the same for
// a seqlock writer's record of five words guarded by its first, in order,
// in one call (ReleaseRecord), and for two words apart, in order
// (ReleasePair). A call of
// any of them costs ~2–3 ns on amd64, whatever it stores: a record is
// best written in one.
//
// On amd64, atomic.StoreUint64 is an exchange (XCHG), a locked instruction
// that waits for every earlier store to reach the cache (~9 ns on an idle
// virtual machine, much more behind a store to a line another processor
// holds). x86 already orders a plain store after every earlier load and
// store, so a plain MOV is a release. Release is that MOV, in assembly so
// that the compiler moves no load or store across it. Elsewhere, and
// under the race detector (which must see the synchronization), it is
// atomic.StoreUint64: a release on arm64 (STLR) and the other ports.
//
// A Release pairs with an atomic load (or compare-and-swap) of the same
// word on another goroutine: what was written before the Release is
// visible after the load that sees it. It is not a fence: a load after a
// Release may still be satisfied before the Release is visible (store,
// then load of another word — Dekker's pattern — needs an exchange).
package order
