package comm_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"unsafe"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/xpu-go/xpu/backends/local"
	"github.com/xpu-go/xpu/comm"
	"github.com/xpu-go/xpu/flight"
	"github.com/xpu-go/xpu/internal/tooling/testwait"
	"github.com/xpu-go/xpu/memspace"
)

// hostNative is native with comm.HostCollectives: each bytes method
// records its call and arguments and, unless it declines, writes 0xCD
// into the bytes it returns results in.
type hostNative struct {
	native
	declineBytes bool
	failBytes    error
	bytesCalls   []string
	got          [][]byte // the slices passed, send before recv
	dt           comm.DType
	op           comm.Op
	root         int
}

var _ comm.HostCollectives = (*hostNative)(nil)

func (h *hostNative) didBytes(name string, out []byte) error {
	h.bytesCalls = append(h.bytesCalls, name)
	if h.failBytes != nil {
		return h.failBytes
	}
	if h.declineBytes {
		return fmt.Errorf("%s: %w", name, comm.ErrFallback)
	}
	for i := range out {
		out[i] = 0xCD
	}
	return nil
}

func (h *hostNative) AllreduceBytes(ctx context.Context, send, recv []byte, dt comm.DType, op comm.Op) error {
	h.got, h.dt, h.op = [][]byte{send, recv}, dt, op
	return h.didBytes("allreduce-bytes", recv)
}

func (h *hostNative) BcastBytes(ctx context.Context, buf []byte, root int) error {
	h.got, h.root = [][]byte{buf}, root
	return h.didBytes("bcast-bytes", buf)
}

// sameBytes reports whether p is exactly the host memory of b.
func sameBytes[T any](t *testing.T, p []byte, b *memspace.Buffer[T]) bool {
	s, err := b.Host()
	require.NoError(t, err)
	return unsafe.Pointer(unsafe.SliceData(p)) == unsafe.Pointer(unsafe.SliceData(s)) &&
		len(p) == len(s)*int(unsafe.Sizeof(s[0]))
}

// TestHostCollectivesTakeBytes: the typed Allreduce and Bcast, and the
// Block-level ones over host memory, hand a communicator with
// HostCollectives the buffers' own bytes and their arguments, and do not
// call its Collectives; one flight entry records each.
func TestHostCollectivesTakeBytes(t *testing.T) {
	cs := newGroup(t, 2, local.Options{})
	h := &hostNative{native: native{Comm: cs[0]}}
	ctx := testwait.Ctx(t)
	send, recv := buf(t, []float64{1, 2, 3}), buf(t, make([]float64, 3))

	require.NoError(t, comm.Allreduce(ctx, h, send, recv, comm.Max))
	require.Equal(t, []string{"allreduce-bytes"}, h.bytesCalls)
	assert.True(t, sameBytes(t, h.got[0], send), "send's bytes")
	assert.True(t, sameBytes(t, h.got[1], recv), "recv's bytes")
	assert.Equal(t, comm.Float64, h.dt)
	assert.Equal(t, comm.Max, h.op)
	r, _ := recv.Host()
	assert.Equal(t, uint64(0xCDCDCDCDCDCDCDCD), *(*uint64)(unsafe.Pointer(&r[0])), "the method wrote the result")

	require.NoError(t, comm.Allreduce(ctx, h, send, send, comm.Sum), "in place")
	assert.True(t, sameBytes(t, h.got[0], send) && sameBytes(t, h.got[1], send))

	b := buf(t, make([]int32, 5))
	require.NoError(t, comm.Bcast(ctx, h, b, 1))
	assert.True(t, sameBytes(t, h.got[0], b))
	assert.Equal(t, 1, h.root)

	require.NoError(t, comm.AllreduceBlock(ctx, h, send.Block(), recv.Block(), comm.Float64, comm.Sum))
	require.NoError(t, comm.BcastBlock(ctx, h, b.Block(), 0))
	assert.Equal(t, []string{"allreduce-bytes", "allreduce-bytes", "bcast-bytes", "allreduce-bytes", "bcast-bytes"}, h.bytesCalls)
	assert.Empty(t, h.calls, "Collectives was not called")

	entries, _ := comm.FlightRecorder(h).Entries()
	var ops []flight.Op
	for _, e := range entries {
		require.Equal(t, flight.Done, e.State, "entry %+v", e)
		ops = append(ops, e.Op)
	}
	assert.Equal(t, []flight.Op{flight.OpAllreduce, flight.OpAllreduce, flight.OpBcast, flight.OpAllreduce, flight.OpBcast}, ops)
	assert.Equal(t, int64(3), entries[0].Count, "elements")
	assert.Equal(t, "float64", entries[0].DType)
	assert.Equal(t, "max", entries[0].Reduction)
}

// TestHostCollectivesDecline: a bytes method that declines with
// ErrFallback leaves the collective to Collectives, under the one flight
// entry; any other error is returned as it is.
func TestHostCollectivesDecline(t *testing.T) {
	cs := newGroup(t, 2, local.Options{})
	h := &hostNative{native: native{Comm: cs[0]}, declineBytes: true}
	ctx := testwait.Ctx(t)
	v := buf(t, []float64{1})
	require.NoError(t, comm.Allreduce(ctx, h, v, v, comm.Sum))
	require.NoError(t, comm.Bcast(ctx, h, v, 0))
	require.NoError(t, comm.AllreduceBlock(ctx, h, v.Block(), v.Block(), comm.Float64, comm.Sum))
	assert.Equal(t, []string{"allreduce-bytes", "bcast-bytes", "allreduce-bytes"}, h.bytesCalls)
	assert.Equal(t, []string{"allreduce", "bcast", "allreduce"}, h.calls)
	entries, _ := comm.FlightRecorder(h).Entries()
	assert.Len(t, entries, 3, "one entry per collective")

	boom := errors.New("boom")
	h.failBytes = boom
	require.ErrorIs(t, comm.Allreduce(ctx, h, v, v, comm.Sum), boom)
	require.ErrorIs(t, comm.Bcast(ctx, h, v, 0), boom)
	assert.Len(t, h.calls, 3, "an error is not a fallback")
}

