package sweep

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/xpu-go/xpu/internal/tooling/bench/stats"
)

// Schema names the format of a Document; Read refuses any other.
const Schema = "xpu-bench-sweep/v1"

// ErrFormat is returned by Read for a document that is not a sweep
// document of this Schema, or whose points do not make sense.
var ErrFormat = errors.New("not a sweep document")

// Document is one run of a sweep: where and how it ran, the series it
// measured and every point with its samples.
type Document struct {
	// Schema is always Schema.
	Schema string `json:"schema"`
	// Command is the command line, program name first.
	Command  []string  `json:"command"`
	Started  time.Time `json:"started"`
	Finished time.Time `json:"finished"`
	Machine  Machine   `json:"machine"`
	Config   Config    `json:"config"`
	// Series lists the lines measured, ours and the references, in the
	// order they ran.
	Series []Series `json:"series"`
	Points []Point  `json:"points"`
	// Stopped says why the sweep ended before measuring everything:
	// StopBudget or StopInterrupted; empty when it ran to the end.
	Stopped string `json:"stopped,omitempty"`
	// Errors holds one line per series that failed or could not run (a
	// reference without mpirun, a job that died); the points it measured
	// before are kept.
	Errors []string `json:"errors,omitempty"`
}

// Reasons a sweep stops early (Document.Stopped).
const (
	StopBudget      = "budget"      // the time budget ran out
	StopInterrupted = "interrupted" // the command was interrupted (Ctrl-C)
)

// Machine describes where a sweep ran.
type Machine struct {
	CPU         string `json:"cpu"`    // model name
	Cores       int    `json:"cores"`  // logical CPUs
	MemoryBytes int64  `json:"memory"` // physical memory, 0 when unknown
	OS          string `json:"os"`     // GOOS/GOARCH and the distribution when known
	Kernel      string `json:"kernel,omitempty"`
	GoVersion   string `json:"go"`
	// Backends are xpu's backends in this binary; References the programs
	// measured beside them (Open MPI and its version).
	Backends   []Component `json:"backends"`
	References []Component `json:"references,omitempty"`
}

// Component is a backend or a reference: its name, its version (the
// foreign library's, when one is used) and whether it could run here.
type Component struct {
	Name      string `json:"name"`
	Version   string `json:"version,omitempty"`
	Available bool   `json:"available"`
	Reason    string `json:"reason,omitempty"` // why not available
}

// Config is what the sweep was asked to measure.
type Config struct {
	Sizes      []int64  `json:"sizes"`           // bytes, in increasing order
	Ranks      []int    `json:"ranks"`           // rank counts of the communicator series
	Ops        []string `json:"ops"`             // operations, in the order measured
	Count      int      `json:"count"`           // samples per point in each round
	Rounds     int      `json:"rounds"`          // rounds: each point has Count samples of each
	SampleTime Duration `json:"sample_time"`     // target duration of one sample
	Budget     Duration `json:"budget,omitzero"` // time budget of the whole sweep; 0 means none
	Filter     string   `json:"filter,omitempty"`
}

// Duration is a time.Duration that JSON writes as "1.5s".
type Duration time.Duration

// MarshalJSON writes d as time.Duration's String.
func (d Duration) MarshalJSON() ([]byte, error) { return json.Marshal(time.Duration(d).String()) }

// UnmarshalJSON reads what MarshalJSON writes.
func (d *Duration) UnmarshalJSON(b []byte) error {
	var s string
	if err := json.Unmarshal(b, &s); err != nil {
		return err
	}
	v, err := time.ParseDuration(s)
	if err != nil {
		return err
	}
	*d = Duration(v)
	return nil
}

// Series is one line of the sweep: a communicator or transfer path of
// ours, or a reference.
type Series struct {
	// Name identifies the series in points and plots: "tcp", "shm",
	// "local", "openmpi.tcp", "openmpi.vader", "copy.cpu", "memmove".
	Name string `json:"name"`
	// Reference is true for the programs ours are compared with.
	Reference bool `json:"reference,omitempty"`
	// Against names the reference series this one's ratios are taken
	// against, or is empty.
	Against string `json:"against,omitempty"`
	// Doc says how the series ran, in one line ("xpu run -n N, links over
	// TCP", "mpirun --mca btl self,vader").
	Doc string `json:"doc,omitempty"`
}

