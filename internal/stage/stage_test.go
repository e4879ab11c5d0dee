package stage_test

import (
	"errors"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/xpu-go/xpu/internal/stage"
	"github.com/xpu-go/xpu/memspace"
	"github.com/xpu-go/xpu/xerr"
)

// deviceSpace hands out blocks the host cannot touch, and stages in
// staging (nil: none).
type deviceSpace struct {
	memspace.Space // the Go heap, for the name and what a test leaves alone
	staging        memspace.Space
	freed          int
}

func (d *deviceSpace) Properties() memspace.Properties {
	return memspace.Properties{Kind: "test-device"}
}
func (d *deviceSpace) StagingSpace() memspace.Space { return d.staging }
func (d *deviceSpace) Allocate(n, _ int) (memspace.Block, error) {
	return memspace.NewBlock(d, 4096, n, nil), nil
}
func (d *deviceSpace) Free(memspace.Block) error { d.freed++; return nil }

func TestSpace(t *testing.T) {
	host := &hostSpace{Space: memspace.GoHeap}
	assert.Equal(t, memspace.GoHeap, stage.Space(&deviceSpace{Space: memspace.GoHeap}), "no staging space: the Go heap")
	assert.Equal(t, memspace.Space(host), stage.Space(&deviceSpace{Space: memspace.GoHeap, staging: host}))
	other := &deviceSpace{Space: memspace.GoHeap}
	assert.Equal(t, memspace.GoHeap, stage.Space(&deviceSpace{Space: memspace.GoHeap, staging: other}),
		"a staging space the host cannot touch is not used")
}

// hostSpace is a host-accessible space distinct from the Go heap.
type hostSpace struct{ memspace.Space }

func TestAllocFree(t *testing.T) {
	b := stage.Heap(13)
	require.Equal(t, 13, b.Len())
	p, err := b.Bytes()
	require.NoError(t, err)
	p[12] = 1
	require.NoError(t, stage.Free(b))
	e, err := stage.Alloc(memspace.GoHeap, 0)
	require.NoError(t, err)
	assert.Equal(t, 0, e.Len())

	dev := &deviceSpace{Space: memspace.GoHeap}
	_, err = stage.Alloc(dev, 8)
	require.True(t, errors.Is(err, xerr.ErrNotSupported), "a block without a host mapping: %v", err)
	assert.Equal(t, 1, dev.freed, "the block is given back")
}
