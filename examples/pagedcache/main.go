package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"sync"
	"syscall"
	"time"

	"github.com/xpu-go/xpu"
	"github.com/xpu-go/xpu/comm"
	"github.com/xpu-go/xpu/memspace"
	"github.com/xpu-go/xpu/transfer"

	_ "github.com/xpu-go/xpu/backends/cpu"   // host memory
	_ "github.com/xpu-go/xpu/backends/cuda"  // PAGEDCACHE_POOL=cuda: the pool in GPU memory
	_ "github.com/xpu-go/xpu/backends/mpi"   // XPU_BACKEND=mpi under mpirun (built with -tags mpi)
	_ "github.com/xpu-go/xpu/backends/procs" // the communicator between processes
	_ "github.com/xpu-go/xpu/backends/rdma"  // XPU_BACKEND=rdma over RDMA (built with -tags rdma)
)

const (
	page   = 16 << 10 // bytes a page
	pages  = 256      // pages of the pool
	pulled = 32       // pages rank 1 pulls
)

// envPool names the backend whose memory holds rank 0's pool: "cpu" (the
// default), or "cuda" for a GPU's device memory, which the host cannot
// touch (the communicator copies into and out of it with the driver).
const envPool = "PAGEDCACHE_POOL"

// written is rank 1's notification: the pages are written back.
var written = []byte("written back")

// slot is the pool slot of the i-th page rank 1 pulls, and back the slot
// it writes that page back to.
func slot(i int) int { return (i*37 + 5) % pages }
func back(i int) int { return (slot(i) + 128) % pages }

