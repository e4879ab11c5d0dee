package conformance

import (
	"errors"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/xpu-go/xpu/memspace"
)

// TestPool checks memspace.Pool over the spaces newUpstream makes: the
// whole TestSpace suite over a pool (under "pool/space/…"), then what a
// caching allocator promises its upstream — freed memory is served again
// from the cache, Trim and Close give the cache back, and the upstream
// ledger returns to where it started once the pool is closed.
//
// newUpstream is called once per case and releases the space with
// t.Cleanup; the suite closes the pool first. The upstream checks need the
// upstream to keep a ledger (memspace.StatsSpace) and are skipped, with that
// reason, when it keeps none.
//
// The suite ends with the case "pool/no-leak", which fails when a goroutine
// started during the suite is still running once every other case has ended
// and closed what it opened; it must not run beside tests that start
// goroutines of their own.
func TestPool(t *testing.T, newUpstream func(t *testing.T) memspace.Space, opts ...Option) {
	t.Helper()
	s := newSuite(t, "pool", opts)
	defer s.finish(t)
	defer s.watchLeaks(t)()
	r := s.root()
	r.group(t, "space", func(t *testing.T, g node) {
		spaceCases(t, g, func(t *testing.T) memspace.Space {
			p, _ := openPool(t, newUpstream, memspace.PoolOptions{})
			return p
		})
	})
	r.run(t, "reuse", func(c *tcase) { poolReuse(c, newUpstream) })
	r.run(t, "trim", func(c *tcase) { poolTrim(c, newUpstream) })
	r.run(t, "close-live", func(c *tcase) { poolCloseLive(c, newUpstream) })
	r.run(t, "upstream-ledger", func(c *tcase) { poolUpstreamLedger(c, newUpstream) })
}

// openPool makes a pool over a fresh upstream. At cleanup it closes the
// pool, then checks that the upstream's ledger is back where it started.
func openPool(t *testing.T, newUpstream func(t *testing.T) memspace.Space, o memspace.PoolOptions) (*memspace.Pool, memspace.StatsSpace) {
	t.Helper()
	up := newUpstream(t)
	if up == nil {
		t.Fatal("conformance: the factory returned a nil upstream space")
	}
	ss, hasStats := memspace.As[memspace.StatsSpace](up)
	var base memspace.Stats
	if hasStats {
		base = ss.Stats()
		t.Cleanup(func() {
			st := ss.Stats()
			if st.InUse != base.InUse || st.Live != base.Live {
				t.Errorf("upstream %s after the pool was closed: InUse %d bytes in %d allocations, want %d in %d "+
					"(the pool kept memory it should have returned)", up.Name(), st.InUse, st.Live, base.InUse, base.Live)
			}
		})
	}
	p, err := memspace.NewPool(up, o)
	require.NoError(t, err, "NewPool(%s, %+v)", up.Name(), o)
	t.Cleanup(func() {
		if err := p.Close(); err != nil && !errors.Is(err, memspace.ErrClosed) {
			t.Errorf("Close of the pool: %v", err)
		}
	})
	if !hasStats {
		return p, nil
	}
	return p, ss
}

// needLedger skips the case when the upstream keeps no ledger.
func needLedger(c *tcase, up memspace.StatsSpace, p *memspace.Pool) {
	c.Helper()
	if up == nil {
		c.Skipf("upstream of %s keeps no ledger (it is not a memspace.StatsSpace)", p.Name())
	}
}

func poolReuse(c *tcase, newUpstream func(*testing.T) memspace.Space) {
	p, up := openPool(c.T, newUpstream, memspace.PoolOptions{})
	needLedger(c, up, p)
	for _, size := range fitOf(p).sizes(c, []int{1, 1000, 100 << 10, 4 << 20}) {
		b, err := p.Allocate(size, 0)
		require.NoError(c, err)
		require.NoError(c, p.Free(b))
		before := up.Stats()
		for range 5 {
			b, err := p.Allocate(size, 0)
			require.NoError(c, err)
			require.NoError(c, p.Free(b))
		}
		after := up.Stats()
		assert.Equal(c, before.Allocs, after.Allocs, "a freed %d-byte block is served again from the cache, not upstream", size)
	}
}

