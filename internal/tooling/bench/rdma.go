package bench

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/xpu-go/xpu"
	"github.com/xpu-go/xpu/backends/rdma"
	"github.com/xpu-go/xpu/comm"
	"github.com/xpu-go/xpu/memspace"
)

// RDMAWindow is how many sends or Puts the RDMA stream cases keep
// outstanding, as osu_bw's window.
const RDMAWindow = 16

// RDMA is the table of the rdma backend's benchmarks: ranks of a group in
// this process (the backend's Group), each with its own device context
// and queue pairs. They need an RDMA device with an active port and a
// binary built with -tags rdma; xpu bench takes them from
// RDMAIfAvailable. backends/rdma runs the same bodies on its simulated
// fabric and, in a soft-RoCE guest, against perftest (docs/results/rdma.md).
var RDMA = []Case{
	{Name: "rdma.pingpong.8B", Run: RDMAPingPong(8), Unit: NsPerOp,
		Doc: "half round trip of an 8-byte message between 2 ranks (eager SEND; median-ns/op beside it is ib_send_lat's t_typical)"},
	{Name: "rdma.pingpong.64KiB", Run: RDMAPingPong(64 << 10), Unit: NsPerOp,
		Doc: "half round trip of 64 KiB between 2 ranks (rendezvous: RTS, RDMA READ, FIN)"},
	{Name: "rdma.stream.1MiB", Run: RDMAStream(1 << 20), Unit: GBPerSec,
		Doc: "one-way stream of 1 MiB messages, 16 outstanding, between 2 ranks (osu_bw's pattern)"},
	{Name: "rdma.stream.4MiB", Run: RDMAStream(4 << 20), Unit: GBPerSec,
		Doc: "one-way stream of 4 MiB messages, 16 outstanding, between 2 ranks (osu_bw's pattern)"},
	{Name: "rdma.put.4MiB", Run: RDMAPut(4 << 20), Unit: GBPerSec,
		Doc: "one-sided Puts (RDMA WRITE) of 4 MiB, 16 outstanding, into a region of the other rank"},
	{Name: "rdma.allreduce.4r.64KiB", Run: RDMAAllreduce(4, 8<<10), Unit: NsPerOp,
		Baseline: "tcp.allreduce.4r.64KiB", Doc: "allreduce of 64 KiB of float64 over 4 ranks"},
	{Name: "rdma.allreduce.4r.64MiB", Run: RDMAAllreduce(4, 8<<20), Unit: NsPerOp,
		Baseline: "tcp.allreduce.4r.64MiB", BaselineGoal: 1.0, Doc: "allreduce of 64 MiB of float64 over 4 ranks"},
}

// RDMAIfAvailable returns RDMA where the rdma backend opens, and nil where
// it is unavailable (a build without -tags rdma, no device with an active
// port): `xpu bench` stops at a case that reports nothing, as a skipped
// one does. It opens and closes the backend once to find out.
func RDMAIfAvailable() []Case {
	be, err := xpu.Open(context.Background(), rdma.Name, nil)
	if err != nil {
		if errors.Is(err, xpu.ErrUnavailable) {
			return nil
		}
		return RDMA // the cases fail, with the reason
	}
	_ = be.Close()
	return RDMA
}

// rdmaGroup opens the rdma backend and makes a group of n ranks, or skips
// the benchmark with the reason; the benchmark's cleanup closes both.
func rdmaGroup(b *testing.B, n int) []comm.Comm {
	b.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	be, err := xpu.Open(ctx, rdma.Name, nil)
	if err != nil {
		if errors.Is(err, xpu.ErrUnavailable) {
			b.Skip(err)
		}
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = be.Close() })
	g, err := be.Group(ctx, n)
	if err != nil {
		b.Fatal(err)
	}
	return g
}

// RDMAPingPong measures PingPongGroup on 2 ranks of the rdma backend.
func RDMAPingPong(size int) func(b *testing.B) {
	return func(b *testing.B) { PingPongGroup(b, rdmaGroup(b, 2), size) }
}

// RDMAStream measures StreamGroup on 2 ranks of the rdma backend.
func RDMAStream(size int) func(b *testing.B) {
	return func(b *testing.B) { StreamGroup(b, rdmaGroup(b, 2), size, RDMAWindow) }
}

// RDMAPut measures PutGroup on 2 ranks of the rdma backend.
func RDMAPut(size int) func(b *testing.B) {
	return func(b *testing.B) { PutGroup(b, rdmaGroup(b, 2), size, RDMAWindow) }
}

// RDMAAllreduce measures AllreduceGroup of n float64 on ranks of the rdma
// backend.
func RDMAAllreduce(ranks, n int) func(b *testing.B) {
	return func(b *testing.B) { AllreduceGroup(b, rdmaGroup(b, ranks), n) }
}

// maxSamples bounds the round trips a ping-pong keeps for its median.
const maxSamples = 1 << 20