// fill is the byte at offset k of page p in the pool at the start.
func fill(p, k int) byte { return byte(p*7 + k) }

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	err := run(ctx)
	cancel()
	stop()
	if err != nil {
		fmt.Fprintln(os.Stderr, "pagedcache:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context) (err error) {
	// Join the job that xpu run (or mpirun, or srun) started, through the
	// communicator XPU_BACKEND names (procs when unset).
	name := os.Getenv(xpu.EnvBackend)
	if name == "" {
		name = "procs"
	}
	network, err := xpu.Open(ctx, name, nil)
	if err != nil {
		return err
	}
	defer func() { err = errors.Join(err, network.Close()) }()
	host, err := xpu.Open(ctx, "cpu", nil)
	if err != nil {
		return err
	}
	defer func() { err = errors.Join(err, host.Close()) }()
	pool := host
	if name := os.Getenv(envPool); name != "" && name != "cpu" {
		if pool, err = xpu.Open(ctx, name, nil); err != nil {
			return fmt.Errorf("%s=%s: %w", envPool, name, err)
		}
		defer func() { err = errors.Join(err, pool.Close()) }()
	}
	spaces := [2]memspace.Space{pool.Memory, host.Memory} // rank 0's pool, rank 1's cache
	if network.Comm != nil {
		return rank(ctx, network.Comm, spaces)
	}
	// Not started by a launcher: both ranks in this process.
	ranks, err := network.Group(ctx, 2)
	if err != nil {
		return err
	}
	errs := make([]error, 2)
	var wg sync.WaitGroup
	for i, c := range ranks {
		wg.Go(func() { errs[i] = rank(ctx, c, spaces) })
	}
	wg.Wait()
	return errors.Join(errs...)
}

// rank is one rank's part: rank 0 keeps its pool in spaces[0], rank 1
// its cache in spaces[1].
func rank(ctx context.Context, c comm.Comm, spaces [2]memspace.Space) error {
	one, ok := c.(comm.Notifier)
	if !ok || c.Size() != 2 {
		return fmt.Errorf("needs 2 ranks of a communicator with one-sided transfers and notifications; have %d of %T", c.Size(), c)
	}
	if c.Rank() == 0 {
		return server(ctx, one, spaces[0])
	}
	return client(ctx, one, spaces[1])
}

// server exposes the pool, waits for rank 1's notification, and checks
// the pool.
func server(ctx context.Context, c comm.Notifier, space memspace.Space) error {
	pool, err := memspace.Alloc[byte](space, pages*page)
	if err != nil {
		return err
	}
	defer pool.Free()
	// The pool's pages are written, and read back, through a host copy:
	// the pool may be memory the host cannot touch.
	mem := make([]byte, pages*page)
	for p := range pages {
		for k := range page {
			mem[p*page+k] = fill(p, k)
		}
	}
	if err := copyPool(ctx, pool, mem, true); err != nil {
		return err
	}
	reg, err := c.Expose(pool.Block())
	if err != nil {
		return err
	}
	defer reg.Close()
	if _, err := comm.ExchangeKeys(ctx, c, reg.Key()); err != nil {
		return err
	}
	// Rank 1 pulls and writes back on its own; its notification comes
	// after its Puts are in place.
	note, err := c.WaitNotification(ctx)
	if err != nil {
		return err
	}
	if note.Source != 1 || string(note.Msg) != string(written) {
		return fmt.Errorf("rank 0: notification %q from rank %d, want %q from rank 1", note.Msg, note.Source, written)
	}
	if err := copyPool(ctx, pool, mem, false); err != nil {
		return err
	}
	for i := range pulled {
		p, q := slot(i), back(i)
		for k := range page {
			if got, want := mem[q*page+k], fill(p, k)+1; got != want {
				return fmt.Errorf("rank 0: byte %d of slot %d, written back from page %d: %d, want %d", k, q, p, got, want)
			}
		}
	}
	fmt.Printf("rank 0: %d pages written back into a pool of %d (%s memory): ok\n", pulled, pages, space.Properties().Kind)
	return nil
}

// copyPool copies host bytes into the pool (in) or the pool into them.
func copyPool(ctx context.Context, pool *memspace.Buffer[byte], host []byte, in bool) error {
	h, err := memspace.FromSlice(host)
	if err != nil {
		return err
	}
	if in {
		return transfer.Copy(ctx, pool, h)
	}
	return transfer.Copy(ctx, h, pool)
}

// client pulls its pages with one batch of Gets, changes them, and writes
// them back with one batch of Puts, which notifies rank 0.
func client(ctx context.Context, c comm.Notifier, space memspace.Space) error {
	cache, err := memspace.Alloc[byte](space, pulled*page)
	if err != nil {
		return err
	}
	defer cache.Free()
	keys, err := comm.ExchangeKeys(ctx, c, comm.RemoteKey{Rank: 1})
	if err != nil {
		return err
	}
	gets := make([]comm.Xfer, pulled)
	puts := make([]comm.Xfer, pulled)
	for i := range pulled {
		b, err := cache.Block().Slice(i*page, page)
		if err != nil {
			return err
		}
		gets[i] = comm.Xfer{Local: b, Remote: keys[0], RemoteOff: slot(i) * page}
		puts[i] = comm.Xfer{Local: b, Remote: keys[0], RemoteOff: back(i) * page}
	}
	pull, err := comm.PrepareBatch(c, false, gets)
	if err != nil {
		return err
	}
	if err := pull.Run(ctx); err != nil {
		return err
	}
	mem, err := cache.Host()
	if err != nil {
		return err
	}
	for i := range pulled {
		for k := range page {
			if got, want := mem[i*page+k], fill(slot(i), k); got != want {
				return fmt.Errorf("rank 1: byte %d of page %d, pulled from slot %d: %d, want %d", k, i, slot(i), got, want)
			}
			mem[i*page+k]++
		}
	}
	push, err := comm.PrepareBatch(c, true, puts)
	if err != nil {
		return err
	}
	// Rank 0 receives the notification once the Puts are in place.
	r, err := push.PostNotify(ctx, written)
	if err != nil {
		return err
	}
	if _, err := r.Wait(ctx); err != nil {
		return err
	}
	fmt.Printf("rank 1: %d pages pulled with one batch of Gets and written back with one batch of Puts, notified: ok\n", pulled)
	return nil
}
