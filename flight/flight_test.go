package flight_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/xpu-go/xpu/flight"
	"github.com/xpu-go/xpu/internal/tooling/testwait"
	"github.com/xpu-go/xpu/xerr"
)

func newRec(t *testing.T, size, rank, n int) *flight.Recorder {
	t.Helper()
	r := flight.New(size, flight.Context{Rank: rank, Size: n, Backend: "test"})
	t.Cleanup(r.Close)
	return r
}

func TestRecordStates(t *testing.T) {
	r := newRec(t, 8, 0, 2)
	send := r.Post(flight.OpSend, 1, 7, 8)
	recv := r.Post(flight.OpRecv, flight.AnyPeer, flight.AnyTag, 16)
	coll := r.PostCollective(flight.OpAllreduce, flight.NoPeer, 1024, "float64", "sum")
	send.End(nil, false)
	recv.Matched()
	coll.End(errors.New("peer lost"), false)
	coll2 := r.PostCollective(flight.OpBcast, 0, 3, "int32", "")
	coll2.End(nil, true)
	coll2.End(nil, false) // only the first End counts
	es, dropped := r.Entries()
	require.Len(t, es, 4)
	assert.Zero(t, dropped)
	assert.Equal(t, []flight.State{flight.Done, flight.Matched, flight.Failed, flight.Cancelled},
		[]flight.State{es[0].State, es[1].State, es[2].State, es[3].State})
	assert.Equal(t, "byte", es[0].DType)
	assert.Equal(t, uint64(1), es[2].Seq)
	assert.Equal(t, uint64(2), es[3].Seq)
	assert.Equal(t, "peer lost", es[2].Err)
	assert.False(t, es[0].Ended.IsZero())
	assert.True(t, es[1].Ended.IsZero(), "a matched receive has not ended")
	for i, e := range es {
		assert.Equal(t, uint64(i+1), e.ID)
		assert.WithinDuration(t, time.Now(), e.Posted, time.Second)
	}
}

// A collective posted while another is in progress is part of it (a
// wrapper delegating, staging): it is not recorded and takes no sequence
// number.
func TestNestedCollective(t *testing.T) {
	r := newRec(t, 8, 0, 2)
	outer := r.PostCollective(flight.OpAllreduce, flight.NoPeer, 8, "float64", "sum")
	inner := r.PostCollective(flight.OpAllreduce, flight.NoPeer, 8, "float64", "sum")
	assert.False(t, inner.Valid())
	inner.End(nil, false)
	outer.End(nil, false)
	next := r.PostCollective(flight.OpBarrier, flight.NoPeer, 0, "", "")
	assert.True(t, next.Valid(), "the collective after the outer one ended is recorded")
	es, _ := r.Entries()
	require.Len(t, es, 2)
	assert.Equal(t, uint64(1), es[0].Seq)
	assert.Equal(t, uint64(2), es[1].Seq)
}

// The ring keeps the last entries and counts those it dropped; a ticket
// of an overwritten entry changes nothing.
func TestRingWraps(t *testing.T) {
	r := newRec(t, 4, 0, 2)
	first := r.Post(flight.OpSend, 1, 0, 1)
	for i := 1; i < 10; i++ {
		r.Post(flight.OpSend, 1, i, 1)
	}
	first.End(errors.New("late"), false)
	es, dropped := r.Entries()
	require.Len(t, es, 4)
	assert.Equal(t, uint64(6), dropped)
	for i, e := range es {
		assert.Equal(t, 6+i, e.Tag)
		assert.Equal(t, flight.Posted, e.State, "entry %d was changed by the ticket of an entry it replaced", e.ID)
	}
}

// Records from several goroutines at once, while the record is read
// (run under -race): every entry read is whole — its count is its tag,
// and its peer the goroutine's — and at the end the IDs number every
// record once.
func TestRecordsWhileReading(t *testing.T) {
	r := newRec(t, 64, 0, 2)
	const writers, each = 4, 3000
	var wg sync.WaitGroup
	for g := range writers {
		wg.Go(func() {
			for i := range each {
				r.Record(flight.OpSend, g, i, int64(i))
			}
		})
	}
	check := func(es []flight.Entry) {
		for _, e := range es {
			if e.Count != int64(e.Tag) || e.Peer < 0 || e.Peer >= writers || e.Op != flight.OpSend || e.State != flight.Done {
				t.Errorf("entry %d: %+v: a torn entry", e.ID, e)
			}
		}
	}
	wg.Go(func() {
		for range 300 {
			es, _ := r.Entries()
			check(es)
		}
	})
	testwait.Group(t, &wg, "records from four goroutines, and reading")
	es, dropped := r.Entries()
	require.Len(t, es, 64)
	assert.Equal(t, uint64(writers*each-64), dropped)
	check(es)
	for i := 1; i < len(es); i++ {
		assert.Equal(t, es[i-1].ID+1, es[i].ID)
	}
	assert.Equal(t, uint64(writers*each), es[len(es)-1].ID)
}

