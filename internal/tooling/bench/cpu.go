package bench

import (
	"context"
	"fmt"
	"sync"
	"testing"

	"golang.org/x/sync/errgroup"

	"github.com/xpu-go/xpu"
	"github.com/xpu-go/xpu/backends/cpu"
	"github.com/xpu-go/xpu/memspace"
	"github.com/xpu-go/xpu/transfer"
)

// Sizes of the CPU benchmarks.
const (
	// LoopN is the trip count of ParallelForIter.
	LoopN = 16 << 20
	// TriadBytes is the size of each of the three arrays of Triad.
	TriadBytes = 128 << 20
	// Workers is the worker count of the executor benchmarks, the thread
	// count of the OpenMP reference.
	Workers = 2
)

// CopySizes are the sizes of the Copy and Memmove cases.
var CopySizes = []struct {
	Name string
	Size int
}{{"64KiB", 64 << 10}, {"1MiB", 1 << 20}, {"16MiB", 16 << 20}, {"256MiB", 256 << 20}}

// CPU is the table of the CPU backend's benchmarks.
var CPU = cpuCases()

func cpuCases() []Case {
	cases := []Case{
		{Name: "parallel_for.empty", Run: ParallelForEmpty, Unit: NsPerOp,
			Baseline: "errgroup.empty", BaselineGoal: 0.6, Ref: "omp.parallel_for.empty", RefGoal: 1,
			Doc: "ParallelFor over 2 indices with an empty body, 2 workers: the fork-join overhead"},
		{Name: "errgroup.empty", Run: ErrgroupEmpty, Unit: NsPerOp,
			Doc: "errgroup.Group with SetLimit(2) running 2 empty functions"},
		{Name: "goroutines.empty", Run: GoroutinesEmpty, Unit: NsPerOp,
			Baseline: "errgroup.empty",
			Doc:      "2 goroutines started per loop and joined with a sync.WaitGroup"},
		{Name: "parallel_for.iter", Run: ParallelForIter, Unit: NsPerIter,
			Ref: "omp.for.fnptr", RefGoal: 1.2,
			Doc: "ParallelFor over 16M indices calling an empty func(i), 2 workers: cost per index"},
		{Name: "triad", Run: Triad, Unit: GBPerSec,
			Ref: "omp.triad", RefGoal: 0.9,
			Doc: "STREAM triad a[i] = b[i] + s*c[i] over 3 x 128 MiB with ParallelRange, 2 workers"},
	}
	for _, cs := range CopySizes {
		cases = append(cases, Case{Name: "copy." + cs.Name, Run: Copy(cs.Size), Unit: GBPerSec,
			Baseline: "memmove." + cs.Name, BaselineGoal: copyGoal(cs.Size), Ref: "memcpy." + cs.Name,
			Doc: fmt.Sprintf("transfer.CopyBlock of %s between blocks of the cpu space, cpu backend open", cs.Name)})
	}
	for _, cs := range CopySizes {
		cases = append(cases, Case{Name: "memmove." + cs.Name, Run: Memmove(cs.Size), Unit: GBPerSec,
			Ref: "memcpy." + cs.Name, Doc: fmt.Sprintf("Go's copy() of %s on one goroutine", cs.Name)})
	}
	cases = append(cases,
		Case{Name: "space.alloc_free.64B", Run: AllocFree(64), Unit: NsPerOp,
			Doc: "Allocate and Free of 64 bytes in the cpu space (slab)"},
		Case{Name: "space.alloc_free.1MiB", Run: AllocFree(1 << 20), Unit: NsPerOp,
			Doc: "Allocate and Free of 1 MiB in the cpu space (mmap and munmap)"},
	)
	return cases
}

func copyGoal(size int) float64 {
	if size >= 1<<20 {
		return 0.95
	}
	return 0
}

// ParallelForEmpty measures the fork-join overhead: ParallelFor over
// Workers indices with an empty body.
func ParallelForEmpty(b *testing.B) {
	e := cpu.NewExecutor(Workers)
	defer e.Close()
	ctx := context.Background()
	body := func(int) {}
	b.ReportAllocs()
	for b.Loop() {
		if err := e.ParallelFor(ctx, Workers, body); err != nil {
			b.Fatal(err)
		}
	}
}

// ErrgroupEmpty is the errgroup baseline of ParallelForEmpty: a Group with
// SetLimit(Workers) running Workers empty functions.
func ErrgroupEmpty(b *testing.B) {
	fn := func() error { return nil }
	b.ReportAllocs()
	for b.Loop() {
		var g errgroup.Group
		g.SetLimit(Workers)
		for range Workers {
			g.Go(fn)
		}
		if err := g.Wait(); err != nil {
			b.Fatal(err)
		}
	}
}

// GoroutinesEmpty is the goroutine-per-chunk baseline of ParallelForEmpty:
// Workers goroutines joined with a WaitGroup.
func GoroutinesEmpty(b *testing.B) {
	var wg sync.WaitGroup
	b.ReportAllocs()
	for b.Loop() {
		wg.Add(Workers)
		for range Workers {
			go wg.Done()
		}
		wg.Wait()
	}
}

