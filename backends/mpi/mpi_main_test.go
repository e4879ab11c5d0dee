//go:build mpi

package mpi_test

import (
	"context"
	"flag"
	"fmt"
	"os"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/xpu-go/xpu/backends/mpi"
)

// envLevel carries the thread level the launcher asks the ranks to use.
const envLevel = "XPU_MPI_TEST_THREAD_LEVEL"

// world is this process's rank of MPI_COMM_WORLD when it runs as a rank
// (launched by mpirun), else nil. It stays open for the whole test binary:
// closing the last communicator finalises MPI, which cannot come back.
var world *mpi.Comm

// testMain runs the tests as one rank when launched by mpirun, else as a
// plain test binary whose TestRanks launches mpirun.
func testMain(m *testing.M) {
	if _, _, _, ok := mpi.Launched(); !ok {
		verify(m)
		return
	}
	os.Exit(runRank(m))
}

func runRank(m *testing.M) int {
	o := mpi.Options{ThreadLevel: mpi.ThreadMultiple}
	if os.Getenv(envLevel) == "serialized" {
		o.ThreadLevel = mpi.ThreadSerialized
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	w, err := mpi.Open(ctx, o)
	cancel()
	if err != nil {
		fmt.Fprintln(os.Stderr, "mpi.Open:", err)
		return 1
	}
	world = w
	// Benchmarks: rank 0 runs them and the other ranks follow its lead.
	flag.Parse()
	bench := flag.Lookup("test.bench")
	follow := bench != nil && bench.Value.String() != "" && w.Rank() != 0
	if follow {
		_ = flag.Set("test.bench", "")
	}
	code := m.Run()
	if bench != nil && bench.Value.String() != "" || follow {
		if w.Rank() == 0 {
			if err := command(w, []int64{-1, 0}); err != nil {
				fmt.Fprintln(os.Stderr, "ending the benchmarks:", err)
				code = 1
			}
		} else if err := followBenchmarks(w); err != nil {
			fmt.Fprintln(os.Stderr, "following the benchmarks:", err)
			code = 1
		}
	}
	if err := w.Close(); err != nil {
		fmt.Fprintln(os.Stderr, "closing the world communicator:", err)
		code = 1
	}
	if err := goleak.Find(); err != nil {
		fmt.Fprintln(os.Stderr, "goleak:", err)
		code = 1
	}
	return code
}
