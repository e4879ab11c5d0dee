package cpu_test

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"
	"unsafe"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/xpu-go/xpu/backends/cpu"
	"github.com/xpu-go/xpu/memspace"
)

func newSpace(t *testing.T, opts cpu.SpaceOptions) *cpu.Space {
	t.Helper()
	s := cpu.NewSpace(opts)
	t.Cleanup(func() { _ = s.Close() })
	return s
}

func TestSpaceProperties(t *testing.T) {
	s := newSpace(t, cpu.SpaceOptions{})
	p := s.Properties()
	assert.Equal(t, "host", p.Kind)
	assert.Equal(t, -1, p.Device)
	assert.True(t, p.HostAccessible)
	assert.True(t, p.Pageable)
	assert.True(t, p.Atomics)
	assert.Equal(t, cpu.DefaultAlignment, p.Alignment)
	assert.Equal(t, "cpu", s.Name())
}

// Every power-of-two alignment from 1 to 2 MiB is honoured for sizes on
// both sides of the slab limit and of the page size, and the memory is
// zeroed, writable to its last byte and not shared between blocks.
func TestSpaceAlignment(t *testing.T) {
	s := newSpace(t, cpu.SpaceOptions{})
	sizes := []int{1, 7, 64, 100, 2048, 2049, 4096, 5000, 1 << 20}
	var blocks []memspace.Block
	for align := 1; align <= 1<<21; align <<= 1 {
		for _, size := range sizes {
			b, err := s.Allocate(size, align)
			require.NoError(t, err, "size %d align %d", size, align)
			want := max(align, cpu.DefaultAlignment)
			assert.Zero(t, uintptr(b.Addr())%uintptr(want), "size %d align %d: %v", size, align, b)
			assert.Equal(t, size, b.Len())
			assert.Equal(t, uintptr(b.Addr()), uintptr(b.HostPointer()))
			buf, err := b.Bytes()
			require.NoError(t, err)
			assert.Zero(t, buf[0])
			assert.Zero(t, buf[size-1])
			buf[0], buf[size-1] = byte(align), byte(size)
			blocks = append(blocks, b)
		}
	}
	// No two blocks overlap, and each kept what was written to it.
	for i, a := range blocks {
		buf, _ := a.Bytes()
		if !assert.Equal(t, byte(a.Len()), buf[a.Len()-1], "block %v", a) {
			break
		}
		if i > 0 {
			assert.False(t, memspace.Overlaps(a, blocks[i-1]))
		}
	}
	for _, b := range blocks {
		require.NoError(t, s.Free(b))
	}
	st := s.Stats()
	assert.Zero(t, st.InUse)
	assert.Zero(t, st.Live)
	assert.Equal(t, int64(len(blocks)), st.Allocs)
	assert.Equal(t, int64(len(blocks)), st.Frees)
}

func TestSpaceLargeAlignment(t *testing.T) {
	s := newSpace(t, cpu.SpaceOptions{})
	for _, align := range []int{1 << 22, 1 << 26, memspace.MaxAlign} {
		b, err := s.Allocate(100, align)
		require.NoError(t, err)
		assert.Zero(t, uintptr(b.Addr())%uintptr(align))
		// Over-mapping was trimmed: the space holds about one page, not
		// the alignment's worth.
		assert.LessOrEqual(t, s.Stats().Reserved, int64(1<<16), "align %d", align)
		require.NoError(t, s.Free(b))
	}
}

func TestSpaceBadArguments(t *testing.T) {
	s := newSpace(t, cpu.SpaceOptions{})
	for _, tc := range []struct{ size, align int }{
		{0, 0}, {-1, 0}, {-1 << 40, 64}, {64, 3}, {64, -64}, {64, 96}, {64, memspace.MaxAlign << 1},
	} {
		_, err := s.Allocate(tc.size, tc.align)
		assert.ErrorIs(t, err, memspace.ErrInvalidArgument, "size %d align %d", tc.size, tc.align)
	}
	assert.Equal(t, memspace.Stats{}, s.Stats())
}

