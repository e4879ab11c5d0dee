package conformance

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/xpu-go/xpu/executor"
	"github.com/xpu-go/xpu/memspace"
	"github.com/xpu-go/xpu/transfer"
)

// TestTransfer checks copies between every ordered pair of the spaces
// newSpaces makes, and Go memory (memspace.GoHeap, through FromSlice):
// bytes equal after transfer.CopyBlock and, when a Streamer is given with
// the Streams option, after transfer.CopyBlockAsync and a wait on its event;
// length mismatches; typed copies; memmove semantics within a space; and
// that a pair with no path is refused with ErrNotSupported naming both
// spaces.
//
// Large copies are checked once per path (per kinds and devices of the two
// sides): at every size the host path distinguishes, on either side of its
// split points and up to tens of MiB ("copy/sizes", sync and on streams),
// between separate blocks at odd, different offsets on both sides
// ("copy/offsets"), and overlapping within a block, both ways
// ("copy/overlap"), so that a path which goes wrong only past a split
// point, or ignores where in its allocation a block starts, is seen.
//
// A pair with no registered path (transfer.Lookup fails) is skipped with
// that reason: the suite tests the paths a backend offers, in full. Data in
// a space with no path to the host cannot be checked, and its pairs are
// skipped the same way.
//
// newSpaces is called once per case and releases the spaces with
// t.Cleanup; the suite frees every block it allocates before that.
//
// The suite ends with the case "transfer/no-leak", which fails when a goroutine
// started during the suite is still running once every other case has ended
// and closed what it opened; it must not run beside tests that start
// goroutines of their own.
func TestTransfer(t *testing.T, newSpaces func(t *testing.T) []memspace.Space, opts ...Option) {
	t.Helper()
	s := newSuite(t, "transfer", opts)
	defer s.finish(t)
	defer s.watchLeaks(t)()
	open := func(c *tcase) []memspace.Space {
		c.Helper()
		sps := newSpaces(c.T)
		for i, sp := range sps {
			if sp == nil {
				c.Fatalf("conformance: the factory returned a nil space at index %d", i)
			}
		}
		for _, sp := range sps {
			if sameSpace(sp, memspace.GoHeap) {
				return sps
			}
		}
		return append(sps, memspace.GoHeap)
	}
	r := s.root()
	r.run(t, "copy/sync", func(c *tcase) { transferPairs(c, open(c), nil) })
	r.run(t, "copy/async", func(c *tcase) {
		if s.cfg.streams == nil {
			c.Skip("no streamer given (pass conformance.Streams to test stream-ordered copies)")
		}
		sps := open(c)
		st := streamFactory{c: c, s: s.cfg.streams(c.T)}.stream()
		transferPairs(c, sps, st)
	})
	r.run(t, "copy/sizes", func(c *tcase) {
		sps := open(c)
		var st executor.Stream
		if s.cfg.streams != nil {
			st = streamFactory{c: c, s: s.cfg.streams(c.T)}.stream()
		}
		transferSizes(c, sps, st)
	})
	r.run(t, "copy/offsets", func(c *tcase) { transferOffsets(c, open(c)) })
	r.run(t, "copy/overlap", func(c *tcase) { transferOverlap(c, open(c)) })
	r.run(t, "copy/typed", func(c *tcase) { transferTyped(c, open(c)) })
	r.run(t, "invalid", func(c *tcase) { transferInvalid(c, open(c), s.cfg.streams) })
	r.run(t, "unsupported", func(c *tcase) { transferUnsupported(c, open(c), s.cfg.streams) })
}

// endpoint allocates blocks in a space for the transfer cases: through the
// space, or from Go memory for GoHeap.
type endpoint struct {
	sp   memspace.Space
	io   blockIO
	noIO string
}

func endpoints(sps []memspace.Space) []endpoint {
	eps := make([]endpoint, len(sps))
	for i, sp := range sps {
		io, noIO := newBlockIO(sp)
		eps[i] = endpoint{sp: sp, io: io, noIO: noIO}
	}
	return eps
}

func (e endpoint) name() string { return safeName(e.sp.Name()) }

// alloc returns a block of size bytes and the function that frees it.
func (e endpoint) alloc(c *tcase, size int) (memspace.Block, func()) {
	c.Helper()
	if sameSpace(e.sp, memspace.GoHeap) {
		buf, err := memspace.FromSlice(make([]byte, size))
		require.NoError(c, err)
		return buf.Block(), func() {}
	}
	b, err := e.sp.Allocate(size, 0)
	require.NoError(c, err, "Allocate(%d) in %s", size, e.sp.Name())
	return b, func() { assert.NoError(c, e.sp.Free(b), "Free in %s", e.sp.Name()) }
}

// pairName names the copy from src to dst; spaces that share a name are
// told apart by their index.
func pairName(eps []endpoint, i, j int) string {
	name := func(k int) string {
		n := eps[k].name()
		for l := range eps {
			if l != k && eps[l].name() == n {
				return fmt.Sprintf("%s#%d", n, k)
			}
		}
		return n
	}
	return name(i) + "->" + name(j)
}

