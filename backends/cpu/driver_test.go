package cpu_test

import (
	"bytes"
	"context"
	"fmt"
	"slices"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/xpu-go/xpu"
	"github.com/xpu-go/xpu/backends/cpu"
	"github.com/xpu-go/xpu/executor"
	"github.com/xpu-go/xpu/internal/tooling/testwait"
	"github.com/xpu-go/xpu/memspace"
	"github.com/xpu-go/xpu/transfer"
)

func TestDriverRegistered(t *testing.T) {
	assert.Contains(t, xpu.Drivers(), "cpu")
}

// An open backend registers its host path and its Close removes it.
func TestHostPathRegistered(t *testing.T) {
	require.NotContains(t, transfer.Paths(), "host->host", "no cpu backend is open yet")
	b, err := xpu.Open(context.Background(), "cpu", nil)
	require.NoError(t, err)
	assert.Contains(t, transfer.Paths(), "host->host")
	require.NoError(t, b.Close())
	assert.NotContains(t, transfer.Paths(), "host->host", "Close removes the path")
}

func TestOpenComposition(t *testing.T) {
	b := openCPU(t, xpu.Options{"workers": "3", "limit": "64M", "tcp.device": "ignored"})
	assert.Equal(t, "cpu", b.Name)
	sp, ok := b.Memory.(*cpu.Space)
	require.True(t, ok)
	assert.Equal(t, int64(64<<20), sp.Limit())
	require.Len(t, b.Spaces, 1)
	assert.Same(t, sp, b.Spaces[0].(*cpu.Space))
	p, ok := executor.As[executor.Parallel](b.Exec)
	require.True(t, ok)
	assert.Equal(t, 3, p.MaxParallelism())
	_, ok = b.Exec.(executor.Streamer)
	assert.True(t, ok)
	_, err := b.Memory.Allocate(65<<20, 0)
	assert.ErrorIs(t, err, memspace.ErrOutOfMemory, "the limit option reached the space")
}

