//go:build race

package shm

import "sync/atomic"

// ioSync orders, for the race detector, what a goroutine did before it
// wrote to a ring with what the goroutine that read those bytes does
// after, as package internal/poll orders the reads and writes of files
// and sockets: the detector cannot see the atomics of a ring, which live
// in memory mapped from outside Go. A write merges its goroutine's clock
// into ioSync; a read that took bytes acquires it.
var ioSync atomic.Uint64

// RaceRelease merges the calling goroutine's history into the order a
// transport's reads acquire (RaceAcquire), with the race detector on; it
// does nothing otherwise. A transport calls it before bytes it wrote can
// be seen by a reader: a ring's record before it is published, a frame
// before it is written to a socket.
func RaceRelease() { ioSync.Add(1) }

// RaceAcquire orders what the calling goroutine does next after every
// RaceRelease before it, with the race detector on; it does nothing
// otherwise. A transport calls it once it has read bytes.
func RaceAcquire() { ioSync.Load() }
