//go:build cgo

package cuda_test

import (
	"fmt"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/xpu-go/xpu/backends/cuda"
	"github.com/xpu-go/xpu/internal/tooling/testwait"
	"github.com/xpu-go/xpu/memspace"
	"github.com/xpu-go/xpu/transfer"
)

// The host never touches device memory: no view, an error rather than a
// crash (the fake maps device memory PROT_NONE, so a dereference by the
// backend would kill the test).
func TestDeviceMemoryNotHostAccessible(t *testing.T) {
	noDriverLeaks(t)
	g := openGPU(t, "0")
	buf, err := memspace.Alloc[float32](g.dev, 1024)
	require.NoError(t, err)
	defer buf.Free()
	_, err = buf.Host()
	assert.ErrorIs(t, err, memspace.ErrNotHostAccessible)
	_, err = buf.Block().Bytes()
	assert.ErrorIs(t, err, memspace.ErrNotHostAccessible)
	assert.False(t, g.dev.Properties().HostAccessible)
	for _, sp := range g.b.Spaces[1:] {
		b, err := memspace.Alloc[float32](sp, 16)
		require.NoError(t, err)
		v, err := b.Host()
		require.NoError(t, err, sp.Name())
		v[15] = 1
		require.NoError(t, b.Free())
	}
}

// memspace.Pool serves device memory unchanged; a pooled block's copies
// find the device allocation it lies in, and Lookup finds it upstream.
func TestPoolOverDeviceMemory(t *testing.T) {
	noDriverLeaks(t)
	g := openGPU(t, "0")
	pool, err := memspace.NewPool(g.dev, memspace.PoolOptions{})
	require.NoError(t, err)
	defer func() { assert.NoError(t, pool.Close()) }()
	ctx := waitCtx(t)
	for round := range 3 {
		a, err := memspace.Alloc[int64](pool, 1000)
		require.NoError(t, err)
		b, err := memspace.Alloc[int64](pool, 1000)
		require.NoError(t, err)
		host := make([]int64, 1000)
		for i := range host {
			host[i] = int64(i * (round + 1))
		}
		hb, _ := memspace.FromSlice(host)
		require.NoError(t, transfer.Copy(ctx, a, hb))
		require.NoError(t, transfer.Copy(ctx, b, a))
		require.NoError(t, cuda.Scale(g.s, b, 2))
		got := download(t, g, b)
		for i, v := range got {
			require.Equal(t, int64(2*i*(round+1)), v)
		}
		up, ok := g.dev.Lookup(b.Block().Addr() + 8)
		require.True(t, ok, "the pooled block's address lies in a device allocation")
		assert.LessOrEqual(t, up.Addr(), b.Block().Addr())
		assert.GreaterOrEqual(t, up.Addr()+memspace.Addr(up.Len()), b.Block().Addr()+memspace.Addr(b.Block().Len()))
		require.NoError(t, a.Free())
		require.NoError(t, b.Free())
	}
}

