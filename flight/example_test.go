package flight_test

import (
	"fmt"
	"time"

	"github.com/xpu-go/xpu/flight"
)

// Two ranks' records, as `xpu run` gathers them when its timeout expires:
// rank 1 waits for tag 7, and rank 0 sent tag 8.
func ExampleAnalyze() {
	at := time.Date(2026, 12, 5, 10, 0, 0, 0, time.UTC)
	dumps := []flight.Dump{
		{Rank: 0, Size: 2, Time: at.Add(15 * time.Second), Entries: []flight.JSONEntry{
			{ID: 1, Op: "Send", State: "done", Peer: 1, Tag: 8, Count: 64, DType: "byte", Posted: at, Ended: at},
		}},
		{Rank: 1, Size: 2, Time: at.Add(15 * time.Second), Entries: []flight.JSONEntry{
			{ID: 1, Op: "Recv", State: "posted", Peer: 0, Tag: 7, Count: 64, DType: "byte", Posted: at},
		}},
	}
	for _, line := range flight.Analyze(dumps) {
		fmt.Println(line)
	}
	// Output:
	// rank 1 waits in Recv(src 0, tag 7, 64 bytes) for 15s; rank 0 sent tag 8 (1 message) to rank 1, unmatched
	// rank 0 waits in no operation of this communicator; its last, Send(dst 1, tag 8, 64 bytes), done 15s ago
	// rank 1 waits in Recv(src 0, tag 7, 64 bytes) for 15s
}

// A rank's recorder: a receive posted, a send that completed as it
// started, and a collective numbered by the recorder.
func ExampleRecorder() {
	r := flight.New(flight.DefaultSize, flight.Context{Rank: 0, Size: 2, Backend: "mine"})
	defer r.Close()
	recv := r.Post(flight.OpRecv, 1, 7, 64)
	r.Record(flight.OpSend, 1, 8, 64)
	coll := r.PostCollective(flight.OpAllreduce, flight.NoPeer, 1024, "float64", "sum")
	coll.End(nil, false)
	recv.End(nil, false)
	entries, _ := r.Entries()
	for _, e := range entries {
		fmt.Println(e.ID, e.Op, e.State, e.Seq)
	}
	// Output:
	// 1 Recv done 0
	// 2 Send done 0
	// 3 Allreduce done 1
}