func TestSpaceHugeSizes(t *testing.T) {
	s := newSpace(t, cpu.SpaceOptions{})
	for _, size := range []int{1 << 62, 1<<63 - 1, 1 << 50} {
		_, err := s.Allocate(size, 0)
		assert.ErrorIs(t, err, memspace.ErrOutOfMemory, "size %d", size)
	}
	_, err := s.Allocate(1<<62, memspace.MaxAlign)
	assert.ErrorIs(t, err, memspace.ErrOutOfMemory)
	// The space is still usable.
	b, err := s.Allocate(4096, 0)
	require.NoError(t, err)
	require.NoError(t, s.Free(b))
	assert.Zero(t, s.Stats().InUse)
}

func TestSpaceLimit(t *testing.T) {
	const limit = 1 << 20
	s := newSpace(t, cpu.SpaceOptions{Limit: limit})
	_, err := s.Allocate(limit+1, 0)
	require.ErrorIs(t, err, memspace.ErrOutOfMemory)
	a, err := s.Allocate(limit/2, 0)
	require.NoError(t, err)
	free, total, err := s.Available()
	require.NoError(t, err)
	assert.Equal(t, int64(limit), total)
	assert.Equal(t, int64(limit/2), free)
	b, err := s.Allocate(limit/2, 0)
	require.NoError(t, err)
	_, err = s.Allocate(1, 0)
	require.ErrorIs(t, err, memspace.ErrOutOfMemory, "the limit counts small blocks too")
	require.NoError(t, s.Free(a))
	c, err := s.Allocate(100, 0)
	require.NoError(t, err, "room came back after Free")
	require.NoError(t, s.Free(b))
	require.NoError(t, s.Free(c))
	free, _, _ = s.Available()
	assert.Equal(t, int64(limit), free)
}

func TestSpaceAvailableWithoutLimit(t *testing.T) {
	s := newSpace(t, cpu.SpaceOptions{})
	free, total, err := s.Available()
	require.NoError(t, err)
	if total == -1 {
		t.Skip("no /proc/meminfo here")
	}
	assert.Positive(t, total)
	assert.Positive(t, free)
	assert.LessOrEqual(t, free, total)
}

func TestSpaceDoubleFree(t *testing.T) {
	s := newSpace(t, cpu.SpaceOptions{})
	for _, size := range []int{10, 3000, 1 << 20} {
		t.Run(fmt.Sprint(size), func(t *testing.T) {
			b, err := s.Allocate(size, 0)
			require.NoError(t, err)
			sub, err := b.Slice(1, size-1)
			require.NoError(t, err)
			assert.ErrorIs(t, s.Free(sub), memspace.ErrDoubleFree, "sub-slice")
			head, err := b.Slice(0, size-1)
			require.NoError(t, err)
			assert.ErrorIs(t, s.Free(head), memspace.ErrDoubleFree, "sub-slice at the start")
			forged := memspace.NewBlock(s, b.Addr()+1<<40, size, nil)
			assert.ErrorIs(t, s.Free(forged), memspace.ErrDoubleFree, "never allocated")
			require.NoError(t, s.Free(b))
			err = s.Free(b)
			assert.ErrorIs(t, err, memspace.ErrDoubleFree)
			assert.ErrorIs(t, err, memspace.ErrInvalidArgument)
			// Still usable, ledger right.
			c, err := s.Allocate(size, 0)
			require.NoError(t, err)
			require.NoError(t, s.Free(c))
			assert.Zero(t, s.Stats().Live)
			assert.Zero(t, s.Stats().InUse)
		})
	}
	assert.ErrorIs(t, s.Free(memspace.Block{}), memspace.ErrInvalidArgument)
}

