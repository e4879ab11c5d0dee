package rdma_test

import (
	"context"
	"fmt"
	"os"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
	"unsafe"

	"github.com/xpu-go/xpu/backends/procs"
	"github.com/xpu-go/xpu/backends/rdma"
	"github.com/xpu-go/xpu/comm"
	"github.com/xpu-go/xpu/internal/tooling/bench"
)

// Benchmarks of the communicator: the half round trip of a ping-pong, a
// one-way stream of large messages, and an allreduce beside the tcp
// backend's. The ranks are goroutines of this process, each with its own
// fabric context and queue pairs (as in the tests). They run on the
// simulated fabric by default — figures of the protocol's Go side, no
// hardware — and on the kernel's verbs with XPU_RDMA_BENCH_FABRIC=verbs
// in a binary built with -tags rdma (TestGuestBench runs them so in a
// soft-RoCE guest, beside perftest). XPU_RDMA_BENCH_CONFIG sets the
// ranks' Config, "spin=200us,chunk=256K" (keys: eager, budget, slots,
// chunk, spin).
//
// The bodies are internal/tooling/bench's, which xpu bench runs on a real device
// too; each checks what it moved: a stamp in each message, and every
// byte once.
const (
	envBenchFabric = "XPU_RDMA_BENCH_FABRIC"
	envBenchConfig = "XPU_RDMA_BENCH_CONFIG"
)

// benchKit returns the fabric XPU_RDMA_BENCH_FABRIC names.
func benchKit(b *testing.B) kit {
	switch f := os.Getenv(envBenchFabric); f {
	case "", "sim":
		k, _ := simKit()
		return k
	case "verbs":
		return verbsKit(b)
	default:
		b.Fatalf("%s=%q: want sim or verbs", envBenchFabric, f)
		return kit{}
	}
}

// benchConfig returns the Config XPU_RDMA_BENCH_CONFIG describes.
func benchConfig(b *testing.B) rdma.Config {
	cfg, err := parseBenchConfig(os.Getenv(envBenchConfig))
	if err != nil {
		b.Fatalf("%s: %v", envBenchConfig, err)
	}
	return cfg
}

func parseBenchConfig(s string) (rdma.Config, error) {
	var cfg rdma.Config
	for kv := range strings.SplitSeq(s, ",") {
		if kv = strings.TrimSpace(kv); kv == "" {
			continue
		}
		k, v, ok := strings.Cut(kv, "=")
		if !ok {
			return cfg, fmt.Errorf("%q is not key=value", kv)
		}
		var err error
		switch k {
		case "spin":
			cfg.Spin, err = time.ParseDuration(v)
		case "eager":
			cfg.EagerLimit, err = parseSize(v)
		case "budget":
			cfg.EagerBudget, err = parseSize(v)
		case "slots":
			cfg.Slots, err = strconv.Atoi(v)
		case "chunk":
			cfg.Chunk, err = parseSize(v)
		default:
			return cfg, fmt.Errorf("unknown key %q (want eager, budget, slots, chunk or spin)", k)
		}
		if err != nil {
			return cfg, fmt.Errorf("%s: %w", k, err)
		}
	}
	return cfg, nil
}

// parseSize reads "4096", "64K" or "1M".
func parseSize(s string) (int, error) {
	mul := 1
	switch {
	case strings.HasSuffix(s, "K"):
		mul, s = 1<<10, s[:len(s)-1]
	case strings.HasSuffix(s, "M"):
		mul, s = 1<<20, s[:len(s)-1]
	}
	n, err := strconv.Atoi(s)
	return n * mul, err
}

// sizeName is "8B", "64KiB" or "4MiB".
func sizeName(n int) string {
	switch {
	case n >= 1<<20 && n%(1<<20) == 0:
		return fmt.Sprintf("%dMiB", n>>20)
	case n >= 1<<10 && n%(1<<10) == 0:
		return fmt.Sprintf("%dKiB", n>>10)
	}
	return fmt.Sprintf("%dB", n)
}

// comms returns the ranks as comm.Comm.
func comms[C comm.Comm](g []C) []comm.Comm {
	out := make([]comm.Comm, len(g))
	for i, c := range g {
		out[i] = c
	}
	return out
}

