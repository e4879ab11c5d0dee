package local_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/xpu-go/xpu/backends/local"
	"github.com/xpu-go/xpu/comm"
)

// benchPingPong bounces a size-byte message between ranks 0 and 1 with
// comm.Send and comm.Recv. One iteration is a round trip: 2*size bytes
// move, and ns/one-way is half its time (the latency).
func benchPingPong(b *testing.B, size int, opts local.Options) {
	cs := group(b, 2, opts)
	ctx := context.Background()
	ping, pong := blk(b, make([]byte, size)), blk(b, make([]byte, size))
	n := b.N
	echoed := make(chan error, 1)
	go func() {
		for range n {
			if _, err := comm.Recv(ctx, cs[1], pong, 0, 1); err != nil {
				echoed <- err
				return
			}
			if err := comm.Send(ctx, cs[1], pong, 0, 2); err != nil {
				echoed <- err
				return
			}
		}
		echoed <- nil
	}()
	b.SetBytes(int64(2 * size))
	b.ReportAllocs()
	b.ResetTimer()
	for range n {
		if err := comm.Send(ctx, cs[0], ping, 1, 1); err != nil {
			b.Fatal(err)
		}
		if _, err := comm.Recv(ctx, cs[0], ping, 1, 2); err != nil {
			b.Fatal(err)
		}
	}
	b.StopTimer()
	if err := <-echoed; err != nil {
		b.Fatal(err)
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(n)/2, "ns/one-way")
}

// BenchmarkPingPong measures latency at 8 B and bandwidth at 4 MiB, the
// latter by rendezvous (the default) and eagerly (one more copy).
func BenchmarkPingPong(b *testing.B) {
	for _, tc := range []struct {
		name string
		size int
		opts local.Options
	}{
		{"8B", 8, local.Options{}},
		{"4MiB", 4 << 20, local.Options{}},
		{"4MiB-eager", 4 << 20, local.Options{EagerLimit: 4 << 20}},
	} {
		b.Run(tc.name, func(b *testing.B) { benchPingPong(b, tc.size, tc.opts) })
	}
}

// BenchmarkStream measures the message rate one way: rank 0 posts sends of
// 8 B back to back while rank 1 receives them.
func BenchmarkStream(b *testing.B) {
	for _, size := range []int{8, 64 << 10} {
		b.Run(fmt.Sprintf("%dB", size), func(b *testing.B) {
			cs := group(b, 2, local.Options{})
			ctx := context.Background()
			n := b.N
			got := make(chan error, 1)
			go func() {
				buf := blk(b, make([]byte, size))
				for range n {
					if _, err := comm.Recv(ctx, cs[1], buf, 0, 1); err != nil {
						got <- err
						return
					}
				}
				got <- nil
			}()
			msg := blk(b, make([]byte, size))
			b.SetBytes(int64(size))
			b.ReportAllocs()
			b.ResetTimer()
			for range n {
				if err := comm.Send(ctx, cs[0], msg, 1, 1); err != nil {
					b.Fatal(err)
				}
			}
			if err := <-got; err != nil {
				b.Fatal(err)
			}
		})
	}
}

// BenchmarkExpose1GiB exposes a 1 GiB block and withdraws it: an entry of
// the rank's table, nothing registered.
func BenchmarkExpose1GiB(b *testing.B) {
	cs := group(b, 2, local.Options{})
	buf := blk(b, make([]byte, 1<<30))
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
