package sweep

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/xpu-go/xpu/backends/local"
	"github.com/xpu-go/xpu/comm"
	"github.com/xpu-go/xpu/memspace"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// quickPlan is a plan of every communicator operation at tiny sizes and
// a short sample time.
func quickPlan(sizes ...int64) Plan {
	var ops []string
	for _, o := range Ops {
		if !o.Transfer {
			ops = append(ops, o.Name)
		}
	}
	return Plan{Ops: ops, Sizes: sizes, Count: 2, SampleTime: 200 * time.Microsecond}
}

// runGroup runs plan on every rank of comms at once and returns rank 0's
// points and every rank's end and error.
func runGroup(t *testing.T, comms []comm.Comm, plan Plan) ([]Point, []string, []error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var points []Point
	ends, errs := RunGroup(ctx, comms, plan, func(p Point) { points = append(points, p) })
	return points, ends, errs
}

func localGroup(t *testing.T, n int) []comm.Comm {
	t.Helper()
	g, err := local.NewGroup(n, local.Options{})
	if err != nil {
		t.Fatal(err)
	}
	out := make([]comm.Comm, n)
	for i, c := range g {
		out[i] = c
		t.Cleanup(func() { _ = c.Close() })
	}
	return out
}

func TestRunRankMeasuresAndChecksEveryPoint(t *testing.T) {
	for _, n := range []int{1, 2, 3} {
		plan := quickPlan(4, 8, 1<<10)
		points, ends, errs := runGroup(t, localGroup(t, n), plan)
		for r := range n {
			if errs[r] != nil || ends[r] != EndComplete {
				t.Fatalf("np%d rank %d: end %q, error %v", n, r, ends[r], errs[r])
			}
		}
		want := plan.Points(n)
		if len(points) != len(want) {
			t.Fatalf("np%d: %d points, want %d (%v)", n, len(points), len(want), want)
		}
		for i, p := range points {
			if p.Op != want[i].Op || p.Size != want[i].Size || p.Ranks != n {
				t.Errorf("np%d point %d: %s, want %s", n, i, p.Key(), want[i].Key())
			}
			if p.Invalid != "" || len(p.Samples) != plan.Count || p.Iters < 1 || !(p.Median > 0) {
				t.Errorf("np%d %s: invalid %q, %d samples, %d iters, median %v", n, p.Key(), p.Invalid, len(p.Samples), p.Iters, p.Median)
			}
		}
		// Point-to-point operations at 2 ranks only; reductions skip 4 bytes.
		if hasLatency := slices.ContainsFunc(points, func(p Point) bool { return p.Op == "latency" }); hasLatency != (n == 2) {
			t.Errorf("np%d: latency measured: %v", n, hasLatency)
		}
		if slices.ContainsFunc(points, func(p Point) bool { return p.Op == "allreduce" && p.Size == 4 }) {
			t.Errorf("np%d measured an allreduce of 4 bytes", n)
		}
	}
}

// corrupting is a communicator that flips the first byte of every
// message it receives, without native collectives, so that every
// operation that moves data delivers a wrong result.
type corrupting struct{ comm.Comm }

type corruptReq struct {
	comm.Request
	buf memspace.Block
}

func (c corrupting) Irecv(buf memspace.Block, source, tag int) (comm.Request, error) {
	r, err := c.Comm.Irecv(buf, source, tag)
	return corruptReq{r, buf}, err
}

func (r corruptReq) Wait(ctx context.Context) (comm.Status, error) {
	st, err := r.Request.Wait(ctx)
	if err == nil && st.Count > 0 {
		if b, berr := r.buf.Bytes(); berr == nil {
			b[0]++ // not an involution: a message forwarded twice stays wrong
		}
	}
	return st, err
}

func (r corruptReq) Test() (comm.Status, bool, error) {
	st, done, err := r.Request.Test()
	if done {
		// Settle through Wait, which corrupts once.
		st, err = r.Wait(context.Background())
	}
	return st, done, err
}

func TestRunRankCatchesWrongResults(t *testing.T) {
	g := localGroup(t, 3)
	comms := make([]comm.Comm, len(g))
	for i, c := range g {
		comms[i] = corrupting{c}
	}
	plan := quickPlan(64)
	plan.Count = 1
	points, _, errs := runGroup(t, comms, plan)
	for r, err := range errs {
		if err != nil {
			t.Fatalf("rank %d: %v", r, err)
		}
	}
	if len(points) == 0 {
		t.Fatal("no point")
	}
	for _, p := range points {
		if p.Op == "barrier" {
			if p.Invalid != "" {
				t.Errorf("barrier marked invalid: %s", p.Invalid)
			}
			continue
		}
		if p.Invalid == "" {
			t.Errorf("%s: a corrupted result passed the check", p.Key())
		}
	}
}

func TestRunRankStopsAtDeadline(t *testing.T) {
	plan := quickPlan(8, 16, 32)
	plan.Deadline = time.Now().Add(-time.Second)
	points, ends, errs := runGroup(t, localGroup(t, 2), plan)
	for r := range 2 {
		if errs[r] != nil || ends[r] != EndBudget {
			t.Fatalf("rank %d: end %q, error %v; want %q", r, ends[r], errs[r], EndBudget)
		}
	}
	if len(points) != 0 {
		t.Errorf("%d points measured after the deadline", len(points))
	}
}

func TestRunRankCanceled(t *testing.T) {
	comms := localGroup(t, 2)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, errs := RunGroup(ctx, comms, quickPlan(8), nil)
	for r, err := range errs {
		if !errors.Is(err, context.Canceled) {
			t.Errorf("rank %d: %v, want context.Canceled", r, err)
		}
	}
}

func TestPlanCheck(t *testing.T) {
	good := quickPlan(8)
	for name, mod := range map[string]func(*Plan){
		"no ops":      func(p *Plan) { p.Ops = nil },
		"unknown op":  func(p *Plan) { p.Ops = []string{"allreduce", "gossip"} },
		"transfer op": func(p *Plan) { p.Ops = []string{"copy"} },
		"no sizes":    func(p *Plan) { p.Sizes = nil },
		"zero size":   func(p *Plan) { p.Sizes = []int64{0} },
		"huge size":   func(p *Plan) { p.Sizes = []int64{MaxSize + 1} },
		"count":       func(p *Plan) { p.Count = 0 },
		"sample time": func(p *Plan) { p.SampleTime = 0 },
	} {
		p := good
		mod(&p)
		if err := p.Check(); !errors.Is(err, ErrPlan) {
			t.Errorf("%s: %v, want ErrPlan", name, err)
		}
	}
	if err := good.Check(); err != nil {
		t.Fatal(err)
	}
}

func TestWindow(t *testing.T) {
	for s, want := range map[int64]int{8: 64, 2 << 20: 64, 4 << 20: 32, 32 << 20: 4, 64 << 20: 4, 1 << 30: 4} {
		if got := Window(s); got != want {
			t.Errorf("Window(%d) = %d, want %d", s, got, want)
		}
	}
}
