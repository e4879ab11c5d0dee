package nodecoll_test

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/xpu-go/xpu/internal/tooling/testwait"
)

// Collectives called side by side on one rank (a program's error, which
// must cost it order, not memory) run one at a time: two goroutines per
// rank each run a series of broadcasts of the same bytes from the same
// root, which match in any order, and every rank ends with all of them
// done (under -race, which sees the gate's order).
func TestCollectivesSideBySide(t *testing.T) {
	const n, each = 2, 300
	nodes, _, _ := group(t, n)
	onEvery(t, n, func(ctx context.Context, r int) error {
		var wg sync.WaitGroup
		errs := make([]error, 2)
		for g := range 2 {
			wg.Go(func() {
				b := []byte{1, 2, 3, 4, 5, 6, 7, 8}
				for range each {
					if errs[g] = nodes[r].Bcast(ctx, block(t, b), 0); errs[g] != nil {
						return
					}
					if b[7] != 8 {
						errs[g] = fmt.Errorf("rank %d received %v", r, b)
						return
					}
				}
			})
		}
		wg.Wait() // each collective ends by ctx's deadline at the latest
		for _, err := range errs {
			if err != nil {
				return err
			}
		}
		return nil
	})
}

// Close waits for the collective in progress: it returns only after the
// broadcast that waits for its root has ended, and unmaps nothing under
// it.
func TestCloseWaitsForTheCollective(t *testing.T) {
	nodes, _, _ := group(t, 2)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	var bcastDone, closeDone atomic.Bool
	var wg sync.WaitGroup
	wg.Go(func() {
		b := make([]byte, 8)
		assert.NoError(t, nodes[1].Bcast(ctx, block(t, b), 0))
		assert.Equal(t, byte(7), b[0])
		bcastDone.Store(true)
	})
	time.Sleep(20 * time.Millisecond) // the broadcast waits for its root
	wg.Go(func() {
		nodes[1].Close()
		if !bcastDone.Load() {
			t.Error("Close returned before the collective in progress ended")
		}
		closeDone.Store(true)
	})
	time.Sleep(20 * time.Millisecond)
	require.False(t, closeDone.Load(), "Close returned while a collective was in progress")
	require.NoError(t, nodes[0].Bcast(ctx, block(t, []byte{7, 0, 0, 0, 0, 0, 0, 0}), 0))
	testwait.Group(t, &wg, "the broadcast and Close")
}