func TestSpaceForeignBlock(t *testing.T) {
	a := newSpace(t, cpu.SpaceOptions{})
	b := newSpace(t, cpu.SpaceOptions{})
	blk, err := a.Allocate(100, 0)
	require.NoError(t, err)
	err = b.Free(blk)
	assert.ErrorIs(t, err, memspace.ErrForeignBlock)
	assert.ErrorIs(t, err, memspace.ErrInvalidArgument)
	goBlk, err := memspace.FromSlice([]byte{1, 2, 3})
	require.NoError(t, err)
	assert.ErrorIs(t, a.Free(goBlk.Block()), memspace.ErrForeignBlock)
	require.NoError(t, a.Free(blk), "the block's own space still frees it")
	assert.Equal(t, int64(1), a.Stats().Frees)
	assert.Zero(t, b.Stats().Frees)
}

func TestSpaceLookup(t *testing.T) {
	s := newSpace(t, cpu.SpaceOptions{})
	var blocks []memspace.Block
	for _, size := range []int{1, 64, 100, 2048, 4096, 70000, 1 << 20} {
		for range 3 {
			b, err := s.Allocate(size, 0)
			require.NoError(t, err)
			blocks = append(blocks, b)
		}
	}
	for _, b := range blocks {
		for _, off := range []int{0, b.Len() / 2, b.Len() - 1} {
			got, ok := s.Lookup(b.Addr() + memspace.Addr(off))
			require.True(t, ok, "%v+%d", b, off)
			assert.Equal(t, b, got)
		}
		// One past the end is not in the block (it may be in another).
		if got, ok := s.Lookup(b.Addr() + memspace.Addr(b.Len())); ok {
			assert.NotEqual(t, b, got)
		}
	}
	_, ok := s.Lookup(0)
	assert.False(t, ok)
	goMem := make([]byte, 10)
	_, ok = s.Lookup(memspace.Addr(uintptr(unsafe.Pointer(&goMem[0]))))
	assert.False(t, ok)
	for _, b := range blocks {
		require.NoError(t, s.Free(b))
		_, ok := s.Lookup(b.Addr())
		assert.False(t, ok, "freed %v", b)
	}
}

// Small blocks share slabs; emptied slabs go back to the system.
func TestSpaceSlabsReturn(t *testing.T) {
	s := newSpace(t, cpu.SpaceOptions{})
	var blocks []memspace.Block
	for range 5000 {
		b, err := s.Allocate(64, 0)
		require.NoError(t, err)
		blocks = append(blocks, b)
	}
	st := s.Stats()
	assert.Equal(t, int64(5000*64), st.InUse)
	assert.Less(t, st.Reserved, int64(5000*64*2), "a slot costs its size, not a page")
	for _, b := range blocks {
		require.NoError(t, s.Free(b))
	}
	assert.LessOrEqual(t, s.Stats().Reserved, int64(64<<10), "at most one slab kept")
}

func TestSpaceConcurrent(t *testing.T) {
	s := newSpace(t, cpu.SpaceOptions{})
	concurrently(t, 4, func(g int) error {
		r := rand.New(rand.NewPCG(uint64(g), 1))
		var live []memspace.Block
		for range 2000 {
			if len(live) > 0 && r.IntN(2) == 0 {
				k := r.IntN(len(live))
				b := live[k]
				buf, _ := b.Bytes()
				if buf[0] != byte(g) || buf[b.Len()-1] != byte(g) {
					return errors.New("block content changed")
				}
				if err := s.Free(b); err != nil {
					return err
				}
				live = append(live[:k], live[k+1:]...)
				continue
			}
			size := 1 + r.IntN(8192)
			b, err := s.Allocate(size, 0)
			if err != nil {
				return err
			}
			buf, _ := b.Bytes()
			for j := range buf {
				buf[j] = byte(g)
			}
			live = append(live, b)
		}
		for _, b := range live {
			if err := s.Free(b); err != nil {
				return err
			}
		}
		return nil
	})
	st := s.Stats()
	assert.Zero(t, st.InUse)
	assert.Zero(t, st.Live)
	assert.Equal(t, st.Allocs, st.Frees)
	assert.Positive(t, st.Peak)
}

