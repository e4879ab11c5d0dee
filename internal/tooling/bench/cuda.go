package bench

import (
	"context"
	"errors"
	"testing"

	"github.com/xpu-go/xpu"
	"github.com/xpu-go/xpu/backends/cpu"
	"github.com/xpu-go/xpu/backends/cuda"
	"github.com/xpu-go/xpu/executor"
	"github.com/xpu-go/xpu/memspace"
	"github.com/xpu-go/xpu/transfer"
)

// Sizes and rhythms of the CUDA benchmarks.
const (
	// CUDACopySize is the size of the copies between host and device.
	CUDACopySize = 64 << 20
	// CUDAPoolSize is the size the pool benchmark allocates and frees.
	CUDAPoolSize = 1 << 20
	// CUDASyncEvery is how many launches (or event records) go to a stream
	// between two synchronizations, so that the queue stays short.
	CUDASyncEvery = 1024
	// CUDAEmptyKernel is the kernel CUDALaunchEmpty launches: the test
	// kernel of that name (backends/cuda/internal/kernels.TestEmpty), which
	// the fake driver knows too.
	CUDAEmptyKernel = "xpu_test_empty"
)

// cudaEmptyPTX is a module holding the empty kernel alone: its text in
// backends/cuda/internal/kernels/testkernels.ptx (which this package cannot
// import), and the one in ref/cuda_ref.c.
const cudaEmptyPTX = `.version 6.0
.target sm_70
.address_size 64

.visible .entry xpu_test_empty()
{
	ret;
}
`

// CUDA is the table of the cuda backend's benchmarks, on device 0. Each
// body skips, saying why, where the backend does not open (no driver, no
// device, a binary built without cgo); xpu bench takes them from
// CUDAIfAvailable. The C references are ref/cuda_ref.c: the same driver
// calls in a loop, with no Go in between.
var CUDA = []Case{
	{Name: "cuda.copy.h2d.pinned.64M", Run: CUDACopyPinned(true), Unit: GBPerSec,
		Ref: "cu.copy.h2d.pinned.64M", RefGoal: 0.95,
		Doc: "transfer.CopyBlock of 64 MiB from pinned host memory to device memory (cuMemcpy)"},
	{Name: "cuda.copy.d2h.pinned.64M", Run: CUDACopyPinned(false), Unit: GBPerSec,
		Ref: "cu.copy.d2h.pinned.64M", RefGoal: 0.95,
		Doc: "transfer.CopyBlock of 64 MiB from device memory to pinned host memory (cuMemcpy)"},
	{Name: "cuda.copy.h2d.pageable.64M", Run: CUDACopyPageable, Unit: GBPerSec,
		Ref: "cu.copy.h2d.pageable.64M", RefGoal: 0.9,
		Doc: "transfer.CopyBlock of 64 MiB from the cpu space (pageable) to device memory (cuMemcpyHtoD)"},
	{Name: "cuda.pool.alloc_free", Run: CUDAPoolAllocFree, Unit: NsPerOp,
		Baseline: "cuda.alloc_free.raw", Ref: "cu.goal.1us", RefGoal: 1,
		Doc: "memspace.Pool over device memory: Allocate+Free of a cached 1 MiB block (goal <= 1 us absolute: ref cu.goal.1us)"},
	{Name: "cuda.alloc_free.raw", Run: CUDARawAllocFree, Unit: NsPerOp,
		Ref: "cu.alloc_free.1M",
		Doc: "Allocate+Free of 1 MiB in the device space without a pool (cuMemAlloc+cuMemFree)"},
	{Name: "cuda.launch.empty", Run: CUDALaunchEmpty, Unit: NsPerOp,
		Ref: "cu.launch.empty", RefGoal: 1.2,
		Doc: "Function.Launch of an empty kernel (1 block of 1 thread) on a stream, synchronized every 1024 launches"},
	{Name: "cuda.event.record_query", Run: CUDAEventRecordQuery, Unit: NsPerOp,
		Ref: "cu.event.record_query", RefGoal: 1.2,
		Doc: "Stream.Record then Event.Query on an idle stream, synchronized every 1024 records"},
}

