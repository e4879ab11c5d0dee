//go:build mpi

package mpi_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/xpu-go/xpu/comm"
	"github.com/xpu-go/xpu/memspace"
)

// TestSPMDCloseRacing closes communicators while goroutines call them on
// the direct path (context.Background: one blocking MPI call each): every
// call completes or fails with comm.ErrClosed, and the MPI communicator is
// freed only once the calls in progress have returned (a use after free
// would crash MPI or fail a call with another error; -race checks the
// rest). The communicators have one rank, so their collectives need no
// peer and run for as long as it takes the Close to land.
func TestSPMDCloseRacing(t *testing.T) {
	c := rank(t)
	spmd(t, c, "close-racing", func(t *testing.T) {
		ctx, cancel := context.WithTimeout(context.Background(), guard)
		defer cancel()
		for round := range 4 {
			self, err := c.Split(ctx, c.Rank(), 0)
			require.NoError(t, err)
			require.Equal(t, 1, self.Size())
			const workers = 4
			started := make(chan struct{}, workers)
			ended := make(chan error, workers)
			for w := range workers {
				v := []float64{1}
				b, err := memspace.FromSlice(v)
				require.NoError(t, err)
				blk := b.Block()
				go func() {
					bg := context.Background()
					for i := 0; ; i++ {
						var err error
						switch w % 3 {
						case 0:
							err = comm.AllreduceBlock(bg, self, blk, blk, comm.Float64, comm.Sum)
						case 1:
							err = self.Barrier(bg)
						default:
							err = comm.BcastBlock(bg, self, blk, 0)
						}
						if i == 0 {
							started <- struct{}{}
						}
						if err != nil {
							ended <- err
							return
						}
					}
				}()
			}
			for range workers {
				<-started
			}
			time.Sleep(time.Duration(round) * time.Millisecond)
			require.NoError(t, self.Close())
			for range workers {
				select {
				case err := <-ended:
					assert.ErrorIs(t, err, comm.ErrClosed)
				case <-ctx.Done():
					t.Fatalf("a call did not return after Close within %v", guard)
				}
			}
			require.NoError(t, self.Close(), "Close twice")
		}
	})
}
