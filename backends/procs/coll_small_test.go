package procs_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/xpu-go/xpu/backends/procs"
	"github.com/xpu-go/xpu/comm"
	"github.com/xpu-go/xpu/internal/tooling/testwait"
	"github.com/xpu-go/xpu/memspace"
)

// TestSmallAllreduceAbort checks the abort of the small allreduce, which
// runs without a context of its own: 4 ranks, rank 3 closes instead of
// taking part. Ranks 1 and 2 wait on rank 3 directly; rank 0 exchanges
// with rank 1, then waits on rank 2, alive but stuck, and is freed only by
// rank 2's abort. Every survivor must fail with ErrPeerLost long before
// its context ends — with a message sent eagerly and by rendezvous.
func TestSmallAllreduceAbort(t *testing.T) {
	for _, elems := range []int{1, 4096} {
		t.Run(fmt.Sprintf("%dB", 8*elems), func(t *testing.T) {
			cs := group(t, 4, procs.Config{EagerLimit: 1024})
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			errs := make([]error, 3)
			took := make([]time.Duration, 3)
			var wg sync.WaitGroup
			start := time.Now()
			for r := range 3 {
				wg.Add(1)
				go func() {
					defer wg.Done()
					v := make([]float64, elems)
					b, err := memspace.FromSlice(v)
					if err != nil {
						errs[r] = err
						return
					}
					errs[r] = comm.AllreduceBlock(ctx, cs[r], b.Block(), b.Block(), comm.Float64, comm.Sum)
					took[r] = time.Since(start)
				}()
			}
			time.Sleep(200 * time.Millisecond)
			require.NoError(t, cs[3].Close())
			testwait.Group(t, &wg, "the survivors' Allreduce, after rank 3 closed")
			for r, err := range errs {
				assert.ErrorIs(t, err, comm.ErrPeerLost, "rank %d", r)
				assert.False(t, errors.Is(err, context.DeadlineExceeded), "rank %d waited for its context: %v", r, err)
				assert.Less(t, took[r], 15*time.Second, "rank %d", r)
			}
			// The group is broken for collectives: later ones fail at once.
			b, _ := memspace.FromSlice(make([]float64, elems))
			err := comm.AllreduceBlock(ctx, cs[0], b.Block(), b.Block(), comm.Float64, comm.Sum)
			assert.ErrorIs(t, err, comm.ErrPeerLost)
		})
	}
}

// TestSmallAllreduceContext checks that the small allreduce ends with the
// caller's context when its partner never comes, and leaves the
// communicator usable for point-to-point messages.
func TestSmallAllreduceContext(t *testing.T) {
	cs := group(t, 2, procs.Config{})
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	b, _ := memspace.FromSlice([]float64{1})
	err := comm.AllreduceBlock(ctx, cs[0], b.Block(), b.Block(), comm.Float64, comm.Sum)
	require.ErrorIs(t, err, context.DeadlineExceeded)

	each(t, cs, func(ctx context.Context, c *procs.Comm) error {
		s := []byte{byte(c.Rank())}
		v, _ := memspace.FromSlice(s)
		if c.Rank() == 0 {
			return comm.Send(ctx, c, v.Block(), 1, 7)
		}
		if _, err := comm.Recv(ctx, c, v.Block(), 0, 7); err != nil {
			return err
		}
		if s[0] != 0 {
			return fmt.Errorf("received %d, want 0", s[0])
		}
		return nil
	})
}

// TestSmallAllreduceSizes runs the small allreduce over group sizes that
// are and are not powers of two, in place and not, with messages eager and
// by rendezvous, and checks every element on every rank, bitwise.
func TestSmallAllreduceSizes(t *testing.T) {
	for _, p := range []int{2, 3, 5} {
		for _, elems := range []int{1, 3, 1000} {
			t.Run(fmt.Sprintf("%dranks/%d", p, elems), func(t *testing.T) {
				cs := group(t, p, procs.Config{EagerLimit: 1024})
				results := make([][]float64, p)
				each(t, cs, func(ctx context.Context, c *procs.Comm) error {
					r := c.Rank()
					send := make([]float64, elems)
					for i := range send {
						send[i] = float64(r+1) + float64(i)/7
					}
					out := make([]float64, elems)
					sb, _ := memspace.FromSlice(send)
					ob, _ := memspace.FromSlice(out)
					if err := comm.AllreduceBlock(ctx, c, sb.Block(), ob.Block(), comm.Float64, comm.Sum); err != nil {
						return err
					}
					// In place, a second time: the sum of the sums.
					if err := comm.AllreduceBlock(ctx, c, ob.Block(), ob.Block(), comm.Float64, comm.Sum); err != nil {
						return err
					}
					results[r] = out
					return nil
				})
				for i := range elems {
					want := 0.0
					for r := range p {
						want += float64(r+1) + float64(i)/7
					}
					want *= float64(p)
					assert.InEpsilon(t, want, results[0][i], 1e-12, "element %d", i)
				}
				for r := 1; r < p; r++ {
					assert.Equal(t, results[0], results[r], "rank %d differs from rank 0", r)
				}
			})
		}
	}
}