// TestHostCollectivesNotThroughWrappers: a wrapper that does not implement
// HostCollectives itself sees every collective: its communicator's
// Collectives are found through it, the bytes methods are not.
func TestHostCollectivesNotThroughWrappers(t *testing.T) {
	cs := newGroup(t, 2, local.Options{})
	h := &hostNative{native: native{Comm: cs[0]}}
	var c comm.Comm = wrapper{h}
	ctx := testwait.Ctx(t)
	v := buf(t, []float64{1})
	require.NoError(t, comm.Allreduce(ctx, c, v, v, comm.Sum))
	require.NoError(t, comm.Bcast(ctx, c, v, 0))
	assert.Empty(t, h.bytesCalls)
	assert.Equal(t, []string{"allreduce", "bcast"}, h.calls)
}

// TestHostCollectivesBadInput: what the typed collectives refuse, they
// refuse alike with or without HostCollectives — the same errors, the
// bytes method never called; empty buffers call nothing; buffers the
// host cannot touch go to Collectives.
func TestHostCollectivesBadInput(t *testing.T) {
	cs := newGroup(t, 2, local.Options{})
	h := &hostNative{native: native{Comm: cs[0]}}
	plainN := &native{Comm: cs[1]}
	ctx := testwait.Ctx(t)
	whole := buf(t, make([]float64, 4))
	h4, _ := whole.Host()
	a, err := memspace.FromSlice(h4[:3])
	require.NoError(t, err)
	partial, err := memspace.FromSlice(h4[1:4])
	require.NoError(t, err)
	freed, err := memspace.Alloc[float64](&ledgerSpace{}, 3)
	require.NoError(t, err)
	require.NoError(t, freed.Free())
	short := buf(t, make([]float64, 2))
	three := buf(t, make([]float64, 3))
	empty := buf(t, []float64{})
	for name, tc := range map[string]struct {
		call func(c comm.Comm) error
		want error
	}{
		"nil send":        {func(c comm.Comm) error { return comm.Allreduce(ctx, c, nil, three, comm.Sum) }, comm.ErrInvalidArgument},
		"nil recv":        {func(c comm.Comm) error { return comm.Allreduce(ctx, c, three, nil, comm.Sum) }, comm.ErrInvalidArgument},
		"freed":           {func(c comm.Comm) error { return comm.Allreduce(ctx, c, freed, three, comm.Sum) }, comm.ErrClosed},
		"lengths":         {func(c comm.Comm) error { return comm.Allreduce(ctx, c, three, short, comm.Sum) }, comm.ErrInvalidArgument},
		"partial overlap": {func(c comm.Comm) error { return comm.Allreduce(ctx, c, a, partial, comm.Sum) }, comm.ErrInvalidArgument},
		"bad op":          {func(c comm.Comm) error { return comm.Allreduce(ctx, c, three, three, comm.Op(99)) }, comm.ErrInvalidArgument},
		"complex max": {func(c comm.Comm) error {
			z := buf(t, make([]complex64, 1))
			return comm.Allreduce(ctx, c, z, z, comm.Max)
		}, comm.ErrInvalidArgument},
		"nil context": {func(c comm.Comm) error { return comm.Allreduce(nil, c, three, three, comm.Sum) }, comm.ErrInvalidArgument}, //nolint:staticcheck // the nil context is the bad input
		"bcast root":  {func(c comm.Comm) error { return comm.Bcast(ctx, c, three, 2) }, comm.ErrInvalidArgument},
		"bcast nil":   {func(c comm.Comm) error { return comm.Bcast[float64](ctx, c, nil, 0) }, comm.ErrInvalidArgument},
		"bcast freed": {func(c comm.Comm) error { return comm.Bcast(ctx, c, freed, 0) }, comm.ErrClosed},
		"ended context": {func(c comm.Comm) error {
			ended, cancel := context.WithCancel(ctx)
			cancel()
			return comm.Allreduce(ended, c, three, three, comm.Sum)
		}, context.Canceled},
	} {
		errHost, errPlain := tc.call(h), tc.call(plainN)
		require.ErrorIs(t, errHost, tc.want, name)
		assert.Equal(t, errPlain.Error(), errHost.Error(), "%s: the same error as without HostCollectives", name)
	}
	assert.Empty(t, h.bytesCalls)

	require.NoError(t, comm.Allreduce(ctx, h, empty, empty, comm.Sum))
	require.NoError(t, comm.Bcast(ctx, h, empty, 0))
	assert.Empty(t, h.bytesCalls, "empty buffers")
	assert.Empty(t, h.calls, "empty buffers")

	d, err := memspace.Alloc[float32](deviceSpace{}, 8)
	require.NoError(t, err)
	require.NoError(t, comm.Allreduce(ctx, h, d, d, comm.Sum))
	require.NoError(t, comm.Bcast(ctx, h, d, 0))
	assert.Empty(t, h.bytesCalls, "device memory")
	assert.Equal(t, []string{"allreduce", "bcast"}, h.calls)
}
