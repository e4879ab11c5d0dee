//go:build cgo

package cu

import (
	"os"
	"runtime"
	"sync"
	"syscall"
	"testing"
	"time"
	"unsafe"

	"github.com/ebitengine/purego"

	"github.com/xpu-go/xpu/backends/cuda/internal/cu/internal/ccall"
	"github.com/xpu-go/xpu/backends/cuda/internal/fakecuda"
)

// The cost of a call into the driver through this package (cgo over
// dlopen) against purego, the alternative that needs no C toolchain, and
// against the same call in a C loop (docs/adr/0019 has the figures):
//
//	go test -run '^$' -bench Call -count 10 ./backends/cuda/internal/cu/
//
// They run on the fake driver, or on the machine's own with
// XPU_CUDA_TEST_REAL=1, as the backend's tests do. Beside ns/op, the
// wall-clock time, each reports cpu-ns/op, the process's CPU time per
// call, which other load on a shared machine disturbs far less.

// benchLib is the driver the benchmarks call and its path.
var benchLib = sync.OnceValues(func() (*Lib, error) {
	path := os.Getenv("XPU_CUDA_LIBRARY")
	if os.Getenv("XPU_CUDA_TEST_REAL") != "1" {
		var err error
		if path, err = fakecuda.Build(); err != nil {
			return nil, err
		}
	} else if path == "" {
		path = "libcuda.so.1"
	}
	l, err := Open(path)
	if err != nil {
		return nil, err
	}
	return l, ccall.Open(path)
})

// cpuTime is the CPU time the process has used, user and system.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// loop runs call b.N times under b.Loop and reports cpu-ns/op too.
func loop(b *testing.B, call func()) {
	b.ReportAllocs()
	start := cpuTime()
	for b.Loop() {
		call()
	}
	b.ReportMetric(float64(cpuTime()-start)/float64(b.N), "cpu-ns/op")
}

// inC runs n calls in one crossing into C, with the timing and metrics
// of loop.
func inC(b *testing.B, calls func(n int) int) {
	b.ReportAllocs()
	b.ResetTimer()
	start := cpuTime()
	r := calls(b.N)
	b.StopTimer()
	b.ReportMetric(float64(cpuTime()-start)/float64(b.N), "cpu-ns/op")
	if r != 0 {
		b.Fatal(Result(r))
	}
}

func openBench(b *testing.B) *Lib {
	b.Helper()
	l, err := benchLib()
	if err != nil {
		b.Fatal(err)
	}
	return l
}

// purego's view of the same library: dlopen of the same path returns the
// instance cu loaded.
func puregoSym(b *testing.B, l *Lib, name string) (handle, sym uintptr) {
	b.Helper()
	h, err := purego.Dlopen(l.Path(), purego.RTLD_NOW|purego.RTLD_LOCAL)
	if err != nil {
		b.Fatal(err)
	}
	fn, err := purego.Dlsym(h, name)
	if err != nil {
		b.Fatal(err)
	}
	return h, fn
}

// BenchmarkCall is one cheap driver call, cuDriverGetVersion, made
// through cu (cgo), through purego (SyscallN, and a function registered
// with RegisterLibFunc), and in a C loop (no crossing per call).
func BenchmarkCall(b *testing.B) {
	l := openBench(b)
	b.Run("cgo", func(b *testing.B) {
		loop(b, func() {
			if _, err := l.DriverVersion(); err != nil {
				b.Fatal(err)
			}
		})
	})
	b.Run("purego", func(b *testing.B) {
		_, fn := puregoSym(b, l, "cuDriverGetVersion")
		loop(b, func() {
			var v int32
			if r, _, _ := purego.SyscallN(fn, uintptr(unsafe.Pointer(&v))); r != 0 {
				b.Fatal(Result(r))
			}
		})
	})
	b.Run("purego-func", func(b *testing.B) {
		h, _ := puregoSym(b, l, "cuDriverGetVersion")
		var driverGetVersion func(v *int32) int32
		purego.RegisterLibFunc(&driverGetVersion, h, "cuDriverGetVersion")
		loop(b, func() {
			var v int32
			if r := driverGetVersion(&v); r != 0 {
				b.Fatal(Result(r))
			}
		})
	})
	b.Run("c", func(b *testing.B) { inC(b, ccall.DriverVersionLoop) })
}

// BenchmarkCtxCall is a call that needs a context, cuMemGetInfo_v2, made
// current first with cuCtxSetCurrent: in one crossing, as cu does every
// such call (cgo-1crossing); as two crossings, the goroutine locked to its
// thread in between as such a binding must (cgo-2crossings, and
// purego-2calls, purego's only way); and both in a C loop.
func BenchmarkCtxCall(b *testing.B) {
	l := openBench(b)
	dev, err := l.Device(0)
	if err != nil {
		b.Fatal(err)
	}
	ctx, err := l.PrimaryCtxRetain(dev)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = l.PrimaryCtxRelease(dev) })
	b.Run("cgo-1crossing", func(b *testing.B) {
		loop(b, func() {
			if _, _, err := l.MemGetInfo(ctx); err != nil {
				b.Fatal(err)
			}
		})
	})
	b.Run("cgo-2crossings", func(b *testing.B) {
		loop(b, func() {
			var free, total uint64
			runtime.LockOSThread()
			r := ccall.SetCurrent(ctx.p)
			if r == 0 {
				r = ccall.MemGetInfo(&free, &total)
			}
			runtime.UnlockOSThread()
			if r != 0 {
				b.Fatal(Result(r))
			}
		})
	})
	b.Run("purego-2calls", func(b *testing.B) {
		_, set := puregoSym(b, l, "cuCtxSetCurrent")
		_, info := puregoSym(b, l, "cuMemGetInfo_v2")
		loop(b, func() {
			var free, total uintptr
			runtime.LockOSThread()
			r, _, _ := purego.SyscallN(set, uintptr(ctx.p))
			if r == 0 {
				r, _, _ = purego.SyscallN(info, uintptr(unsafe.Pointer(&free)), uintptr(unsafe.Pointer(&total)))
			}
			runtime.UnlockOSThread()
			if r != 0 {
				b.Fatal(Result(r))
			}
		})
	})
	b.Run("c", func(b *testing.B) {
		inC(b, func(n int) int { return ccall.SetMemGetInfoLoop(ctx.p, n) })
	})
}
