// Package rdma is a multi-process communicator over RDMA: libibverbs and
// librdmacm (rdma-core), reliable connected queue pairs, one process per
// rank. It implements comm.Comm and registers the driver "rdma" with
// package xpu.
//
//	c, err := rdma.FromEnv(ctx) // under xpu run, mpirun or srun
//	defer c.Close()
//	err = comm.Allreduce(ctx, c, grads, grads, comm.Sum)
//
// # Options
//
// xpu.Open reads these keys of xpu.Options, each documented on its
// constant:
//
//	device        OptDevice       the RDMA device ("rxe0"); $XPU_RDMA_DEVICE, else the first active one
//	addr          OptAddr         the IP address the connection manager binds
//	eager_limit   OptEagerLimit   largest message sent eagerly ("16K")
//	eager_budget  OptEagerBudget  eager bytes in flight per peer ("4M")
//	slots         OptSlots        Config.Slots
//	spin          OptSpin         how long a waiter polls before it sleeps ("50us")
//	timeout       OptTimeout      failure-detection bound ("3s"); $XPU_RDMA_TIMEOUT, else DefaultTimeout
//
// A bad value is an error matching xpu.ErrInvalidArgument, and a key the
// driver does not know one matching xpu.ErrUnknownOption. A key scoped to
// another backend ("cpu.limit") is left to it, so that one set of options
// can serve a fallback chain; "rdma.timeout" is read as timeout.
//
// # Building
//
// The verbs are reached through cgo, behind the build tag rdma (as
// backends/mpi is behind mpi), so that the module builds and its tests run
// on machines without rdma-core:
//
//	go build -tags rdma ./...   // needs libibverbs-dev and librdmacm-dev
//
// Built without the tag, the driver reports xpu.ErrUnavailable with the
// reason, and FromEnv fails with it (docs/adr/0024-rdma-verbs-through-cgo.md).
//
// # Joining a job
//
// FromEnv reads the job from the same environment as the procs backend
// (XPU_RANK, XPU_WORLD_SIZE, XPU_MASTER_ADDR, XPU_MASTER_PORT,
// XPU_JOB_SECRET, or Open MPI's, PMIx's, PMI's and Slurm's variables), so
// `xpu run -n 4 -- prog` and mpirun start RDMA jobs unchanged. The ranks
// form the job as every multi-process backend does (package internal/join:
// rank 0's rendezvous store, connections authenticated with the job
// secret), exchange their addresses over those connections, then connect
// a queue pair to every other rank through the connection manager, the
// higher rank dialing the lower. Each connection request and its reply carry an HMAC over the job
// secret: a process without it is rejected. The connection manager binds
// the IPv4 address of the device's active port (XPU_RDMA_ADDR overrides
// it; XPU_RDMA_DEVICE picks the device).
//
// # Messages
//
// Every rank posts Config.Slots receive slots per peer. A message of at
// most Config.EagerLimit (16 KiB) bytes is copied into a registered send
// slot behind a 40-byte header and SENT at once; its send completes then.
// A larger one is announced (RTS: its address and remote key), and the
// receiver, once a receive matches it, reads it with RDMA READs of
// Config.Chunk bytes straight into the receive buffer and answers FIN:
// no copy on either side. Buffers are registered for the message and
// released after it.
//
// Flow control is by credits: a rank sends only into a receive slot the
// peer has posted (it never relies on receiver-not-ready retries), and the
// peer returns credits on every message it sends back, or alone once half
// its slots are owed; one credit is kept for that. Eager bytes held
// unmatched at the receiver are bounded by Config.EagerBudget, returned as
// receives take them: a sender that runs ahead of a receiver that stops
// receiving switches to rendezvous, and nothing is lost or overrun.
//
// Matching follows MPI through internal/match: by source and tag,
// AnySource and AnyTag (never matching the reserved tags of the
// collectives), messages from one sender with one tag never overtake each
// other, and a message longer than its receive buffer fails the receive
// with comm.ErrTruncated after delivering what fits.
//
// # Progress
//
// A goroutine waiting for a request of at most 64 KiB polls the
// completion queue itself for Config.Spin (500 µs) before it sleeps: the
// latency of a busy-polling MPI. One goroutine per rank, on a locked OS
// thread, handles what nobody waits for — messages arriving unasked,
// announcements to read, large transfers — sleeping on the completion
// channel, so an idle rank burns no core.
//
// # Collectives
//
// When every rank of a job runs on one machine, the ranks map a region of
// shared memory as they join (set up over their queue pairs) and run
// Barrier, Bcast, Reduce, Allreduce, Allgather and Alltoall there, with no
// message (package internal/nodecoll; Comm.OneNode reports it): shared
// memory moves a node's bytes many times faster than a round trip through
// the device, as MPI libraries run a node's collectives in shared memory
// whatever their network. Their messages and one-sided transfers stay on
// the queue pairs. Ranks on several machines, links forced to TCP
// (XPU_LINKS=tcp) and groups made in one process run the collectives of
// package comm over the queue pairs, and so do Gather, Scatter and
// ReduceScatter always (docs/adr/0029-rdma-collectives-of-one-machine.md,
// docs/adr/0031-every-transport-its-own-room.md).
//
// # One-sided
//
// Comm implements comm.OneSided: Expose registers a block and returns its
// Region, whose RemoteKey the ranks exchange (comm.ExchangeKeys); Put is an
// RDMA WRITE and Get an RDMA READ into or from a peer's region, Flush waits
// for them. A buffer of the cpu space is registered once per allocation
// and reused until freed (memspace.FreeNotifier); Go memory is pinned and
// registered per message.
//
// A key is checked with its target before its first use: the origin asks
// whether the target exposes exactly that region (a round trip, once per
// key and peer), and the target tells those it answered when the region
// closes. A forged or withdrawn key fails its transfer with
// comm.ErrInvalidArgument and never reaches the queue pair, whose remote
// access error would break the link.
//
// Comm implements comm.Notifier: a notification is a SEND of its own kind,
// matching no receive, posted behind the WRITEs of the Puts started
// before it (RC places their bytes first); Notify waits for the Gets to
// the target first. WaitNotification pops what arrived.
//
// Comm implements comm.Batcher: PrepareXfers registers a list's buffers
// (kept until Close), builds its work requests and asks about its keys;
// each Post chains them to each target in as few posts as the send queue
// allows, unsignaled but every 32nd and the last of a post
// (docs/adr/0036-rdma-notifications-and-batches.md).
//
// # Failures
//
// When a peer's process dies its connection is torn down by the kernel and
// the connection manager tells the survivors; a queue pair in the error
// state fails its requests; a peer silent for Config.Timeout (10 s,
// XPU_RDMA_TIMEOUT; heartbeats every Timeout/4) is lost too. Either way every pending and later operation
// that needs the peer fails with comm.ErrPeerLost, and a peer lost
// without saying goodbye revokes the collectives of every rank (see
// docs/failure-semantics.md). Close says goodbye after the messages
// already sent, and always returns within about Config.CloseTimeout.
//
// A Comm is safe for concurrent use by many goroutines.
package rdma