// Point is one operation at one size and rank count, measured Count
// times in each of Rounds rounds.
type Point struct {
	Series string `json:"series"`
	Op     string `json:"op"`    // an Op's Name
	Ranks  int    `json:"ranks"` // ranks of the communicator; 1 for a transfer
	Size   int64  `json:"size"`  // bytes, as the Op defines its size
	Iters  int    `json:"iters"` // operations timed per sample (in the first round; each round calibrates its own)
	// Samples are the time of one operation in each sample, in
	// nanoseconds: total time over Iters (and over what the Op counts as
	// one operation: half a round trip for latency, one message of the
	// window for bw and bibw).
	Samples []float64 `json:"samples_ns"`
	// Invalid, when not empty, says how the check of the results failed;
	// the samples are then figures of a wrong operation.
	Invalid string `json:"invalid,omitempty"`

	// Derived figures, written for readers of the JSON and recomputed by
	// Read: the median time (ns), and the bandwidths of the median in
	// GB/s (1e9 bytes/s) — Bandwidth for the operations whose figure is a
	// bandwidth, AlgBW and BusBW (nccl-tests' definitions) for the
	// collectives that move data.
	Median    float64 `json:"median_ns"`
	Bandwidth float64 `json:"bandwidth_gbs,omitempty"`
	AlgBW     float64 `json:"algbw_gbs,omitempty"`
	BusBW     float64 `json:"busbw_gbs,omitempty"`
}

// Key identifies a point within a document: what Compare matches points
// of two documents by.
type Key struct {
	Series string
	Op     string
	Ranks  int
	Size   int64
}

// Key returns the point's Key.
func (p Point) Key() Key { return Key{p.Series, p.Op, p.Ranks, p.Size} }

// String names the key as "op/series/np2/64KiB".
func (k Key) String() string {
	return fmt.Sprintf("%s/%s/np%d/%s", k.Op, k.Series, k.Ranks, FormatSize(k.Size))
}

// Fill computes the point's derived figures from its samples.
func (p *Point) Fill() {
	p.Median = stats.Median(p.Samples)
	p.Bandwidth, p.AlgBW, p.BusBW = 0, 0, 0
	if p.Median <= 0 {
		return
	}
	op, ok := LookupOp(p.Op)
	if !ok {
		return
	}
	if op.Metric == MetricBandwidth {
		p.Bandwidth = float64(op.bytesMoved(p.Size)) / p.Median
	}
	if op.AlgBytes != nil {
		p.AlgBW = float64(op.AlgBytes(p.Size, p.Ranks)) / p.Median
		p.BusBW = p.AlgBW * op.BusFactor(p.Ranks)
	}
}

// Write writes d as indented JSON, its derived figures filled in.
func (d *Document) Write(w io.Writer) error {
	for i := range d.Points {
		d.Points[i].Fill()
	}
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(d)
}

// WriteFile writes d to the file path (see Write).
func (d *Document) WriteFile(path string) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if err := d.Write(f); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// Read reads a document Write wrote. It refuses, with an error matching
// ErrFormat, another schema, an unknown operation, a point without samples
// or with a sample that is not a positive number, and a point whose series
// the document does not list; it recomputes the derived figures.
func Read(r io.Reader) (*Document, error) {
	var d Document
	dec := json.NewDecoder(r)
	if err := dec.Decode(&d); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrFormat, err)
	}
	if d.Schema != Schema {
		return nil, fmt.Errorf("%w: schema %q, want %q", ErrFormat, d.Schema, Schema)
	}
	series := map[string]bool{}
	for _, s := range d.Series {
		series[s.Name] = true
	}
	for i := range d.Points {
		p := &d.Points[i]
		if _, ok := LookupOp(p.Op); !ok {
			return nil, fmt.Errorf("%w: point %d: unknown operation %q", ErrFormat, i, p.Op)
		}
		if !series[p.Series] {
			return nil, fmt.Errorf("%w: point %d: series %q is not listed", ErrFormat, i, p.Series)
		}
		if len(p.Samples) == 0 || p.Ranks < 1 || p.Size < 0 || p.Iters < 1 {
			return nil, fmt.Errorf("%w: point %d (%s): no samples, or a rank count, size or iteration count out of range", ErrFormat, i, p.Key())
		}
		for _, v := range p.Samples {
			if !(v > 0) || v > 1e15 {
				return nil, fmt.Errorf("%w: point %d (%s): sample %v is not a time", ErrFormat, i, p.Key(), v)
			}
		}
		p.Fill()
	}
	return &d, nil
}

// ReadFile reads the document in the file path (see Read).
func ReadFile(path string) (*Document, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	d, err := Read(f)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return d, nil
}

// SeriesNamed returns the series of d named name.
func (d *Document) SeriesNamed(name string) (Series, bool) {
	for _, s := range d.Series {
		if s.Name == name {
			return s, true
		}
	}
	return Series{}, false
}
