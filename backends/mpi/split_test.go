//go:build mpi

package mpi_test

import (
	"context"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/xpu-go/xpu"
	"github.com/xpu-go/xpu/backends/mpi"
	"github.com/xpu-go/xpu/comm"
	"github.com/xpu-go/xpu/memspace"
)

// TestSPMDSplitDup checks sub-communicators: their ranks, their traffic
// apart from the parent's, collectives on them, and Close.
func TestSPMDSplitDup(t *testing.T) {
	c := rank(t)
	p, r := c.Size(), c.Rank()
	for _, cx := range contexts {
		spmd(t, c, cx.name+"/split", func(t *testing.T) {
			ctx, cancel := cx.make()
			defer cancel()
			// Even and odd ranks, each group in reverse order of world rank.
			sub, err := c.Split(ctx, r%2, -r)
			require.NoError(t, err)
			require.NotNil(t, sub)
			defer func() { require.NoError(t, sub.Close()) }()
			var members []int
			for q := range p {
				if q%2 == r%2 {
					members = append(members, q)
				}
			}
			slices.Reverse(members)
			require.Equal(t, len(members), sub.Size())
			require.Equal(t, slices.Index(members, r), sub.Rank())
			// A collective over the group sums the world ranks of its members.
			x := []int64{int64(r)}
			xb, _ := memspace.FromSlice(x)
			require.NoError(t, comm.Allreduce(ctx, sub, xb, xb, comm.Sum))
			var want int64
			for _, q := range members {
				want += int64(q)
			}
			require.Equal(t, want, x[0])
			// A ring over the group, by group ranks.
			n, sr := sub.Size(), sub.Rank()
			in := make([]byte, 3)
			rr, err := sub.Irecv(buf(t, in), mod(sr-1, n), 1)
			require.NoError(t, err)
			require.NoError(t, comm.Send(ctx, sub, buf(t, []byte{byte(r), 1, 2}), mod(sr+1, n), 1))
			st, err := wait(t, rr)
			require.NoError(t, err)
			assert.Equal(t, mod(sr-1, n), st.Source)
			assert.Equal(t, byte(members[mod(sr-1, n)]), in[0])
			// The whole collective suite on the first split only.
			if cx.name == "background" && p >= 3 && r%2 == 0 {
				testReductions[float64](t, ctx, sub)
			}
		})
		spmd(t, c, cx.name+"/split-undefined", func(t *testing.T) {
			ctx, cancel := cx.make()
			defer cancel()
			color := 0
			if r == 0 {
				color = mpi.Undefined
			}
			sub, err := c.Split(ctx, color, 0)
			require.NoError(t, err)
			if r == 0 {
				require.Nil(t, sub, "a rank of no group gets no communicator")
				return
			}
			require.NotNil(t, sub)
			assert.Equal(t, p-1, sub.Size())
			assert.Equal(t, r-1, sub.Rank())
			require.NoError(t, comm.Barrier(ctx, sub))
			require.NoError(t, sub.Close())
		})
		spmd(t, c, cx.name+"/dup", func(t *testing.T) {
			ctx, cancel := cx.make()
			defer cancel()
			d, err := c.Dup(ctx)
			require.NoError(t, err)
			require.Equal(t, c.Rank(), d.Rank())
			require.Equal(t, c.Size(), d.Size())
			// A message on d never matches a receive on c.
			onC := make([]byte, 4)
			rc, err := c.Irecv(buf(t, onC), comm.AnySource, 3)
			require.NoError(t, err)
			onD := make([]byte, 4)
			rd, err := d.Irecv(buf(t, onD), comm.AnySource, 3)
			require.NoError(t, err)
			require.NoError(t, comm.Send(ctx, d, buf(t, []byte("dup!")), mod(r+1, p), 3))
			st, err := wait(t, rd)
			require.NoError(t, err)
			assert.Equal(t, "dup!", string(onD[:st.Count]))
			require.NoError(t, comm.Barrier(ctx, c))
			_, done, err := rc.Test()
			require.NoError(t, err)
			require.False(t, done, "a message of the duplicate reached the parent")
			require.NoError(t, rc.Cancel())
			_, err = wait(t, rc)
			require.ErrorIs(t, err, comm.ErrCanceled)
			// Close cancels pending receives and fails later calls.
			pend, err := d.Irecv(buf(t, onD), comm.AnySource, 4)
			require.NoError(t, err)
			require.NoError(t, d.Close())
			_, err = wait(t, pend)
			require.ErrorIs(t, err, comm.ErrClosed)
			_, err = d.Isend(buf(t, onD), 0, 0)
			require.ErrorIs(t, err, comm.ErrClosed)
			require.ErrorIs(t, d.Send(ctx, buf(t, onD), 0, 0), comm.ErrClosed)
			_, err = d.Recv(ctx, buf(t, onD), 0, 0)
			require.ErrorIs(t, err, comm.ErrClosed)
			require.ErrorIs(t, d.Barrier(ctx), comm.ErrClosed)
			_, err = d.Split(ctx, 0, 0)
			require.ErrorIs(t, err, comm.ErrClosed)
			require.NoError(t, d.Close(), "Close twice")
		})
	}
	spmd(t, c, "bad-color", func(t *testing.T) {
		_, err := c.Split(context.Background(), -5, 0)
		require.ErrorIs(t, err, comm.ErrInvalidArgument)
	})
	spmd(t, c, "collectives-on-split", func(t *testing.T) {
		ctx, cancel := context.WithTimeout(context.Background(), guard)
		defer cancel()
		sub, err := c.Split(ctx, r/2, r)
		require.NoError(t, err)
		defer func() { require.NoError(t, sub.Close()) }()
		testCollectives(t, sub, "pair")
	})
}

