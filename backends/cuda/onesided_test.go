//go:build cgo

package cuda_test

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"
	"time"
	"unsafe"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/xpu-go/xpu"
	"github.com/xpu-go/xpu/backends/cuda"
	"github.com/xpu-go/xpu/backends/cuda/internal/fakecuda"
	"github.com/xpu-go/xpu/backends/local"
	"github.com/xpu-go/xpu/backends/procs"
	"github.com/xpu-go/xpu/comm"
	"github.com/xpu-go/xpu/conformance"
	"github.com/xpu-go/xpu/memspace"
	"github.com/xpu-go/xpu/xerr"
	"github.com/xpu-go/xpu/xpucmd"
)

// One-sided transfers into and out of device memory: the one-sided cases
// of the communicator suite, "comm/onesided/regions" among them, over
// local groups and over procs groups whose links are shared memory or
// TCP, with regions in the device memory of two devices of the driver.
// The host cannot touch that memory (the fake driver maps it
// inaccessible), so every byte into or out of a region goes through the
// driver's copies.

// oneSidedOnly declares every section of the communicator suite but the
// one-sided one: the others run in the communicators' own packages.
var oneSidedOnly = func() []conformance.Option {
	var opts []conformance.Option
	for _, sec := range []string{"group", "p2p", "requests", "context", "close", "coll", "algorithms"} {
		opts = append(opts, conformance.Declare("comm/"+sec, "this test checks regions in device memory; the section runs in the communicator's own tests"))
	}
	return opts
}()

// asComms returns the ranks of a group as comm.Comm values.
func asComms[C comm.Comm](cs []C) []comm.Comm {
	out := make([]comm.Comm, len(cs))
	for i, c := range cs {
		out[i] = c
	}
	return out
}

func TestOneSidedDeviceRegions(t *testing.T) {
	noDriverLeaks(t)
	gs := []*gpu{openGPU(t, "0"), openGPU(t, "1")}
	opts := append([]conformance.Option{conformance.RegionSpaces(gs[0].dev, gs[1].dev)}, oneSidedOnly...)
	t.Run("local", func(t *testing.T) {
		conformance.TestComm(t, func(t *testing.T, n int) []comm.Comm {
			cs, err := local.NewGroup(n, local.Options{})
			require.NoError(t, err)
			return asComms(cs)
		}, opts...)
	})
	for _, links := range []procs.LinkMode{procs.LinkShm, procs.LinkTCP} {
		t.Run("procs-"+links.String(), func(t *testing.T) {
			conformance.TestComm(t, func(t *testing.T, n int) []comm.Comm {
				ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
				defer cancel()
				cs, err := procs.NewLoopbackGroupConfig(ctx, n, procs.Config{Links: links})
				require.NoError(t, err)
				return asComms(cs)
			}, opts...)
		})
	}
	checkStagingIdle(t, gs)
}

// A device that fails under a region: a Put into it, and a Get out of it,
// fail at the origin with ErrDeviceLost, naming the target's copy, and the
// link goes on carrying transfers to the target's other regions.
func TestOneSidedDeviceRegionFails(t *testing.T) {
	f := needFake(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for _, links := range []procs.LinkMode{procs.LinkShm, procs.LinkTCP} {
		t.Run(links.String(), func(t *testing.T) {
			defer f.Reset()
			b, err := xpu.Open(ctx, cuda.Name, xpu.Options{cuda.OptDevice: "1"})
			require.NoError(t, err)
			dev := b.Spaces[0].(*cuda.Space)
			cs, err := procs.NewLoopbackGroupConfig(ctx, 2, procs.Config{Links: links})
			require.NoError(t, err)
			defer func() {
				for _, c := range cs {
					assert.NoError(t, c.Close())
				}
			}()
			blk, err := dev.Allocate(4096, 0)
			require.NoError(t, err)
			reg, err := cs[1].Expose(blk)
			require.NoError(t, err)
			host := make([]byte, 4096)
			hreg, err := cs[1].Expose(memspace.NewBlock(memspace.GoHeap, memspace.Addr(uintptr(unsafe.Pointer(&host[0]))), len(host), unsafe.Pointer(&host[0])))
			require.NoError(t, err)

			f.Inject(fakecuda.FaultDeviceLost, 1, 0)
			src := []byte("bytes for a failed device")
			srcBuf, err := memspace.FromSlice(src)
			require.NoError(t, err)
			err = comm.Put(ctx, cs[0], srcBuf.Block(), reg.Key(), 100)
			require.ErrorIs(t, err, xerr.ErrDeviceLost, "a Put into the region of a failed device")
			t.Log(err)
			dst, err := memspace.FromSlice(make([]byte, 64))
			require.NoError(t, err)
			require.ErrorIs(t, comm.Get(ctx, cs[0], dst.Block(), reg.Key(), 0), xerr.ErrDeviceLost, "a Get out of it")

			require.NoError(t, comm.Put(ctx, cs[0], srcBuf.Block(), hreg.Key(), 100), "a Put into a host region of the same rank")
			assert.Equal(t, src, host[100:100+len(src)])
			require.NoError(t, reg.Close())
			require.NoError(t, hreg.Close())
			assert.NoError(t, dev.Free(blk), "freeing on a failed device: the block goes with the context")
			require.NoError(t, b.Close(), "closing a backend whose device failed")
		})
	}
}

// examples/pagedcache with its pool in device memory (PAGEDCACHE_POOL=cuda):
// both ranks in one process, and two rank processes under xpu run, whose
// pages the communicator copies into and out of the device with the
// driver.
func TestExamplePagedCacheDevicePool(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs examples/pagedcache")
	}
	goCmd, err := exec.LookPath("go")
	if err != nil {
		t.Skip("no go command")
	}
	bin := filepath.Join(t.TempDir(), "pagedcache")
	out, err := exec.Command(goCmd, "build", "-o", bin, "../../examples/pagedcache").CombinedOutput()
	require.NoError(t, err, "go build ./examples/pagedcache: %s", out)
	env := []string{"PAGEDCACHE_POOL=cuda", "XPU_BACKEND="}
	for _, v := range []string{"XPU_RANK", "XPU_WORLD_SIZE", "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE",
		"PMI_RANK", "PMI_SIZE", "SLURM_PROCID", "SLURM_NTASKS"} {
		env = append(env, v+"=")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	const pool = "rank 0: 32 pages written back into a pool of 256 (cuda-device memory): ok"
	cmd := exec.CommandContext(ctx, bin)
	cmd.Env = append(os.Environ(), env...)
	out, err = cmd.CombinedOutput()
	require.NoError(t, err, "both ranks in one process: %s", out)
	assert.Contains(t, string(out), pool)

	for k, v := range map[string]string{"PAGEDCACHE_POOL": "cuda", "XPU_BACKEND": ""} {
		t.Setenv(k, v)
	}
	var stdout, stderr syncBuffer
	code := xpucmd.Run(ctx, []string{"run", "-n", "2", "--timeout", "1m", bin}, &stdout, &stderr)
	require.Equal(t, 0, code, "xpu run -n 2 pagedcache: %s%s", stdout.String(), stderr.String())
	assert.Contains(t, stdout.String(), "[0] "+pool)
}

// syncBuffer is a bytes.Buffer that the rank streams of xpu run may write
// at once.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}
