//go:build cgo

package cuda

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/xpu-go/xpu/memspace"
)

// A driver without the IPC entry points: Share and Import fail with
// memspace.ErrNotShareable, saying why, and nothing else changes.
func TestIPCDriverWithoutIPC(t *testing.T) {
	lib, err := load("")
	require.NoError(t, err)
	require.True(t, lib.HasIPC(), "the driver under test has the IPC entry points")
	sp, err := newSpace(lib.WithoutIPC(), KindDevice, 0)
	require.NoError(t, err)
	defer func() { assert.NoError(t, sp.Close()) }()
	b, err := sp.Allocate(4096, 0)
	require.NoError(t, err)
	defer func() { assert.NoError(t, sp.Free(b)) }()
	_, err = sp.Share(b)
	require.ErrorIs(t, err, memspace.ErrNotShareable)
	assert.Contains(t, err.Error(), "lacks the IPC entry points")
	sh := memspace.Shared{Kind: ShareKind, Handle: make([]byte, 64), Size: 4096, Len: 4096}
	_, done, err := sp.Import(sh)
	done()
	require.ErrorIs(t, err, memspace.ErrNotShareable)
	assert.Contains(t, err.Error(), "lacks the IPC entry points")
}