func TestOff(t *testing.T) {
	r := flight.New(flight.Off, flight.Context{})
	assert.Nil(t, r)
	tk := r.Post(flight.OpSend, 1, 0, 1)
	assert.False(t, tk.Valid())
	tk.End(nil, false)
	es, _ := r.Entries()
	assert.Empty(t, es)
	r.Close()
	// A Recorder's zero value records nothing either, and closes.
	var zero flight.Recorder
	zero.Record(flight.OpSend, 1, 0, 1)
	zero.Post(flight.OpRecv, 1, 0, 1).Completed()
	zero.PostCollective(flight.OpBarrier, flight.NoPeer, 0, "", "").Completed()
	es, _ = zero.Entries()
	assert.Empty(t, es)
	zero.Close()
	zero.Close()
}

// Records and dumps from many goroutines at once (run under -race).
func TestConcurrent(t *testing.T) {
	r := newRec(t, 64, 0, 2)
	var wg sync.WaitGroup
	for g := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 500 {
				tk := r.Post(flight.OpSend, 1, g, int64(i))
				tk.Matched()
				tk.End(nil, false)
			}
		}()
	}
	wg.Add(1)
	go func() {
		defer wg.Done()
		for range 50 {
			var b bytes.Buffer
			_, err := r.WriteTo(&b)
			assert.NoError(t, err)
		}
	}()
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(20 * time.Second):
		t.Fatal("recording from 4 goroutines and dumping did not finish within 20s")
	}
	es, dropped := r.Entries()
	assert.Len(t, es, 64)
	assert.Equal(t, uint64(2000-64), dropped)
}

func TestDumpRoundTrip(t *testing.T) {
	dir := t.TempDir()
	r := newRec(t, 8, 1, 3)
	r.Post(flight.OpRecv, 0, 7, 8)
	r.PostCollective(flight.OpReduce, 2, 5, "float32", "max").End(nil, false)
	path, err := r.WriteFile(dir, "SIGQUIT")
	require.NoError(t, err)
	assert.Equal(t, filepath.Join(dir, fmt.Sprintf("flight.rank1.%d.json", r.Serial())), path)
	assert.NotZero(t, r.Serial())
	ds, err := flight.ReadDir(dir)
	require.NoError(t, err)
	require.Len(t, ds, 1)
	d := ds[0]
	assert.Equal(t, 1, d.Rank)
	assert.Equal(t, 3, d.Size)
	assert.Equal(t, "SIGQUIT", d.Reason)
	assert.Equal(t, os.Getpid(), d.PID)
	require.Len(t, d.Entries, 2)
	assert.Equal(t, "Recv", d.Entries[0].Op)
	assert.Equal(t, "posted", d.Entries[0].State)
	assert.Equal(t, "Reduce", d.Entries[1].Op)
	assert.Equal(t, "max", d.Entries[1].Reduction)
	leftovers, _ := filepath.Glob(filepath.Join(dir, ".flight-*"))
	assert.Empty(t, leftovers, "temporary files left behind")
}

func TestReadRefuses(t *testing.T) {
	for _, in := range []string{"", "not json", `{"rank":3,"size":2}`, `{"rank":0,"size":2,"bogus":1}`} {
		_, err := flight.Read(strings.NewReader(in))
		assert.ErrorIs(t, err, flight.ErrBadDump, "%q", in)
		assert.ErrorIs(t, err, xerr.ErrInvalidArgument, "%q", in)
		assert.NotContains(t, err.Error(), "\n")
	}
	_, err := flight.ReadDir(t.TempDir())
	assert.ErrorIs(t, err, flight.ErrBadDump)
	assert.Contains(t, err.Error(), "no flight.rank*.json in ")
}

// Finish tells the state by the error: done, cancelled (a cancel or a
// context's end), or failed.
func TestFinish(t *testing.T) {
	r := newRec(t, 8, 0, 2)
	for _, err := range []error{nil, context.Canceled, fmt.Errorf("wait: %w", context.DeadlineExceeded),
		xerr.Errorf("test", "recv", xerr.ErrCanceled, "rank 1"), errors.New("peer lost")} {
		r.Post(flight.OpRecv, 1, 0, 8).Finish(err)
	}
	es, _ := r.Entries()
	require.Len(t, es, 5)
	assert.Equal(t, []flight.State{flight.Done, flight.Cancelled, flight.Cancelled, flight.Cancelled, flight.Failed},
		[]flight.State{es[0].State, es[1].State, es[2].State, es[3].State, es[4].State})
	flight.Ticket{}.Finish(nil) // the zero Ticket records nothing
}
