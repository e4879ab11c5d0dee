//go:build linux

package shm

import (
	"os"
	"sync"
	"sync/atomic"
	"testing"
	"time"
	"unsafe"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/xpu-go/xpu/internal/tooling/testwait"
)

// Each side publishes in its own directory and copies through the
// other's: a range is entered only under the key, address and length it
// was published with, and not once withdrawn.
func TestDirs(t *testing.T) {
	a, b := pair(t, MinRing, 0)
	aOwn, aPeer := a.Dirs()
	bOwn, bPeer := b.Dirs()
	bOwn.Publish(0, 5, 1, 1)
	require.True(t, aPeer.Enter(0, 5, 1, 1), "the attacher's directory is the creator's peer's")
	aPeer.Leave(0)
	assert.True(t, aOwn.Free(0), "and not the creator's own")

	mem := make([]byte, 100)
	addr := uint64(uintptr(unsafe.Pointer(&mem[0])))
	require.True(t, aOwn.Free(7))
	assert.False(t, bPeer.Enter(7, 42, addr, 100), "nothing published")
	aOwn.Publish(7, 42, addr, 100)
	assert.False(t, aOwn.Free(7))
	for _, c := range []struct {
		key, addr, n uint64
	}{{43, addr, 100}, {42, addr + 1, 100}, {42, addr, 99}, {0, addr, 100}} {
		assert.False(t, bPeer.Enter(7, c.key, c.addr, c.n), "%+v", c)
	}
	assert.Zero(t, aOwn.Busy(7), "a refused Enter leaves no count")
	assert.False(t, bPeer.Enter(6, 42, addr, 100), "another slot")
	assert.False(t, bPeer.Enter(-1, 42, addr, 100))
	assert.False(t, bPeer.Enter(DirSlots, 42, addr, 100))

	require.True(t, bPeer.Enter(7, 42, addr, 100))
	require.NoError(t, WriteTo(os.Getpid(), addr+10, []byte("copied")))
	assert.Equal(t, uint64(1), aOwn.Busy(7))
	aOwn.Withdraw(7)
	assert.False(t, aOwn.Free(7), "a copy is under way")
	assert.False(t, bPeer.Enter(7, 42, addr, 100), "withdrawn")
	bPeer.Leave(7)
	assert.True(t, aOwn.Free(7))
	assert.Equal(t, "copied", string(mem[10:16]))
}

// Copiers enter and leave a slot while its publisher withdraws it: once
// the withdrawal has seen no copy under way, no copier is inside.
func TestDirWithdrawRace(t *testing.T) {
	a, b := pair(t, MinRing, 0)
	own, _ := a.Dirs()
	_, peer := b.Dirs()
	var inside atomic.Int64
	for round := range 20 {
		key := uint64(round + 1)
		own.Publish(3, key, 4096, 64)
		var wg sync.WaitGroup
		stop := make(chan struct{})
		for range 3 {
			wg.Go(func() {
				for {
					select {
					case <-stop:
						return
					default:
					}
					if peer.Enter(3, key, 4096, 64) {
						inside.Add(1)
						inside.Add(-1)
						peer.Leave(3)
					}
				}
			})
		}
		time.Sleep(50 * time.Microsecond)
		own.Withdraw(3)
		deadline := time.Now().Add(stallAfter)
		for own.Busy(3) != 0 && time.Now().Before(deadline) {
		}
		if n := own.Busy(3); n != 0 {
			close(stop)
			testwait.Group(t, &wg, "the copiers, stopped")
			t.Fatalf("round %d: %d copies still counted %v after the withdrawal", round, n, stallAfter)
		}
		require.Zero(t, inside.Load(), "round %d: a copier inside a withdrawn range", round)
		close(stop)
		testwait.Group(t, &wg, "the copiers, stopped")
		require.True(t, own.Free(3))
	}
}
