// Package mpi is a communicator over MPI — Open MPI or MPICH — through
// cgo: the engine for clusters. A *Comm implements comm.Comm (point to
// point with tags and wildcards, nonblocking requests), comm.Blocking,
// all of comm.Collectives with MPI's own algorithms, and comm.OneSided and
// comm.Notifier over an MPI-3 window (see One-sided communication).
//
//	c, err := mpi.Open(ctx, mpi.Options{}) // this process's rank of the job
//	if err != nil { … }
//	defer c.Close()
//	err = comm.Allreduce(ctx, c, send, recv, comm.Sum)
//
// The package registers the driver "mpi" with package xpu: its Backend
// has only Comm, this process's rank of MPI_COMM_WORLD (Group is nil: MPI
// ranks are processes).
//
// # Options
//
// xpu.Open reads this key of xpu.Options, documented on its constant:
//
//	thread_level  OptThreadLevel  "multiple" (the default) or "serialized"
//
// A bad value is an error matching xpu.ErrInvalidArgument, and a key the
// driver does not know one matching xpu.ErrUnknownOption. A key scoped to
// another backend ("procs.timeout") is left to it, so that one set of options
// can serve a fallback chain; "mpi.thread_level" is read as thread_level.
//
// # Building
//
// The cgo code is behind the build tag mpi, so that the module builds and
// its tests run on machines without MPI:
//
//	go build -tags mpi ./...          // Open MPI: pkg-config ompi-c
//	go build -tags 'mpi mpich' ./...  // MPICH: pkg-config mpich
//
// mpi.h and the library are found with pkg-config (PKG_CONFIG_PATH points
// it at another installation). On Debian, scripts/setup-mpi.sh installs
// libopenmpi-dev, openmpi-bin and pkg-config (--mpich: libmpich-dev and
// mpich; both can be installed side by side). Built without the tag, the
// package has the same API, the driver reports xpu.ErrUnavailable ("built
// without MPI support: rebuild with -tags mpi") and Open fails with it.
//
// # Launching
//
// A program runs unchanged as every rank of a job:
//
//	mpirun -np 4 ./prog            // Open MPI (as root: --allow-run-as-root;
//	                               // more ranks than cores: --oversubscribe)
//	mpirun.mpich -np 4 ./prog      // MPICH's Hydra
//	srun -n 4 ./prog               // Slurm, with MPI built for PMI/PMIx
//
// The launcher of the MPI the binary links with must start it. Started
// without a launcher, the process is a one-rank job (an MPI singleton).
// Launched reports what the launcher said through the environment without
// initialising MPI.
//
// # Lifetime
//
// The first Open initialises MPI (MPI_Init_thread) on a goroutine locked
// to its OS thread; Open, Dup and Split are collective. Closing the
// process's last Comm finalises MPI (MPI_Finalize, on that same thread),
// which waits for every process of the job to finalise: close each Comm
// once, on every rank, at the end. MPI cannot be initialised twice: an Open
// after that fails with an error matching xpu.ErrUnavailable. Keep one Comm
// open for the life of the program (tests: in TestMain). When another
// library of the process has initialised MPI already, Open adopts it and
// leaves finalisation to that library.
//
// Making a Comm also makes its window (see One-sided communication), and
// freeing it frees the window, which is collective: a Comm is freed once
// every rank has closed it, and Close waits for that (in an MPI_Ibarrier,
// polled) when it is the call that frees it.
//
// Every Comm is a duplicate (MPI_Comm_dup) of its parent, so its traffic
// never meets other code using MPI_COMM_WORLD, plus more duplicates that
// carry the reserved tags of package comm's shared algorithms (tags above
// comm.MaxTag, sent on them as tag-comm.MaxTag-1): a comm.AnyTag receive
// (MPI_ANY_TAG) can never take collective traffic. MPI_TAG_UB bounds the
// user's tags: Open MPI carries every tag up to comm.MaxTag; MPICH only up
// to 2^28-1, and larger user tags fail with comm.ErrInvalidArgument
// (TagUB tells).
//
// # Threads
//
// Open asks for MPI_THREAD_MULTIPLE: goroutines call MPI concurrently, and
// a blocking call may block inside MPI. Below it — Options.ThreadLevel
// ThreadSerialized, or all the library grants — every MPI call is
// serialised behind one mutex and nothing blocks inside MPI (blocking
// operations become nonblocking ones polled with MPI_Test). The driver's
// Info says which: capability "threads.multiple" or "threads.serialized".
//
// # Blocking calls and contexts
//
// Send, Recv and the collectives take a context. When ctx can never end
// (ctx.Done() == nil: context.Background) and calls are not serialised, they
// are the blocking MPI calls themselves on the caller's memory (MPI_Send,
// MPI_Allreduce, …; MPI_Mprobe and MPI_Mrecv for a receive, see Receives),
// one cgo call each: the fastest path. Otherwise they start the nonblocking form (MPI_Isend,
// MPI_Iallreduce, …) and poll it with MPI_Test — a short spin, then
// yielding, then sleeping up to half a millisecond — so a deadline or
// cancellation is seen promptly and nothing sits in MPI_Wait with no way
// out. On ctx done:
//
//   - a receive no message has matched yet is withdrawn and ctx.Err()
//     returned; one matched first completes and is returned;
//   - a send is canceled where MPI can; Open MPI (ob1) never cancels a
//     send and MPICH over UCX does not either, so it stays in flight and
//     may still be delivered. It was started from a private copy of the
//     buffer, taken at the call, so the caller's buffer is free when Send
//     returns;
//   - a collective cannot be canceled in MPI: it was started on private
//     copies of the buffers, is left to complete in the background as the
//     other ranks join it, and still counts as called (do not call it
//     again). The results are then not written to the caller's buffers;
//   - Split and Dup wait, honouring ctx, in an MPI_Ibarrier for every rank
//     to arrive; a rank whose ctx ends first still takes its part in the
//     background (the next collective on the parent waits for that) and
//     frees the result.
//
// Requests (Isend, Irecv) work on the caller's memory; Go memory is pinned
// (runtime.Pinner) until they complete, memory outside the Go heap needs
// nothing. Their Wait polls like the watched calls.
//
// # Receives
//
// Every receive learns the length of its message before taking it: a
// blocking one with MPI_Mprobe and MPI_Mrecv (one cgo call), a request with
// MPI_Improbe and MPI_Imrecv. A message longer than the buffer is received
// into memory of its own length and its first len(buffer) bytes delivered,
// with an error matching comm.ErrTruncated and Status.Count = len(buffer).
// Posting the caller's buffer directly is not safe: Open MPI 4.1 writes a
// truncated message that went by rendezvous (above the transport's eager
// limit: 4 KiB over shared memory, 64 KiB over TCP) whole, past the end of
// the buffer, whatever the buffer's length — so only the message's length
// tells whether a receive is safe (testdata/overrun.c reproduces it;
// TestTruncationOverrun runs it). The probe costs about 80 ns per message
// in C as well; MPI_Probe with MPI_Recv costs the same, MPI_Improbe polled
// more.
//
// Receive requests not yet matched wait in a queue of the process, in the
// order they were started, and are matched in that order, each message to
// the earliest waiting receive it fits, so MPI's matching rules hold
// (non-overtaking, wildcards, reserved tags apart). Matching runs whenever
// a goroutine tests or waits on a request or waits in a watched call;
// while any receive waits to be matched, no call blocks inside MPI (the
// blocking paths become watched ones), since MPI's own progress would not
// match it. A started receive that nothing waits for is therefore matched
// only once something waits. Cancel of a receive not yet matched takes it
// out of the queue (Wait returns comm.ErrCanceled); a matched one
// completes normally. Cancel of a send is MPI_Cancel: a send it cannot
// cancel (see above) completes when its receiver takes it.
//
// # One-sided communication
//
// Every Comm of several ranks has one dynamic window
// (MPI_Win_create_dynamic), made with it over a communicator of its own and
// locked for every rank once (MPI_Win_lock_all: passive target). Expose
// attaches a block (MPI_Win_attach) and Region.Close detaches it; Put and
// Get are MPI_Rput and MPI_Rget; Flush is MPI_Win_flush (MPI_Win_flush_all
// for comm.AnySource). A Put's request completes when its bytes are at the
// target: its Wait flushes to that rank once MPI is done with the buffer,
// unless a Flush did. With a context that never ends (and calls not
// serialised) Wait and Flush flush at once, inside MPI; otherwise they
// poll with ctx until MPI is done with the buffers, and then flush, which
// waits inside MPI for the targets' acknowledgements only. Transfers to
// this rank are copies. Where MPI makes no window (Open MPI 4.1 over its
// TCP transport) the Comm works and transfers to other ranks fail with
// comm.ErrNotSupported.
//
// A RemoteKey carries the rank, the address MPI_Get_address gives for the
// block, its length, and in Key the region's number (low 32 bits) and a
// check of all of it keyed by a secret the ranks share (high 32 bits). A
// key altered in any field, or made on another communicator, is refused
// with comm.ErrInvalidArgument before MPI sees it, and ranges are checked
// against the key's length: no key writes outside a region. A key of a
// region its rank has closed cannot be told from an open one without
// asking the target, and MPI cannot refuse a transfer to detached memory
// (it is erroneous; what happens depends on the library). So the
// contract is: complete (Flush) every transfer to a region, and tell its
// rank, before that rank closes the region; the conformance case
// comm/onesided/stale-keys is declared (docs/adr/0035-mpi-rma-windows.md
// says what checking it would cost). Regions of one Comm must not overlap
// (MPI attaches memory once).
//
// Notifications (comm.Notifier) are messages on that same communicator of
// their own, tag 0: they never meet the user's messages or the
// collectives'. Notify flushes to the rank, then starts an MPI_Isend from
// a copy and returns; WaitNotification probes for one (MPI_Improbe),
// receives it, and syncs the window (MPI_Win_sync) before returning it.
//
// Under MPICH, transfers into attached memory move as messages that the
// target's MPI handles when it is called: a target busy in its own
// computation delays them (MPI's passive-target progress).
//
// # Speed
//
// A direct call costs about 60-80 ns more than the same MPI call made from
// C (a cgo call, two atomic operations, the checks; a receive also its
// probe): docs/results/mpi.md.
//
// A goroutine that does nothing but call MPI never passes through the Go
// scheduler, and after 10 ms the runtime's monitor thread (sysmon) takes
// its processor away in the middle of a call to preempt it, wakes other
// threads, and polls every 20 µs for a millisecond or more, on the cores
// the ranks spin on. That made 8-byte operations 1.5-2.5 times slower than
// the same loop in C launched the same way (most at GOMAXPROCS=1, where a
// rank bound to one core runs). So every 64th call a Comm looks at the
// clock, and when 5 ms have passed since it last did and no other
// goroutine is waiting for a processor it yields (runtime.Gosched), which
// keeps the runtime quiet; when goroutines are waiting it does not, so as
// not to hand them the processor for a whole time slice.
//
// Give each rank GOMAXPROCS of 2 or more: more than one core (mpirun
// --bind-to none; Open MPI: --map-by slot:PE=2), or -x GOMAXPROCS=2 where
// ranks must stay bound to one core each (mpirun's default up to 2
// ranks). At GOMAXPROCS=1 small messages are as fast, but sysmon also
// takes the processor from any call that lasts across two of its ticks
// (20 µs and up), there being no idle one: 64 KiB-4 MiB collectives ran up
// to 1.2-1.4 times the C figure. The driver's Info reports GOMAXPROCS.
// Real-time priority (chrt -f) is no remedy: with GOMAXPROCS of 2 or more
// such a launch stalled here, its threads spinning at that priority.
//
// # Memory
//
// Blocks must be host-accessible (memory of the cpu backend, Go memory from
// memspace.FromSlice, pinned host memory of a GPU backend). Device memory
// is refused by Isend, Irecv, Expose, Put and Get with comm.ErrNotSupported
// (wrapping memspace.ErrNotHostAccessible where the block says so), and
// declined by the collectives with comm.ErrFallback. Go memory is pinned
// while exposed and while a transfer uses it. Messages and collective counts
// are bounded by MPI's int (2 GiB - 1 bytes for point to point).
//
// # Errors
//
// The communicators use MPI_ERRORS_RETURN: errors come back as Go errors,
// never as an abort. An error of MPI is an *Error (code, class and MPI's
// own message, MPI_Error_string) inside an *xerr.Error naming the
// operation, and matches the sentinel of its class: comm.ErrTruncated for
// MPI_ERR_TRUNCATE (receives detect truncation themselves, see Receives),
// comm.ErrInvalidArgument for bad ranks, tags, counts, types, ops or
// roots. Bad arguments are refused before MPI sees them.
//
// # Failures
//
// MPI without the ULFM fault-tolerance extension cannot report a dead peer.
// When a rank dies, Open MPI's mpirun aborts the whole job (every process
// is killed) and MPICH's Hydra does the same; no call returns
// comm.ErrPeerLost (an MPI with ULFM reports MPIX_ERR_PROC_FAILED, which
// maps to it). Until the launcher acts, a call waiting on the dead rank
// waits: with a context that can end it returns ctx.Err() at the deadline
// (the watched path), with context.Background it blocks inside MPI. Use
// deadlines where a hang would cost more than the copies of the watched
// path. The same holds for one-sided transfers and their flushes, and
// for the freeing of a Comm, which waits for every rank to close it.
// Close cannot tell the peers either: they see nothing until they
// time out or the job ends; and Close cannot interrupt a blocking MPI call
// in progress on another goroutine (it frees the communicator when that
// call returns).
package mpi