// onGroup runs body on every rank of g at once and fails b on any error.
func onGroup(b *testing.B, g []comm.Comm, body func(r int, c comm.Comm) error) {
	b.Helper()
	errs := make([]error, len(g))
	var wg sync.WaitGroup
	for r, c := range g {
		wg.Go(func() { errs[r] = body(r, c) })
	}
	wg.Wait()
	for r, err := range errs {
		if err != nil {
			b.Fatalf("rank %d: %v", r, err)
		}
	}
}

// pattern fills m with bytes that depend on seed and the position.
func pattern(m []byte, seed int) {
	for i := range m {
		m[i] = byte(seed*131 + i*7 + i>>8)
	}
}

// stamp writes i into the first 8 bytes of m (all of a shorter m).
func stamp(m []byte, i int) {
	var s [8]byte
	binary.LittleEndian.PutUint64(s[:], uint64(i))
	copy(m, s[:])
}

// stamped reports whether m carries the stamp of i.
func stamped(m []byte, i int) bool {
	var s [8]byte
	binary.LittleEndian.PutUint64(s[:], uint64(i))
	return bytes.Equal(m[:min(len(m), 8)], s[:min(len(m), 8)])
}

// PingPongGroup measures the half round trip of a size-byte message
// between ranks 0 and 1 of g: rank 0 sends, rank 1 receives and sends it
// back. One op is one message one way: ns/op is the mean half round trip,
// and median-ns/op half the median of the round trips rank 0 times one by
// one — what ib_send_lat reports as t_typical (the mean is far from it on
// a noisy machine). Every message carries a stamp that is checked, and
// the last one is checked whole.
func PingPongGroup(b *testing.B, g []comm.Comm, size int) {
	ctx := context.Background()
	out := make([]byte, size)
	pattern(out, 1)
	bufs := [2][]byte{make([]byte, size), make([]byte, size)}
	// (b.N+1)/2 round trips: b.N half round trips, rounded up.
	rounds := (b.N + 1) / 2
	rtts := make([]time.Duration, 0, min(rounds, maxSamples))
	b.SetBytes(int64(size))
	b.ResetTimer()
	onGroup(b, g[:2], func(r int, c comm.Comm) error {
		buf := Block(bufs[r])
		t0 := time.Now()
		for i := range rounds {
			if r == 0 {
				if i > 0 && len(rtts) < cap(rtts) {
					t := time.Now()
					rtts = append(rtts, t.Sub(t0))
					t0 = t
				}
				if i == rounds-1 {
					copy(bufs[0], out)
				}
				stamp(bufs[0], i)
				if err := comm.Send(ctx, c, buf, 1, 1); err != nil {
					return err
				}
			}
			if _, err := comm.Recv(ctx, c, buf, 1-r, 1); err != nil {
				return err
			}
			if !stamped(bufs[r], i) {
				return fmt.Errorf("message %d: stamp % x", i, bufs[r][:min(size, 8)])
			}
			if r == 1 {
				if err := comm.Send(ctx, c, buf, 0, 1); err != nil {
					return err
				}
			}
		}
		return nil
	})
	b.StopTimer()
	if len(rtts) > 0 {
		slices.Sort(rtts)
		b.ReportMetric(float64(rtts[len(rtts)/2])/2, "median-ns/op")
	}
	stamp(out, rounds-1)
	for r := range bufs {
		if !bytes.Equal(bufs[r], out) {
			b.Fatalf("rank %d holds other bytes than were sent", r)
		}
	}
}

// StreamGroup measures one-way bandwidth from rank 0 to rank 1 of g as
// osu_bw does: rank 0 keeps a window of Isends outstanding, rank 1
// pre-posts as many Irecvs, and answers each window with an 8-byte
// message. One op is one message (MB/s from b.SetBytes). Every message
// carries a stamp that is checked, and the last window is checked whole.
func StreamGroup(b *testing.B, g []comm.Comm, size, window int) {
	ctx := context.Background()
	send := make([][]byte, window)
	recv := make([][]byte, window)
	for k := range send {
		send[k] = make([]byte, size)
		pattern(send[k], k)
		recv[k] = make([]byte, size)
	}
	last := 0 // messages in the last window
	b.SetBytes(int64(size))
	b.ResetTimer()
	onGroup(b, g[:2], func(r int, c comm.Comm) error {
		reqs := make([]comm.Request, window)
		ack := Block(make([]byte, 8))
		for done := 0; done < b.N; done += window {
			w := min(window, b.N-done)
			var err error
			for k := range w {
				if r == 0 {
					stamp(send[k], done+k)
					reqs[k], err = c.Isend(Block(send[k]), 1, 0)
				} else {
					reqs[k], err = c.Irecv(Block(recv[k]), 0, 0)
				}
				if err != nil {
					return err
				}
			}
			if err := comm.WaitAll(ctx, reqs[:w]...); err != nil {
				return err
			}
			if r == 0 {
				if _, err := comm.Recv(ctx, c, ack, 1, 1); err != nil {
					return err
				}
				continue
			}
			for k := range w {
				if !stamped(recv[k], done+k) {
					return fmt.Errorf("message %d: stamp % x", done+k, recv[k][:8])
				}
			}
			if err := comm.Send(ctx, c, ack, 0, 1); err != nil {
				return err
			}
			last = w
		}
		return nil
	})
	b.StopTimer()
	for k := range last {
		if !bytes.Equal(recv[k][8:], send[k][8:]) {
			b.Fatalf("message %d of the last window: other bytes than were sent", k)
		}
	}
}