// Goroutines move between OS threads and CUDA contexts are per thread:
// many goroutines using two devices at once, each call must run under its
// own device's context (the fake refuses a stream, a module or memory of
// another context).
func TestDevicesFromManyGoroutines(t *testing.T) {
	noDriverLeaks(t)
	gs := []*gpu{openGPU(t, "0"), openGPU(t, "1")}
	ctx := waitCtx(t)
	var wg sync.WaitGroup
	errs := make(chan error, 16)
	for w := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			g := gs[w%2]
			s, err := g.x.NewStream()
			if err != nil {
				errs <- err
				return
			}
			defer s.Close()
			for i := range 20 {
				buf, err := memspace.Alloc[uint32](g.dev, 512)
				if err != nil {
					errs <- err
					return
				}
				if err := cuda.Fill(s, buf, uint32(w*100+i)); err != nil {
					errs <- err
					return
				}
				if err := cuda.Scale(s, buf, 3); err != nil {
					errs <- err
					return
				}
				sum, err := cuda.Sum(ctx, s, buf)
				if err != nil {
					errs <- fmt.Errorf("worker %d round %d: waiting for the sum: %w", w, i, err)
					return
				}
				if want := uint32(512 * 3 * (w*100 + i)); sum != want {
					errs <- fmt.Errorf("worker %d round %d: sum %d, want %d", w, i, sum, want)
					return
				}
				if err := buf.Free(); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	testwait.Group(t, &wg, "the allocating goroutines")
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}

// A backend opened for device 1 is device 1's, by the driver's own
// accounting: it retains device 1's primary context and not device 0's,
// its device memory lies on device 1 (and its free memory is device 1's),
// and its kernels run in device 1's context.
func TestDeviceOneIsDeviceOne(t *testing.T) {
	f := needFake(t)
	noDriverLeaks(t)
	before0, before1 := f.DeviceStats(0), f.DeviceStats(1)
	g := openGPU(t, "1")
	d0, d1 := f.DeviceStats(0), f.DeviceStats(1)
	require.Equal(t, before0.ContextRefs, d0.ContextRefs, "a backend opened for device 1 must not retain device 0's context")
	require.Greater(t, d1.ContextRefs, before1.ContextRefs, "a backend opened for device 1 must retain device 1's context")

	const size = 64 << 20
	free, _, err := g.dev.Available()
	require.NoError(t, err)
	buf, err := memspace.Alloc[uint32](g.dev, size/4)
	require.NoError(t, err)
	defer func() { assert.NoError(t, buf.Free()) }()
	d0, d1 = f.DeviceStats(0), f.DeviceStats(1)
	require.Equal(t, before0.DeviceBytes, d0.DeviceBytes, "device 1's memory must not be allocated on device 0")
	require.GreaterOrEqual(t, d1.DeviceBytes-before1.DeviceBytes, int64(size), "device 1's memory must be allocated on device 1")
	after, _, err := g.dev.Available()
	require.NoError(t, err)
	assert.GreaterOrEqual(t, free-after, int64(size), "device 1's free memory after allocating %d bytes of it", size)

	head, err := buf.Slice(0, 1024)
	require.NoError(t, err)
	require.NoError(t, cuda.Scale(g.s, head, 3))
	wait(t, "the stream after a kernel on device 1", g.s.Synchronize)
	d0, d1 = f.DeviceStats(0), f.DeviceStats(1)
	require.Equal(t, before0.KernelLaunches, d0.KernelLaunches, "a kernel on device 1's stream must not run on device 0")
	require.Greater(t, d1.KernelLaunches, before1.KernelLaunches, "a kernel on device 1's stream must run in device 1's context")
}

// A communicator that shared an allocation with another process learns of
// its free before the driver frees it, with the driver's whole allocation.
func TestNotifyFree(t *testing.T) {
	noDriverLeaks(t)
	s, err := cuda.NewSpace("", cuda.KindDevice, 0)
	require.NoError(t, err)
	var got []memspace.Block
	stop := s.NotifyFree(func(b memspace.Block) { got = append(got, b) })

	b, err := s.Allocate(1000, 4096)
	require.NoError(t, err)
	require.NoError(t, s.Free(b))
	require.Len(t, got, 1, "one free, one notification")
	assert.Equal(t, memspace.Space(s), got[0].Space())
	assert.LessOrEqual(t, got[0].Addr(), b.Addr(), "the notification starts at the driver's base")
	assert.GreaterOrEqual(t, got[0].Addr()+memspace.Addr(got[0].Len()), b.Addr()+memspace.Addr(b.Len()),
		"the notification covers the block handed out")

	live, err := s.Allocate(64, 0)
	require.NoError(t, err)
	stop()
	stop() // a second stop does nothing
	other, err := s.Allocate(64, 0)
	require.NoError(t, err)
	require.NoError(t, s.Free(other))
	assert.Len(t, got, 1, "no notification after stop")

	s.NotifyFree(func(b memspace.Block) { got = append(got, b) })
	assert.Error(t, s.Close(), "Close reports the block still allocated")
	require.Len(t, got, 2, "Close tells of the allocation still live")
	assert.Equal(t, live.Addr(), got[1].Addr())
}