// TestSPMDAbandoned checks that a collective whose context ends on one
// rank completes in the background, from the copy taken at the call, so
// that the ranks that join it later finish, and that the communicator
// stays usable.
func TestSPMDAbandoned(t *testing.T) {
	c := rank(t)
	p, r := c.Size(), c.Rank()
	if p < 2 {
		t.Skip("needs a rank that joins late")
	}
	long, cancel := context.WithTimeout(context.Background(), guard)
	defer cancel()
	// go tells the other ranks that rank 0 has given up.
	goAhead := func(t *testing.T) {
		if r == 0 {
			for q := 1; q < p; q++ {
				require.NoError(t, c.Send(long, buf(t, []byte{1}), q, 60))
			}
			return
		}
		_, err := c.Recv(long, buf(t, make([]byte, 1)), 0, 60)
		require.NoError(t, err)
	}
	spmd(t, c, "allreduce", func(t *testing.T) {
		x := []float64{float64(r + 1), 10}
		xb, _ := memspace.FromSlice(x)
		if r == 0 {
			short, cancel := context.WithTimeout(context.Background(), 30*time.Millisecond)
			err := comm.Allreduce(short, c, xb, xb, comm.Sum)
			cancel()
			require.ErrorIs(t, err, context.DeadlineExceeded)
			x[0], x[1] = -1000, -1000 // the collective must not see these
		}
		goAhead(t)
		if r != 0 {
			require.NoError(t, comm.Allreduce(long, c, xb, xb, comm.Sum))
			require.Equal(t, []float64{float64(p * (p + 1) / 2), float64(10 * p)}, x)
		}
		// Rank 0's part completes while it waits here.
		require.NoError(t, comm.Barrier(long, c))
	})
	spmd(t, c, "split", func(t *testing.T) {
		if r == 0 {
			short, cancel := context.WithTimeout(context.Background(), 30*time.Millisecond)
			sub, err := c.Split(short, 0, 0)
			cancel()
			require.ErrorIs(t, err, context.DeadlineExceeded)
			require.Nil(t, sub)
		}
		goAhead(t)
		if r != 0 {
			sub, err := c.Split(long, 0, 0)
			require.NoError(t, err)
			assert.Equal(t, p, sub.Size(), "rank 0 took its part")
			require.NoError(t, sub.Close())
		}
		// Rank 0 finishes the split before this barrier.
		require.NoError(t, comm.Barrier(long, c))
		x := []int32{1}
		xb, _ := memspace.FromSlice(x)
		require.NoError(t, comm.Allreduce(context.Background(), c, xb, xb, comm.Sum))
		require.Equal(t, int32(p), x[0], "collectives line up after the abandoned split")
	})
	spmd(t, c, "dup", func(t *testing.T) {
		if r == 0 {
			short, cancel := context.WithTimeout(context.Background(), 30*time.Millisecond)
			d, err := c.Dup(short)
			cancel()
			require.ErrorIs(t, err, context.DeadlineExceeded)
			require.Nil(t, d)
		}
		goAhead(t)
		if r != 0 {
			d, err := c.Dup(long)
			require.NoError(t, err)
			require.NoError(t, d.Close())
		}
		require.NoError(t, comm.Barrier(long, c))
	})
}

// TestProcsText checks what Info says of GOMAXPROCS: its value, and at 1
// a warning with the remedy.
func TestProcsText(t *testing.T) {
	assert.Equal(t, "GOMAXPROCS 4", mpi.ProcsText(4))
	one := mpi.ProcsText(1)
	assert.True(t, strings.HasPrefix(one, "GOMAXPROCS 1 ("), one)
	assert.Contains(t, one, "--bind-to none")
	assert.Contains(t, one, "GOMAXPROCS=2")
}

// TestSPMDDriver opens the backend by name and reads its Info.
func TestSPMDDriver(t *testing.T) {
	c := rank(t)
	spmd(t, c, "driver", func(t *testing.T) {
		ctx, cancel := context.WithTimeout(context.Background(), guard)
		defer cancel()
		info, err := xpu.Describe(ctx, mpi.Name)
		require.NoError(t, err)
		assert.True(t, info.Available)
		assert.Contains(t, info.Library, "MPI")
		assert.Contains(t, info.Library, "(from MPI)")
		assert.Contains(t, info.Library, "; "+mpi.ProcsText(runtime.GOMAXPROCS(0)))
		level, up := mpi.Provided()
		require.True(t, up)
		if level == mpi.ThreadMultiple && !strings.Contains(osLevel(), "serialized") {
			assert.Contains(t, info.Capabilities, xpu.CapThreadsMulti)
		} else {
			assert.Contains(t, info.Capabilities, xpu.CapThreadsSerial)
		}
		assert.Subset(t, info.Capabilities, xpu.CapabilitiesOf(c), "derived from what a Comm implements")
		assert.Subset(t, info.Capabilities, []string{xpu.CapP2P, xpu.CapBlocking, xpu.CapCollectivesNative})
		b, err := xpu.Open(ctx, mpi.Name, xpu.Options{})
		require.NoError(t, err)
		require.NotNil(t, b.Comm)
		assert.Nil(t, b.Group)
		assert.Equal(t, c.Size(), b.Comm.Size())
		assert.Equal(t, c.Rank(), b.Comm.Rank())
		require.NoError(t, comm.Barrier(ctx, b.Comm))
		require.NoError(t, b.Close())
		_, err = xpu.Open(ctx, mpi.Name, xpu.Options{mpi.OptThreadLevel: "bogus"})
		require.ErrorIs(t, err, xpu.ErrInvalidArgument)
		_, err = xpu.Open(ctx, mpi.Name, xpu.Options{"threads": "multiple"})
		require.ErrorIs(t, err, xpu.ErrUnknownOption)
	})
}
