//go:build cgo

package cuda_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/xpu-go/xpu/backends/cpu"
	"github.com/xpu-go/xpu/backends/cuda"
	"github.com/xpu-go/xpu/backends/cuda/internal/kernels"
	"github.com/xpu-go/xpu/executor"
	"github.com/xpu-go/xpu/memspace"
	"github.com/xpu-go/xpu/transfer"
)

// leakCheckedGPU0 checks the test for driver leaks, then opens device 0 and loads the test kernels on it.
func leakCheckedGPU0(t *testing.T) (*gpu, map[string]*cuda.Function) {
	t.Helper()
	noDriverLeaks(t)
	g := openGPU(t, "0")
	return g, testKernels(t, g)
}

// testKernels loads the test module on g's device.
func testKernels(t *testing.T, g *gpu) map[string]*cuda.Function {
	t.Helper()
	m, err := g.x.LoadModule(kernels.TestPTX)
	require.NoError(t, err)
	t.Cleanup(func() { _ = m.Close() })
	fs := map[string]*cuda.Function{}
	for _, k := range kernels.TestKernels() {
		f, err := m.Function(k.Name)
		require.NoError(t, err)
		fs[k.Name] = f
	}
	return fs
}

var one = cuda.Config{Grid: cuda.Dim3{X: 1}, Block: cuda.Dim3{X: 1}}

func iotaConfig() cuda.Config { return cuda.Config{Grid: cuda.Dim3{X: 4}, Block: cuda.Dim3{X: 256}} }

// Host work runs after the device work before it, and the device work
// after it waits for it: a slow kernel, then host work that reads what the
// kernel wrote and writes pinned memory, then a copy of that memory.
func TestStreamHostWorkInOrder(t *testing.T) {
	g, k := leakCheckedGPU0(t)
	const n = 4096
	buf := upload(t, g, make([]uint32, n))
	pinned, err := memspace.Alloc[uint32](g.pinned, n)
	require.NoError(t, err)
	defer pinned.Free()
	out := upload(t, g, make([]uint32, n))

	require.NoError(t, k[kernels.TestSleep].Launch(g.s, one, uint64(30*time.Millisecond)))
	require.NoError(t, k[kernels.TestIotaU32].Launch(g.s, iotaConfig(), buf, uint64(n)))
	var seen atomic.Int64
	require.NoError(t, g.s.Enqueue(func(ctx context.Context) error {
		host := make([]uint32, n)
		dst, _ := memspace.FromSlice(host)
		if err := transfer.Copy(ctx, dst, buf); err != nil { // a driver call from host work: allowed
			return err
		}
		p, err := pinned.Host()
		if err != nil {
			return err
		}
		for i, v := range host {
			if v == uint32(i) {
				seen.Add(1)
			}
			p[i] = v * 2
		}
		return nil
	}))
	_, err = transfer.CopyAsync(g.s, out, pinned)
	require.NoError(t, err)
	got := download(t, g, out)
	assert.Equal(t, int64(n), seen.Load(), "the host work saw the kernel's result")
	for i, v := range got {
		require.Equal(t, uint32(2*i), v, "element %d copied after the host work", i)
	}
	wait(t, "the stream after the copy", g.s.Synchronize)
}

