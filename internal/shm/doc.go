// Package shm is the shared-memory transport between processes of one
// machine: a segment holding two single-producer single-consumer rings,
// one per direction, and a Conn over them that implements net.Conn, so
// that a protocol written for a socket (the multi-process engine's frames,
// backends/procs) runs over it unchanged; the negotiation that decides, per
// pair of ranks, whether their link moves onto it (Negotiate, NodeKey);
// single copies straight between the processes' memories
// (process_vm_readv/writev); and a Region that every rank of a node maps
// for its collectives (package internal/nodecoll).
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
// Each write publishes a record at the producer's place in the ring: a
// 16-byte header — the record's position plus one, and its length — then
// the bytes, padded to 64. The header's position word is stored last (an
// atomic store), so the consumer, which polls the header at its own
// place, never sees a byte that was not completely written; a header
// whose position is not the consumer's is older (or not yet written), so
// nothing is ever cleared. A small message thus costs the consumer one
// cache line where a separate tail index would cost two (a Go ping-pong
// through the ring: 178 ns one way, against 318 ns with a tail). The
// consumer's head, on a line of its own, tells the producer what room it
// has; the consumer publishes it a quarter ring at a time, or when it
// finds nothing to read, not after every record. A reader may take a
// record in place (Next, Peek, Take) and a writer write a frame's header
// and payload as one record (TryWriteFrame). Both sides keep their own index privately and check what they load:
// a consumer index that moves backwards or past the producer, or a record
// longer than the ring, is ErrCorrupt, never an out-of-bounds access. The
// bytes themselves are the protocol's to check; they are copied out before
// anything reads them.
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
// any time from any goroutine. Close leaves the segment mapped, so that
// reads and writes need not count themselves: the owner of the Conn calls
// Unmap once none can be under way, or the memory goes with the Conn when
// the garbage collector finds it unreachable.
package shm
