//go:build mpi

package mpi_test

import (
	"context"
	"os"
	"testing"
	"time"

	"github.com/xpu-go/xpu/backends/mpi"
	"github.com/xpu-go/xpu/comm"
	"github.com/xpu-go/xpu/internal/tooling/commtest"
	"github.com/xpu-go/xpu/memspace"
)

// guard is the generous time limit that turns a hang into a failure.
const guard = 30 * time.Second

// rank returns the world communicator, skipping when the binary does not
// run as a rank of an MPI job (TestRanks launches it so).
func rank(t *testing.T) *mpi.Comm {
	t.Helper()
	if world == nil {
		t.Skip("runs as a rank of an MPI job; TestRanks launches this binary under mpirun")
	}
	return world
}

// spmd runs body as subtest name on every rank, then has the ranks agree
// on the outcome: a rank whose subtest passed fails when another's failed,
// so every rank's output names the failure.
func spmd(t *testing.T, c *mpi.Comm, name string, body func(t *testing.T)) {
	t.Helper()
	ok := t.Run(name, body)
	flag := []int32{0}
	if !ok {
		flag[0] = 1
	}
	ctx, cancel := context.WithTimeout(context.Background(), guard)
	defer cancel()
	b := buf(t, flag)
	if err := comm.AllreduceBlock(ctx, c, b, b, comm.Int32, comm.Max); err != nil {
		t.Fatalf("after %s: agreeing on the outcome: %v", name, err)
	}
	if ok && flag[0] != 0 {
		t.Errorf("%s failed on another rank", name)
	}
}

// contexts are the two paths of every blocking call: a context that never
// ends (direct MPI calls) and one that can (nonblocking calls watched
// with the context, on copies for collectives).
var contexts = []struct {
	name string
	make func() (context.Context, context.CancelFunc)
}{
	{"background", func() (context.Context, context.CancelFunc) { return context.Background(), func() {} }},
	{"deadline", func() (context.Context, context.CancelFunc) { return context.WithTimeout(context.Background(), guard) }},
}

// buf views a Go slice as a block.
func buf[T any](t testing.TB, s []T) memspace.Block {
	t.Helper()
	return commtest.Buffer(t, s).Block()
}

// pattern returns n bytes that depend on seed.
func pattern(n int, seed int) []byte {
	p := make([]byte, n)
	for i := range p {
		p[i] = byte(i*7+seed*13) ^ byte(i>>8)
	}
	return p
}

// mk returns the element of T with real part re and imaginary part im
// (ignored for real types).
func mk[T comm.Number](re, im int) T { return commtest.FromInt[T](re, im) }

// wait waits for r under the guard.
func wait(t testing.TB, r comm.Request) (comm.Status, error) {
	t.Helper()
	return commtest.Wait(t, r, guard)
}

func mod(a, p int) int { return ((a % p) + p) % p }

// osLevel is the thread level the launcher asked for.
func osLevel() string { return os.Getenv(envLevel) }
