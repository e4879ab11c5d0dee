package conformance

import (
	"context"
	"errors"
	"fmt"

	"github.com/xpu-go/xpu/comm"
	"github.com/xpu-go/xpu/flight"
)

// ruleFlight is what the flight recorder must show of a rank's calls.
var ruleFlight = rule{"a communicator's flight record (comm.FlightRecorder) holds each call of a user tag " +
	"— its own Isend and Irecv when it implements comm.Recording — with the peer, tag and bytes, and ends " +
	"each entry when the call returns: done, failed or cancelled, never still posted; every rank numbers its " +
	"collectives alike", guideFlight}

// commFlight is the case "flight/record": each rank exchanges 16 bytes of
// tag 5 with its neighbours (Sendrecv), starts and waits for a receive
// and a send of tag 6 with the communicator's own Isend and Irecv, runs
// an Allreduce, and starts a receive that its context cancels; its record
// must hold them all as they ended, and the Allreduce's number must be
// the same on every rank.
func commFlight(ctx context.Context, me, n int, cm comm.Comm) error {
	rec := comm.FlightRecorder(cm)
	if rec == nil {
		if flight.SizeFromEnv() == flight.Off {
			return nil // turned off (XPU_FLIGHT_SIZE=0): nothing to check
		}
		return fmt.Errorf("rank %d: comm.FlightRecorder returned none, with %s unset", me, flight.EnvSize)
	}
	_, recordsOwn := comm.As[comm.Recording](cm)
	before := lastID(rec)
	next, prev := (me+1)%n, (me+n-1)%n
	in := make([]byte, 16)
	if _, err := comm.Sendrecv(ctx, cm, blk(pattern(me, 16)), next, 5, blk(in), prev, 5); err != nil {
		return fmt.Errorf("Sendrecv of tag 5: %w", err)
	}
	rr, err := cm.Irecv(blk(make([]byte, 24)), prev, 6)
	if err != nil {
		return fmt.Errorf("Irecv of tag 6: %w", err)
	}
	sr, err := cm.Isend(blk(pattern(me, 24)), next, 6)
	if err != nil {
		return fmt.Errorf("Isend of tag 6: %w", err)
	}
	if err := comm.WaitAll(ctx, rr, sr); err != nil {
		return fmt.Errorf("the Isend and Irecv of tag 6: %w", err)
	}
	sum := make([]float64, 3)
	if err := comm.AllreduceBlock(ctx, cm, blk(asBytes(sum)), blk(asBytes(sum)), comm.Float64, comm.Sum); err != nil {
		return fmt.Errorf("Allreduce: %w", err)
	}
	done, cancel := context.WithCancel(ctx)
	cancel()
	if _, err := comm.Recv(done, cm, blk(make([]byte, 8)), prev, 7); err == nil {
		return errors.New("Recv of tag 7 with a canceled context succeeded: nothing sends it")
	}
	entries, _ := rec.Entries()
	var mine []flight.Entry
	for _, e := range entries {
		if e.ID > before {
			mine = append(mine, e)
		}
	}
	want := []flight.Entry{
		{Op: flight.OpSend, Peer: next, Tag: 5, Count: 16, State: flight.Done},
		{Op: flight.OpRecv, Peer: prev, Tag: 5, Count: 16, State: flight.Done},
	}
	if recordsOwn {
		want = append(want,
			flight.Entry{Op: flight.OpRecv, Peer: prev, Tag: 6, Count: 24, State: flight.Done},
			flight.Entry{Op: flight.OpSend, Peer: next, Tag: 6, Count: 24, State: flight.Done})
	}
	var errs []error
	for _, w := range want {
		if !holds(mine, w) {
			errs = append(errs, fmt.Errorf("rank %d: no %v(peer %d, tag %d, %d bytes) %s in its flight record: %v",
				me, w.Op, w.Peer, w.Tag, w.Count, w.State, mine))
		}
	}
	var seq uint64
	for _, e := range mine {
		if e.State.Pending() {
			errs = append(errs, fmt.Errorf("rank %d: %v(peer %d, tag %d) is still %s in its flight record after the call returned",
				me, e.Op, e.Peer, e.Tag, e.State))
		}
		if e.Op == flight.OpRecv && e.Tag == 7 && e.State != flight.Cancelled && e.State != flight.Failed {
			errs = append(errs, fmt.Errorf("rank %d: the Recv its context canceled is %s in its flight record, want cancelled", me, e.State))
		}
		if e.Op == flight.OpAllreduce {
			if seq != 0 {
				errs = append(errs, fmt.Errorf("rank %d: one Allreduce, two entries (#%d, #%d)", me, seq, e.Seq))
			}
			seq = e.Seq
		}
	}
	if seq == 0 {
		errs = append(errs, fmt.Errorf("rank %d: no Allreduce in its flight record: %v", me, mine))
	}
	if err := errors.Join(errs...); err != nil {
		return err
	}
	// Every rank's Allreduce has the same number.
	lo, hi := []int64{-int64(seq)}, []int64{int64(seq)}
	if err := comm.AllreduceBlock(ctx, cm, blk(asBytes(lo)), blk(asBytes(lo)), comm.Int64, comm.Max); err != nil {
		return fmt.Errorf("Allreduce of the numbers: %w", err)
	}
	if err := comm.AllreduceBlock(ctx, cm, blk(asBytes(hi)), blk(asBytes(hi)), comm.Int64, comm.Max); err != nil {
		return fmt.Errorf("Allreduce of the numbers: %w", err)
	}
	if -lo[0] != hi[0] {
		return fmt.Errorf("rank %d numbered the same Allreduce #%d; the ranks' numbers run from %d to %d", me, seq, -lo[0], hi[0])
	}
	return nil
}

// lastID is the ID of the newest entry of rec, 0 for none.
func lastID(rec *flight.Recorder) uint64 {
	es, _ := rec.Entries()
	if len(es) == 0 {
		return 0
	}
	return es[len(es)-1].ID
}

// holds reports whether es has an entry of w's operation, peer, tag,
// count and state.
func holds(es []flight.Entry, w flight.Entry) bool {
	for _, e := range es {
		if e.Op == w.Op && e.Peer == w.Peer && e.Tag == w.Tag && e.Count == w.Count && e.State == w.State {
			return true
		}
	}
	return false
}