// transferPairs copies between every ordered pair of spaces, synchronously
// when st is nil, else on st.
func transferPairs(c *tcase, sps []memspace.Space, st executor.Stream) {
	eps := endpoints(sps)
	for i, src := range eps {
		for j, dst := range eps {
			c.Run(pairName(eps, i, j), func(t *testing.T) {
				pc := &tcase{T: t, ctx: c.ctx, name: c.name, cfg: c.cfg}
				copyPair(pc, src, dst, st)
			})
		}
	}
}

func copyPair(c *tcase, src, dst endpoint, st executor.Stream) {
	if _, err := transfer.Lookup(dst.sp, src.sp); err != nil {
		c.Skipf("no path: %v", err)
	}
	for _, e := range []endpoint{src, dst} {
		if e.noIO != "" {
			c.Skip(e.noIO)
		}
	}
	for k, size := range fitAll([]memspace.Space{src.sp, dst.sp}).sizes(c, []int{1, 4095, 1 << 20}) {
		sb, freeS := src.alloc(c, size)
		db, freeD := dst.alloc(c, size)
		want := pattern(k+3, size)
		require.NoError(c, src.io.write(c.ctx, sb, want))
		require.NoError(c, dst.io.write(c.ctx, db, pattern(k+77, size))) // stale bytes to be replaced
		if st == nil {
			require.NoError(c, transfer.CopyBlock(c.ctx, db, sb), "CopyBlock of %d bytes", size)
		} else {
			ev, err := transfer.CopyBlockAsync(st, db, sb)
			require.NoError(c, err, "CopyBlockAsync of %d bytes", size)
			require.NotNil(c, ev, "CopyBlockAsync returned no event")
			require.NoError(c, ev.Wait(c.ctx), "Wait of the copy's event")
		}
		got, err := dst.io.read(c.ctx, db)
		require.NoError(c, err)
		assert.Empty(c, diff(want, got), "%d bytes %s -> %s", size, src.sp.Name(), dst.sp.Name())
		src2, err := src.io.read(c.ctx, sb)
		require.NoError(c, err)
		assert.Empty(c, diff(want, src2), "the source of a %d-byte copy changed", size)
		freeD()
		freeS()
	}
}

func transferOverlap(c *tcase, sps []memspace.Space) {
	type where struct {
		kind   string
		device int
	}
	seen := map[where]bool{} // the large copies run once per kind of memory and device
	for _, e := range endpoints(sps) {
		if sameSpace(e.sp, memspace.GoHeap) {
			continue // covered by the host spaces; nothing of the backend's
		}
		p := e.sp.Properties()
		large := !seen[where{p.Kind, p.Device}]
		seen[where{p.Kind, p.Device}] = true
		c.Run(e.name(), func(t *testing.T) {
			c := &tcase{T: t, ctx: c.ctx, name: c.name, cfg: c.cfg}
			if _, err := transfer.Lookup(e.sp, e.sp); err != nil {
				c.Skipf("no path within the space: %v", err)
			}
			if e.noIO != "" {
				c.Skip(e.noIO)
			}
			const n = 4096
			b, free := e.alloc(c, n)
			defer free()
			for _, shift := range []int{1, -1, 100, -100} {
				orig := pattern(shift+1000, n)
				require.NoError(c, e.io.write(c.ctx, b, orig))
				const l = 3000
				so, do := 500, 500+shift
				sb, err := b.Slice(so, l)
				require.NoError(c, err)
				db, err := b.Slice(do, l)
				require.NoError(c, err)
				require.NoError(c, transfer.CopyBlock(c.ctx, db, sb), "overlapping CopyBlock shifted by %d", shift)
				want := append([]byte(nil), orig...)
				copy(want[do:do+l], orig[so:so+l]) // Go's copy is a memmove
				got, err := e.io.read(c.ctx, b)
				require.NoError(c, err)
				assert.Empty(c, diff(want, got), "overlapping copy shifted by %d is not a memmove", shift)
			}
			if large {
				largeOverlap(c, e)
			}
		})
	}
}

