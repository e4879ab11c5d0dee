package bench

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/xpu-go/xpu/backends/cpu"
	"github.com/xpu-go/xpu/memspace"
)

// Pool lists the benchmarks of memspace.Pool, the caching allocator, over
// the CPU backend's host space (memory mapped off the Go heap: a real
// upstream with a system call per segment).
var Pool = []Case{
	{Name: "pool.alloc_free", Run: PoolAllocFree, Unit: NsPerOp,
		Baseline: "pool.upstream_alloc_free", BaselineGoal: 0.25,
		Doc: "Allocate+Free of a cached 4 KiB block: the hot path (goal <= 100 ns; Umpire publishes ~300 ns)"},
	{Name: "pool.upstream_alloc_free", Run: PoolUpstreamAllocFree, Unit: NsPerOp,
		Doc: "Allocate+Free of 4 KiB straight from the CPU space, without the pool"},
	{Name: "pool.alloc_free_sizes", Run: PoolAllocFreeSizes, Unit: NsPerOp,
		Doc: "Allocate+Free cycling through 8 cached sizes from 256 B to 8 MiB"},
	{Name: "pool.alloc_free_batch", Run: PoolAllocFreeBatch, Unit: "ns/block",
		Doc: "64 mixed-size blocks allocated then freed in random order (splitting and coalescing); per block"},
	{Name: "pool.alloc_free_parallel", Run: PoolAllocFreeParallel, Unit: NsPerOp,
		Doc: "Allocate+Free of a cached 4 KiB block from GOMAXPROCS goroutines at once"},
	{Name: "pool.fragmentation", Run: PoolFragmentation, Unit: "peak-reserved/peak-inuse",
		Doc: "a fixed random workload (256 B-8 MiB log-uniform, ~128 live): peak reserved over peak in use (1.0 would be no waste)"},
}

// newPoolUpstream returns the space the pool benchmarks allocate from.
func newPoolUpstream() memspace.Space { return cpu.NewSpace(cpu.SpaceOptions{}) }

func newBenchPool(b *testing.B) (*memspace.Pool, memspace.Space) {
	b.Helper()
	up := newPoolUpstream()
	p, err := memspace.NewPool(up, memspace.PoolOptions{})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() {
		if err := p.Close(); err != nil {
			b.Error(err)
		}
		if c, ok := up.(memspace.Closer); ok {
			if err := c.Close(); err != nil {
				b.Error(err)
			}
		}
	})
	return p, up
}

func allocFree(b *testing.B, s memspace.Space, size int) {
	blk, err := s.Allocate(size, 0)
	if err != nil {
		b.Fatal(err)
	}
	if err := s.Free(blk); err != nil {
		b.Fatal(err)
	}
}

// PoolAllocFree measures Allocate+Free of a 4 KiB block the pool has
// cached: the hot path.
func PoolAllocFree(b *testing.B) {
	p, _ := newBenchPool(b)
	allocFree(b, p, 4096) // the first allocation brings a segment in
	b.ReportAllocs()
	for b.Loop() {
		allocFree(b, p, 4096)
	}
}

// PoolUpstreamAllocFree measures what PoolAllocFree saves: Allocate+Free of
// 4 KiB from the upstream space directly.
func PoolUpstreamAllocFree(b *testing.B) {
	_, up := newBenchPool(b)
	b.ReportAllocs()
	for b.Loop() {
		allocFree(b, up, 4096)
	}
}

// PoolAllocFreeSizes measures Allocate+Free cycling through eight sizes
// from 256 B to 8 MiB, all cached after the first round.
func PoolAllocFreeSizes(b *testing.B) {
	p, _ := newBenchPool(b)
	sizes := []int{256, 3000, 40 << 10, 300 << 10, 1 << 20, 3 << 20, 5<<20 + 12345, 8 << 20}
	for _, n := range sizes {
		allocFree(b, p, n)
	}
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		allocFree(b, p, sizes[i&7])
		i++
	}
}

// PoolAllocFreeBatch allocates 64 blocks of mixed sizes (512 B to 256 KiB,
// log-uniform), then frees them in a random order, so that blocks are split
// from and coalesced with live neighbours. It reports the time per block
// (one Allocate and one Free).
func PoolAllocFreeBatch(b *testing.B) {
	p, _ := newBenchPool(b)
	rng := rand.New(rand.NewPCG(1, 2))
	const batch = 64
	sizes := make([]int, batch)
	for i := range sizes {
		sizes[i] = logUniform(rng, 512, 256<<10)
	}
	order := rng.Perm(batch)
	blocks := make([]memspace.Block, batch)
	run := func() {
		for i, n := range sizes {
			blk, err := p.Allocate(n, 0)
			if err != nil {
				b.Fatal(err)
			}
			blocks[i] = blk
		}
		for _, i := range order {
			if err := p.Free(blocks[i]); err != nil {
				b.Fatal(err)
			}
		}
	}
	run()
	b.ReportAllocs()
	for b.Loop() {
		run()
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*batch), "ns/block")
}