// BenchmarkPingPong measures the half round trip of a message between 2
// ranks (bench.PingPongGroup): ns/op is the mean, median-ns/op half the
// median round trip, which ib_send_lat reports as t_typical.
func BenchmarkPingPong(b *testing.B) {
	g := comms(benchKit(b).group(b, 2, benchConfig(b)))
	for _, size := range []int{8, 64 << 10} {
		b.Run(sizeName(size), func(b *testing.B) { bench.PingPongGroup(b, g, size) })
	}
}

// BenchmarkStream measures one-way bandwidth between 2 ranks as osu_bw
// does (bench.StreamGroup): a window of bench.RDMAWindow Isends
// outstanding, as many Irecvs pre-posted. One op is one message.
func BenchmarkStream(b *testing.B) {
	g := comms(benchKit(b).group(b, 2, benchConfig(b)))
	for _, size := range []int{1 << 20, 4 << 20} {
		b.Run(sizeName(size), func(b *testing.B) { bench.StreamGroup(b, g, size, bench.RDMAWindow) })
	}
}

// BenchmarkPut measures one-sided bandwidth between 2 ranks
// (bench.PutGroup): a window of bench.RDMAWindow Puts (RDMA WRITEs)
// outstanding into a region of the other rank. One op is one Put.
func BenchmarkPut(b *testing.B) {
	g := comms(benchKit(b).group(b, 2, benchConfig(b)))
	for _, size := range []int{1 << 20, 4 << 20} {
		b.Run(sizeName(size), func(b *testing.B) { bench.PutGroup(b, g, size, bench.RDMAWindow) })
	}
}

// BenchmarkAllreduce measures comm.Allreduce of float64 sums over 4
// ranks (bench.AllreduceGroup), on this backend and on the procs backend's
// loopback group (4 ranks in this process over 127.0.0.1) in the same
// binary, its links forced to TCP: by default ranks of one machine link
// through shared memory, and their allreduce runs in a region all of them
// map, which no network transport is meant to beat. One op is one
// allreduce.
func BenchmarkAllreduce(b *testing.B) {
	sizes := []int{64 << 10, 64 << 20}
	b.Run("rdma", func(b *testing.B) {
		g := comms(benchKit(b).group(b, 4, benchConfig(b)))
		for _, size := range sizes {
			b.Run("4r/"+sizeName(size), func(b *testing.B) { bench.AllreduceGroup(b, g, size/8) })
		}
	})
	b.Run("tcp", func(b *testing.B) {
		ctx, cancel := context.WithTimeout(b.Context(), time.Minute)
		defer cancel()
		ts, err := procs.NewLoopbackGroupConfig(ctx, 4, procs.Config{Links: procs.LinkTCP})
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() {
			var wg sync.WaitGroup
			for _, c := range ts {
				wg.Go(func() { _ = c.Close() })
			}
			wg.Wait()
		})
		g := comms(ts)
		for _, size := range sizes {
			b.Run("4r/"+sizeName(size), func(b *testing.B) { bench.AllreduceGroup(b, g, size/8) })
		}
	})
}

// BenchmarkRegister measures what a rendezvous message pays for its
// memory registration on the bench fabric when nothing is cached: one
// Register and Deregister of a buffer already touched (ibv_reg_mr and
// ibv_dereg_mr on verbs). One op is one pair.
func BenchmarkRegister(b *testing.B) {
	k := benchKit(b)
	fc, err := k.prov.Open("", 64)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = fc.Close() })
	for _, size := range []int{1 << 20, 4 << 20, 16 << 20} {
		b.Run(sizeName(size), func(b *testing.B) {
			buf := make([]byte, size)
			for i := range buf {
				buf[i] = byte(i)
			}
			var pin runtime.Pinner
			pin.Pin(&buf[0])
			defer pin.Unpin()
			b.SetBytes(int64(size))
			b.ResetTimer()
			for range b.N {
				mr, err := fc.Register(unsafe.Pointer(&buf[0]), size)
				if err != nil {
					b.Fatal(err)
				}
				if err := fc.Deregister(mr); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkClock measures time.Now, which the progress engine reads on
// every turn of its spin: a vDSO call on most machines, a system call
// where the clock source is not the TSC (hpet, as in the emulated guest).
func BenchmarkClock(b *testing.B) {
	var t time.Time
	for range b.N {
		t = time.Now()
	}
	_ = t
}
