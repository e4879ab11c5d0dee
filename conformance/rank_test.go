package conformance_test

import (
	"bytes"
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/xpu-go/xpu"
	"github.com/xpu-go/xpu/backends/local"
	"github.com/xpu-go/xpu/comm"
	"github.com/xpu-go/xpu/conformance"
	"github.com/xpu-go/xpu/memspace"
)

// spmd runs TestCommRank on every rank of an in-process group, as the
// processes of a job would: each rank in its own subtest "rank=R", all at
// once. The subtests are started from a goroutine each (t.Run may be called
// concurrently) rather than made parallel: parallel subtests run at most
// -test.parallel at a time, and a job needs all its ranks running.
func spmd(t *testing.T, ranks []comm.Comm, opts ...conformance.Option) {
	t.Helper()
	var wg sync.WaitGroup
	for r, cm := range ranks {
		wg.Add(1)
		go func() {
			defer wg.Done()
			t.Run(fmt.Sprintf("rank=%d", r), func(t *testing.T) { conformance.TestCommRank(t, cm, opts...) })
		}()
	}
	wg.Wait()
}

// A backend with one rank per process tests its job communicator with
// TestCommRank, in a test that the job's launcher starts in every process.
func ExampleTestCommRank() {
	_ = func(t *testing.T) { // func TestJob(t *testing.T) in mybackend_test.go, run as mpirun -np 4 mybackend.test
		b, err := xpu.Open(context.Background(), "mybackend", nil)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = b.Close() })
		if b.Comm == nil {
			t.Skip("not started as a job")
		}
		conformance.TestCommRank(t, b.Comm, conformance.Timeout(2*time.Minute))
	}
}

// localGroup returns a group of n in-process ranks, each wrapped by wrap
// (when not nil).
func localGroup(n int, o local.Options, wrap func(rank int, c comm.Comm) comm.Comm) ([]comm.Comm, error) {
	ranks, err := local.NewGroup(n, o)
	if err != nil {
		return nil, err
	}
	out := make([]comm.Comm, n)
	for i, r := range ranks {
		out[i] = r
		if wrap != nil {
			out[i] = wrap(i, r)
		}
	}
	return out, nil
}

// localRanks returns a group of n in-process ranks, each wrapped by wrap
// (when not nil), closed when the test ends.
func localRanks(t *testing.T, n int, o local.Options, wrap func(rank int, c comm.Comm) comm.Comm) []comm.Comm {
	t.Helper()
	ranks, err := localGroup(n, o, wrap)
	require.NoError(t, err)
	t.Cleanup(func() {
		var wg sync.WaitGroup
		for _, r := range ranks {
			wg.Add(1)
			go func() {
				defer wg.Done()
				_ = r.Close() // a Close may wait for its peers
			}()
		}
		wg.Wait()
	})
	return ranks
}

// wrappedGroup returns a TestComm factory of local groups whose ranks are
// wrapped by wrap.
func wrappedGroup(wrap func(c comm.Comm) comm.Comm) func(t *testing.T, n int) []comm.Comm {
	return func(t *testing.T, n int) []comm.Comm {
		return localRanks(t, n, local.Options{}, func(_ int, c comm.Comm) comm.Comm { return wrap(c) })
	}
}

// TestCommRankLocal runs the SPMD suite over in-process groups, one
// goroutine per rank standing in for one process per rank: a group with
// the default transport, and one that sends everything by rendezvous, with
// more ranks than MaxRanks lets the point-to-point cases use.
func TestCommRankLocal(t *testing.T) {
	t.Run("eager", func(t *testing.T) {
		spmd(t, localRanks(t, 2, local.Options{}, nil), conformance.DeviceSpaces(newFakeDevice()))
	})
	t.Run("rendezvous", func(t *testing.T) {
		spmd(t, localRanks(t, 4, local.Options{EagerLimit: -1}, nil), conformance.MaxRanks(3))
	})
}

