package comm_test

import (
	"context"
	"testing"

	"github.com/xpu-go/xpu/comm"
	"github.com/xpu-go/xpu/flight"
	"github.com/xpu-go/xpu/memspace"
)

// nopColl is a communicator whose native collectives do nothing: the
// benchmarks below time what the Block-level functions spend validating
// before they reach a backend (the fixed cost a native backend such as MPI
// pays on every call, small messages included).
type nopColl struct{ rank, size int }

var (
	_ comm.Comm        = (*nopColl)(nil)
	_ comm.Collectives = (*nopColl)(nil)
)

func (c *nopColl) Rank() int { return c.rank }
func (c *nopColl) Size() int { return c.size }
func (c *nopColl) Isend(memspace.Block, int, int) (comm.Request, error) {
	return nil, comm.ErrNotSupported
}
func (c *nopColl) Irecv(memspace.Block, int, int) (comm.Request, error) {
	return nil, comm.ErrNotSupported
}
func (c *nopColl) Close() error                  { return nil }
func (c *nopColl) Barrier(context.Context) error { return nil }
func (c *nopColl) Bcast(context.Context, memspace.Block, int) error {
	return nil
}
func (c *nopColl) Reduce(context.Context, memspace.Block, memspace.Block, comm.DType, comm.Op, int) error {
	return nil
}
func (c *nopColl) Allreduce(context.Context, memspace.Block, memspace.Block, comm.DType, comm.Op) error {
	return nil
}
func (c *nopColl) Gather(context.Context, memspace.Block, memspace.Block, int) error  { return nil }
func (c *nopColl) Scatter(context.Context, memspace.Block, memspace.Block, int) error { return nil }
func (c *nopColl) Allgather(context.Context, memspace.Block, memspace.Block) error    { return nil }
func (c *nopColl) Alltoall(context.Context, memspace.Block, memspace.Block) error     { return nil }
func (c *nopColl) ReduceScatter(context.Context, memspace.Block, memspace.Block, comm.DType, comm.Op) error {
	return nil
}

// BenchmarkValidation times the Block-level collectives on a communicator
// whose native methods return at once: the cost of validation and
// dispatch alone, per call, for 8-byte (one float64) vectors on rank 0 of
// 2.
func BenchmarkValidation(b *testing.B) {
	ctx := context.Background()
	var c comm.Comm = &nopColl{rank: 0, size: 2}
	one := func() memspace.Block { return buf(b, make([]float64, 1)).Block() }
	two := func() memspace.Block { return buf(b, make([]float64, 2)).Block() }
	s, r := one(), one()
	s2, r2 := two(), two()
	cases := []struct {
		name string
		fn   func() error
	}{
		{"barrier", func() error { return comm.Barrier(ctx, c) }},
		{"bcast", func() error { return comm.BcastBlock(ctx, c, s, 0) }},
		{"reduce", func() error { return comm.ReduceBlock(ctx, c, s, r, comm.Float64, comm.Sum, 0) }},
		{"allreduce", func() error { return comm.AllreduceBlock(ctx, c, s, r, comm.Float64, comm.Sum) }},
		{"allreduce/inplace", func() error { return comm.AllreduceBlock(ctx, c, s, s, comm.Float64, comm.Sum) }},
		{"gather", func() error { return comm.GatherBlock(ctx, c, s, r2, 0) }},
		{"scatter", func() error { return comm.ScatterBlock(ctx, c, s2, r, 0) }},
		{"allgather", func() error { return comm.AllgatherBlock(ctx, c, s, r2) }},
		{"alltoall", func() error { return comm.AlltoallBlock(ctx, c, s2, r2) }},
		{"reduce-scatter", func() error { return comm.ReduceScatterBlock(ctx, c, s2, r, comm.Float64, comm.Sum) }},
	}
	for _, cs := range cases {
		b.Run(cs.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if err := cs.fn(); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkValidationTyped times the typed collectives on the same
// communicator: the Block-level checks plus those of the buffers.
func BenchmarkValidationTyped(b *testing.B) {
	ctx := context.Background()
	var c comm.Comm = &nopColl{rank: 0, size: 2}
	s, r := buf(b, make([]float64, 1)), buf(b, make([]float64, 1))
	b.Run("allreduce", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if err := comm.Allreduce(ctx, c, s, r, comm.Sum); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("bcast", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if err := comm.Bcast(ctx, c, s, 0); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// recColl is nopColl with a flight recorder of its own, as every backend
// of this project has: package comm then keeps none for it, and the
// benchmark times the checks and the recorder's entry alone.
type recColl struct {
	nopColl
	rec *flight.Recorder
}

func (c *recColl) FlightRecorder() *flight.Recorder { return c.rec }

// BenchmarkValidationRecorded times the typed 8-byte allreduce on a
// communicator whose native collectives return at once and that records
// its own operations: what package comm adds to every small collective of
// a backend, with the recorder on (its default) and off.
func BenchmarkValidationRecorded(b *testing.B) {
	ctx := context.Background()
	for _, on := range []bool{true, false} {
		b.Run(map[bool]string{true: "recorder", false: "norecorder"}[on], func(b *testing.B) {
			c := &recColl{nopColl: nopColl{rank: 0, size: 2}}
			if on {
				c.rec = flight.New(flight.DefaultSize, flight.Context{Rank: 0, Size: 2})
				defer c.rec.Close()
			}
			s, r := buf(b, make([]float64, 1)), buf(b, make([]float64, 1))
			b.ReportAllocs()
			for b.Loop() {
				if err := comm.Allreduce(ctx, c, s, r, comm.Sum); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
