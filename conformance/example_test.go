package conformance_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/xpu-go/xpu"
	"github.com/xpu-go/xpu/backends/cpu"
	"github.com/xpu-go/xpu/backends/local"
	"github.com/xpu-go/xpu/comm"
	"github.com/xpu-go/xpu/conformance"
)

// A backend's conformance test is one call in its own _test.go, over a
// factory that opens a fresh backend for each case.
func ExampleRun() {
	_ = func(t *testing.T) { // func TestConformance(t *testing.T) in mybackend_test.go
		conformance.Run(t, func(t *testing.T) *xpu.Backend {
			b, err := xpu.Open(context.Background(), "cpu", nil)
			if errors.Is(err, xpu.ErrUnavailable) {
				t.Skip(err)
			}
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = b.Close() })
			return b
		})
	}
}

// A registered backend is run by name: RunDriver opens it through the
// registry for every case, and also checks that its driver's Info lists
// exactly the capabilities its components implement.
func ExampleRunDriver() {
	_ = func(t *testing.T) { // func TestConformance(t *testing.T) in mybackend_test.go
		conformance.RunDriver(t, "cpu", xpu.Options{"workers": "4"})
	}
}

// One suite alone: TestSpace is generic over the space's type, so the
// factory returns the concrete type.
func ExampleTestSpace() {
	_ = func(t *testing.T) {
		conformance.TestSpace(t, func(t *testing.T) *cpu.Space {
			s := cpu.NewSpace(cpu.SpaceOptions{})
			t.Cleanup(func() { _ = s.Close() })
			return s
		})
	}
}

// TestComm takes a factory of groups; the suite drives each rank from its
// own goroutine and closes the ranks when a case ends.
func ExampleTestComm() {
	_ = func(t *testing.T) {
		conformance.TestComm(t, func(t *testing.T, n int) []comm.Comm {
			ranks, err := local.NewGroup(n, local.Options{})
			if err != nil {
				t.Fatal(err)
			}
			out := make([]comm.Comm, n)
			for i, r := range ranks {
				out[i] = r
			}
			return out
		}, conformance.MaxRanks(4))
	}
}

// An implementation that cannot do something says so, and the case is
// skipped with the reason; everything else is still tested. A case is named
// as the suite knows it, or by the whole name go test -v prints, which
// declares it there only (here, for the space named "pinned" alone).
func ExampleDeclare() {
	_ = func(t *testing.T) { // func TestConformance(t *testing.T)
		conformance.RunDriver(t, "mybackend", nil,
			conformance.Declare("executor/parallel/nested", "this executor deadlocks on nested loops"),
			conformance.Declare("TestConformance/pinned/space/alloc/huge", "pinning 1 TiB takes minutes"))
	}
}

// A slow device raises the time a case may take; a case that hangs fails
// that much later (plus a grace period), naming itself, and the suite goes
// on.
func ExampleTimeout() {
	_ = func(t *testing.T) {
		conformance.RunDriver(t, "mybackend", nil, conformance.Timeout(time.Minute))
	}
}
