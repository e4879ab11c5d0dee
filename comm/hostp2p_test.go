package comm_test

import (
	"context"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/xpu-go/xpu/backends/local"
	"github.com/xpu-go/xpu/comm"
	"github.com/xpu-go/xpu/flight"
	"github.com/xpu-go/xpu/internal/tooling/testwait"
	"github.com/xpu-go/xpu/memspace"
)

// bytesP2P takes host bytes point to point (comm.HostPointToPoint): each
// call is recorded with the bytes it got, then carried by the wrapped
// communicator.
type bytesP2P struct {
	comm.Comm
	mu    sync.Mutex
	calls []string
	got   []byte
}

var _ comm.HostPointToPoint = (*bytesP2P)(nil)

func (b *bytesP2P) did(name string, p []byte) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.calls, b.got = append(b.calls, name), p
}

func (b *bytesP2P) SendBytes(ctx context.Context, p []byte, dest, tag int) error {
	b.did("send-bytes", p)
	return comm.Send(ctx, b.Comm, bytesBlock(p), dest, tag)
}

func (b *bytesP2P) RecvBytes(ctx context.Context, p []byte, source, tag int) (comm.Status, error) {
	b.did("recv-bytes", p)
	return comm.Recv(ctx, b.Comm, bytesBlock(p), source, tag)
}

// recordingP2P is bytesP2P that records its own requests, as
// HostPointToPoint's users must for Send and Recv to use it.
type recordingP2P struct {
	*bytesP2P
	rec *flight.Recorder
}

func (r recordingP2P) FlightRecorder() *flight.Recorder { return r.rec }

// bytesBlock is the zero Block for nil, else p as a host Block.
func bytesBlock(p []byte) memspace.Block {
	if p == nil {
		return memspace.Block{}
	}
	b, err := memspace.FromSlice(p)
	if err != nil {
		panic(err)
	}
	return b.Block()
}

// TestHostPointToPoint: Send and Recv of host Blocks hand a communicator
// that takes host bytes and records itself the Blocks' own bytes (nil for
// the zero Block); one that does not record itself, one behind a wrapper,
// and Blocks the host cannot touch take the other paths.
func TestHostPointToPoint(t *testing.T) {
	cs := newGroup(t, 2, local.Options{})
	ctx := testwait.Ctx(t)
	bp := &bytesP2P{Comm: cs[0]}
	rec := flight.New(flight.DefaultSize, flight.Context{Rank: 0, Size: 2})
	defer rec.Close()
	c := recordingP2P{bp, rec}

	out := buf(t, []int64{7, 8, 9})
	in := buf(t, make([]int64, 3))
	done := make(chan error, 1)
	go func() {
		_, err := comm.Recv(ctx, cs[1], in.Block(), 0, 5)
		done <- err
	}()
	require.NoError(t, comm.Send(ctx, c, out.Block(), 1, 5))
	require.NoError(t, testwait.Recv(t, done, "rank 1's receive"))
	require.Equal(t, []string{"send-bytes"}, bp.calls)
	assert.True(t, sameBytes(t, bp.got, out), "the send's bytes are the block's")
	got, _ := in.Host()
	assert.Equal(t, []int64{7, 8, 9}, got)

	go func() { done <- comm.Send(ctx, cs[1], out.Block(), 0, 6) }()
	into := buf(t, make([]int64, 4))
	st, err := comm.Recv(ctx, c, into.Block(), 1, 6)
	require.NoError(t, err)
	require.NoError(t, testwait.Recv(t, done, "rank 1's send"))
	assert.Equal(t, 24, st.Count)
	assert.Equal(t, 1, st.Source)
	assert.True(t, sameBytes(t, bp.got, into), "the receive's bytes are the block's")
	assert.Equal(t, []string{"send-bytes", "recv-bytes"}, bp.calls)

	go func() {
		_, err := comm.Recv(ctx, cs[1], memspace.Block{}, 0, 7)
		done <- err
	}()
	require.NoError(t, comm.Send(ctx, c, memspace.Block{}, 1, 7), "the zero Block")
	require.NoError(t, testwait.Recv(t, done, "rank 1's empty receive"))
	assert.Nil(t, bp.got)

	require.ErrorIs(t, comm.Send(ctx, c, out.Block(), 1, -3), comm.ErrInvalidArgument, "a bad tag is refused first")
	assert.Len(t, bp.calls, 3)

	d, err := memspace.Alloc[int64](deviceSpace{}, 3)
	require.NoError(t, err)
	short, cancel := context.WithCancel(ctx)
	cancel()
	_ = comm.Send(short, c, d.Block(), 1, 8)
	_, _ = comm.Recv(short, c, d.Block(), 1, 8)
	assert.Len(t, bp.calls, 3, "device memory does not go by bytes")

	// Not recording itself, or behind a wrapper: the bytes methods are
	// not used.
	for name, other := range map[string]comm.Comm{"not recording": bp, "wrapped": wrapper{c}} {
		go func() {
			_, err := comm.Recv(ctx, cs[1], in.Block(), 0, 9)
			done <- err
		}()
		require.NoError(t, comm.Send(ctx, other, out.Block(), 1, 9), name)
		require.NoError(t, testwait.Recv(t, done, "rank 1's receive"), name)
		assert.Len(t, bp.calls, 3, name)
	}
}
