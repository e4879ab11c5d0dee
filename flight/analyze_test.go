package flight_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"

	"github.com/xpu-go/xpu/flight"
)

// t0 is when the job started; the dumps are written 15 s later.
var t0 = time.Date(2026, 12, 5, 10, 0, 0, 0, time.UTC)

func dump(rank, size int, entries ...flight.JSONEntry) flight.Dump {
	for i := range entries {
		entries[i].ID = uint64(i + 1)
	}
	return flight.Dump{Rank: rank, Size: size, Reason: "timeout", Time: t0.Add(15 * time.Second), Entries: entries}
}

// at is an entry posted s seconds into the job, ended when state is not
// pending.
func at(s float64, e flight.JSONEntry) flight.JSONEntry {
	e.Posted = t0.Add(time.Duration(s * float64(time.Second)))
	if e.State != "posted" && e.State != "matched" {
		e.Ended = e.Posted.Add(time.Millisecond)
	}
	return e
}

func send(dst, tag int, state string) flight.JSONEntry {
	return flight.JSONEntry{Op: "Send", Peer: dst, Tag: tag, Count: 8, DType: "byte", State: state}
}

func recv(src, tag int, state string) flight.JSONEntry {
	return flight.JSONEntry{Op: "Recv", Peer: src, Tag: tag, Count: 8, DType: "byte", State: state}
}

func coll(op string, seq uint64, root int, dtype string, n int64, red, state string) flight.JSONEntry {
	return flight.JSONEntry{Op: op, Peer: root, Seq: seq, DType: dtype, Count: n, Reduction: red, State: state}
}

func TestAnalyzeWrongTag(t *testing.T) {
	got := flight.Analyze([]flight.Dump{
		dump(0, 2, at(0, send(1, 8, "done"))),
		dump(1, 2, at(0, recv(0, 7, "posted"))),
	})
	assert.Equal(t, []string{
		"rank 1 waits in Recv(src 0, tag 7, 8 bytes) for 15s; rank 0 sent tag 8 (1 message) to rank 1, unmatched",
		"rank 0 waits in no operation of this communicator; its last, Send(dst 1, tag 8, 8 bytes), done 15s ago",
		"rank 1 waits in Recv(src 0, tag 7, 8 bytes) for 15s",
	}, got)
}

// Messages a receive took, by tag or by a wildcard, are not reported.
func TestAnalyzeMatchedSendsNotReported(t *testing.T) {
	got := flight.Analyze([]flight.Dump{
		dump(0, 2, at(0, send(1, 8, "done")), at(1, send(1, 9, "done")), at(2, send(1, 3, "done"))),
		dump(1, 2, at(0, recv(0, 8, "done")), at(1, recv(flight.AnyPeer, flight.AnyTag, "done")),
			at(2, recv(0, 7, "posted"))),
	})
	assert.Equal(t, "rank 1 waits in Recv(src 0, tag 7, 8 bytes) for 13s; rank 0 sent tag 9 (1 message) to rank 1, unmatched",
		got[0], "the wildcard receive takes the lowest tag left, 3; 9 is unmatched")
}

func TestAnalyzeSendWithoutReceive(t *testing.T) {
	got := flight.Analyze([]flight.Dump{
		dump(0, 2, at(1, send(1, 8, "posted"))),
		dump(1, 2, at(2, recv(0, 7, "posted"))),
	})
	assert.Contains(t, got, "rank 0 waits in Send(dst 1, tag 8, 8 bytes) for 14s; rank 1 has no receive posted for it (it waits in Recv(src 0, tag 7, 8 bytes))")
	assert.Contains(t, got, "rank 1 waits in Recv(src 0, tag 7, 8 bytes) for 13s; rank 0 sent tag 8 (1 message) to rank 1, unmatched")
}

func TestAnalyzeMismatchedCollectives(t *testing.T) {
	ar := func(state string) flight.JSONEntry {
		return at(3, coll("Allreduce", 41, flight.NoPeer, "float64", 1024, "sum", state))
	}
	bar := at(2, coll("Barrier", 40, flight.NoPeer, "byte", 0, "", "done"))
	got := flight.Analyze([]flight.Dump{
		dump(0, 4, bar, ar("posted")),
		dump(1, 4, bar, at(3, coll("Bcast", 41, 0, "float64", 1024, "", "posted"))),
		dump(2, 4, bar, ar("posted")),
		dump(3, 4, bar, ar("posted")),
	})
	assert.Equal(t, "mismatched collectives at #41: ranks 0, 2, 3 in Allreduce #41 (float64 × 1024, sum); rank 1 in Bcast #41 (root 0, float64 × 1024)", got[0])
	assert.Equal(t, "rank 0 waits in Allreduce #41 (float64 × 1024, sum) for 12s", got[1])
}

func TestAnalyzeNeverEntered(t *testing.T) {
	bar := at(2, coll("Barrier", 40, flight.NoPeer, "byte", 0, "", "done"))
	ar := at(3, coll("Allreduce", 41, flight.NoPeer, "float64", 8, "sum", "posted"))
	got := flight.Analyze([]flight.Dump{
		dump(0, 3, bar, ar),
		dump(1, 3, bar, at(2.5, recv(0, 7, "posted"))),
		dump(2, 3, bar, ar),
	})
	assert.Equal(t, "rank 1 never entered Allreduce #41 (float64 × 8, sum), which ranks 0, 2 wait in for 12s; "+
		"its last collective was Barrier #40 (done); it waits in Recv(src 0, tag 7, 8 bytes) for 12.5s", got[0])
}

func TestAnalyzeMissingRank(t *testing.T) {
	got := flight.Analyze([]flight.Dump{dump(0, 3), dump(2, 3)})
	assert.Equal(t, []string{
		"no record from rank 1 (it ended before it could write one, or was not asked to)",
		"rank 0 recorded no operation",
		"rank 2 recorded no operation",
	}, got)
}

// Nothing pending and nothing mismatched: only what each rank did last.
func TestAnalyzeQuiet(t *testing.T) {
	bar := at(2, coll("Barrier", 1, flight.NoPeer, "byte", 0, "", "done"))
	got := flight.Analyze([]flight.Dump{dump(0, 2, bar), dump(1, 2, bar)})
	assert.Equal(t, []string{
		"rank 0 waits in no operation of this communicator; its last, Barrier #1, done 13s ago",
		"rank 1 waits in no operation of this communicator; its last, Barrier #1, done 13s ago",
	}, got)
}
