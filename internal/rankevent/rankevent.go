package rankevent

import (
	"bufio"
	"encoding/json"
	"errors"
	"os"
	"time"

	"github.com/xpu-go/xpu/internal/jobenv"
)

// Kind is how a peer was lost.
type Kind string

const (
	// PeerClosed: the peer said goodbye, closing its communicator.
	PeerClosed Kind = "peer-closed"
	// PeerLost: the peer vanished without a goodbye (its connection ended
	// or failed, or it fell silent).
	PeerLost Kind = "peer-lost"
)

// MaxLine bounds the bytes of one event's line, newline included: below
// PIPE_BUF, so that appends of several ranks never interleave.
const MaxLine = 1024

// maxReason is how much of the reason an event keeps.
const maxReason = 512

// Event is one line of the file.
type Event struct {
	// Time is when the rank saw it.
	Time time.Time `json:"-"`
	// Nanos is Time in nanoseconds since the Unix epoch, as written.
	Nanos int64 `json:"t"`
	// Rank is the rank that saw it; Pid its process.
	Rank int `json:"rank"`
	Pid  int `json:"pid"`
	// Peer is the rank it lost, and Kind how.
	Peer int  `json:"peer"`
	Kind Kind `json:"kind"`
	// Reason is the error the link failed with, cut to 512 bytes.
	Reason string `json:"reason,omitempty"`
}

// PeerDown records, when the launcher asked for events, that rank lost
// peer: by its goodbye when goodbye is true, else by its vanishing, for
// reason. Call it once per peer, when the loss is seen, and not for the
// links a rank cuts itself while it closes.
func PeerDown(rank, peer int, goodbye bool, reason error) {
	path := os.Getenv(jobenv.Events)
	if path == "" {
		return
	}
	e := Event{Nanos: time.Now().UnixNano(), Rank: rank, Pid: os.Getpid(), Peer: peer, Kind: PeerLost}
	if goodbye {
		e.Kind = PeerClosed
	}
	if reason != nil {
		e.Reason = reason.Error()
		if len(e.Reason) > maxReason {
			e.Reason = e.Reason[:maxReason]
		}
	}
	_ = appendLine(path, e)
}

func appendLine(path string, e Event) error {
	line, err := json.Marshal(e)
	if err != nil {
		return err
	}
	line = append(line, '\n')
	if len(line) > MaxLine {
		return errors.New("event line too long")
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		return err
	}
	_, err = f.Write(line)
	return errors.Join(err, f.Close())
}

// Read returns the events of the file at path, in the order they were
// written; lines that are not events (cut, or written by a stranger) are
// skipped.
func Read(path string) ([]Event, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var out []Event
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 0, MaxLine), 64*MaxLine)
	for sc.Scan() {
		var e Event
		if json.Unmarshal(sc.Bytes(), &e) != nil || e.Nanos <= 0 || e.Rank < 0 || e.Peer < 0 ||
			(e.Kind != PeerClosed && e.Kind != PeerLost) {
			continue
		}
		e.Time = time.Unix(0, e.Nanos)
		out = append(out, e)
	}
	return out, sc.Err()
}
