// Package nodecoll runs the collectives of the ranks of one machine in a
// region of shared memory they all map, with no message at all — and, for
// a job that spans machines, hierarchically: within each machine in its
// region, across machines between the machines' lowest ranks over the
// host communicator's point-to-point, then within each machine again. Any
// communicator of one process per rank can host it (Host): the procs engine
// does for every job, rdma for jobs of one machine.
//
// Setup maps a region into the ranks of each node (the ranks a host says
// share this machine; Members finds them from their shm.NodeKey): a
// control line per rank of the node, a ring of nodeRing small entries per
// rank, and a data slot per rank, in two halves used by turns. Within a node, Barrier, Bcast, Reduce and Allreduce then
// run in it, with no message at all: each rank
// publishes its step in its control line (seq), copies its data into its
// slot, and reads the others' slots directly. A job that spans nodes runs
// them hierarchically: within each node in its region, across nodes
// between the nodes' leaders (their lowest ranks) over their links with
// the shared algorithms of package comm, then within each node again.
//
//   - Every node collective takes one or more steps, numbered alike on
//     every rank (all ranks call the collectives in the same order with the
//     same sizes). At step e a rank first waits until every rank has
//     published e-1 — so nobody still reads what this rank last wrote in
//     the half e%2 of its slot — then writes that half, then publishes e.
//   - A step that moves at most nodeTiny bytes from some ranks to others
//     (a small Bcast or Reduce) goes through the ring instead: entry
//     e%nodeRing holds its bytes and its arguments, then its stamp (the
//     step and the length), written last, which the readers wait for in
//     the entry itself; a rank waits only until every rank has published
//     e-nodeRing+1 before it writes it, and takes the line of the entry a
//     few steps on ahead of time (shm.PrefetchWrite). A
//     root that broadcasts, and the ranks that contribute to a reduction,
//     so run up to nodeRing-1 steps ahead of their slowest reader instead
//     of waiting for it at every step.
//   - Allreduce up to nodeSmall bytes: every rank copies its vector into
//     its slot, publishes, waits for every rank, and reduces every slot in
//     rank order into its result: one step, and the bitwise-same result on
//     every rank.
//   - Larger allreduces go in chunks of nodeChunk per step, each in two
//     phases: every rank copies its chunk in and publishes; rank r reduces
//     part r of the chunk over every slot into its result and into the
//     chunk's shared result, and publishes again (done); then every rank
//     copies the other parts of the shared result out. Each part is reduced
//     once, so every rank ends with the same bits.
//   - Bcast: the root copies a chunk into its slot and publishes; the
//     others wait for it, copy it out, and publish.
//   - Reduce (one-node jobs): as Allreduce, but the ranks other than the
//     root leave as soon as they have published their part, and only the
//     root copies the result out.
//   - Barrier: publish, and wait for every rank.
//   - Allgather and Alltoall (one-node jobs): every rank copies what it
//     sends into its slot, a part per rank, publishes, waits for every
//     rank, and copies its part of every slot out.
//
// A waiter polls like a shared-memory link (Options.Spin, yielding the
// processor when the node is oversubscribed: Options.Yield), then sleeps
// on a futex in the region that a rank that publishes wakes when someone
// sleeps, looking again every nodeNap. Every wait ends with ErrPeerLost as soon as any peer
// is lost (Host.Lost: for the procs engine a link that failed, for rdma a
// revocation), with the collective's abort or context, or with
// ErrInvalidArgument when the ranks disagree on the arguments (then the
// node's collectives stay broken).
package nodecoll
