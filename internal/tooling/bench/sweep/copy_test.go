package sweep

import (
	"context"
	"testing"
	"time"

	"github.com/xpu-go/xpu/backends/cpu"
	"github.com/xpu-go/xpu/memspace"
)

func TestRunCopy(t *testing.T) {
	space := cpu.NewSpace(cpu.SpaceOptions{})
	defer space.Close()
	plan := Plan{Sizes: []int64{8, 4096, 1 << 20}, Count: 2, SampleTime: 200 * time.Microsecond}
	// shortCopier copies all but the last byte: a path with a bug.
	shortCopier := func(dst, src memspace.Block) (func(ctx context.Context) error, error) {
		d, _ := dst.Bytes()
		s, _ := src.Bytes()
		return func(context.Context) error { copy(d[:len(d)-1], s); return nil }, nil
	}
	for name, tc := range map[string]struct {
		cp      Copier
		invalid bool
	}{
		"transfer": {TransferCopier, false},
		"memmove":  {MemmoveCopier, false},
		"short":    {shortCopier, true},
	} {
		var points []Point
		end, err := RunCopy(context.Background(), space, space, tc.cp, plan, func(p Point) { points = append(points, p) })
		if err != nil || end != EndComplete {
			t.Fatalf("%s: end %q, %v", name, end, err)
		}
		if len(points) != len(plan.Sizes) {
			t.Fatalf("%s: %d points, want %d", name, len(points), len(plan.Sizes))
		}
		for i, p := range points {
			if p.Op != "copy" || p.Ranks != 1 || p.Size != plan.Sizes[i] || len(p.Samples) != 2 {
				t.Errorf("%s: point %s with %d samples", name, p.Key(), len(p.Samples))
			}
			if (p.Invalid != "") != tc.invalid {
				t.Errorf("%s %s: invalid %q, want invalid %v", name, p.Key(), p.Invalid, tc.invalid)
			}
			if !tc.invalid && !(p.Bandwidth > 0) {
				t.Errorf("%s %s: bandwidth %v", name, p.Key(), p.Bandwidth)
			}
		}
	}
	if st := space.Stats(); st.InUse != 0 || st.Live != 0 {
		t.Errorf("the sweep left %d bytes in %d blocks allocated", st.InUse, st.Live)
	}
	plan.Deadline = time.Now().Add(-time.Second)
	if end, err := RunCopy(context.Background(), space, space, MemmoveCopier, plan, nil); err != nil || end != EndBudget {
		t.Errorf("past the deadline: end %q, %v; want %q", end, err, EndBudget)
	}
}
