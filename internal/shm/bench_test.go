//go:build linux

package shm

import (
	"io"
	"testing"
)

// BenchmarkPingPong: a 40-byte message (a tcp frame header and 8 bytes)
// there and back between two goroutines over one segment; the time per
// iteration is a round trip.
func BenchmarkPingPong(b *testing.B) {
	a, c := pair(b, DefaultRing, 0)
	done := make(chan error, 1)
	go func() {
		buf := make([]byte, 40)
		for range b.N {
			if _, err := io.ReadFull(c, buf); err != nil {
				done <- err
				return
			}
			if _, err := c.Write(buf); err != nil {
				done <- err
				return
			}
		}
		done <- nil
	}()
	buf := make([]byte, 40)
	b.ResetTimer()
	for range b.N {
		if _, err := a.Write(buf); err != nil {
			b.Fatal(err)
		}
		if _, err := io.ReadFull(a, buf); err != nil {
			b.Fatal(err)
		}
	}
	if err := <-done; err != nil {
		b.Fatal(err)
	}
}

// BenchmarkStream: 1 MiB writes read in 1 MiB reads.
func BenchmarkStream(b *testing.B) {
	const size = 1 << 20
	a, c := pair(b, DefaultRing, 0)
	done := make(chan error, 1)
	go func() {
		buf := make([]byte, size)
		for range b.N {
			if _, err := io.ReadFull(c, buf); err != nil {
				done <- err
				return
			}
		}
		done <- nil
	}()
	buf := make([]byte, size)
	b.SetBytes(size)
	b.ResetTimer()
	for range b.N {
		if _, err := a.Write(buf); err != nil {
			b.Fatal(err)
		}
	}
	if err := <-done; err != nil {
		b.Fatal(err)
	}
}