// TestRankModeReports runs TestRankReports in a child process and checks
// from its verbose output which cases each rank ran, skipped (and why) or
// left to TestComm: a job of one rank, where every case of two ranks is
// skipped, and a job of three, where the cases of two ranks leave rank 2
// idle, with declarations of both suites' names.
func TestRankModeReports(t *testing.T) {
	onlyInParent(t)
	t.Parallel() // a child process: it runs beside the other parallel tests
	tc := childCase{test: "TestRankReports", ok: true, absent: []string{"--- FAIL"}, want: []string{
		"--- PASS: TestRankReports/n=3/rank=0/comm/group",
		"--- PASS: TestRankReports/n=3/rank=2/comm/p2p/send-recv",
		"--- PASS: TestRankReports/n=3/rank=2/comm/p2p/truncated", // idle: only ranks 0 and 1 take part
		"--- PASS: TestRankReports/n=3/rank=1/comm/coll/barrier",
		"--- PASS: TestRankReports/n=3/rank=1/comm/coll/allreduce",
		"--- PASS: TestRankReports/n=1/rank=0/comm/coll/allreduce",
		"--- PASS: TestRankReports/n=1/rank=0/comm/p2p/self",
		"--- SKIP: TestRankReports/n=1/rank=0/comm/p2p/truncated",
		"needs 2 ranks; the communicator has 1",
		"--- SKIP: TestRankReports/n=1/rank=0/comm/p2p/send-recv",
		"needs at least 2 ranks; the communicator has 1",
		"--- SKIP: TestRankReports/n=3/rank=0/comm/close/peer-lost",
		"--- SKIP: TestRankReports/n=3/rank=1/comm/coll/peer-lost",
		"runs in TestComm only: it closes a rank",
		"--- SKIP: TestRankReports/n=3/rank=2/comm/close/no-leak",
		"runs in TestComm only: it counts the goroutines",
		"--- SKIP: TestRankReports/n=3/rank=1/comm/context/collectives",
		"runs in TestComm only: it cancels collectives on some ranks only",
		"--- PASS: TestRankReports/n=3/rank=2/comm/algorithms/bcast",
		"--- PASS: TestRankReports/n=3/rank=0/comm/context/send",
		"--- PASS: TestRankReports/n=3/rank=2/comm/requests/wait-all", // idle: only ranks 0 and 1 take part
		// A declaration of one of TestComm's group sizes applies to a job of that size only.
		"--- SKIP: TestRankReports/n=3/rank=2/comm/coll/alltoall",
		"declared by the implementation: alltoall of three is not for this test",
		"--- PASS: TestRankReports/n=1/rank=0/comm/coll/alltoall",
		"--- SKIP: TestRankReports/n=1/rank=0/comm/p2p/cancel",
		"declared by the implementation: cancel is not for this test",
	}}
	tc.check(t, startChild(t, tc.test))
}

func TestRankReports(t *testing.T) {
	onlyInChild(t)
	opts := []conformance.Option{
		conformance.Declare("comm/coll/alltoall/n=3", "alltoall of three is not for this test"),
		conformance.Declare("comm/p2p/cancel", "cancel is not for this test"),
		// TestComm's names of a case that does not run in a job are known too.
		conformance.Declare("comm/coll/peer-lost/n=3", "not for this test"),
	}
	for _, n := range []int{1, 3} {
		t.Run(fmt.Sprintf("n=%d", n), func(t *testing.T) { spmd(t, localRanks(t, n, local.Options{}, nil), opts...) })
	}
}

// TestRankModeCatchesBrokenImplementations runs each TestBrokenRank… test
// in a child process and checks that it fails as it should.
func TestRankModeCatchesBrokenImplementations(t *testing.T) {
	t.Parallel() // child processes that mostly wait: beside the other parallel tests
	runChildren(t, []childCase{
		// Rank 1 corrupts what it sends: its peers see it, and every rank
		// stops after the case, the cases after it unrun.
		{test: "TestBrokenRankCorrupt", want: []string{
			"--- PASS: TestBrokenRankCorrupt/rank=0/comm/group",
			"--- FAIL: TestBrokenRankCorrupt/rank=0/comm/p2p/send-recv",
			"--- FAIL: TestBrokenRankCorrupt/rank=2/comm/p2p/send-recv",
			"bytes differ",
			// Rank 1 waits for rank 0's message around a ring, which never comes.
			"--- FAIL: TestBrokenRankCorrupt/rank=1/comm/p2p/send-recv",
			"rank 1 of 3: Sendrecv: context deadline exceeded (the case's context expired",
			"which failed on rank(s) [0 2] and timed out on rank(s) [1]",
			"rank 0 of 3 stopped after comm/p2p/send-recv",
			"rank 1 of 3 stopped after comm/p2p/send-recv",
			"rank 2 of 3 stopped after comm/p2p/send-recv",
		}, absent: []string{
			"comm/p2p/self",
			"comm/coll",
		}},
		// A Barrier that lets ranks out at once, in both suites: the barrier
		// case is written with messages only, so it catches it in a job.
		{test: "TestBrokenRankBarrier", want: []string{
			"--- FAIL: TestBrokenRankBarrier/rank=0/comm/coll/barrier",
			"left Barrier #0 before rank 0 had entered it",
			"stopped after comm/coll/barrier",
		}, absent: []string{
			"comm/coll/bcast",
		}},
		{test: "TestBrokenGroupBarrier/^comm$/^coll$/^barrier$", want: []string{
			"--- FAIL: TestBrokenGroupBarrier/comm/coll/barrier/n=2",
			"--- FAIL: TestBrokenGroupBarrier/comm/coll/barrier/n=5",
			"left Barrier #0 before rank 0 had entered it",
		}},
	}, hung) // and the watchdog ends none of their cases
}

