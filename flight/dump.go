package flight

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"time"

	"github.com/xpu-go/xpu/xerr"
)

// ErrBadDump is the error of a dump that cannot be read.
var ErrBadDump = xerr.NewKind("not a flight record", xerr.ErrInvalidArgument)

// Dump is a recorder's record as written: whose it is, why and when it
// was written, and its entries, oldest first.
type Dump struct {
	Rank    int    `json:"rank"`
	Size    int    `json:"size"`
	Backend string `json:"backend,omitempty"`
	Comm    string `json:"comm,omitempty"`
	PID     int    `json:"pid"`
	Host    string `json:"host,omitempty"`
	// Reason says what made the rank write it ("SIGQUIT", "timeout",
	// "revoked: …", "api").
	Reason string    `json:"reason"`
	Time   time.Time `json:"time"`
	// Capacity is the recorder's size; Dropped counts the entries older
	// than the first, which the ring no longer holds.
	Capacity int         `json:"capacity"`
	Dropped  uint64      `json:"dropped"`
	Entries  []JSONEntry `json:"entries"`
}

// JSONEntry is an Entry as a dump writes it: names for the operation and
// the state.
type JSONEntry struct {
	ID        uint64    `json:"id"`
	Op        string    `json:"op"`
	State     string    `json:"state"`
	Peer      int       `json:"peer"`
	Tag       int       `json:"tag"`
	Count     int64     `json:"count"`
	DType     string    `json:"dtype"`
	Reduction string    `json:"reduction,omitempty"`
	Seq       uint64    `json:"seq,omitempty"`
	Posted    time.Time `json:"posted"`
	Ended     time.Time `json:"ended,omitzero"`
	Err       string    `json:"error,omitempty"`
}

// Snapshot returns the recorder's record, with reason.
func (r *Recorder) Snapshot(reason string) Dump {
	entries, dropped := r.Entries()
	ctx := r.Context()
	host, _ := os.Hostname()
	d := Dump{Rank: ctx.Rank, Size: ctx.Size, Backend: ctx.Backend, Comm: ctx.Comm, PID: os.Getpid(), Host: host,
		Reason: reason, Time: time.Now(), Dropped: dropped, Entries: make([]JSONEntry, 0, len(entries))}
	if r != nil {
		d.Capacity = len(r.ring)
	}
	for _, e := range entries {
		d.Entries = append(d.Entries, JSONEntry{ID: e.ID, Op: e.Op.String(), State: e.State.String(), Peer: e.Peer,
			Tag: e.Tag, Count: e.Count, DType: e.DType, Reduction: e.Reduction, Seq: e.Seq, Posted: e.Posted,
			Ended: e.Ended, Err: e.Err})
	}
	return d
}

// WriteTo writes the record as one JSON document, with reason "api".
func (r *Recorder) WriteTo(w io.Writer) (int64, error) {
	return writeDump(w, r.Snapshot("api"))
}

func writeDump(w io.Writer, d Dump) (int64, error) {
	b, err := json.MarshalIndent(d, "", " ")
	if err != nil {
		return 0, xerr.Op("flight", "dump", err)
	}
	n, err := w.Write(append(b, '\n'))
	if err != nil {
		return int64(n), xerr.Op("flight", "dump", err)
	}
	return int64(n), nil
}

// FileName is the name of the dump of the n-th recorder of a process
// (Recorder.Serial), rank of its communicator, in a dump directory:
// "flight.rank3.1.json". A record written again replaces the last.
func FileName(rank int, n uint64) string {
	return fmt.Sprintf("flight.rank%d.%d.json", rank, n)
}

// Serial numbers the recorders of the process from 1, in the order they
// were made.
func (r *Recorder) Serial() uint64 {
	if r == nil {
		return 0
	}
	return r.serial
}

// WriteFile writes the record into dir, as FileName names it, whole or
// not at all (through a temporary file renamed into place); it returns
// the file's path.
func (r *Recorder) WriteFile(dir, reason string) (string, error) {
	d := r.Snapshot(reason)
	path := filepath.Join(dir, FileName(d.Rank, r.Serial()))
	tmp, err := os.CreateTemp(dir, ".flight-*")
	if err != nil {
		return "", xerr.Op("flight", "dump", err)
	}
	if _, err := writeDump(tmp, d); err != nil {
		_ = tmp.Close()
		_ = os.Remove(tmp.Name())
		return "", err
	}
	if err := tmp.Close(); err != nil {
		_ = os.Remove(tmp.Name())
		return "", xerr.Op("flight", "dump", err)
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		_ = os.Remove(tmp.Name())
		return "", xerr.Op("flight", "dump", err)
	}
	return path, nil
}

// Read reads one dump.
func Read(rd io.Reader) (Dump, error) {
	var d Dump
	dec := json.NewDecoder(rd)
	dec.DisallowUnknownFields()
	if err := dec.Decode(&d); err != nil {
		return Dump{}, xerr.Errorf("flight", "read", ErrBadDump, "%w", err)
	}
	if d.Size <= 0 || d.Rank < 0 || d.Rank >= d.Size {
		return Dump{}, xerr.Errorf("flight", "read", ErrBadDump, "rank %d of a group of %d", d.Rank, d.Size)
	}
	return d, nil
}

// ReadDir reads every dump (flight.rank*.json) in dir, by rank.
func ReadDir(dir string) ([]Dump, error) {
	names, err := filepath.Glob(filepath.Join(dir, "flight.rank*.json"))
	if err != nil {
		return nil, xerr.Op("flight", "read", err)
	}
	if len(names) == 0 {
		return nil, xerr.Errorf("flight", "read", ErrBadDump, "no flight.rank*.json in %s", dir)
	}
	var out []Dump
	var errs []error
	for _, name := range names {
		f, err := os.Open(name)
		if err != nil {
			errs = append(errs, xerr.Op("flight", "read", err))
			continue
		}
		d, err := Read(f)
		_ = f.Close()
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", filepath.Base(name), err))
			continue
		}
		out = append(out, d)
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Comm != out[j].Comm {
			return out[i].Comm < out[j].Comm
		}
		return out[i].Rank < out[j].Rank
	})
	return out, errors.Join(errs...)
}

// entry converts a written entry back.
func (j JSONEntry) entry() Entry {
	return Entry{ID: j.ID, Op: opNamed(j.Op), Peer: j.Peer, Tag: j.Tag, Count: j.Count, DType: j.DType,
		Reduction: j.Reduction, Seq: j.Seq, State: stateNamed(j.State), Posted: j.Posted, Ended: j.Ended, Err: j.Err}
}

func opNamed(s string) Op {
	for i, n := range opNames {
		if n == s && i > 0 {
			return Op(i)
		}
	}
	return 0
}

func stateNamed(s string) State {
	for i, n := range stateNames {
		if n == s && i > 0 {
			return State(i)
		}
	}
	return 0
}