func TestOpenBadOptions(t *testing.T) {
	for _, tc := range []struct {
		opts xpu.Options
		key  string // the key the error names
	}{
		{xpu.Options{"workers": "0"}, "workers"}, {xpu.Options{"workers": "-2"}, "workers"},
		{xpu.Options{"workers": "many"}, "workers"}, {xpu.Options{"workers": "100000"}, "workers"},
		{xpu.Options{"limit": "0"}, "limit"}, {xpu.Options{"limit": "-1"}, "limit"}, {xpu.Options{"limit": "12Q"}, "limit"},
		{xpu.Options{"limit": "lots"}, "limit"}, {xpu.Options{"limit": "99999999999T"}, "limit"},
		{xpu.Options{"hugepages": "maybe"}, "hugepages"}, {xpu.Options{"hugepages": ""}, "hugepages"},
		{xpu.Options{"workers": "2", "limit": "1X", "hugepages": "true"}, "limit"},
	} {
		_, err := xpu.Open(context.Background(), "cpu", tc.opts)
		assert.ErrorIs(t, err, xpu.ErrInvalidArgument, "%v", tc.opts)
		var oe *xpu.OptionError
		if assert.ErrorAs(t, err, &oe, "%v", tc.opts) {
			assert.Equal(t, tc.key, oe.Key, "%v", tc.opts)
			assert.Equal(t, tc.opts[tc.key], oe.Value, "%v", tc.opts)
			assert.Contains(t, err.Error(), fmt.Sprintf("%s=%q", tc.key, tc.opts[tc.key]))
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err := xpu.Open(ctx, "cpu", nil)
	assert.ErrorIs(t, err, context.Canceled)
}

// A key the driver does not know is refused, named with the keys it knows;
// keys scoped to another backend are skipped, and those scoped to cpu read.
func TestOpenUnknownOption(t *testing.T) {
	ctx := context.Background()
	_, err := xpu.Open(ctx, "cpu", xpu.Options{"limt": "64K"})
	require.ErrorIs(t, err, xpu.ErrUnknownOption)
	assert.ErrorIs(t, err, xpu.ErrInvalidArgument)
	assert.Contains(t, err.Error(), "limt")
	assert.Contains(t, err.Error(), "limit")
	assert.NotContains(t, err.Error(), "\n", "one line")
	var oe *xpu.OptionError
	require.ErrorAs(t, err, &oe)
	assert.Equal(t, "limt", oe.Key)

	_, err = xpu.Open(ctx, "cpu", xpu.Options{"cpu.workerz": "2"})
	require.ErrorIs(t, err, xpu.ErrUnknownOption, "a key scoped to cpu is checked")

	b := openCPU(t, xpu.Options{cpu.OptLimit: "64K"})
	assert.Equal(t, int64(64<<10), b.Memory.(*cpu.Space).Limit())
	b = openCPU(t, xpu.Options{"cpu.limit": "128K", cpu.OptLimit: "64K", "local.eager_limit": "bad"})
	assert.Equal(t, int64(128<<10), b.Memory.(*cpu.Space).Limit(), "the scoped key wins; another backend's is skipped")
}

func TestOpenLimitUnits(t *testing.T) {
	for in, want := range map[string]int64{
		"4096": 4096, "1K": 1 << 10, "2KiB": 2 << 10, "3m": 3 << 20, "1G": 1 << 30, "1GB": 1 << 30, " 5 MiB ": 5 << 20, "1T": 1 << 40,
	} {
		b, err := xpu.Open(context.Background(), "cpu", xpu.Options{"limit": in})
		require.NoError(t, err, in)
		assert.Equal(t, want, b.Memory.(*cpu.Space).Limit(), in)
		require.NoError(t, b.Close())
	}
}

func TestBackendCloseReportsLeak(t *testing.T) {
	b, err := xpu.Open(context.Background(), "cpu", nil)
	require.NoError(t, err)
	_, err = b.Memory.Allocate(100, 0)
	require.NoError(t, err)
	err = b.Close()
	require.Error(t, err)
	assert.Contains(t, err.Error(), "1 blocks")
	assert.ErrorIs(t, b.Exec.(*cpu.Executor).ParallelFor(testwait.Ctx(t), 1, func(int) {}), executor.ErrClosed)
}

func TestInfo(t *testing.T) {
	info, err := xpu.Describe(context.Background(), "cpu")
	require.NoError(t, err)
	assert.Equal(t, "cpu", info.Name)
	assert.True(t, info.Available)
	require.Len(t, info.Devices, 1)
	assert.NotEmpty(t, info.Devices[0].Name)
	assert.Equal(t, []string{"memory", "executor", "transfer"}, info.Concepts)
	for _, c := range []string{"parallel", "streams", "events.timing", "memory.stats", "memory.lookup",
		"memory.available", "memory.limit", "parallel.nested", "parallel.dynamic", "transfer.host-parallel"} {
		assert.Contains(t, info.Capabilities, c)
	}
	assert.NotContains(t, info.Capabilities, "p2p")
	for _, ty := range xpu.NumericTypes {
		assert.Contains(t, info.ElementTypes, ty)
	}
	assert.Contains(t, info.ElementTypes, "bool")
	if info.Devices[0].MemoryTotal != -1 {
		assert.Positive(t, info.Devices[0].MemoryTotal)
		assert.LessOrEqual(t, info.Devices[0].MemoryFree, info.Devices[0].MemoryTotal)
	}
}

// Host copies are exact for every size around the path's thresholds,
// whether or not a cpu backend is open, into and out of Go memory, and
// within one block as memmove.
func TestHostPathCopies(t *testing.T) {
	sizes := []int{1, 100, 64 << 10, 256<<10 - 1, 256 << 10, 1<<20 + 3, 3 << 20, 16 << 20, 16<<20 + 65}
	run := func(t *testing.T, sp memspace.Space) {
		ctx := testwait.Ctx(t)
		for _, n := range sizes {
			src, err := sp.Allocate(n, 0)
			require.NoError(t, err)
			dst, err := sp.Allocate(n, 0)
			require.NoError(t, err)
			sb, _ := src.Bytes()
			for i := range sb {
				sb[i] = byte(i*7 + i>>12)
			}
			require.NoError(t, transfer.CopyBlock(ctx, dst, src))
			db, _ := dst.Bytes()
			require.True(t, bytes.Equal(db, sb), "size %d", n)

			// Go memory on either side.
			goMem := make([]byte, n)
			gb, err := memspace.FromSlice(goMem)
			require.NoError(t, err)
			require.NoError(t, transfer.CopyBlock(ctx, gb.Block(), src))
			require.True(t, bytes.Equal(goMem, sb), "to Go memory, size %d", n)
			clear(db)
			require.NoError(t, transfer.CopyBlock(ctx, dst, gb.Block()))
			require.True(t, bytes.Equal(db, sb), "from Go memory, size %d", n)

			// Overlapping, within one block: memmove semantics.
			if n >= 2 {
				want := slices.Clone(sb[:n-n/3])
				lo, _ := src.Slice(0, n-n/3)
				hi, _ := src.Slice(n/3, n-n/3)
				require.NoError(t, transfer.CopyBlock(ctx, hi, lo))
				require.True(t, bytes.Equal(sb[n/3:], want), "overlap, size %d", n)
			}
			require.NoError(t, sp.Free(src))
			require.NoError(t, sp.Free(dst))
		}
	}
	t.Run("no-backend", func(t *testing.T) { run(t, newSpace(t, cpu.SpaceOptions{})) })
	t.Run("backend-open", func(t *testing.T) {
		b := openCPU(t, xpu.Options{"workers": "3"})
		run(t, b.Memory)
	})
}

func TestHostPathCanceled(t *testing.T) {
	b := openCPU(t, nil)
	src, err := b.Memory.Allocate(4<<20, 0)
	require.NoError(t, err)
	dst, err := b.Memory.Allocate(4<<20, 0)
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	path, err := transfer.Lookup(b.Memory, b.Memory)
	require.NoError(t, err)
	assert.ErrorIs(t, path.Copy(ctx, dst, src), context.Canceled)
	require.NoError(t, b.Memory.Free(src))
	require.NoError(t, b.Memory.Free(dst))
}

// Two backends may be open at once; closing either leaves host copies
// working, served by the path of a backend still open.
func TestHostPathTwoBackends(t *testing.T) {
	ctx := testwait.Ctx(t)
	a, err := xpu.Open(ctx, "cpu", xpu.Options{"workers": "2"})
	require.NoError(t, err)
	b, err := xpu.Open(ctx, "cpu", xpu.Options{"workers": "3"})
	require.NoError(t, err)
	copyOnce := func(be *xpu.Backend, what string) {
		const n = 3 << 20
		src, err := be.Memory.Allocate(n, 0)
		require.NoError(t, err)
		dst, err := be.Memory.Allocate(n, 0)
		require.NoError(t, err)
		sb, _ := src.Bytes()
		for i := range sb {
			sb[i] = byte(i * 13)
		}
		require.NoError(t, transfer.CopyBlock(ctx, dst, src), what)
		db, _ := dst.Bytes()
		require.True(t, bytes.Equal(db, sb), what)
		require.NoError(t, be.Memory.Free(src))
		require.NoError(t, be.Memory.Free(dst))
	}
	copyOnce(a, "both open")
	require.NoError(t, b.Close())
	copyOnce(a, "the second closed")
	c := openCPU(t, nil)
	require.NoError(t, a.Close())
	copyOnce(c, "the first closed, a third open")
	assert.Contains(t, transfer.Paths(), "host->host")
}
