//go:build cgo

package cuda_test

import (
	"fmt"
	"os"
	"testing"

	"go.uber.org/goleak"

	"github.com/xpu-go/xpu/backends/cuda"
	"github.com/xpu-go/xpu/backends/cuda/internal/fakecuda"
)

// EnvRealGPU, set to 1, runs the tests on the machine's own driver and
// GPU instead of the fake driver (the tests that drive the fake's fault
// injection then skip, saying so).
const EnvRealGPU = "XPU_CUDA_TEST_REAL"

// fake controls the fake driver the tests load; nil on a real GPU.
var fake *fakecuda.Control

// fakePath is the fake driver's library.
var fakePath string

// Every test runs against the fake libcuda built here with gcc (or the
// real driver, with EnvRealGPU=1), and leaves no goroutine behind.
func TestMain(m *testing.M) {
	if os.Getenv(EnvRealGPU) != "1" {
		path, err := fakecuda.Build()
		if err != nil {
			fmt.Fprintf(os.Stderr, "building the fake libcuda: %v\n", err)
			os.Exit(1)
		}
		if fake, err = fakecuda.Attach(path); err != nil {
			fmt.Fprintf(os.Stderr, "attaching to the fake libcuda: %v\n", err)
			os.Exit(1)
		}
		fakePath = path
		os.Setenv(cuda.EnvLibrary, path)
	}
	goleak.VerifyTestMain(m)
}

// needFake skips a test that drives the fake driver's controls when the
// tests run on a real GPU.
func needFake(t *testing.T) *fakecuda.Control {
	t.Helper()
	if fake == nil {
		t.Skip("drives the fake driver's fault injection; it runs on the fake in make test")
	}
	return fake
}

// noDriverLeaks checks, at the end of t, that everything the backend took
// from the fake driver was given back: allocations, streams, events,
// modules and context references, and that no context was torn down with
// objects still in it.
func noDriverLeaks(t *testing.T) {
	t.Helper()
	if fake == nil {
		return
	}
	before := fake.Stats()
	t.Cleanup(func() {
		after := fake.Stats()
		after.KernelLaunches, after.AsyncCopies, after.IPCOpens = before.KernelLaunches, before.AsyncCopies, before.IPCOpens
		if after != before {
			t.Errorf("the driver holds what the backend took:\nbefore %+v\nafter  %+v", before, after)
		}
	})
}
