package onesided_test

import (
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/xpu-go/xpu/internal/onesided"
	"github.com/xpu-go/xpu/internal/tooling/testwait"
	"github.com/xpu-go/xpu/memspace"
)

func expose(t *testing.T, tb *onesided.Table, n int) *onesided.Region {
	t.Helper()
	data := make([]byte, n)
	b, err := memspace.FromSlice(data)
	require.NoError(t, err)
	g := tb.Expose(3, b.Block(), data)
	require.NotNil(t, g)
	return g
}

// A key finds its region, whole and exactly; any altered field, a range
// outside, a withdrawn region and another table's key find nothing.
func TestFind(t *testing.T) {
	var tb, other onesided.Table
	g := expose(t, &tb, 100)
	k := g.Key()
	assert.Equal(t, 3, k.Rank)
	assert.Equal(t, 100, k.Len)

	got, closed := tb.Find(k, 10, 90)
	require.Same(t, g, got)
	assert.False(t, closed)
	got.Done()

	moved, forged, grown, shrunk := k, k, k, k
	moved.Addr++
	forged.Key ^= 1 << 40
	grown.Len++
	shrunk.Len--
	for _, c := range []struct {
		what string
		k    func() (*onesided.Region, bool)
	}{
		{"moved address", func() (*onesided.Region, bool) { return tb.Find(moved, 0, 1) }},
		{"forged number", func() (*onesided.Region, bool) { return tb.Find(forged, 0, 1) }},
		{"longer region", func() (*onesided.Region, bool) { return tb.Find(grown, 0, 1) }},
		{"shorter region", func() (*onesided.Region, bool) { return tb.Find(shrunk, 0, 1) }},
		{"past the end", func() (*onesided.Region, bool) { return tb.Find(k, 50, 51) }},
		{"negative offset", func() (*onesided.Region, bool) { return tb.Find(k, -1, 1) }},
		{"another table", func() (*onesided.Region, bool) { return other.Find(k, 0, 1) }},
	} {
		got, closed := c.k()
		assert.Nil(t, got, c.what)
		assert.False(t, closed, c.what)
	}

	require.NoError(t, g.Close())
	got, _ = tb.Find(k, 0, 1)
	assert.Nil(t, got, "a withdrawn region")
	require.NoError(t, g.Close(), "Close is idempotent")
}

// Close of a region waits for the copies under way; Close of the table
// closes every region and reports it to Find.
func TestCloseWaitsForCopies(t *testing.T) {
	var tb onesided.Table
	g := expose(t, &tb, 8)
	got, _ := tb.Find(g.Key(), 0, 8)
	require.NotNil(t, got)
	var closedAt time.Time
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		_ = g.Close()
		closedAt = time.Now()
	}()
	time.Sleep(20 * time.Millisecond)
	doneAt := time.Now()
	got.Done()
	testwait.Group(t, &wg, "the Close of the table")
	assert.False(t, closedAt.Before(doneAt), "Close returned before the copy under way was done")

	h := expose(t, &tb, 8)
	tb.Close()
	got, closed := tb.Find(h.Key(), 0, 1)
	assert.Nil(t, got)
	assert.True(t, closed)
	assert.Nil(t, tb.Expose(0, h.Block(), h.Data()), "a closed table exposes nothing")
}

// CloseWithin calls onLate once the copies under way outlast late, and
// returns when onLate has ended them; it does not call it when they end
// in time.
func TestCloseWithin(t *testing.T) {
	var tb onesided.Table
	g := expose(t, &tb, 8)
	got, _ := tb.Find(g.Key(), 0, 8)
	require.NotNil(t, got)
	var late atomic.Int32
	require.NoError(t, g.CloseWithin(20*time.Millisecond, func() {
		late.Add(1)
		got.Done()
	}))
	assert.EqualValues(t, 1, late.Load(), "onLate for a copy that outlasted the bound")

	h := expose(t, &tb, 8)
	require.NoError(t, h.CloseWithin(time.Minute, func() { late.Add(1) }))
	assert.EqualValues(t, 1, late.Load(), "onLate with nothing under way")
}

// nowhere is a space the host cannot touch and no transfer path reaches.
type nowhere struct{}

func (nowhere) Name() string { return "nowhere" }
func (nowhere) Properties() memspace.Properties {
	return memspace.Properties{Kind: "onesided-test-nowhere", Device: 0, DeviceAccessible: true}
}
func (nowhere) Allocate(int, int) (memspace.Block, error) {
	return memspace.Block{}, memspace.ErrNotSupported
}
func (nowhere) Free(memspace.Block) error { return memspace.ErrForeignBlock }

// A region exposed without a host view is Staged, keeps its block's
// address, and is reached through Store and Load, which copy through the
// transfer paths; memory no path reaches is refused.
func TestStagedRegion(t *testing.T) {
	var tb onesided.Table
	mem := make([]byte, 64)
	b, err := memspace.FromSlice(mem)
	require.NoError(t, err)
	g := tb.Expose(1, b.Block(), nil)
	require.NotNil(t, g)
	assert.True(t, onesided.Staged(g.Key()))
	assert.Equal(t, uint64(b.Block().Addr()), g.Key().Addr)
	assert.Nil(t, g.Data())
	assert.Equal(t, 64, g.Len())
	host := expose(t, &tb, 8)
	assert.False(t, onesided.Staged(host.Key()), "a host region")

	found, _ := tb.Find(g.Key(), 10, 5)
	require.Same(t, g, found)
	require.NoError(t, g.Store(testwait.Ctx(t), 10, []byte("hello")))
	out := make([]byte, 5)
	require.NoError(t, g.Load(testwait.Ctx(t), 10, out))
	found.Done()
	assert.Equal(t, "hello", string(out))
	assert.Equal(t, "hello", string(mem[10:15]))

	_, err = onesided.HostView(memspace.NewBlock(nowhere{}, 4096, 64, nil))
	assert.ErrorIs(t, err, memspace.ErrNotSupported)
	view, err := onesided.HostView(b.Block())
	require.NoError(t, err)
	assert.Len(t, view, 64)
}
