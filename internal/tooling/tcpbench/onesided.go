package main

import (
	"context"

	"github.com/xpu-go/xpu/backends/procs"
	"github.com/xpu-go/xpu/comm"
	"github.com/xpu-go/xpu/internal/tooling/bench"
)

// One-sided cases, 2 ranks, in the OSU benchmarks' conventions (osu_put_latency,
// osu_get_latency, osu_put_bw, osu_get_bw): rank 0 is the origin, rank 1
// the target, which runs nothing but its communicator's own progress.
//
//	put.lat.8B, get.lat.8B      one 8-byte Put (Get) and its Flush (ns/op)
//	put.bw.<size>, get.bw.<size> 64 transfers of 8 KiB, 64 KiB, 1 MiB or 4 MiB to one place, then Flush (GB/s)
//	getbatch.1024x4KiB          one prepared batch of 1,024 Gets of 4 KiB pages, scattered (GB/s)
//	putbatch.1024x4KiB          the same pages written back by a batch of Puts (GB/s)
//	putnotify.8B                half a round trip of 8-byte Puts, each with a notification that
//	                            the other rank waits for before it answers (ns/op)
//
// The C reference (tcp_mpi_ref.c) measures MPI_Put and MPI_Get with
// MPI_Win_flush in a window locked with MPI_Win_lock_all under the same
// names.

// osWindow is how many transfers a bandwidth run keeps in flight.
const osWindow = 64

// oneSidedCases measures the cases whose names want accepts and reports
// them.
func oneSidedCases(ctx context.Context, c *procs.Comm, want func(string) bool,
	measure func(int, func() error) (float64, error), report func(string, float64, string)) error {
	const span = 4 << 20
	region := make([]byte, span)
	for i := range region {
		region[i] = byte(i*7 + c.Rank())
	}
	reg, err := c.Expose(bench.Block(region))
	if err != nil {
		return err
	}
	defer reg.Close()
	keys, err := comm.ExchangeKeys(ctx, c, reg.Key())
	if err != nil {
		return err
	}
	target := keys[1]
	origin := c.Rank() == 0
	local := make([]byte, span)
	for i := range local {
		local[i] = byte(i*13 + 1)
	}
	// one starts a Put or a Get of n bytes and waits for it, then flushes.
	one := func(put bool, n int) error {
		b, _ := bench.Block(local).Slice(0, n)
		var r comm.Request
		var err error
		if put {
			r, err = c.Put(b, target, 0)
		} else {
			r, err = c.Get(b, target, 0)
		}
		if err != nil {
			return err
		}
		if _, err := r.Wait(ctx); err != nil {
			return err
		}
		return c.Flush(ctx, 1)
	}
	// window starts osWindow transfers of n bytes to one place, then
	// flushes.
	window := func(put bool, n int) error {
		b, _ := bench.Block(local).Slice(0, n)
		for range osWindow {
			var err error
			if put {
				_, err = c.Put(b, target, 0)
			} else {
				_, err = c.Get(b, target, 0)
			}
			if err != nil {
				return err
			}
		}
		return c.Flush(ctx, 1)
	}
	idle := func() error { return nil }
	for _, put := range []bool{true, false} {
		op := map[bool]string{true: "put", false: "get"}[put]
		if want(op + ".lat.8B") {
			body := idle
			if origin {
				body = func() error { return one(put, 8) }
			}
			ns, err := measure(5000, body)
			if err != nil {
				return err
			}
			report(op+".lat.8B", ns, "ns/op")
		}
		for _, k := range []struct {
			name string
			size int
		}{{"8KiB", 8 << 10}, {"64KiB", 64 << 10}, {"1MiB", 1 << 20}, {"4MiB", 4 << 20}} {
			if !want(op + ".bw." + k.name) {
				continue
			}
			body := idle
			if origin {
				body = func() error { return window(put, k.size) }
			}
			ns, err := measure(max(2, (1<<20)/k.size), body)
			if err != nil {
				return err
			}
			report(op+".bw."+k.name, float64(osWindow*k.size)/ns, "GB/s")
		}
	}
	for _, put := range []bool{false, true} {
		name := map[bool]string{true: "putbatch.1024x4KiB", false: "getbatch.1024x4KiB"}[put]
		if !want(name) {
			continue
		}
		const page, pages = 4 << 10, 1024
		var batch *comm.Batch
		if origin {
			xfers := make([]comm.Xfer, pages)
			for i := range xfers {
				b, _ := bench.Block(local).Slice(i*page, page)
				xfers[i] = comm.Xfer{Local: b, Remote: target, RemoteOff: (i * 7 % pages) * page}
			}
			if batch, err = comm.PrepareBatch(c, put, xfers); err != nil {
				return err
			}
		}
		body := idle
		if origin {
			body = func() error { return batch.Run(ctx) }
		}
		ns, err := measure(20, body)
		if err != nil {
			return err
		}
		report(name, float64(pages*page)/ns, "GB/s")
	}
	if want("putnotify.8B") {
		src, _ := bench.Block(local).Slice(0, 8)
		peer := keys[1-c.Rank()]
		// turn Puts 8 bytes into the peer's region with a notification;
		// the Put's request is waited for once the answer has come, as a
		// program that only needs the notification does.
		turn := func() (comm.Request, error) { return comm.PutNotify(ctx, c, src, peer, 0, nil) }
		await := func() error {
			_, err := c.WaitNotification(ctx)
			return err
		}
		round := func() error {
			if !origin {
				if err := await(); err != nil {
					return err
				}
			}
			r, err := turn()
			if err != nil {
				return err
			}
			if origin {
				if err := await(); err != nil {
					return err
				}
			}
			_, err = r.Wait(ctx)
			return err
		}
		ns, err := measure(5000, round)
		if err != nil {
			return err
		}
		report("putnotify.8B", ns/2, "ns/op")
	}
	return comm.Barrier(ctx, c)
}
