// Package shm carries a byte stream between two processes of one machine
// through shared memory: a segment holding two single-producer
// single-consumer rings, one per direction, and a Conn over them that
// implements net.Conn, so that a protocol written for a socket (the tcp
// backend's frames) runs over it unchanged.
//
// # The segment
//
// Create makes a segment in an anonymous memory file (memfd_create): it
// has no name, so nothing is ever left in /dev/shm, and the kernel frees
// it when the last process that maps it exits, however it exits. Its size
// is sealed (F_SEAL_SHRINK, F_SEAL_GROW), so the peer cannot truncate it
// under this process (which would turn a read into SIGBUS). The peer
// attaches by opening /proc/PID/fd/FD of the creator, which the kernel
// allows only to processes with ptrace access to it (the same user), and
// checks a nonce that only the creator and the peer know: the two learn
// each other's PID, FD and nonce over a connection that the caller has
// authenticated. Both then close their descriptors; only the mappings
// remain. Segment.Close unmaps it.
//
// # The rings
//
// Each ring has a tail that only its producer writes and a head that only
// its consumer writes, on cache lines of their own; bytes are copied in,
// then the tail is published (an atomic store), so the consumer never sees
// a byte that was not completely written. Both sides keep their own index
// privately and check the peer's on every load: an index that moves
// backwards or claims more bytes than the ring holds is ErrCorrupt, never
// an out-of-bounds access. The bytes themselves are the protocol's to
// check; they are copied out before anything reads them.
//
// # Waiting
//
// A reader with nothing to read polls the ring for the spin budget
// (Options.Spin), then sets a flag in the segment and sleeps; a writer
// that publishes bytes and finds the flag set clears it and rings the
// peer's doorbell: one byte on a socket between the two processes
// (Options.Bell), which a goroutine of the peer reads and turns into a
// wake-up. A writer with a full ring waits for space the same way. So an
// idle process spends nothing, and processes that share cores still
// progress. The doorbell socket is also how a process learns that its
// peer has died: the kernel closes a killed process's sockets, and the
// reader sees the end of the stream once it has read every byte the peer
// published.
//
// A Conn is safe for one reader and one writer at a time, as a net.Conn
// is for the reads and the writes of one stream; Close may be called at
// any time from any goroutine.
package shm
