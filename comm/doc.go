// Package comm is the communication concept of xpu: a group of ranks that
// exchange messages point to point, and the collective operations built on
// them. A program gets a Comm — its rank of a job from a backend
// (xpu.OpenDefault under `xpu run`, mpirun or srun: Backend.Comm), or the
// ranks of a group in one process (Backend.Group, local.NewGroup) — and
// calls the package functions on it, typed by the element type of their
// memspace.Buffer arguments:
//
//	c := b.Comm // b from xpu.OpenDefault, in a rank of a job
//	err := comm.Allreduce(ctx, c, grads, grads, comm.Sum) // in place, on every rank
//	err = comm.Bcast(ctx, c, params, 0)                   // from rank 0
//	err = comm.Send(ctx, c, buf.Block(), 1, tag)          // to rank 1
//	st, err := comm.Recv(ctx, c, buf.Block(), comm.AnySource, tag)
//
// Every call takes a context and fails, never hangs, when a rank it needs
// is lost (ErrPeerLost).
//
// # Point to point
//
// A Comm is one rank of a group of Size ranks. Isend and Irecv start
// nonblocking operations on memspace Blocks and return a Request; Send,
// Recv and Sendrecv are the blocking forms, and WaitAll waits for many
// requests. A buffer belongs to its request until the request completes:
// do not write a send buffer, nor read or write a receive buffer, before
// then.
//
// A message matches a receive by source and tag; AnySource and AnyTag are
// wildcards. User tags are 0..MaxTag. The tags above MaxTag, up to
// MaxReservedTag, are reserved for the collective algorithms of this
// package: backends carry them like any other tag, but AnyTag never matches
// them, so a wildcard receive posted by the user never takes a collective's
// message. Send and Recv reject reserved tags; Isend and Irecv accept them.
//
// Messages are non-overtaking, as in MPI: messages from one source with one
// tag match receives in the order they were sent. A message longer than the
// receive buffer fails the receive with ErrTruncated.
//
// Every blocking call takes a context. When it is done, the call returns an
// error matching ctx.Err(); Request.Wait leaves the request pending (wait
// again or Cancel it), while Send, Recv and the collectives cancel what they
// started and let it settle, within a short grace, before they return: a
// send a backend cannot cancel (MPI cannot cancel one its receiver has not
// taken) may outlast the grace, and its buffer must then stay allocated
// and unchanged until the receiver takes it or the communicator closes.
//
// # Failures
//
// Errors match the sentinels of this package with errors.Is:
// ErrInvalidArgument for bad ranks, tags, sizes, roots or reductions,
// ErrClosed after Close, ErrTruncated, ErrCanceled for a canceled request,
// ErrNotSupported for what a backend cannot do (such as memory its
// transport cannot reach), and ErrPeerLost when an operation needs a rank
// that died or closed: an operation that involves a lost rank fails, it
// never hangs.
//
// A collective in which a rank is lost fails with ErrPeerLost on every
// rank the failure reaches, not only on those that exchange messages with
// the lost one: the communicator revokes the group's collectives (see Comm;
// the conformance case comm/coll/peer-lost holds every backend to it), so
// no survivor waits for its context to end. A rank whose context ends in a
// collective revokes nothing by itself, and the others wait for theirs:
// run collectives under a deadline, and treat a group whose collective
// failed or was canceled as broken: its ranks may disagree about which
// messages of that collective were exchanged, so close it (which revokes
// the collectives of the others, who see ErrPeerLost) rather than call
// another collective on it. Point-to-point traffic with user tags is not
// affected.
//
// # Collectives
//
// The collectives are package functions, typed by the element type of
// their memspace.Buffer arguments: Barrier, Bcast, Reduce, Allreduce,
// Gather, Scatter, Allgather, Alltoall and ReduceScatter. The reductions
// take a Number element type (every integer, float and complex type, named
// types such as `type Celsius float32` included) and an Op: Sum, Prod, Min
// or Max, the last two not for complex numbers. Each has a form over
// memspace Blocks for backends and wrappers (BcastBlock, AllreduceBlock,
// …), where reductions name the element type with a DType. ReduceLocal is
// the element-wise reduction kernel itself.
//
// Every rank of the group must call the same collectives in the same order,
// with matching arguments (the same root, the same sizes, the same op), as
// in MPI. Collectives on one communicator must not run concurrently; use
// one communicator per concurrent stream of collectives. Arguments are
// checked on each rank before anything is sent (a bad one is reported on
// that rank with ErrInvalidArgument), but a mismatch between ranks can only
// show as a failed receive or a wait that ends with the context.
//
// A communicator with native collectives (MPI, NCCL) implements
// Collectives; the package functions find it through wrappers (Unwrapper)
// and call its method. A method returns an error matching ErrFallback to
// decline (an element type, op or memory space it does not handle), and the
// package runs its shared algorithm instead. A wrapper that implements
// Collectives by delegating calls the Block form on the communicator it
// wraps, never on itself.
//
// A communicator whose native calls also take host memory as bytes may
// implement HostCollectives (Allreduce, Bcast) and HostPointToPoint (Send,
// Recv; with Recording): the package functions then hand it the bytes of
// host buffers after their checks, instead of Blocks. Only the
// communicator's own methods are used, never through wrappers.
//
// # The shared algorithms
//
// Communicators without native collectives get algorithms built on Isend
// and Irecv alone. Each kind of collective uses its own reserved tags, and
// non-overtaking keeps the messages of consecutive collectives apart. They
// reduce and copy on the host, so they run on host-accessible memory:
// device memory no native collective takes is staged (below). Scratch
// memory comes from the Go heap. Every rank of an Allreduce gets the
// bitwise-same result.
//
//   - Barrier: dissemination, ceil(log2 p) rounds of empty messages.
//   - Bcast: binomial tree; from 512 KiB, scatter from the root then ring
//     allgather (van de Geijn).
//   - Reduce: binomial tree; from 1 MiB, ring reduce-scatter then gather to
//     the root (Rabenseifner).
//   - Allreduce: recursive doubling below 32 KiB (any p: the surplus ranks
//     over a power of two fold their vectors into a partner first); from
//     32 KiB, ring reduce-scatter then ring allgather, in pipelined chunks.
//   - Gather, Scatter: linear, the root's requests all in flight at once.
//   - Allgather: Bruck below 64 KiB of result, ring from there.
//   - Alltoall: pairwise exchange, a few steps in flight.
//   - ReduceScatter: ring, in pipelined chunks.
//
// On cancellation or failure an algorithm cancels every request it started
// and waits for each to settle before returning, so no request refers to the
// caller's buffers afterwards — save a send the backend cannot cancel that
// outlasts the grace (above).
//
// # Device memory
//
// The blocking calls take buffers the host cannot touch (GPU device
// memory), as CUDA-aware MPI does. Send, Recv, Sendrecv and every
// collective (Block forms and typed ones) hand such a buffer to a native
// collective first, as any other; where none takes it, they stage it:
// they allocate a host stand-in in the space the buffer's space names
// (memspace.Stager, found through wrappers: for CUDA device memory,
// page-locked memory of the same device) or else on the Go heap, copy into
// it with transfer.CopyBlock what the operation reads (send buffers, the
// receive buffer of an in-place form, Bcast's buffer at the root), run the
// operation on the host blocks (native collectives included), copy back
// what it wrote (a Recv's Status.Count bytes, a Reduce's result at the
// root, …) and free the stand-ins. Host-accessible buffers are passed on
// unchanged: each is tested once, and nothing else is done.
//
// A staged collective stages each buffer whole, so ranks may mix host and
// device buffers freely, as MPI allows. A communicator that every rank
// makes with StageInPieces(ctx, c, chunk) runs Allreduce, Reduce and Bcast
// of more than chunk bytes as one collective per piece, on every rank
// whatever its memory: a device buffer is staged in three stand-ins of a
// piece, the copy in of the next piece and the copy out of the last
// overlapping the collective on the current one, and host buffers are cut
// in the same pieces with no copy, so ranks may still mix memory kinds.
// StageInPieces is a collective and fails on every rank, with
// ErrInvalidArgument, when the ranks ask for different chunks (ADR 42).
//
// Staging errors come back as an *xerr.Error of component "comm" naming
// the call, matching the cause's sentinel: ErrNotSupported where no
// transfer path reaches the buffer's space (found before anything is
// sent), ErrOutOfMemory where the stand-in cannot be had. A context that
// ends stops a staged collective between pieces. Data that arrived is
// copied out even when the context has ended meanwhile. Staging memory is
// freed before the call returns, save the stand-in of a send the backend
// could not cancel in time (see above), freed once that send settles.
//
// The methods Isend and Irecv of a Comm do not stage: they are the
// backend's, and one that cannot reach the buffer fails them with an
// error matching ErrNotSupported that names it
// (memspace.ErrNotHostAccessible, for the local and procs backends). The
// package functions Isend and Irecv do: a host buffer, or a device one
// the communicator takes (DeviceNative), goes to the method unchanged, at
// no cost; otherwise Isend copies the buffer into a host stand-in before
// it returns and sends that, and Irecv receives into a stand-in and its
// request copies what arrived (Status.Count bytes, also of a truncated
// message) into the buffer when it completes — in Wait, Test, WaitAll or
// Await, once, before it reports completion. Each request frees its
// stand-in once it has settled, Cancel included. Package comm has no
// nonblocking collectives.
//
// Implementers: the checks of ranks and tags and the matching of tags
// (impl.CheckRank, impl.CheckTag, impl.CheckWireTag, impl.MatchTag, formerly
// in this package) are in package impl, with the other helpers for
// backends; wrap their errors with the backend's name.
package comm
