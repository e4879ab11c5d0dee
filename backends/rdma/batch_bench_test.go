package rdma_test

import (
	"context"
	"testing"
	"time"

	"github.com/xpu-go/xpu/backends/cpu"
	"github.com/xpu-go/xpu/backends/rdma"
	"github.com/xpu-go/xpu/comm"
	"github.com/xpu-go/xpu/memspace"
)

// BenchmarkBatch moves 4 MiB from (Get) or to (Put) a peer's region as
// a prepared batch of 1,024 scattered 4 KiB pages, and as one 4 MiB
// transfer, on the bench fabric (benchKit). One op is the 4 MiB, waited
// for. The buffers are of the cpu space (registered once, cached).
func BenchmarkBatch(b *testing.B) {
	const page, pages = 4096, 1024
	k := benchKit(b)
	cs := k.group(b, 2, benchConfig(b))
	space := cpu.NewSpace(cpu.SpaceOptions{})
	b.Cleanup(func() { _ = space.Close() })
	alloc := func() (*memspace.Buffer[byte], []byte) {
		m, err := memspace.Alloc[byte](space, page*pages)
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { _ = m.Free() })
		h, _ := m.Host()
		for i := range h {
			h[i] = byte(i)
		}
		return m, h
	}
	remote, _ := alloc()
	local, _ := alloc()
	reg, err := cs[1].Expose(remote.Block())
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = reg.Close() })
	key := reg.Key()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	b.Cleanup(cancel)
	for _, put := range []bool{false, true} {
		name := map[bool]string{false: "get", true: "put"}[put]
		xfers := make([]comm.Xfer, pages)
		for i := range pages {
			l, _ := local.Block().Slice(i*page, page)
			// Scattered: page i to the page 389 i mod 1024 of the region.
			xfers[i] = comm.Xfer{Local: l, Remote: key, RemoteOff: (i * 389 % pages) * page}
		}
		batch, err := comm.PrepareBatch(cs[0], put, xfers)
		if err != nil {
			b.Fatal(err)
		}
		b.Run(name+"/batch-1024x4KiB", func(b *testing.B) {
			b.SetBytes(page * pages)
			for b.Loop() {
				if err := batch.Run(ctx); err != nil {
					b.Fatal(err)
				}
			}
		})
		b.Run(name+"/one-4MiB", func(b *testing.B) {
			b.SetBytes(page * pages)
			for b.Loop() {
				var r comm.Request
				var err error
				if put {
					r, err = cs[0].Put(local.Block(), key, 0)
				} else {
					r, err = cs[0].Get(local.Block(), key, 0)
				}
				if err == nil {
					_, err = r.Wait(ctx)
				}
				if err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkExpose1GiB measures Expose and Close of 1 GiB of the cpu
// space: "first", the allocation's first registration (a miss of the
// registration cache: the fabric registers the whole allocation; the
// allocation and its Free are not timed), and "again", the same
// allocation exposed again (a hit: no registration). One op is one
// Expose and its Close.
func BenchmarkExpose1GiB(b *testing.B) {
	const size = 1 << 30
	k := benchKit(b)
	cs := k.group(b, 2, benchConfig(b))
	c := cs[0]
	space := cpu.NewSpace(cpu.SpaceOptions{})
	b.Cleanup(func() { _ = space.Close() })
	expose := func(b *testing.B, m *memspace.Buffer[byte]) {
		reg, err := c.Expose(m.Block())
		if err != nil {
			b.Fatal(err)
		}
		if err := reg.Close(); err != nil {
			b.Fatal(err)
		}
	}
	b.Run("first", func(b *testing.B) {
		for b.Loop() {
			b.StopTimer()
			m, err := memspace.Alloc[byte](space, size)
			if err != nil {
				b.Fatal(err)
			}
			b.StartTimer()
			expose(b, m)
			b.StopTimer()
			_ = m.Free()
			b.StartTimer()
		}
	})
	b.Run("again", func(b *testing.B) {
		m, err := memspace.Alloc[byte](space, size)
		if err != nil {
			b.Fatal(err)
		}
		defer m.Free()
		expose(b, m) // registered once
		_, before := rdma.RegStats(c)
		for b.Loop() {
			expose(b, m)
		}
		if _, after := rdma.RegStats(c); after != before {
			b.Fatalf("%d registrations of an allocation already registered", after-before)
		}
	})
}