// ParallelForIter measures the cost per index of ParallelFor(func(i)) over
// LoopN indices with an empty body, and reports it as ns/iter.
func ParallelForIter(b *testing.B) {
	e := cpu.NewExecutor(Workers)
	defer e.Close()
	ctx := context.Background()
	body := func(int) {}
	for b.Loop() {
		if err := e.ParallelFor(ctx, LoopN, body); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/LoopN, NsPerIter)
}

// Triad is the STREAM triad a[i] = b[i] + s*c[i] over three float64 arrays
// of TriadBytes in the cpu space, split with ParallelRange over Workers
// workers. Bytes per op are 3*TriadBytes, as STREAM counts them.
func Triad(b *testing.B) {
	space := cpu.NewSpace(cpu.SpaceOptions{})
	defer space.Close()
	e := cpu.NewExecutor(Workers)
	defer e.Close()
	n := TriadBytes / 8
	var arrs [3][]float64
	for i := range arrs {
		buf, err := memspace.Alloc[float64](space, n)
		if err != nil {
			b.Fatal(err)
		}
		defer buf.Free()
		if arrs[i], err = buf.Host(); err != nil {
			b.Fatal(err)
		}
	}
	a, x, y := arrs[0], arrs[1], arrs[2]
	ctx := context.Background()
	// First touch in parallel, as the reference does.
	if err := e.ParallelRange(ctx, n, 0, func(lo, hi int) {
		for i := lo; i < hi; i++ {
			a[i], x[i], y[i] = 0, 1, 2
		}
	}); err != nil {
		b.Fatal(err)
	}
	const s = 3.0
	body := func(lo, hi int) { triad(a[lo:hi], x[lo:hi], y[lo:hi], s) }
	b.SetBytes(3 * TriadBytes)
	for b.Loop() {
		if err := e.ParallelRange(ctx, n, 0, body); err != nil {
			b.Fatal(err)
		}
	}
	if a[n/2] != 7 {
		b.Fatalf("triad computed %v, want 7", a[n/2])
	}
}

// triad is the kernel, unrolled by four; the length tests let the
// compiler drop the bounds checks.
func triad(a, b, c []float64, s float64) {
	for len(a) >= 4 && len(b) >= 4 && len(c) >= 4 {
		a[0] = b[0] + s*c[0]
		a[1] = b[1] + s*c[1]
		a[2] = b[2] + s*c[2]
		a[3] = b[3] + s*c[3]
		a, b, c = a[4:], b[4:], c[4:]
	}
	for i := range min(len(a), len(b), len(c)) {
		a[i] = b[i] + s*c[i]
	}
}

// copyBlocks allocates two touched blocks of size bytes in the space of an
// open cpu backend; the caller closes the backend.
func copyBlocks(b *testing.B, size int) (be *xpu.Backend, dst, src memspace.Block) {
	be, err := (cpu.Driver{}).Open(context.Background(), xpu.Options{"workers": fmt.Sprint(Workers)})
	if err != nil {
		b.Fatal(err)
	}
	for _, blk := range []*memspace.Block{&dst, &src} {
		if *blk, err = be.Memory.Allocate(size, 0); err != nil {
			be.Close()
			b.Fatal(err)
		}
		bs, _ := blk.Bytes()
		for i := range bs {
			bs[i] = byte(i)
		}
	}
	return be, dst, src
}

// Copy returns the benchmark of transfer.CopyBlock of size bytes between
// two blocks of the cpu space with a cpu backend open: the path the cpu
// package registers for host to host.
func Copy(size int) func(b *testing.B) {
	return func(b *testing.B) {
		be, dst, src := copyBlocks(b, size)
		defer be.Close()
		defer be.Memory.Free(src)
		defer be.Memory.Free(dst)
		ctx := context.Background()
		b.SetBytes(int64(size))
		for b.Loop() {
			if err := transfer.CopyBlock(ctx, dst, src); err != nil {
				b.Fatal(err)
			}
		}
	}
}

// Memmove returns the baseline of Copy: Go's copy() of size bytes between
// the same kind of blocks, on one goroutine.
func Memmove(size int) func(b *testing.B) {
	return func(b *testing.B) {
		be, dst, src := copyBlocks(b, size)
		defer be.Close()
		defer be.Memory.Free(src)
		defer be.Memory.Free(dst)
		d, _ := dst.Bytes()
		s, _ := src.Bytes()
		b.SetBytes(int64(size))
		for b.Loop() {
			copy(d, s)
		}
	}
}

// AllocFree returns the benchmark of an Allocate and a Free of size bytes
// in a cpu space.
func AllocFree(size int) func(b *testing.B) {
	return func(b *testing.B) {
		s := cpu.NewSpace(cpu.SpaceOptions{})
		defer s.Close()
		b.ReportAllocs()
		for b.Loop() {
			blk, err := s.Allocate(size, 0)
			if err != nil {
				b.Fatal(err)
			}
			if err := s.Free(blk); err != nil {
				b.Fatal(err)
			}
		}
	}
}