func transferTyped(c *tcase, sps []memspace.Space) {
	eps := endpoints(sps)
	const n = 1001
	want := make([]vec4, n)
	for i := range want {
		want[i] = vec4{float32(i), 1 / float32(i+1), -float32(i), 7}
	}
	for i, a := range eps {
		for j, b := range eps {
			c.Run(pairName(eps, i, j), func(t *testing.T) {
				c := &tcase{T: t, ctx: c.ctx, name: c.name, cfg: c.cfg}
				for _, p := range [][2]memspace.Space{{a.sp, memspace.GoHeap}, {b.sp, a.sp}, {memspace.GoHeap, b.sp}} {
					if _, err := transfer.Lookup(p[0], p[1]); err != nil {
						c.Skipf("no path: %v", err)
					}
				}
				// Go memory -> a -> b -> Go memory.
				host, err := memspace.FromSlice(want)
				require.NoError(c, err)
				ab, freeA := typedBuf[vec4](c, a.sp, n)
				defer freeA()
				bb, freeB := typedBuf[vec4](c, b.sp, n)
				defer freeB()
				require.NoError(c, transfer.Copy(c.ctx, ab, host), "Copy Go memory -> %s", a.sp.Name())
				require.NoError(c, transfer.Copy(c.ctx, bb, ab), "Copy %s -> %s", a.sp.Name(), b.sp.Name())
				got := make([]vec4, n)
				out, err := memspace.FromSlice(got)
				require.NoError(c, err)
				require.NoError(c, transfer.Copy(c.ctx, out, bb), "Copy %s -> Go memory", b.sp.Name())
				assert.Equal(c, want, got, "vec4 through %s and %s", a.sp.Name(), b.sp.Name())
				// A typed copy of a length mismatch is refused.
				short, err := out.Slice(0, n-1)
				require.NoError(c, err)
				assert.ErrorIs(c, transfer.Copy(c.ctx, short, bb), transfer.ErrInvalidArgument, "Copy of %d elements into %d", n, n-1)
			})
		}
	}
}

// typedBuf allocates n elements of T in sp (Go memory for GoHeap).
func typedBuf[T any](c *tcase, sp memspace.Space, n int) (*memspace.Buffer[T], func()) {
	c.Helper()
	if sameSpace(sp, memspace.GoHeap) {
		b, err := memspace.FromSlice(make([]T, n))
		require.NoError(c, err)
		return b, func() {}
	}
	b, err := memspace.Alloc[T](sp, n)
	require.NoError(c, err, "Alloc in %s", sp.Name())
	return b, func() { assert.NoError(c, b.Free(), "Free in %s", sp.Name()) }
}

func transferInvalid(c *tcase, sps []memspace.Space, streams func(*testing.T) executor.Streamer) {
	var st executor.Stream
	if streams != nil {
		st = streamFactory{c: c, s: streams(c.T)}.stream()
	}
	for _, e := range endpoints(sps) {
		a, freeA := e.alloc(c, 100)
		b, freeB := e.alloc(c, 101)
		assert.ErrorIs(c, transfer.CopyBlock(c.ctx, a, b), transfer.ErrInvalidArgument, "CopyBlock of 101 bytes into 100 in %s", e.sp.Name())
		assert.ErrorIs(c, transfer.CopyBlock(c.ctx, b, a), transfer.ErrInvalidArgument, "CopyBlock of 100 bytes into 101 in %s", e.sp.Name())
		assert.ErrorIs(c, transfer.CopyBlock(c.ctx, memspace.Block{}, a), transfer.ErrInvalidArgument, "CopyBlock into the zero Block")
		if st != nil {
			_, err := transfer.CopyBlockAsync(st, a, b)
			assert.ErrorIs(c, err, transfer.ErrInvalidArgument, "CopyBlockAsync of 101 bytes into 100 in %s", e.sp.Name())
		}
		ctx, cancel := context.WithCancel(c.ctx)
		cancel()
		b2, err := b.Slice(0, 100)
		require.NoError(c, err)
		assert.ErrorIs(c, transfer.CopyBlock(ctx, a, b2), context.Canceled, "CopyBlock with a canceled context")
		freeB()
		freeA()
	}
	if st != nil {
		require.NoError(c, st.Synchronize(c.ctx), "the stream after refused copies")
	}
}

func transferUnsupported(c *tcase, sps []memspace.Space, streams func(*testing.T) executor.Streamer) {
	fake := &opaqueSpace{name: "conformance-opaque"}
	fb, err := fake.Allocate(64, 0)
	require.NoError(c, err)
	defer func() { _ = fake.Free(fb) }()
	var st executor.Stream
	if streams != nil {
		st = streamFactory{c: c, s: streams(c.T)}.stream()
	}
	for _, e := range endpoints(sps) {
		b, free := e.alloc(c, 64)
		for _, dir := range []struct {
			dst, src memspace.Block
		}{{b, fb}, {fb, b}} {
			err := transfer.CopyBlock(c.ctx, dir.dst, dir.src)
			what := fmt.Sprintf("CopyBlock %s -> %s", dir.src.Space().Name(), dir.dst.Space().Name())
			if assert.ErrorIs(c, err, transfer.ErrNotSupported, what) {
				msg := err.Error()
				assert.True(c, strings.Contains(msg, e.sp.Name()) && strings.Contains(msg, fake.Name()),
					"%s: the error %q does not name both spaces", what, msg)
			}
			if st != nil {
				_, err := transfer.CopyBlockAsync(st, dir.dst, dir.src)
				assert.ErrorIs(c, err, transfer.ErrNotSupported, "CopyBlockAsync %s -> %s", dir.src.Space().Name(), dir.dst.Space().Name())
			}
		}
		free()
	}
	if st != nil {
		err := st.Synchronize(c.ctx)
		assert.False(c, errors.Is(err, transfer.ErrNotSupported), "a refused async copy left its error on the stream: %v", err)
	}
}
