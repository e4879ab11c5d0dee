package comm

import (
	"errors"
	"fmt"
	"io"
	"reflect"
	"sync"

	"github.com/xpu-go/xpu/flight"
)

// Recording is a communicator that keeps a flight recorder (package
// flight) and records its own point-to-point requests in it: Isend,
// Irecv, and its blocking Send and Recv. Package comm records the rest —
// collectives, Put, Get, Flush — in the same recorder. Every in-tree
// backend is one; a communicator that is not gets a recorder from
// package comm, which records what its functions run (see
// FlightRecorder).
type Recording interface {
	// FlightRecorder returns the communicator's recorder; nil when it is
	// off.
	FlightRecorder() *flight.Recorder
}

// FlightRecorder returns the flight recorder of c: the one c, or a
// communicator c wraps, keeps (Recording); otherwise one package comm
// keeps for c, in which it records the calls of its functions (Send,
// Recv, Sendrecv, the collectives, Put, Get, Flush) but not the requests
// c's Isend and Irecv start when called directly. Package comm keeps a
// recorder for at most the last 64 such communicators it met, each a
// pointer (a communicator that is a value, a view or a wrapper without
// Unwrap, gets none). It returns nil for a nil c and for such a value.
func FlightRecorder(c Comm) *flight.Recorder {
	if r, ok := c.(Recording); ok {
		return r.FlightRecorder()
	}
	if r, ok := As[Recording](c); ok {
		return r.FlightRecorder()
	}
	return kept.of(c)
}

// DumpFlight writes c's flight record to w, as one JSON document that
// flight.Read reads.
func DumpFlight(c Comm, w io.Writer) error {
	_, err := FlightRecorder(c).WriteTo(w)
	return err
}

// recordsItself reports whether c records its point-to-point requests.
func recordsItself(c Comm) bool {
	if _, ok := c.(Recording); ok {
		return true
	}
	_, ok := As[Recording](c)
	return ok
}

// keptMax bounds the recorders package comm keeps for communicators that
// keep none.
const keptMax = 64

// kept holds the recorders package comm keeps, oldest first.
var kept keptRecorders

type keptRecorders struct {
	m     sync.Map   // Comm → *flight.Recorder, read without the lock
	mu    sync.Mutex // adding and evicting
	order []Comm
}

func (k *keptRecorders) of(c Comm) *flight.Recorder {
	// A pointer is a key; a value of a comparable type may still hold an
	// uncomparable one in an interface, which a map refuses by panicking.
	if c == nil || reflect.TypeOf(c).Kind() != reflect.Pointer {
		return nil
	}
	if r, ok := k.m.Load(c); ok {
		return r.(*flight.Recorder)
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	if r, ok := k.m.Load(c); ok {
		return r.(*flight.Recorder)
	}
	if len(k.order) == keptMax {
		if old, ok := k.m.LoadAndDelete(k.order[0]); ok {
			old.(*flight.Recorder).Close()
		}
		k.order = k.order[1:]
	}
	// Package comm does not see c close: the recorder reads time.Now,
	// not the shared clock, whose goroutine would outlive c.
	r := flight.NewUnclocked(flight.SizeFromEnv(), flight.Context{Rank: c.Rank(), Size: c.Size(),
		Comm: fmt.Sprintf("%T", c)})
	k.m.Store(c, r)
	k.order = append(k.order, c)
	return r
}

// endFlight records how the operation of t ended; a collective that
// failed with ErrPeerLost (revoked) also writes the record where the job
// asked for one (flight.DumpDir).
func endFlight(t flight.Ticket, err error) {
	if err == nil {
		t.Completed()
		return
	}
	if !t.Valid() {
		return
	}
	t.Finish(err)
	if err != nil && errors.Is(err, ErrPeerLost) {
		t.Recorder().DumpOnce("revoked: " + err.Error())
	}
}

// postColl records a collective of c as posted; the zero Ticket when c
// has no recorder, or when a collective of c is already in progress on
// this recorder (a wrapper delegating, staging through host memory): the
// outer call is the one recorded.
func postColl(c Comm, op flight.Op, root int, count int64, dtype, red string) flight.Ticket {
	return FlightRecorder(c).PostCollective(op, root, count, dtype, red)
}

// postP2P records a point-to-point call of package comm on a
// communicator that does not record its own.
func postP2P(c Comm, op flight.Op, peer, tag, n int) flight.Ticket {
	if recordsItself(c) {
		return flight.Ticket{}
	}
	return kept.of(c).Post(op, peer, tag, int64(n))
}