// CUDAIfAvailable returns CUDA where the cuda backend opens, and nil where
// it is unavailable (the reason is what the cases' skips would say):
// `xpu bench` stops at a case that reports nothing, as a skipped one does.
// It opens and closes the backend once to find out.
func CUDAIfAvailable() []Case {
	b, err := xpu.Open(context.Background(), cuda.Name, nil)
	if err != nil {
		if cudaUnavailable(err) {
			return nil
		}
		return CUDA // the cases fail, with the reason
	}
	_ = b.Close()
	return CUDA
}

func cudaUnavailable(err error) bool {
	return errors.Is(err, xpu.ErrUnavailable) || errors.Is(err, cuda.ErrNoSuchDevice)
}

// cudaGPU is an open cuda backend of device 0; the benchmark's cleanup
// closes it, after what cudaAlloc allocated has been freed.
type cudaGPU struct {
	be     *xpu.Backend
	dev    *cuda.Space // device memory
	pinned *cuda.Space
	x      *cuda.Executor
}

// openCUDA opens the backend, or skips the benchmark with the reason.
func openCUDA(b *testing.B) *cudaGPU {
	b.Helper()
	be, err := xpu.Open(context.Background(), cuda.Name, nil)
	if err != nil {
		if cudaUnavailable(err) {
			b.Skip(err) // "cuda open: cannot load libcuda.so.1: …: backend unavailable"
		}
		b.Fatal(err)
	}
	b.Cleanup(func() {
		if err := be.Close(); err != nil {
			b.Error(err)
		}
	})
	g := &cudaGPU{be: be, x: be.Exec.(*cuda.Executor)}
	for _, sp := range be.Spaces {
		if s, ok := sp.(*cuda.Space); ok {
			switch s.Properties().Kind {
			case cuda.KindDevice:
				g.dev = s
			case cuda.KindPinned:
				g.pinned = s
			}
		}
	}
	if g.dev == nil || g.pinned == nil {
		b.Fatal("the cuda backend has no device or pinned space")
	}
	return g
}

// cudaAlloc allocates size bytes of sp, freed at the benchmark's cleanup.
func cudaAlloc(b *testing.B, sp memspace.Space, size int) memspace.Block {
	b.Helper()
	blk, err := sp.Allocate(size, 0)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() {
		if err := sp.Free(blk); err != nil {
			b.Error(err)
		}
	})
	return blk
}

// cudaFill writes a pattern into a host-accessible block.
func cudaFill(b *testing.B, blk memspace.Block) {
	b.Helper()
	bs, err := blk.Bytes()
	if err != nil {
		b.Fatal(err)
	}
	for i := range bs {
		bs[i] = byte(i)
	}
}

// cudaCopyLoop measures transfer.CopyBlock(dst, src) of CUDACopySize bytes,
// after one copy outside the timing.
func cudaCopyLoop(b *testing.B, dst, src memspace.Block) {
	ctx := context.Background()
	if err := transfer.CopyBlock(ctx, dst, src); err != nil {
		b.Fatal(err)
	}
	b.SetBytes(CUDACopySize)
	for b.Loop() {
		if err := transfer.CopyBlock(ctx, dst, src); err != nil {
			b.Fatal(err)
		}
	}
}

// CUDACopyPinned returns the benchmark of a synchronous copy of
// CUDACopySize bytes between pinned host memory and device memory: to the
// device when toDevice, else from it.
func CUDACopyPinned(toDevice bool) func(b *testing.B) {
	return func(b *testing.B) {
		g := openCUDA(b)
		dev := cudaAlloc(b, g.dev, CUDACopySize)
		pin := cudaAlloc(b, g.pinned, CUDACopySize)
		cudaFill(b, pin)
		if toDevice {
			cudaCopyLoop(b, dev, pin)
		} else {
			cudaCopyLoop(b, pin, dev)
		}
	}
}

