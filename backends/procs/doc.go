// Package procs is the multi-process communicator: one process per rank,
// on one machine or many, in pure Go, each pair of ranks linked through
// shared memory when they share a machine and through TCP otherwise. It
// implements comm.Comm, comm.Blocking and comm.Collectives and registers
// the driver "procs" with package xpu, and "tcp", its name before
// (docs/adr/0032-procs-the-backends-truthful-name.md), as an alias.
//
//	c, err := procs.FromEnv(ctx) // under xpu run, mpirun or srun
//	defer c.Close()
//	err = comm.Allreduce(ctx, c, grads, grads, comm.Sum)
//
// # Options
//
// xpu.Open reads these keys of xpu.Options, each documented on its
// constant and setting the field of Config it names:
//
//	timeout       OptTimeout      failure-detection bound ("3s")
//	eager_limit   OptEagerLimit   largest message sent eagerly ("16K"); 64 KiB by default
//	eager_budget  OptEagerBudget  eager bytes in flight per peer ("4M"); 4 MiB by default
//	join_timeout  OptJoinTimeout  bound on joining the job ("90s"); DefaultJoinTimeout by default
//	links         OptLinks        "auto", "tcp" or "shm": the links between ranks of a node
//	shm_ring      OptShmRing      size of a shared-memory ring ("256K"); 256 KiB by default
//
// A bad value is an error matching xpu.ErrInvalidArgument, and a key the
// driver does not know one matching xpu.ErrUnknownOption. A key scoped to
// another backend ("cpu.limit") is left to it, so that one set of options
// can serve a fallback chain; "procs.timeout" is read as timeout; so is "tcp.timeout", of the former name.
//
// # Joining a job
//
// FromEnv reads the rank, the world size, the master address and the job
// secret from the environment (XPU_RANK, XPU_WORLD_SIZE, XPU_MASTER_ADDR,
// XPU_MASTER_PORT, XPU_JOB_SECRET; Open MPI's, PMIx's, PMI's and Slurm's
// variables are understood too, see ConfigFromEnv), Dial takes them in a
// Config.
// Rank 0 listens on the master address and serves a small key-value store
// there (PyTorch's TCPStore, in miniature); every other rank listens on a
// port of its own, publishes it in the store, and dials every lower rank,
// so each pair of ranks shares exactly one connection. Dial returns when
// every link is up; the listeners then close. NewLoopbackGroup makes a
// whole job in one process over 127.0.0.1, for tests.
//
// Every connection, to the store or between ranks, starts with a mutual
// HMAC-SHA256 challenge-response over the job secret, with fresh nonces on
// both sides and the rank, world size and purpose inside the MAC: a
// process without the secret learns nothing and is refused, and the job
// goes on.
//
// # Links on one node
//
// Ranks of one node — the same machine and PID namespace, and the same
// Config.Node — are linked through shared memory instead of a socket
// (package internal/shm): right after the handshake the two ranks compare
// where they run, the dialer creates a segment of two rings in an
// anonymous memory file and offers it, the other maps it through /proc,
// and the frames below then travel through the rings, the TCP connection
// staying as the doorbell that wakes a sleeping peer and tells that it
// has died. A waiter polls its ring for Config.ShmSpin (50 µs) before it
// sleeps; on a node with more ranks than processors every poll yields the
// processor. Nothing is ever created in /dev/shm: the segment vanishes
// with the last process that maps it, however it ends. Config.Links (or
// XPU_LINKS=auto|tcp|shm, or the option "links") forces one kind of link;
// Transport says which a peer got. One matching engine, one failure
// contract and one set of collectives serve both kinds of link, so a job
// may mix them (docs/adr/0025-shared-memory-links.md). A small message is
// written into the ring as one record and taken from it in place; a
// blocking Recv from one such peer polls the ring itself and takes its
// message with no request and, when no receive is posted, no lock, falling
// back to the general path for anything else
// (docs/adr/0044-a-lane-for-small-messages.md).
//
// # Messages
//
// Frames have a fixed 32-byte header (docs/adr/0008-tcp-wire.md). A
// message of at most the eager limit (64 KiB) goes at once, within an
// eager budget per peer (4 MiB) that the receiver gives back as its
// receives take the messages; past the budget, or above the limit, a
// message is announced (RTS) and sent only once the receiver has matched a
// receive and answered with a clear-to-send naming how much fits: the
// bytes then go from the sender's buffer straight into the receiver's,
// with no copy in between, in data frames of Config.Chunk (1 MiB) so
// that small messages are never stuck behind a large one. Over a
// shared-memory link data frames are a quarter of the ring, so that the
// sender copies one in while the receiver copies the one before out; from
// 4 MiB the announcement carries the address of the sender's buffer, and
// the receiver copies the bytes itself from the sender's memory
// (process_vm_readv: one copy, by two goroutines) and says so, where the
// kernel allows it (xpu info says which path large messages take;
// docs/adr/0027-shared-memory-hot-paths.md). Matching follows
// MPI: by source and tag, AnySource and AnyTag (which never matches the
// reserved tags of the collectives), messages from one sender with one
// tag never overtake each other, and a message longer than its receive
// buffer fails the receive with comm.ErrTruncated after delivering what
// fits. Each link has a reader goroutine and a writer goroutine; a sender
// writes its frame itself when the link is idle, and a goroutine waiting
// for a receive from one peer reads that link's socket itself, so the
// message it waits for costs no handoff between goroutines
// (docs/adr/0010-tcp-waiter-reads-its-socket.md). A request makes a
// completion channel only for a goroutine that blocks on one. The
// blocking calls (comm.Send and comm.Recv) make no request for a message
// the link takes at once and reuse their receive's request: a round trip
// of small messages allocates nothing; an Isend the link takes at once
// returns its status alone, and Irecv makes one request. Config.Spin (or
// XPU_TCP_SPIN) makes such a waiter poll the socket before it blocks, as
// MPI libraries do: lower latency where every rank has a core of its own,
// much higher where ranks share cores; off by default.
//
// A frame that breaks the protocol — an unknown type, a length over what
// this rank accepts, data nobody asked for — cuts the link with an error
// matching ErrProtocol: a peer can never make a rank allocate more than
// its eager limit for one frame, or its budget in all.
//
// # Device memory
//
// Comm is comm.DeviceNative: Isend, Irecv, Send and Recv take a block
// the host cannot touch (a GPU's) whose space has transfer paths to and
// from host memory, so comm.Send, Recv and Sendrecv hand it such blocks
// as they are. To a peer on a shared-memory link, a block whose space
// shares it (memspace.Sharer: CUDA IPC) is announced by its description;
// the receiver maps it (memspace.Importer) and copies from it into its
// own block, device or host, then answers, and the send completes; a
// receiver that cannot map it answers with a clear-to-send, and the block
// comes through host memory. Everywhere else (TCP links, a rank's messages
// to itself, spaces that cannot share) a send copies the block into host
// memory and sends that, and a receive into a device block takes the
// message into host memory and copies it into the block before it
// completes. A receiver keeps a mapping until the sender frees the
// allocation (where its space tells, memspace.FreeNotifier) or the link
// ends. DevicePath says which way a peer's device messages went
// (docs/adr/0041-device-blocks-on-procs-links.md).
//
// # One-sided communication
//
// Comm implements comm.OneSided. A Put travels as frames of at most a
// chunk, each with the region's key and its offset; the target's link
// reader — its reader goroutine, never the target program's code — checks
// the key against the target's open regions and the range against the
// region, reads the bytes straight into the region, and answers; a Get is
// answered with bytes written from the region. A transfer completes when
// every chunk is answered. A key of no open region, or that does not match
// the region it names, is refused with ErrInvalidArgument and writes
// nothing, and the link goes on; a lost target fails the transfers under
// way with ErrPeerLost. Over a shared-memory link a rank publishes each
// region it exposes in the link's directory (shared memory, shm.Dir), and
// an origin makes a transfer of 8 KiB or more to a published region by
// itself: one process_vm_writev or readv from the goroutine that calls
// Put or Get (a batch, one vectored call), complete when the call returns,
// the target taking no part; closing the region waits for the copies
// under way (docs/adr/0037-direct-one-sided-and-device-regions.md). A
// transfer of 256 KiB or more to a region the directory does not name
// goes by single copy made by the target's reader
// (docs/adr/0033-one-sided-on-every-communicator.md). A region of memory
// the host cannot touch (a GPU's) is reached through its space's copies:
// the link reader copies each chunk of a Put into it and each Get out of
// it, transfers to it never go by single copy, and a copy the device
// fails fails the transfer at the origin with ErrDeviceLost. A Put or Get
// whose origin block is device memory is copied by the target through its
// mapping of that block on a shared-memory link (CUDA IPC), else staged
// through host memory (docs/adr/0041-device-blocks-on-procs-links.md).
//
// # Failures
//
// When a peer dies, closes or becomes unreachable, every pending and later
// operation that needs it fails with an error matching comm.ErrPeerLost
// within Config.Timeout (10 s by default): a closed socket is seen at
// once, a silent peer after the timeout (heartbeats every Timeout/4,
// TCP_USER_TIMEOUT for unacknowledged data). A collective that cannot
// complete fails on every rank, not only on the neighbours of the lost
// rank: see docs/failure-semantics.md. Close always returns, within about
// Config.CloseTimeout.
//
// # Collectives
//
// Allreduce runs natively: above 64 KiB a pipelined ring, up to it
// recursive doubling; both fold each incoming piece into the result as it
// is read from the socket. The other collectives run the shared algorithms
// of package comm over this communicator's point-to-point calls. Between
// the ranks of one node, Barrier, Bcast and Allreduce (and, in a one-node
// job, Reduce, Allgather and Alltoall) run instead in a region the node's
// ranks map, with no message at all; small broadcasts and reductions run
// ahead of their slowest reader there (docs/adr/0025-shared-memory-links.md,
// docs/adr/0027-shared-memory-hot-paths.md). All of them run inside the
// abort protocol that propagates a lost peer.
//
// A Comm is safe for concurrent use by many goroutines.
package procs
