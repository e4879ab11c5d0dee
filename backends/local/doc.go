// Package local is an in-process communicator: N ranks in one process,
// exchanging messages point to point through shared memory. It serves tests
// of code written against comm.Comm (the collective algorithms of package
// comm among them), single-process multi-device programs, and as the
// reference implementation of the comm contract.
//
//	ranks, err := local.NewGroup(4, local.Options{})
//	// hand ranks[i] to goroutine i; Close each rank when done.
//
// The package registers the driver "local" with package xpu; its Backend
// has only Group (a comm.GroupFunc).
//
// # Options
//
// xpu.Open reads these keys of xpu.Options, each documented on its
// constant:
//
//	eager_limit   OptEagerLimit   largest message sent eagerly ("64K")
//	eager_budget  OptEagerBudget  eager bytes a rank holds per sender ("4M")
//
// A bad value is an error matching xpu.ErrInvalidArgument, and a key the
// driver does not know one matching xpu.ErrUnknownOption. A key scoped to
// another backend ("procs.timeout") is left to it, so that one set of options
// can serve a fallback chain; "local.eager_limit" is read as eager_limit, before a bare eager_limit.
//
// # Matching
//
// Each rank keeps a queue of posted receives and a queue of unexpected
// messages (sent before a matching receive was posted). A message matches a
// receive by source (or comm.AnySource) and tag (or comm.AnyTag, which never
// matches the reserved tags above comm.MaxTag). Matching follows MPI's
// non-overtaking rule: messages from one sender match receives in the order
// they were sent — for wildcard receives too — and a message matches the
// earliest posted receive it fits. Order is defined between sends that are
// ordered in time (one goroutine's, say); sends raced from several
// goroutines are ordered as they arrive.
//
// # One-sided communication
//
// Comm implements comm.OneSided: a rank exposes a block of host memory, and
// the others Put into it and Get from it with one copy, made by the
// origin's goroutine; the request has completed when Put or Get returns.
// A block the host cannot touch (a GPU's memory) may be exposed too: the
// copy is then its space's (the driver's), from or into the origin's host
// buffer.
// A key of another group, of a closed region, or altered in any field is
// refused with ErrInvalidArgument before a byte moves.
//
// # Protocols
//
// A message of at most the eager limit (Options.EagerLimit, 64 KiB by
// default) is eager: if a matching receive is posted it is copied straight
// into it, else into a private buffer, and the send completes at once. A
// larger message goes by rendezvous: the send stays pending until a receive
// matches it; then the bytes are copied once, from the send buffer straight
// into the receive buffer, by the goroutine that made the match (inside
// Isend or Irecv), and both requests complete.
//
// Flow control: a rank holds at most its eager budget (Options.EagerBudget,
// 64 MiB by default) of eager messages no receive has taken; beyond it,
// messages go by rendezvous, so a sender that runs ahead waits for its
// receiver instead of growing its queue without bound. As in MPI, a program
// whose sends must all complete before any matching receive is posted is
// unsafe: it works only while its messages fit the eager limit and budget.
// Private buffers of 1 KiB and more are recycled.
//
// # Buffers
//
// Buffers are memspace Blocks of any host-accessible space, Go memory
// viewed with memspace.FromSlice included; the zero Block is an empty
// buffer. A block the host cannot access is rejected by Isend and Irecv with
// an error matching comm.ErrNotSupported. A message longer than the receive
// buffer fails the receive with comm.ErrTruncated; the first len(buffer)
// bytes are delivered, Status.Count says how many, the message is consumed
// and its send completes normally.
//
// # Requests
//
// Wait blocks on a channel (nothing spins); on ctx done it returns ctx.Err()
// and the request stays pending. Comm also implements comm.Blocking, whose
// Send and Recv skip the request where the operation completes at once. Cancel succeeds on a receive no message has
// matched and on a rendezvous send no receive has matched: Wait then returns
// comm.ErrCanceled. Eager sends complete when started, so canceling them
// does nothing. The package starts no goroutines.
//
// # Leaving
//
// Close leaves the group: the rank's pending requests fail with
// comm.ErrClosed and so do its later calls. Peers' pending and later
// operations that need the rank — a receive from it, a send to it, an
// AnySource receive once every other rank has left — fail with
// comm.ErrPeerLost. Eager messages a rank sent before Close remain
// deliverable; Kill simulates a crash, which loses them too. Both are
// idempotent and always return.
package local