func TestSpaceClose(t *testing.T) {
	s := cpu.NewSpace(cpu.SpaceOptions{})
	a, err := s.Allocate(100, 0)
	require.NoError(t, err)
	_, err = s.Allocate(1<<20, 0)
	require.NoError(t, err)
	err = s.Close()
	require.Error(t, err)
	assert.Contains(t, err.Error(), "2 blocks")
	_, err = s.Allocate(1, 0)
	assert.ErrorIs(t, err, memspace.ErrClosed)
	assert.ErrorIs(t, s.Free(a), memspace.ErrClosed)
	assert.ErrorIs(t, s.Close(), memspace.ErrClosed)
	st := s.Stats()
	assert.Zero(t, st.InUse)
	assert.Zero(t, st.Live)
	assert.Zero(t, st.Reserved)

	clean := cpu.NewSpace(cpu.SpaceOptions{})
	b, err := clean.Allocate(10, 0)
	require.NoError(t, err)
	require.NoError(t, clean.Free(b))
	assert.NoError(t, clean.Close(), "nothing leaked")
}

func TestSpaceHugePages(t *testing.T) {
	s := newSpace(t, cpu.SpaceOptions{HugePages: true})
	b, err := s.Allocate(5<<20, 0)
	require.NoError(t, err)
	assert.Zero(t, uintptr(b.Addr())%(2<<20), "large blocks are aligned for huge pages")
	buf, err := b.Bytes()
	require.NoError(t, err)
	buf[len(buf)-1] = 1
	require.NoError(t, s.Free(b))
}

// memspace.Alloc works over the space: typed buffers of user structs.
func TestSpaceTypedBuffers(t *testing.T) {
	s := newSpace(t, cpu.SpaceOptions{})
	type vec4 struct{ X, Y, Z, W float32 }
	buf, err := memspace.Alloc[vec4](s, 1000)
	require.NoError(t, err)
	v, err := buf.Host()
	require.NoError(t, err)
	for i := range v {
		v[i] = vec4{float32(i), 1, 2, 3}
	}
	assert.Equal(t, float32(999), v[999].X)
	require.NoError(t, buf.Free())
	_, err = memspace.Alloc[*int](s, 1)
	assert.ErrorIs(t, err, memspace.ErrBadElemType)
	assert.Zero(t, s.Stats().Live)
}

// TestNotifyFree checks that observers hear of every allocation freed, and
// of the regions still mapped at Close, and nothing after stop.
func TestNotifyFree(t *testing.T) {
	s := cpu.NewSpace(cpu.SpaceOptions{})
	var mu sync.Mutex
	var got []memspace.Block
	stop := s.NotifyFree(func(b memspace.Block) {
		mu.Lock()
		got = append(got, b)
		mu.Unlock()
	})
	small, err := s.Allocate(100, 0)
	require.NoError(t, err)
	large, err := s.Allocate(4<<20, 0)
	require.NoError(t, err)
	require.NoError(t, s.Free(small))
	require.NoError(t, s.Free(large))
	require.Len(t, got, 2)
	require.Equal(t, small.Addr(), got[0].Addr())
	require.Equal(t, small.Len(), got[0].Len())
	require.Equal(t, large.Addr(), got[1].Addr())
	require.Equal(t, large.Len(), got[1].Len())
	require.Error(t, s.Free(small)) // a double free tells nobody
	require.Len(t, got, 2)

	live, err := s.Allocate(8<<20, 0)
	require.NoError(t, err)
	require.Error(t, s.Close()) // a leak, reported
	covered := false
	for _, r := range got[2:] { // the regions still mapped at Close
		covered = covered || uintptr(r.Addr()) <= uintptr(live.Addr()) &&
			uintptr(r.Addr())+uintptr(r.Len()) >= uintptr(live.Addr())+uintptr(live.Len())
	}
	require.True(t, covered, "no region told at Close covers the live block: %v", got)

	s2 := cpu.NewSpace(cpu.SpaceOptions{})
	n := 0
	stop2 := s2.NotifyFree(func(memspace.Block) { n++ })
	stop2()
	stop2()
	b, err := s2.Allocate(64, 0)
	require.NoError(t, err)
	require.NoError(t, s2.Free(b))
	require.Zero(t, n)
	require.NoError(t, s2.Close())
	stop()
}
