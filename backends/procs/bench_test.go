package procs_test

import (
	"context"
	"testing"

	"github.com/xpu-go/xpu/backends/procs"
	"github.com/xpu-go/xpu/internal/tooling/bench"
)

// BenchmarkTCP runs the cases of bench.TCP (go test -bench TCP), named as
// the cases.
func BenchmarkTCP(b *testing.B) {
	for _, c := range bench.TCP {
		b.Run(c.Name, c.Run)
	}
}

// BenchmarkExpose1GiB exposes a 1 GiB block and withdraws it: what a
// region costs here, where nothing is registered with a device (the
// region is an entry of the rank's table).
func BenchmarkExpose1GiB(b *testing.B) {
	cs := group(b, 2, procs.Config{})
	buf := bench.Block(make([]byte, 1<<30))
	b.ReportAllocs()
	for b.Loop() {
		reg, err := cs[0].Expose(buf)
		if err != nil {
			b.Fatal(err)
		}
		if err := reg.Close(); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkTurnaround is the turnaround of a ping-pong over shared memory
// on one goroutine: a blocking Recv of 8 bytes already in the ring,
// through the lane, and the Send of the answer, by each rank of a pair in
// turn. Nothing waits and no line moves between processors, so it is
// what a rank spends between seeing a message and publishing its answer:
// a round trip is that twice plus the machine's two transfers of a line
// each way (ADR 47).
func BenchmarkTurnaround(b *testing.B) {
	cs := lanePair(b, procs.Config{})
	ctx := context.Background()
	freeRole(b, ctx, cs, 1, 0)
	freeRole(b, ctx, cs, 0, 1)
	msg := bytesBlock(make([]byte, 8))
	lanes := procs.LaneReads(cs[0], 1) + procs.LaneReads(cs[1], 0)
	if err := cs[0].Send(ctx, msg, 1, 1); err != nil {
		b.Fatal(err)
	}
	n := 0
	for b.Loop() {
		for _, me := range [2]int{1, 0} {
			if _, err := cs[me].Recv(ctx, msg, 1-me, 1); err != nil {
				b.Fatal(err)
			}
			if err := cs[me].Send(ctx, msg, 1-me, 1); err != nil {
				b.Fatal(err)
			}
		}
		n += 2
	}
	b.StopTimer()
	if _, err := cs[1].Recv(ctx, msg, 0, 1); err != nil {
		b.Fatal(err)
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(n), "ns/turn")
	// A few go the general path: those that find a credit frame the
	// reader wrote in the same record as the message.
	if got := procs.LaneReads(cs[0], 1) + procs.LaneReads(cs[1], 0) - lanes; got < int64(n)*99/100 {
		b.Fatalf("%d of %d receives came through the lane", got, n)
	}
}
