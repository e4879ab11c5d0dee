package memspace_test

import (
	"strings"
	"testing"
	"unsafe"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/xpu-go/xpu/memspace"
)

// hostBlock returns a block of the fake host space viewing mem.
func hostBlock(s memspace.Space, mem []byte) memspace.Block {
	p := unsafe.Pointer(unsafe.SliceData(mem))
	return memspace.NewBlock(s, memspace.Addr(uintptr(p)), len(mem), p)
}

func TestBlockAccessors(t *testing.T) {
	dev := newDevice(0)
	b := memspace.NewBlock(dev, 0x1000, 256, nil)
	assert.Equal(t, memspace.Space(dev), b.Space())
	assert.Equal(t, memspace.Addr(0x1000), b.Addr())
	assert.Equal(t, 256, b.Len())
	assert.False(t, b.IsZero())
	assert.True(t, memspace.Block{}.IsZero())
	assert.Nil(t, memspace.Block{}.Space())
	assert.Equal(t, "fakedev[0x1000+256]", b.String())
	assert.Equal(t, "<nil>[0x0+0]", memspace.Block{}.String())
}

func TestBlockSliceBounds(t *testing.T) {
	mem := make([]byte, 100)
	host := newHost(0)
	b := hostBlock(host, mem)
	for _, c := range []struct{ off, n int }{{-1, 1}, {0, -1}, {101, 0}, {0, 101}, {50, 51}, {100, 1}} {
		_, err := b.Slice(c.off, c.n)
		assert.ErrorIs(t, err, memspace.ErrInvalidArgument, "[%d, +%d)", c.off, c.n)
	}
	for _, c := range []struct{ off, n int }{{0, 100}, {0, 0}, {100, 0}, {10, 20}, {99, 1}} {
		s, err := b.Slice(c.off, c.n)
		require.NoError(t, err, "[%d, +%d)", c.off, c.n)
		assert.Equal(t, b.Addr()+memspace.Addr(c.off), s.Addr())
		assert.Equal(t, c.n, s.Len())
		assert.Equal(t, memspace.Space(host), s.Space())
		if c.n == 0 {
			assert.Nil(t, s.HostPointer(), "an empty slice keeps no host pointer (it could point past the end)")
			bs, err := s.Bytes()
			assert.NoError(t, err)
			assert.Empty(t, bs)
		} else {
			assert.Equal(t, unsafe.Add(b.HostPointer(), c.off), s.HostPointer())
		}
	}
	// A slice views the same memory.
	s, err := b.Slice(10, 20)
	require.NoError(t, err)
	sb, err := s.Bytes()
	require.NoError(t, err)
	sb[0], sb[19] = 7, 9
	assert.Equal(t, byte(7), mem[10])
	assert.Equal(t, byte(9), mem[29])

	// Device blocks slice by address arithmetic only.
	d := memspace.NewBlock(newDevice(0), 1<<40, 4096, nil)
	ds, err := d.Slice(512, 1024)
	require.NoError(t, err)
	assert.Equal(t, memspace.Addr(1<<40+512), ds.Addr())
	assert.Nil(t, ds.HostPointer())
	_, err = d.Slice(4096, 1)
	require.ErrorIs(t, err, memspace.ErrInvalidArgument)
}

func TestBlockBytes(t *testing.T) {
	mem := make([]byte, 64)
	b := hostBlock(newHost(0), mem)
	assert.True(t, b.HostAccessible())
	bs, err := b.Bytes()
	require.NoError(t, err)
	require.Len(t, bs, 64)
	bs[63] = 42
	assert.Equal(t, byte(42), mem[63], "Bytes aliases the memory")

	d := memspace.NewBlock(newDevice(0), 1<<40, 64, nil)
	assert.False(t, d.HostAccessible())
	_, err = d.Bytes()
	require.ErrorIs(t, err, memspace.ErrNotHostAccessible)
	require.ErrorIs(t, err, memspace.ErrNotSupported)
	assert.Contains(t, err.Error(), "fakedev")

	empty := memspace.NewBlock(newDevice(0), 1<<40, 0, nil)
	bs, err = empty.Bytes()
	require.NoError(t, err, "an empty block has nothing to hide")
	assert.Empty(t, bs)
	assert.False(t, empty.HostAccessible(), "an empty block of device memory")
	assert.True(t, memspace.NewBlock(newHost(0), 0, 0, nil).HostAccessible(), "an empty block of host memory")
	assert.False(t, memspace.Block{}.HostAccessible())
	_, err = memspace.Block{}.Bytes()
	require.NoError(t, err)
}

func TestOverlaps(t *testing.T) {
	dev, other := newDevice(0), newDevice(0)
	blk := func(s memspace.Space, addr, n int) memspace.Block {
		return memspace.NewBlock(s, memspace.Addr(addr), n, nil)
	}
	a := blk(dev, 1000, 100)
	for _, c := range []struct {
		b    memspace.Block
		want bool
	}{
		{blk(dev, 1000, 100), true},
		{blk(dev, 1050, 10), true},
		{blk(dev, 900, 101), true},
		{blk(dev, 1099, 50), true},
		{blk(dev, 900, 2000), true},
		{blk(dev, 1100, 10), false},
		{blk(dev, 900, 100), false},
		{blk(dev, 1050, 0), false},
		{blk(other, 1000, 100), false},
		{memspace.Block{}, false},
	} {
		assert.Equal(t, c.want, memspace.Overlaps(a, c.b), "%v", c.b)
		assert.Equal(t, c.want, memspace.Overlaps(c.b, a), "symmetric: %v", c.b)
	}
}

func TestSliceStringMentionsSpace(t *testing.T) {
	b := memspace.NewBlock(newDevice(0), 1<<40, 8, nil)
	_, err := b.Slice(4, 8)
	require.Error(t, err)
	assert.True(t, strings.Contains(err.Error(), "8-byte block"), err.Error())
}
