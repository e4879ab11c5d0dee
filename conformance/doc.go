// Package conformance holds the behavioural suites every xpu backend must
// pass: one call from a backend's own _test.go checks its memory spaces,
// executor, streams, transfers and communicator against the contracts of
// packages memspace, executor, transfer and comm.
//
// # Use
//
// A backend in its own module tests itself with a one-liner over a factory
// that opens a fresh backend per case:
//
//	func TestConformance(t *testing.T) {
//		conformance.Run(t, func(t *testing.T) *xpu.Backend {
//			b, err := mybackend.Driver{}.Open(context.Background(), nil)
//			if errors.Is(err, xpu.ErrUnavailable) {
//				t.Skip(err) // no device here
//			}
//			require.NoError(t, err)
//			t.Cleanup(func() { _ = b.Close() })
//			return b
//		})
//	}
//
// A backend registered with xpu.Register can be run by name instead:
// RunDriver opens it through the registry for every case, as `xpu
// conformance` does, and also checks that the driver's Info tells the
// truth: that it lists exactly the concept-level capabilities (xpu.Derived)
// the opened components implement ("backend/capabilities"), and, for a
// backend whose memory lies on one of several devices, that opened with
// DeviceOption for device i it is device i's ("backend/devices").
//
//	func TestConformance(t *testing.T) {
//		conformance.RunDriver(t, "mybackend", xpu.Options{"workers": "4"})
//	}
//
// Run picks the suites that apply from the backend's composition. Each
// suite can also be called alone over the smallest thing it needs:
// TestSpace over a factory of spaces (generic over the concrete type, so
// the factory returns it unconverted), TestPool over a factory of upstream
// spaces, TestExecutor over executors, TestStream over streamers,
// TestTransfer over sets of spaces, TestComm over groups of ranks. Run the
// suites under the race detector: several cases check that an
// implementation orders memory as it promises.
//
// # Cases
//
// Every requirement is one subtest with a stable, hierarchical name
// relative to the suite, such as "space/alloc/alignment",
// "stream/error/sticky" or "comm/coll/allreduce/n=7", so one case can be
// run with -run and a failure names what is broken. Each case gets a fresh
// implementation from the factory and frees what it allocated; at its end
// the space ledgers (memspace.StatsSpace) must be back where they started.
// Optional capabilities (memspace.Lookuper, memspace.Availability,
// memspace.Closer, executor.Parallel, executor.TimedEvent, …) are found
// through wrappers with memspace.As and executor.As and tested where
// present; a case whose capability is absent is skipped and says so.
//
// # Factories
//
// A factory is called once per case with the case's *testing.T: it may call
// t.Skip (a backend unavailable on this machine, a group size it cannot
// make) and must release what it made with t.Cleanup. Some cases close
// components themselves ("space/close", "stream/close/after",
// "comm/close/closed"), so cleanups must accept a component already closed
// (an error matching ErrClosed). The suite closes the streams and ranks it
// is given. Factories must not share components with tests running at the
// same time: ledgers are compared, and the "no-leak" cases look for
// goroutines left after everything was closed. Every suite, called alone or
// through Run, ends with "<area>/no-leak" ("space/no-leak",
// "executor/no-leak", "comm/no-leak", …), which fails on a goroutine its
// cases started and left running, naming the case that started it; a
// goroutine a backend keeps for the life of the process is declared.
//
// # What the suites try
//
// Spaces: every allocation path, by allocating a spread of sizes from 1 B
// to 64 MiB (powers of four and one byte more), each tried with a double
// free, a free of a sub-block and a free of another space's block, so a
// space that serves sizes differently is checked on each path; and
// Properties that agree with each other and with behaviour (Device -1 is
// host memory, not unified; pinned and pageable exclude each other; a host
// view exists exactly when the space claims HostAccessible). Transfers:
// sizes on both sides of every split point of the host path, taken from
// the split points themselves, copies at different non-zero offsets on both
// sides, and large overlapping copies in both directions. Executors:
// executor.Reduce over floating-point values whose sum depends on the order
// gives the bits of the sequential sum, chunk by chunk, at every grain,
// alone, concurrently and nested.
//
// # Limits and declarations
//
// An implementation states what it does not do with Declare, which skips
// the named case (or group of cases) with the reason, visibly in the test
// output. Nothing else is weakened: what an implementation claims — an
// interface it implements, a path it registers, a group size its factory
// makes — is tested in full. A case is named suite-relative
// ("space/free/double", for every space of a backend) or by the whole name
// `go test -v` prints ("TestConformance/host/space/free/double", for that
// one). A declaration that names no case fails the suite, with the nearest
// case names, so a typo or a stale declaration is noticed.
//
// # Hangs
//
// Every case runs under a watchdog, as in golang.org/x/net/nettest: its
// context expires after Timeout (DefaultTimeout, 10 s; the slowest case of
// the repository's backends takes about a second under the race detector),
// and a case still running a grace period later (DefaultGrace) — a blocking
// call that ignores its context, a request that never completes — fails
// then, with its name and the stacks of its goroutines (those started by
// the case, the backend's included), and the suite goes on without it: its
// cleanups close what the factory made, and the goroutines of the case
// still running after them are reported, since nothing can stop them. A
// panic fails its case with its stack, and the suite goes on too. Only a
// cleanup that never returns (a Close that hangs) ends the test binary, a
// grace period later, with every goroutine's stack and the name of the
// case, since a test cannot go on past its cleanups. Raise Timeout for a
// slow device, never to hide a hang.
//
// # Communicators
//
// TestComm drives the ranks of a group from goroutines of the test, with
// buffers in Go memory (memspace.FromSlice). Point-to-point cases use 2 and
// 3 ranks; the collectives run over 1 to MaxRanks ranks (DefaultMaxRanks)
// with odd counts, counts below the number of ranks, and Sum, Prod, Min and
// Max on signed, unsigned, floating-point, named and complex element types,
// each compared with a sequential computation. Values are small integers so
// that every result is exact whatever order the backend combines them in.
// The "comm/algorithms/…" cases run Bcast, Reduce, Allreduce, Allgather and
// ReduceScatter at sizes on both sides of every threshold at which package
// comm's shared algorithms change, taken from the thresholds themselves, over
// 2, 3 and 4 ranks with a non-zero root, so every algorithm runs.
// "comm/context/…" call every blocking call with a context already done and
// with one that ends while it blocks; "comm/requests/…" check Test, WaitAll
// and Await on done, failed and canceled requests; "comm/p2p/any-source-order"
// and "any-tag-order" check that the receive posted first takes the message
// across wildcard and specific receives. "comm/device/…", run when the
// option DeviceSpaces gives spaces the host cannot touch (device memory),
// passes their blocks to comm.Send and comm.Recv, comm.Isend and
// comm.Irecv (polled with Test: the bytes are in the block when Test first
// reports the receive done), a truncated receive, Sendrecv, Bcast,
// Allreduce and Allgather, and mixes host and device buffers across ranks
// (also on a communicator made by comm.StageInPieces). A case that times
// out names the rule the backend broke and the section of
// docs/backend-guide.md that states it.
//
// TestCommRank checks the same requirements in a job with one rank per
// process (mpirun -np N, xpu run -n N): every process calls it with its
// own rank, and each case is the same body, run by every rank, as in
// TestComm. Its cases are named without the group size
// ("comm/coll/allreduce"); collectives run over the whole job, and cases
// for a fixed number of ranks over the first ranks only. After each case
// the ranks get back in step with a collective that also shares their
// verdicts, and every rank stops at the first case that failed anywhere.
// The cases that close ranks or count goroutines ("comm/close/…",
// "comm/coll/peer-lost") need the whole group in one process: in a job
// they are skipped with that reason.
package conformance
