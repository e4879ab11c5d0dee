//go:build mpi

package mpi

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestStateEndedWraps runs operations on a state word whose count of ended
// operations is about to wrap: the count in progress and the flags below
// it stay intact, and the wrap (a multiple of paceCalls) makes exit look
// at the clock.
func TestStateEndedWraps(t *testing.T) {
	var c Comm
	c.state.Store(1 - 8*endedUnit) // one reference; 8 operations short of wrapping
	c.yielded.Store(-int64(paceGap))
	for range 16 {
		require.True(t, c.enter())
		assert.Equal(t, int64(2), c.state.Load()&liveMask)
		c.exit()
	}
	assert.Equal(t, int64(1), c.state.Load()&liveMask, "in progress: only the reference")
	assert.Equal(t, uint64(8), uint64(c.state.Load())/uint64(endedUnit), "ended, after wrapping")
	assert.GreaterOrEqual(t, c.yielded.Load(), int64(0), "exit at the wrap paced")

	// A closed word refuses operations and keeps its count.
	c.state.Store(1 + closedBit + 5*endedUnit)
	assert.False(t, c.enter())
	assert.Equal(t, 1+closedBit, c.state.Load()&liveMask)
}

// TestPace checks that pace yields at most once per paceGap.
func TestPace(t *testing.T) {
	var c Comm
	now := int64(time.Since(epoch))
	c.yielded.Store(now)
	c.pace()
	assert.Equal(t, now, c.yielded.Load(), "yielded again within paceGap")
	c.yielded.Store(now - int64(paceGap))
	c.pace()
	assert.Greater(t, c.yielded.Load(), now-int64(paceGap), "no yield after paceGap")
}

// TestSPMDFreeAfterLastCall closes communicators while a call is in
// progress on each (an operation entered by hand, a point-to-point one and
// a direct collective holding the order): Close must leave the MPI
// communicators to the end of that call, and the call's exit free them.
// Run as a rank: Open is collective, like the TestSPMD tests of package
// mpi_test that run beside it.
func TestSPMDFreeAfterLastCall(t *testing.T) {
	if _, _, _, ok := Launched(); !ok {
		t.Skip("runs as a rank of an MPI job; TestRanks launches this binary under mpirun")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for _, kind := range []string{"p2p", "coll"} {
		c, err := Open(ctx, Options{})
		require.NoError(t, err)
		if kind == "p2p" {
			require.True(t, c.enter())
		} else {
			require.NoError(t, c.enterColl("test"))
		}
		require.NoError(t, c.Close())
		select {
		case <-c.freed:
			t.Fatalf("%s: freed while a call was in progress", kind)
		default:
		}
		assert.Equal(t, closedBit|1, c.state.Load()&liveMask&^collBit, kind)
		assert.False(t, c.enter(), "%s: entered a closed communicator", kind)
		if kind == "p2p" {
			c.exit()
		} else {
			c.exitColl()
		}
		select {
		case <-c.freed:
		case <-ctx.Done():
			t.Fatalf("%s: not freed after the last call ended", kind)
		}
		require.NoError(t, c.freeErr, kind)
		assert.Equal(t, closedBit|freedBit, c.state.Load()&liveMask, kind)
	}
}
