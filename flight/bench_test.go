package flight_test

import (
	"testing"

	"github.com/xpu-go/xpu/flight"
)

// BenchmarkRecord is the cost of recording one eager send that completed
// as it started (one entry, posted and done).
func BenchmarkRecord(b *testing.B) {
	r := flight.New(flight.DefaultSize, flight.Context{Rank: 0, Size: 2})
	defer r.Close()
	for b.Loop() {
		r.Record(flight.OpSend, 1, 0, 8)
	}
}

// BenchmarkPostEnd is the cost of recording one receive: posted, then
// ended.
func BenchmarkPostEnd(b *testing.B) {
	r := flight.New(flight.DefaultSize, flight.Context{Rank: 0, Size: 2})
	defer r.Close()
	for b.Loop() {
		t := r.Post(flight.OpRecv, 1, 0, 8)
		t.End(nil, false)
	}
}

// BenchmarkOff is what a recorder turned off costs: a nil check.
func BenchmarkOff(b *testing.B) {
	r := flight.New(flight.Off, flight.Context{})
	for b.Loop() {
		t := r.Post(flight.OpRecv, 1, 0, 8)
		t.End(nil, false)
	}
}

// BenchmarkRecordSmall is BenchmarkRecord with a ring that stays in the
// first-level cache.
func BenchmarkRecordSmall(b *testing.B) {
	r := flight.New(64, flight.Context{Rank: 0, Size: 2})
	defer r.Close()
	for b.Loop() {
		r.Record(flight.OpSend, 1, 0, 8)
	}
}

// BenchmarkCollective is the cost of recording one collective: posted,
// then ended, without a lock (ADR 48).
func BenchmarkCollective(b *testing.B) {
	r := flight.New(flight.DefaultSize, flight.Context{Rank: 0, Size: 2})
	defer r.Close()
	for b.Loop() {
		r.PostCollective(flight.OpAllreduce, flight.NoPeer, 1, "float64", "sum").Finish(nil)
	}
}

// BenchmarkCollectiveCompleted is BenchmarkCollective ended as package
// comm ends a collective that succeeded: Completed, one call fewer than
// Finish(nil).
func BenchmarkCollectiveCompleted(b *testing.B) {
	r := flight.New(flight.DefaultSize, flight.Context{Rank: 0, Size: 2})
	defer r.Close()
	for b.Loop() {
		r.PostCollective(flight.OpAllreduce, flight.NoPeer, 1, "float64", "sum").Completed()
	}
}