// CUDACopyPageable measures a synchronous copy of CUDACopySize bytes from
// pageable memory of the cpu space to device memory.
func CUDACopyPageable(b *testing.B) {
	g := openCUDA(b)
	host := cpu.NewSpace(cpu.SpaceOptions{})
	b.Cleanup(func() {
		if err := host.Close(); err != nil {
			b.Error(err)
		}
	})
	dev := cudaAlloc(b, g.dev, CUDACopySize)
	src := cudaAlloc(b, host, CUDACopySize)
	cudaFill(b, src)
	cudaCopyLoop(b, dev, src)
}

// CUDAPoolAllocFree measures Allocate+Free of a CUDAPoolSize block that a
// memspace.Pool over device memory has cached: no driver call.
func CUDAPoolAllocFree(b *testing.B) {
	g := openCUDA(b)
	p, err := memspace.NewPool(g.dev, memspace.PoolOptions{})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() {
		if err := p.Close(); err != nil {
			b.Error(err)
		}
	})
	allocFree(b, p, CUDAPoolSize) // the first allocation brings a segment in
	b.ReportAllocs()
	for b.Loop() {
		allocFree(b, p, CUDAPoolSize)
	}
}

// CUDARawAllocFree is the baseline of CUDAPoolAllocFree: Allocate+Free of
// CUDAPoolSize bytes in the device space itself, a cuMemAlloc and a
// cuMemFree each time.
func CUDARawAllocFree(b *testing.B) {
	g := openCUDA(b)
	b.ReportAllocs()
	for b.Loop() {
		allocFree(b, g.dev, CUDAPoolSize)
	}
}

// cudaStream is a new stream of g's executor, closed at the benchmark's
// cleanup.
func cudaStream(b *testing.B, g *cudaGPU) executor.Stream {
	b.Helper()
	s, err := g.x.NewStream()
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() {
		if err := s.Close(); err != nil {
			b.Error(err)
		}
	})
	return s
}

// CUDALaunchEmpty measures Function.Launch of the empty kernel on one
// block of one thread, the stream synchronized every CUDASyncEvery
// launches: the cost of a launch to the host.
func CUDALaunchEmpty(b *testing.B) {
	g := openCUDA(b)
	m, err := g.x.LoadModule(cudaEmptyPTX)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() {
		if err := m.Close(); err != nil {
			b.Error(err)
		}
	})
	f, err := m.Function(CUDAEmptyKernel)
	if err != nil {
		b.Fatal(err)
	}
	s := cudaStream(b, g)
	ctx := context.Background()
	cfg := cuda.Config{Grid: cuda.Dim3{X: 1}, Block: cuda.Dim3{X: 1}}
	// One launch outside the timing: the first loads the code.
	if err := f.Launch(s, cfg); err != nil {
		b.Fatal(err)
	}
	if err := s.Synchronize(ctx); err != nil {
		b.Fatal(err)
	}
	loopSynced(b, s, func() error { return f.Launch(s, cfg) })
}

// CUDAEventRecordQuery measures Stream.Record on an idle stream followed
// by Event.Query of the event, the stream synchronized every CUDASyncEvery
// records.
func CUDAEventRecordQuery(b *testing.B) {
	g := openCUDA(b)
	s := cudaStream(b, g)
	loopSynced(b, s, func() error {
		ev, err := s.Record()
		if err == nil {
			_, err = ev.Query()
		}
		return err
	})
}

// loopSynced runs op in b's loop, synchronizing s every CUDASyncEvery
// iterations and at the end.
func loopSynced(b *testing.B, s executor.Stream, op func() error) {
	ctx := context.Background()
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		if err := op(); err != nil {
			b.Fatal(err)
		}
		if i++; i%CUDASyncEvery == 0 {
			if err := s.Synchronize(ctx); err != nil {
				b.Fatal(err)
			}
		}
	}
	if err := s.Synchronize(ctx); err != nil {
		b.Fatal(err)
	}
}