// PutGroup measures one-sided bandwidth from rank 0 to rank 1 of g
// (comm.OneSided, or skips): rank 1 exposes a region of window messages,
// rank 0 keeps a window of Puts outstanding into it and flushes at the
// end, then tells rank 1 with a message, which checks the last window
// whole. One op is one Put (MB/s from b.SetBytes).
func PutGroup(b *testing.B, g []comm.Comm, size, window int) {
	ctx := context.Background()
	one := make([]comm.OneSided, 2)
	for r := range one {
		var ok bool
		if one[r], ok = g[r].(comm.OneSided); !ok {
			b.Skipf("%T has no one-sided communication", g[r])
		}
	}
	send := make([][]byte, window)
	for k := range send {
		send[k] = make([]byte, size)
		pattern(send[k], k)
	}
	target := make([]byte, window*size)
	reg, err := one[1].Expose(Block(target))
	if err != nil {
		b.Fatal(err)
	}
	defer reg.Close()
	var key comm.RemoteKey
	onGroup(b, g[:2], func(r int, c comm.Comm) error {
		mine := comm.RemoteKey{Rank: r}
		if r == 1 {
			mine = reg.Key()
		}
		keys, err := comm.ExchangeKeys(ctx, c, mine)
		if r == 0 && err == nil {
			key = keys[1]
		}
		return err
	})
	last := 0
	b.SetBytes(int64(size))
	b.ResetTimer()
	onGroup(b, g[:2], func(r int, c comm.Comm) error {
		done := Block(make([]byte, 8))
		if r == 1 {
			_, err := comm.Recv(ctx, c, done, 0, 2)
			return err
		}
		reqs := make([]comm.Request, window)
		for n := 0; n < b.N; n += window {
			w := min(window, b.N-n)
			for k := range w {
				stamp(send[k], n+k)
				var err error
				if reqs[k], err = one[0].Put(Block(send[k]), key, k*size); err != nil {
					return err
				}
			}
			if err := comm.WaitAll(ctx, reqs[:w]...); err != nil {
				return err
			}
			last = w
		}
		if err := one[0].Flush(ctx, 1); err != nil {
			return err
		}
		return comm.Send(ctx, c, done, 1, 2)
	})
	b.StopTimer()
	n := b.N - last
	for k := range last {
		got := target[k*size : (k+1)*size]
		if !stamped(got, n+k) || !bytes.Equal(got[8:], send[k][8:]) {
			b.Fatalf("Put %d: other bytes than were sent", n+k)
		}
	}
}

// AllreduceGroup measures comm.Allreduce of n float64 summed over the
// ranks of g, from a send buffer into a receive buffer: rank r holds
// r + j%3 at j, so every rank must end with the sum of the ranks plus
// p·(j%3), which is checked after the timed calls. One untimed call
// comes first: the first touch of fresh pages (buffers, the algorithm's
// scratch) costs more than the collective on a virtual machine, and would
// be all that a 1-iteration run measured. One op is one allreduce.
func AllreduceGroup(b *testing.B, g []comm.Comm, n int) {
	ctx := context.Background()
	p := len(g)
	send := make([]*memspace.Buffer[float64], p)
	recv := make([]*memspace.Buffer[float64], p)
	vals := make([][]float64, p)
	for r := range p {
		s := make([]float64, n)
		for j := range s {
			s[j] = float64(r + j%3)
		}
		vals[r] = make([]float64, n)
		send[r], _ = memspace.FromSlice(s)
		recv[r], _ = memspace.FromSlice(vals[r])
	}
	run := func(iters int) {
		onGroup(b, g, func(r int, c comm.Comm) error {
			for range iters {
				if err := comm.Allreduce(ctx, c, send[r], recv[r], comm.Sum); err != nil {
					return err
				}
			}
			return nil
		})
	}
	run(1)
	b.SetBytes(int64(n) * 8)
	b.ResetTimer()
	run(b.N)
	b.StopTimer()
	base := float64(p * (p - 1) / 2)
	for r := range p {
		for j, v := range vals[r] {
			if want := base + float64(p*(j%3)); v != want {
				b.Fatalf("rank %d: element %d is %v, want %v", r, j, v, want)
			}
		}
	}
}