// failFast is the Timeout of the broken jobs: the ranks that wait for a
// rank that failed wait this long. The grace period that comes with it
// (2 s) bounds how late they may be to get back in step.
var failFast = conformance.Timeout(8 * time.Second)

func TestBrokenRankCorrupt(t *testing.T) {
	onlyInChild(t)
	spmd(t, localRanks(t, 3, local.Options{}, func(rank int, c comm.Comm) comm.Comm {
		if rank == 1 {
			return corruptComm{c}
		}
		return c
	}), failFast)
}

func TestBrokenRankBarrier(t *testing.T) {
	onlyInChild(t)
	spmd(t, localRanks(t, 3, local.Options{}, func(_ int, c comm.Comm) comm.Comm { return hastyBarrier{c} }), failFast)
}

func TestBrokenGroupBarrier(t *testing.T) {
	onlyInChild(t)
	conformance.TestComm(t, wrappedGroup(func(c comm.Comm) comm.Comm { return hastyBarrier{c} }),
		conformance.MaxRanks(5), failFast)
}

// corruptComm flips one byte of every message of 4 KiB or more that it
// sends with a user tag, as a faulty link would. It has no Unwrap, so that
// every send, blocking or not, goes through its Isend.
type corruptComm struct{ comm.Comm }

func (c corruptComm) Isend(buf memspace.Block, dest, tag int) (comm.Request, error) {
	if tag < 0 || tag > comm.MaxTag || buf.Len() < 4096 {
		return c.Comm.Isend(buf, dest, tag)
	}
	b, err := buf.Bytes()
	if err != nil {
		return nil, err
	}
	bad := bytes.Clone(b)
	bad[len(bad)/2] ^= 0x40
	m, err := memspace.FromSlice(bad)
	if err != nil {
		return nil, err
	}
	return c.Comm.Isend(m.Block(), dest, tag)
}

// hastyBarrier is a communicator whose native Barrier returns at once; its
// other collectives fall back to the shared algorithms.
type hastyBarrier struct{ comm.Comm }

var _ comm.Collectives = hastyBarrier{}

// Unwrap returns the communicator underneath.
func (h hastyBarrier) Unwrap() comm.Comm { return h.Comm }

func (hastyBarrier) Barrier(context.Context) error { return nil }

func (hastyBarrier) Bcast(context.Context, memspace.Block, int) error { return comm.ErrFallback }

func (hastyBarrier) Reduce(context.Context, memspace.Block, memspace.Block, comm.DType, comm.Op, int) error {
	return comm.ErrFallback
}

func (hastyBarrier) Allreduce(context.Context, memspace.Block, memspace.Block, comm.DType, comm.Op) error {
	return comm.ErrFallback
}

func (hastyBarrier) Gather(context.Context, memspace.Block, memspace.Block, int) error {
	return comm.ErrFallback
}

func (hastyBarrier) Scatter(context.Context, memspace.Block, memspace.Block, int) error {
	return comm.ErrFallback
}

func (hastyBarrier) Allgather(context.Context, memspace.Block, memspace.Block) error {
	return comm.ErrFallback
}

func (hastyBarrier) Alltoall(context.Context, memspace.Block, memspace.Block) error {
	return comm.ErrFallback
}

func (hastyBarrier) ReduceScatter(context.Context, memspace.Block, memspace.Block, comm.DType, comm.Op) error {
	return comm.ErrFallback
}