// Streams of one device and of two wait for each other's events; a CPU
// stream waits for a CUDA event and a CUDA stream for a CPU event.
func TestStreamCrossWaits(t *testing.T) {
	g, k := leakCheckedGPU0(t)
	const n = 4096
	buf := upload(t, g, make([]uint32, n))

	// Two CUDA streams: without the wait the copy would race the kernel.
	s2, err := g.x.NewStream()
	require.NoError(t, err)
	defer s2.Close()
	require.NoError(t, k[kernels.TestSleep].Launch(g.s, one, uint64(30*time.Millisecond)))
	require.NoError(t, k[kernels.TestIotaU32].Launch(g.s, iotaConfig(), buf, uint64(n)))
	ev, err := g.s.Record()
	require.NoError(t, err)
	require.NoError(t, s2.WaitEvent(ev))
	pinned, err := memspace.Alloc[uint32](g.pinned, n)
	require.NoError(t, err)
	defer pinned.Free()
	done, err := transfer.CopyAsync(s2, pinned, buf)
	require.NoError(t, err)
	wait(t, "the copy on the stream waiting for the kernel's event", done.Wait)
	p, err := pinned.Host()
	require.NoError(t, err)
	for i, v := range p {
		require.Equal(t, uint32(i), v)
	}

	// A CPU stream waits for a CUDA event.
	ce := cpu.NewExecutor(2)
	defer ce.Close()
	cs, err := ce.NewStream()
	require.NoError(t, err)
	defer cs.Close()
	require.NoError(t, k[kernels.TestSleep].Launch(g.s, one, uint64(30*time.Millisecond)))
	require.NoError(t, cuda.Fill(g.s, buf, uint32(9)))
	ev, err = g.s.Record()
	require.NoError(t, err)
	require.NoError(t, cs.WaitEvent(ev))
	host := make([]uint32, n)
	hb, _ := memspace.FromSlice(host)
	require.NoError(t, cs.Enqueue(func(ctx context.Context) error { return transfer.Copy(ctx, hb, buf) }))
	wait(t, "the CPU stream waiting for a CUDA event", cs.Synchronize)
	for _, v := range host {
		require.Equal(t, uint32(9), v)
	}

	// A CUDA stream waits for a CPU event.
	require.NoError(t, cs.Enqueue(func(context.Context) error {
		time.Sleep(30 * time.Millisecond)
		for i := range p {
			p[i] = uint32(3 * i)
		}
		return nil
	}))
	cev, err := cs.Record()
	require.NoError(t, err)
	require.NoError(t, g.s.WaitEvent(cev))
	_, err = transfer.CopyAsync(g.s, buf, pinned)
	require.NoError(t, err)
	for i, v := range download(t, g, buf) {
		require.Equal(t, uint32(3*i), v)
	}

	// A stream of device 1 waits for an event of device 0.
	g1 := openGPU(t, "1")
	other := upload(t, g1, make([]uint32, n))
	require.NoError(t, k[kernels.TestSleep].Launch(g.s, one, uint64(30*time.Millisecond)))
	require.NoError(t, cuda.Fill(g.s, buf, uint32(5)))
	ev, err = g.s.Record()
	require.NoError(t, err)
	require.NoError(t, g1.s.WaitEvent(ev))
	_, err = transfer.CopyAsync(g1.s, other, buf)
	require.NoError(t, err)
	for _, v := range download(t, g1, other) {
		require.Equal(t, uint32(5), v)
	}
}

// Events time the device's work; query does not block; a CPU event is not
// a start the device can time against.
func TestEventTiming(t *testing.T) {
	g, k := leakCheckedGPU0(t)
	start, err := g.s.Record()
	require.NoError(t, err)
	require.NoError(t, k[kernels.TestSleep].Launch(g.s, one, uint64(20*time.Millisecond)))
	end, err := g.s.Record()
	require.NoError(t, err)
	done, err := end.Query()
	require.NoError(t, err)
	assert.False(t, done, "queried while the kernel sleeps")
	_, err = executor.Elapsed(start, end)
	assert.Error(t, err, "elapsed time of an event not yet complete")
	wait(t, "the event after the sleeping kernel", end.Wait)
	d, err := executor.Elapsed(start, end)
	require.NoError(t, err)
	assert.GreaterOrEqual(t, d, 19*time.Millisecond)
	assert.Less(t, d, 10*time.Second)

	ce := cpu.NewExecutor(1)
	defer ce.Close()
	cs, _ := ce.NewStream()
	defer cs.Close()
	cev, _ := cs.Record()
	_, err = executor.Elapsed(cev, end)
	assert.ErrorIs(t, err, executor.ErrInvalidArgument)
}

// A wait bounded by a context returns when the context ends, and the
// stream is still usable once the work is done.
func TestStreamWaitBounded(t *testing.T) {
	g, k := leakCheckedGPU0(t)
	require.NoError(t, k[kernels.TestSleep].Launch(g.s, one, uint64(300*time.Millisecond)))
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	t0 := time.Now()
	err := returned(t, "the stream, bounded by 20ms", func() error { return g.s.Synchronize(ctx) })
	assert.ErrorIs(t, err, context.DeadlineExceeded)
	assert.Less(t, time.Since(t0), 250*time.Millisecond)
	wait(t, "the stream after the sleeping kernel", g.s.Synchronize)
}
