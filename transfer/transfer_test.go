package transfer_test

import (
	"bytes"
	"context"
	"slices"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/xpu-go/xpu/executor"
	"github.com/xpu-go/xpu/internal/tooling/testwait"
	"github.com/xpu-go/xpu/memspace"
	"github.com/xpu-go/xpu/transfer"
)

// kindSpace is a space of a given kind that allocates nothing; blocks of it
// are made with memspace.NewBlock.
type kindSpace struct {
	kind string
	host bool
}

func (s kindSpace) Name() string { return "test-" + s.kind }
func (s kindSpace) Properties() memspace.Properties {
	return memspace.Properties{Kind: s.kind, Device: -1, HostAccessible: s.host}
}
func (s kindSpace) Allocate(size, align int) (memspace.Block, error) {
	return memspace.Block{}, memspace.ErrNotSupported
}
func (s kindSpace) Free(memspace.Block) error { return memspace.ErrNotSupported }

func TestRegister(t *testing.T) {
	const dk, sk = "transfer-test-dst", "transfer-test-src"
	dst, src := kindSpace{kind: dk}, kindSpace{kind: sk}
	calls := 0
	p := transfer.PathFunc(func(context.Context, memspace.Block, memspace.Block) error { calls++; return nil })

	_, err := transfer.Lookup(dst, src)
	require.ErrorIs(t, err, transfer.ErrNotSupported, "no path before Register")
	assert.Contains(t, err.Error(), dst.Name())
	assert.Contains(t, err.Error(), src.Name())

	unregister := transfer.Register(dk, sk, p)
	assert.Contains(t, transfer.Paths(), sk+"->"+dk)
	got, err := transfer.Lookup(dst, src)
	require.NoError(t, err)
	require.NoError(t, got.Copy(testwait.Ctx(t), memspace.Block{}, memspace.Block{}))
	assert.Equal(t, 1, calls, "Lookup returns the registered path")
	_, err = transfer.Lookup(src, dst)
	assert.ErrorIs(t, err, transfer.ErrNotSupported, "a path has a direction")

	assert.Panics(t, func() { transfer.Register("a", "b", nil) })

	unregister()
	assert.NotContains(t, transfer.Paths(), sk+"->"+dk)
	_, err = transfer.Lookup(dst, src)
	require.ErrorIs(t, err, transfer.ErrNotSupported, "no path after unregister")

	// A new registration of the pair is not removed by the old function.
	again := transfer.Register(dk, sk, p)
	unregister()
	assert.Contains(t, transfer.Paths(), sk+"->"+dk, "the first unregister removes only its own registration")
	again()
	again()
	assert.NotContains(t, transfer.Paths(), sk+"->"+dk)
}

// A pair registered again is served by the newer path until it is removed,
// then by the older one; removing the older first leaves the newer in force.
func TestRegisterShadows(t *testing.T) {
	const dk, sk = "transfer-test-dst2", "transfer-test-src2"
	dst, src := kindSpace{kind: dk}, kindSpace{kind: sk}
	var got []string
	path := func(name string) transfer.Path {
		return transfer.PathFunc(func(context.Context, memspace.Block, memspace.Block) error {
			got = append(got, name)
			return nil
		})
	}
	use := func() {
		t.Helper()
		p, err := transfer.Lookup(dst, src)
		require.NoError(t, err)
		require.NoError(t, p.Copy(testwait.Ctx(t), memspace.Block{}, memspace.Block{}))
	}
	removeA := transfer.Register(dk, sk, path("a"))
	removeB := transfer.Register(dk, sk, path("b"))
	use()
	removeB()
	use()
	removeC := transfer.Register(dk, sk, path("c"))
	removeA()
	use()
	assert.Equal(t, []string{"b", "a", "c"}, got, "the newest registration in force serves")
	assert.Equal(t, 1, countOf(transfer.Paths(), sk+"->"+dk), "a pair is listed once")
	removeC()
	_, err := transfer.Lookup(dst, src)
	require.ErrorIs(t, err, transfer.ErrNotSupported, "no path once every registration is removed")
}

func countOf(list []string, s string) (n int) {
	for _, x := range list {
		if x == s {
			n++
		}
	}
	return n
}

// A registered path takes precedence over the built-in host path.
func TestRegisteredBeforeHost(t *testing.T) {
	const k = "transfer-test-host"
	sp := kindSpace{kind: k, host: true}
	p, err := transfer.Lookup(sp, sp)
	require.NoError(t, err)
	assert.NotNil(t, p, "host-accessible spaces always have a path")
	calls := 0
	unregister := transfer.Register(k, k, transfer.PathFunc(func(context.Context, memspace.Block, memspace.Block) error {
		calls++
		return nil
	}))
	defer unregister()
	p, err = transfer.Lookup(sp, sp)
	require.NoError(t, err)
	require.NoError(t, p.Copy(testwait.Ctx(t), memspace.Block{}, memspace.Block{}))
	assert.Equal(t, 1, calls)
}

func TestCopyBlockErrors(t *testing.T) {
	ctx := testwait.Ctx(t)
	a, b := goBlock(t, 100), goBlock(t, 101)
	assert.ErrorIs(t, transfer.CopyBlock(ctx, a, b), transfer.ErrInvalidArgument)
	assert.ErrorIs(t, transfer.CopyBlock(ctx, memspace.Block{}, a), transfer.ErrInvalidArgument)
	assert.ErrorIs(t, transfer.Copy[byte](ctx, nil, nil), transfer.ErrInvalidArgument)
	canceled, cancel := context.WithCancel(ctx)
	cancel()
	assert.ErrorIs(t, transfer.CopyBlock(canceled, a, a), context.Canceled)
}

