package comm_test

import (
	"bytes"
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/xpu-go/xpu/backends/local"
	"github.com/xpu-go/xpu/comm"
	"github.com/xpu-go/xpu/flight"
	"github.com/xpu-go/xpu/memspace"
)

// thirdParty is a communicator of another module: it keeps no flight
// recorder (it is not a comm.Recording, and does not unwrap to one).
type thirdParty struct{ c comm.Comm }

func (p *thirdParty) Rank() int { return p.c.Rank() }
func (p *thirdParty) Size() int { return p.c.Size() }
func (p *thirdParty) Isend(b memspace.Block, dest, tag int) (comm.Request, error) {
	return p.c.Isend(b, dest, tag)
}
func (p *thirdParty) Irecv(b memspace.Block, src, tag int) (comm.Request, error) {
	return p.c.Irecv(b, src, tag)
}
func (p *thirdParty) Close() error { return p.c.Close() }

// A communicator that keeps no recorder gets one from package comm, which
// records the calls of its functions: the send, the receive and the
// collective, numbered alike on both ranks.
func TestFlightOfThirdParty(t *testing.T) {
	ranks := newGroup(t, 2, local.Options{})
	tp := []comm.Comm{&thirdParty{ranks[0]}, &thirdParty{ranks[1]}}
	errs := onRanks(t, context.Background(), tp, func(ctx context.Context, c comm.Comm) error {
		b := buf(t, make([]byte, 8)).Block()
		if c.Rank() == 0 {
			if err := comm.Send(ctx, c, b, 1, 4); err != nil {
				return err
			}
		} else if _, err := comm.Recv(ctx, c, b, 0, 4); err != nil {
			return err
		}
		v := buf(t, []float64{1})
		return comm.Allreduce(ctx, c, v, v, comm.Sum)
	})
	require.NoError(t, errors.Join(errs...))
	for r, c := range tp {
		rec := comm.FlightRecorder(c)
		require.NotNil(t, rec, "rank %d", r)
		assert.Same(t, rec, comm.FlightRecorder(c), "the same recorder on every call")
		es, _ := rec.Entries()
		require.Len(t, es, 2, "rank %d: %+v", r, es)
		p2p := es[0]
		if r == 0 {
			assert.Equal(t, flight.OpSend, p2p.Op)
		} else {
			assert.Equal(t, flight.OpRecv, p2p.Op)
		}
		assert.Equal(t, 1-r, p2p.Peer)
		assert.Equal(t, 4, p2p.Tag)
		assert.Equal(t, flight.Done, p2p.State)
		assert.Equal(t, flight.OpAllreduce, es[1].Op)
		assert.Equal(t, uint64(1), es[1].Seq)
		assert.Equal(t, "float64", es[1].DType)
		assert.Equal(t, "sum", es[1].Reduction)
		var b bytes.Buffer
		require.NoError(t, comm.DumpFlight(c, &b))
		d, err := flight.Read(&b)
		require.NoError(t, err)
		assert.Equal(t, r, d.Rank)
		assert.Len(t, d.Entries, 2)
	}
}

// A communicator of its own (local) records its requests itself: package
// comm adds nothing to them, and its recorder is the backend's.
func TestFlightOfRecordingBackend(t *testing.T) {
	ranks := newGroup(t, 2, local.Options{})
	rec, ok := comm.As[comm.Recording](ranks[0])
	require.True(t, ok)
	assert.Same(t, rec.FlightRecorder(), comm.FlightRecorder(ranks[0]))
	errs := onRanks(t, context.Background(), ranks, func(ctx context.Context, c comm.Comm) error {
		b := buf(t, make([]byte, 8)).Block()
		if c.Rank() == 0 {
			return comm.Send(ctx, c, b, 1, 4)
		}
		_, err := comm.Recv(ctx, c, b, 0, 4)
		return err
	})
	require.NoError(t, errors.Join(errs...))
	es, _ := comm.FlightRecorder(ranks[1]).Entries()
	require.Len(t, es, 1, "one receive, recorded once: %+v", es)
	assert.Equal(t, flight.OpRecv, es[0].Op)
}

// A communicator that is a value (a view, a wrapper without Unwrap) gets
// no recorder, and its calls work as before.
func TestFlightOfValueComm(t *testing.T) {
	ranks := newGroup(t, 1, local.Options{})
	v := valueComm{ranks[0]}
	assert.Nil(t, comm.FlightRecorder(v))
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	require.NoError(t, comm.Barrier(ctx, v))
}

type valueComm struct{ comm.Comm }

// A collective that fails on a lost peer writes the rank's record where
// the job asked (flight.EnvDir), once, saying why.
func TestFlightDumpedOnRevocation(t *testing.T) {
	dir := t.TempDir()
	t.Setenv(flight.EnvDir, dir)
	ranks := newGroup(t, 3, local.Options{})
	ranks[2].(*local.Comm).Kill()
	errs := onRanks(t, context.Background(), ranks[:2], func(ctx context.Context, c comm.Comm) error {
		v := buf(t, []float64{1})
		return comm.Allreduce(ctx, c, v, v, comm.Sum)
	})
	for r, err := range errs {
		require.ErrorIs(t, err, comm.ErrPeerLost, "rank %d", r)
	}
	ds, err := flight.ReadDir(dir)
	require.NoError(t, err)
	require.Len(t, ds, 2, "a record of each survivor")
	for _, d := range ds {
		assert.Contains(t, d.Reason, "revoked: ")
		require.NotEmpty(t, d.Entries)
		last := d.Entries[len(d.Entries)-1]
		assert.Equal(t, "Allreduce", last.Op)
		assert.Equal(t, "failed", last.State)
		assert.Contains(t, last.Err, "peer lost")
	}
}