func poolTrim(c *tcase, newUpstream func(*testing.T) memspace.Space) {
	p, up := openPool(c.T, newUpstream, memspace.PoolOptions{})
	needLedger(c, up, p)
	base := up.Stats()
	var blocks []memspace.Block
	for _, size := range fitOf(p).sizes(c, []int{64, 5000, 1 << 20, 3 << 20, 30 << 20}) {
		b, err := p.Allocate(size, 0)
		require.NoError(c, err)
		blocks = append(blocks, b)
	}
	held := up.Stats().InUse - base.InUse
	assert.Positive(c, held, "the pool holds memory from upstream for its live blocks")
	keep := blocks[0]
	for _, b := range blocks[1:] {
		require.NoError(c, p.Free(b))
	}
	released, err := p.Trim()
	require.NoError(c, err, "Trim")
	st := up.Stats()
	assert.Equal(c, held-(st.InUse-base.InUse), released, "Trim reports the bytes it returned upstream")
	assert.Positive(c, st.InUse-base.InUse, "Trim returned memory a live block still uses")
	// The live block still works.
	poolReadback(c, p, keep, 3, "a live block after Trim")
	require.NoError(c, p.Free(keep))
	_, err = p.Trim()
	require.NoError(c, err, "Trim")
	st = up.Stats()
	assert.Equal(c, base.InUse, st.InUse, "upstream InUse after every block was freed and the pool trimmed")
	assert.Equal(c, base.Live, st.Live, "upstream Live after every block was freed and the pool trimmed")
	assert.Zero(c, p.Stats().Reserved, "the pool's Reserved after Trim with nothing live")
	// The pool still allocates after a Trim.
	b, err := p.Allocate(4096, 0)
	require.NoError(c, err, "Allocate after Trim")
	require.NoError(c, p.Free(b))
}

func poolCloseLive(c *tcase, newUpstream func(*testing.T) memspace.Space) {
	p, up := openPool(c.T, newUpstream, memspace.PoolOptions{})
	b, err := p.Allocate(10000, 0)
	require.NoError(c, err)
	require.NoError(c, p.Close(), "Close with a live block")
	_, err = p.Allocate(64, 0)
	assert.ErrorIs(c, err, memspace.ErrClosed, "Allocate after Close")
	poolReadback(c, p, b, 4, "a block live at Close stays valid")
	require.NoError(c, p.Free(b), "Free of a block live at Close")
	assert.ErrorIs(c, p.Free(b), memspace.ErrDoubleFree, "double Free after Close")
	if up != nil {
		assert.Zero(c, p.Stats().InUse, "the closed pool's InUse")
	}
}

func poolUpstreamLedger(c *tcase, newUpstream func(*testing.T) memspace.Space) {
	configs := []memspace.PoolOptions{
		{},
		{MinBlock: 64, SegmentSize: 64 << 10, LargeSegmentSize: 256 << 10, RoundUp: memspace.RoundPow2},
		{MaxCached: -1},
	}
	for i, o := range configs {
		p, up := openPool(c.T, newUpstream, o)
		needLedger(c, up, p)
		// Blocks of up to 1 MiB, about 130 live at once: less on a space
		// too small for them.
		maxBits := 20
		if f := fitOf(p); f.limit != 0 {
			for maxBits > 6 && 150*(1<<maxBits)/(maxBits-3) > f.limit*fitShare/2 {
				maxBits--
			}
			if maxBits < 20 && i == 0 {
				c.Logf("blocks of up to %d bytes, not 1 MiB: %s", 1<<maxBits, f.why)
			}
		}
		rng := rand.New(rand.NewPCG(uint64(i), 11))
		var live []memspace.Block
		for range 400 {
			if len(live) > 0 && rng.IntN(3) == 0 {
				k := rng.IntN(len(live))
				require.NoError(c, p.Free(live[k]))
				live = append(live[:k], live[k+1:]...)
				continue
			}
			size := 1 + rng.IntN(1<<(4+rng.IntN(maxBits-3)))
			align := 0
			if rng.IntN(4) == 0 {
				align = 1 << rng.IntN(16)
			}
			b, err := p.Allocate(size, align)
			require.NoError(c, err, "pool %+v: Allocate(%d, %d)", o, size, align)
			live = append(live, b)
		}
		require.Empty(c, sortedOverlap(live), "pool %+v", o)
		for _, b := range live {
			require.NoError(c, p.Free(b))
		}
		require.NoError(c, p.Close(), "Close of pool %+v", o)
		// openPool's cleanup checks upstream's ledger is back to its start.
	}
}

// poolReadback writes pattern(seed) to b of p and checks it reads back,
// what naming the block in the failure; it does nothing when p's blocks
// cannot be read or written from the host.
func poolReadback(c *tcase, p memspace.Space, b memspace.Block, seed int, what string) {
	c.Helper()
	io, noIO := newBlockIO(p)
	if noIO == "" {
		want := pattern(seed, b.Len())
		require.NoError(c, io.write(c.ctx, b, want))
		got, err := io.read(c.ctx, b)
		require.NoError(c, err)
		assert.Empty(c, diff(want, got), what)
	}
}