// workers is an executor.Parallel that runs the chunks of ParallelRange on
// the calling goroutine and records each call.
type workers struct {
	n      int
	closed bool

	mu     sync.Mutex
	calls  int
	grains []int
}

var _ executor.Parallel = (*workers)(nil)

func (w *workers) Name() string { return "test-workers" }
func (w *workers) Execute(ctx context.Context, fn func(context.Context) error) error {
	return fn(ctx)
}
func (w *workers) ParallelFor(ctx context.Context, n int, body func(int)) error {
	return w.ParallelRange(ctx, n, 1, func(lo, hi int) {
		for i := lo; i < hi; i++ {
			body(i)
		}
	})
}
func (w *workers) ParallelRange(ctx context.Context, n, grain int, body func(lo, hi int)) error {
	w.mu.Lock()
	w.calls++
	w.grains = append(w.grains, grain)
	w.mu.Unlock()
	if w.closed {
		return executor.ErrClosed
	}
	for lo := 0; lo < n; lo += grain {
		if err := ctx.Err(); err != nil {
			return err
		}
		body(lo, min(lo+grain, n))
	}
	return nil
}
func (w *workers) MaxParallelism() int      { return w.n }
func (w *workers) SuggestedGrain(n int) int { return max(1, n/w.n) }

func (w *workers) record() (calls int, grains []int) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.calls, slices.Clone(w.grains)
}

func goBlock(t *testing.T, n int) memspace.Block {
	t.Helper()
	b, err := memspace.FromSlice(make([]byte, n))
	require.NoError(t, err)
	return b.Block()
}

// copyExact copies n patterned bytes with path and checks them.
func copyExact(t *testing.T, path transfer.Path, n int) {
	t.Helper()
	src, dst := goBlock(t, n), goBlock(t, n)
	sb, _ := src.Bytes()
	for i := range sb {
		sb[i] = byte(i*7 + i>>12)
	}
	require.NoError(t, path.Copy(testwait.Ctx(t), dst, src))
	db, _ := dst.Bytes()
	require.True(t, bytes.Equal(db, sb), "copy of %d bytes", n)
}

// ParallelHost splits a copy as its documentation says: not below 256 KiB;
// pieces of 512 KiB below 16 MiB; one piece per worker, a multiple of 64
// bytes, from 16 MiB.
func TestParallelHostSplits(t *testing.T) {
	w := &workers{n: 4}
	path := transfer.ParallelHost(w)
	for _, tc := range []struct {
		n     int
		grain int // 0: not split
	}{
		{1, 0}, {64 << 10, 0}, {256<<10 - 1, 0},
		{256 << 10, 512 << 10}, {1<<20 + 3, 512 << 10}, {16<<20 - 1, 512 << 10},
		{16 << 20, 4 << 20}, {16<<20 + 65, 4<<20 + 64},
	} {
		before, _ := w.record()
		copyExact(t, path, tc.n)
		calls, grains := w.record()
		if tc.grain == 0 {
			assert.Equal(t, before, calls, "a copy of %d bytes is one memmove", tc.n)
			continue
		}
		require.Equal(t, before+1, calls, "a copy of %d bytes is split", tc.n)
		assert.Equal(t, tc.grain, grains[len(grains)-1], "grain of a copy of %d bytes", tc.n)
	}

	// Overlapping blocks of one space are copied as by memmove, not split.
	mem := make([]byte, 3<<20)
	for i := range mem {
		mem[i] = byte(i * 5)
	}
	buf, err := memspace.FromSlice(mem)
	require.NoError(t, err)
	lo, _ := buf.Block().Slice(0, 2<<20)
	hi, _ := buf.Block().Slice(1<<20, 2<<20)
	want := slices.Clone(mem[:2<<20])
	before, _ := w.record()
	require.NoError(t, path.Copy(testwait.Ctx(t), hi, lo))
	assert.Equal(t, want, mem[1<<20:])
	calls, _ := w.record()
	assert.Equal(t, before, calls, "overlapping copies are not split")
}

// With one worker, or an executor closed under the copy, the caller copies
// the pieces itself, exactly.
func TestParallelHostFallback(t *testing.T) {
	one := &workers{n: 1}
	copyExact(t, transfer.ParallelHost(one), 1<<20)
	c1, _ := one.record()
	assert.Equal(t, 0, c1, "a single worker is not handed the copy")

	closed := &workers{n: 2, closed: true}
	path := transfer.ParallelHost(closed)
	copyExact(t, path, 1<<20)
	copyExact(t, path, 32<<20)
	cc, _ := closed.record()
	assert.Equal(t, 2, cc, "the closed executor was asked, then the caller copied")

	assert.Panics(t, func() { transfer.ParallelHost(nil) })
}

func TestParallelHostCanceled(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	src, dst := goBlock(t, 1<<20), goBlock(t, 1<<20)
	assert.ErrorIs(t, transfer.ParallelHost(&workers{n: 1}).Copy(ctx, dst, src), context.Canceled, "one worker")
	assert.ErrorIs(t, transfer.ParallelHost(&workers{n: 2}).Copy(ctx, dst, src), context.Canceled, "with workers")
}