// PoolAllocFreeParallel measures the hot path with GOMAXPROCS goroutines
// contending for the pool.
func PoolAllocFreeParallel(b *testing.B) {
	p, _ := newBenchPool(b)
	allocFree(b, p, 4096)
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			blk, err := p.Allocate(4096, 0)
			if err != nil {
				b.Error(err)
				return
			}
			if err := p.Free(blk); err != nil {
				b.Error(err)
				return
			}
		}
	})
}

// FragStats are the figures of one run of the fragmentation workload.
type FragStats struct {
	Steps          int     // allocations and frees made
	ReservedInUse  float64 // Reserved / InUse at the end
	PeakRatio      float64 // highest Reserved / highest InUse over the run
	FragReserved   float64 // Fragmented / Reserved at the end
	HeldInUse      float64 // Held / InUse at the end: the slack of rounding
	Final          memspace.PoolStats
	PeakInUse      int64
	PeakReserved   int64
	UpstreamAllocs int64
}

// RunFragWorkload runs the fragmentation workload on p: it fills the pool
// to about live blocks of sizes log-uniform in [256 B, 8 MiB] from a fixed
// seed, then makes steps random allocations and frees that keep the count
// near live, and measures the pool at the end. It frees everything before
// returning.
func RunFragWorkload(p *memspace.Pool, seed uint64, live, steps int) (FragStats, error) {
	rng := rand.New(rand.NewPCG(seed, 0x9e3779b9))
	var blocks []memspace.Block
	var fs FragStats
	defer func() {
		for _, blk := range blocks {
			_ = p.Free(blk)
		}
	}()
	for fs.Steps < steps+live {
		fs.Steps++
		// Allocate with a probability that pulls the count towards live.
		pAlloc := 0.5 + float64(live-len(blocks))/float64(4*live)
		if len(blocks) == 0 || rng.Float64() < pAlloc {
			blk, err := p.Allocate(logUniform(rng, 256, 8<<20), 0)
			if err != nil {
				return fs, err
			}
			blocks = append(blocks, blk)
			st := p.Stats()
			fs.PeakInUse = max(fs.PeakInUse, st.InUse)
			fs.PeakReserved = max(fs.PeakReserved, st.Reserved)
			continue
		}
		i := rng.IntN(len(blocks))
		if err := p.Free(blocks[i]); err != nil {
			return fs, err
		}
		blocks[i] = blocks[len(blocks)-1]
		blocks = blocks[:len(blocks)-1]
	}
	st := p.PoolStats()
	fs.Final = st
	fs.ReservedInUse = float64(st.Reserved) / float64(st.InUse)
	fs.PeakRatio = float64(fs.PeakReserved) / float64(fs.PeakInUse)
	fs.FragReserved = float64(st.Fragmented) / float64(st.Reserved)
	fs.HeldInUse = float64(st.Held) / float64(st.InUse)
	fs.UpstreamAllocs = st.UpstreamAllocs
	return fs, nil
}

// PoolFragmentation runs the fragmentation workload (128 live blocks,
// 10000 steps, fixed seed) on a fresh pool per iteration and reports the
// pool's waste: reserved/inuse and peak-reserved/peak-inuse (memory held
// from upstream per byte asked for), frag/reserved (the share of reserved
// memory outside the largest free block) and held/inuse (slack of
// rounding). ns/op is the time of one whole workload.
func PoolFragmentation(b *testing.B) {
	up := newPoolUpstream()
	if c, ok := up.(memspace.Closer); ok {
		b.Cleanup(func() { _ = c.Close() })
	}
	var fs FragStats
	for b.Loop() {
		p, err := memspace.NewPool(up, memspace.PoolOptions{})
		if err != nil {
			b.Fatal(err)
		}
		if fs, err = RunFragWorkload(p, 42, 128, 10000); err != nil {
			b.Fatal(err)
		}
		if err := p.Close(); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(fs.ReservedInUse, "reserved/inuse")
	b.ReportMetric(fs.PeakRatio, "peak-reserved/peak-inuse")
	b.ReportMetric(fs.FragReserved, "frag/reserved")
	b.ReportMetric(fs.HeldInUse, "held/inuse")
	b.ReportMetric(float64(fs.UpstreamAllocs), "segments-allocated")
}

// logUniform returns a size in [lo, hi], log-uniformly distributed.
func logUniform(rng *rand.Rand, lo, hi int) int {
	l, h := math.Log(float64(lo)), math.Log(float64(hi))
	return int(math.Exp(l + rng.Float64()*(h-l)))
}
