package sweep

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"sync"
	"time"

	"github.com/xpu-go/xpu/comm"
	"github.com/xpu-go/xpu/memspace"
)

// ErrPlan is returned by Plan.Check and RunRank for a plan that cannot be
// measured.
var ErrPlan = errors.New("bad sweep plan")

// MaxIters bounds the operations timed in one sample.
const MaxIters = 1 << 20

// Plan is what every rank of a sweep measures. All ranks must be given
// the same plan (Deadline aside: only rank 0's is read).
type Plan struct {
	// Ops are operation names (Ops); they are measured in the order of
	// Ops whatever their order here. Transfer operations are not a
	// communicator's and are refused.
	Ops []string
	// Sizes are message sizes in bytes; each operation is measured at
	// those it applies to (Op.Applies), in increasing order. Barrier has
	// one point, size 0.
	Sizes []int64
	// Count is the number of samples of each point, at least 1.
	Count int
	// SampleTime is the time one sample aims at: the operations timed per
	// sample are calibrated to it (within [1, MaxIters]).
	SampleTime time.Duration
	// Deadline, when not zero, stops the sweep at the first sample that
	// ends after it: the point being measured is dropped, the points
	// before are kept.
	Deadline time.Time
}

// Check refuses a plan without operations or sizes, with an unknown or a
// transfer operation, a size out of range or a count below 1.
func (p Plan) Check() error {
	if len(p.Ops) == 0 {
		return fmt.Errorf("%w: no operation", ErrPlan)
	}
	for _, name := range p.Ops {
		op, ok := LookupOp(name)
		if !ok {
			return fmt.Errorf("%w: unknown operation %q", ErrPlan, name)
		}
		if op.Transfer {
			return fmt.Errorf("%w: %q is a transfer, not an operation of a communicator", ErrPlan, name)
		}
	}
	if len(p.Sizes) == 0 {
		return fmt.Errorf("%w: no size", ErrPlan)
	}
	for _, s := range p.Sizes {
		if s < 1 || s > MaxSize {
			return fmt.Errorf("%w: size %d out of range [1, %s]", ErrPlan, s, FormatSize(MaxSize))
		}
	}
	if p.Count < 1 {
		return fmt.Errorf("%w: count %d: want at least 1 sample", ErrPlan, p.Count)
	}
	if p.SampleTime <= 0 {
		return fmt.Errorf("%w: sample time %v: want a positive duration", ErrPlan, p.SampleTime)
	}
	return nil
}

// Points lists the points the plan measures on ranks ranks, in order:
// (operation, size) pairs, without ranks and samples.
func (p Plan) Points(ranks int) []Point {
	var out []Point
	for _, op := range Ops {
		if !slices.Contains(p.Ops, op.Name) || op.Transfer || (op.P2P && ranks != 2) {
			continue
		}
		if op.NoSize {
			out = append(out, Point{Op: op.Name, Ranks: ranks})
			continue
		}
		for _, s := range p.Sizes {
			if op.Applies(s) {
				out = append(out, Point{Op: op.Name, Ranks: ranks, Size: s})
			}
		}
	}
	return out
}

// Ends of RunRank: a sweep runs to its end or stops at its deadline.
const (
	EndComplete = "complete"
	EndBudget   = StopBudget
)

// RunRank runs the sweep of plan on the rank c; every rank of c's group
// must call it with the same plan. Rank 0 calls emit with each point as
// soon as it is measured (the other ranks never call it; emit may be nil
// there). It returns EndComplete, or EndBudget when the deadline stopped
// it, or the first error of an operation (then the group is in an
// unknown state: close it). The protocol, which the Open MPI reference
// follows too, is documented in ref/sweep_mpi_ref.c.
func RunRank(ctx context.Context, c comm.Comm, plan Plan, emit func(Point)) (string, error) {
	if err := plan.Check(); err != nil {
		return "", err
	}
	r := &ranker{ctx: ctx, c: c, plan: plan, rank: c.Rank(), n: c.Size()}
	r.ctl, _ = memspace.FromSlice(r.ctlv[:])
	for seed, pt := range plan.Points(r.n) {
		op, _ := LookupOp(pt.Op)
		p, stopped, err := r.point(op, pt.Size, seed)
		if seed == 0 && err == nil && !stopped {
			// The first point is measured twice and the first time
			// discarded: a job's first moments (page faults, the runtime
			// and the links settling) belong to no point.
			p, stopped, err = r.point(op, pt.Size, seed)
		}
		if err != nil {
			return "", fmt.Errorf("%s at %s on %d ranks: %w", pt.Op, FormatSize(pt.Size), r.n, err)
		}
		if stopped {
			return EndBudget, nil
		}
		if r.rank == 0 && emit != nil {
			emit(p)
		}
	}
	return EndComplete, nil
}

// RunGroup runs RunRank on every rank of comms, a group of this process,
// at once, and returns each rank's end and error. A rank that fails
// closes its communicator, so that the others see it lost instead of
// waiting for it.
func RunGroup(ctx context.Context, comms []comm.Comm, plan Plan, emit func(Point)) (ends []string, errs []error) {
	ends, errs = make([]string, len(comms)), make([]error, len(comms))
	var wg sync.WaitGroup
	for i, c := range comms {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if ends[i], errs[i] = RunRank(ctx, c, plan, emit); errs[i] != nil {
				_ = c.Close()
			}
		}()
	}
	wg.Wait()
	return ends, errs
}

// ranker is one rank's state during a sweep.
type ranker struct {
	ctx     context.Context
	c       comm.Comm
	plan    Plan
	rank, n int
	// ctlv is the control vector each sample ends with: its time, the
	// stop flag and the failed-check flag, reduced with Max (ctl views it).
	ctlv [3]float64
	ctl  *memspace.Buffer[float64]
}

// point measures one operation at one size: a warm-up sample, the
// calibration of the iterations, then Count samples.
func (r *ranker) point(op Op, size int64, seed int) (p Point, stopped bool, err error) {
	b, err := r.body(op, size, seed)
	if err != nil {
		return Point{}, false, err
	}
	sample := func(iters int) (float64, bool, bool, error) { return r.sample(b, iters) }
	p = Point{Op: op.Name, Ranks: r.n, Size: size}
	stopped, err = measure(&p, sample, r.plan, float64(b.per), "a rank's check of the results failed")
	return p, stopped, err
}

// measure runs a point's protocol with sample, which times iters
// operations and says whether to stop and whether the check failed: a
// warm-up sample of one operation, the calibration of the iterations to
// plan.SampleTime, both discarded, then plan.Count samples, each divided
// by the iterations times per (what one operation counts, per iteration).
// It fills p's Iters, Samples and Invalid (with bad, on a failed check).
func measure(p *Point, sample func(iters int) (ns float64, stop, bad bool, err error), plan Plan, per float64, bad string) (stopped bool, err error) {
	if _, stop, _, err := sample(1); err != nil || stop {
		return stop, err
	}
	target := float64(plan.SampleTime.Nanoseconds())
	iters := 1
	for range 20 {
		t, stop, _, err := sample(iters)
		if err != nil || stop {
			return stop, err
		}
		if t >= target/2 || iters >= MaxIters {
			break
		}
		next := math.Ceil(float64(iters) * target / math.Max(t, 1))
		iters = int(math.Min(MaxIters, math.Max(2*float64(iters), next)))
	}
	p.Iters = iters
	for range plan.Count {
		t, stop, failed, err := sample(iters)
		if err != nil || stop {
			return stop, err
		}
		if failed && p.Invalid == "" {
			p.Invalid = bad
		}
		p.Samples = append(p.Samples, t/(float64(iters)*per))
	}
	p.Fill()
	return false, nil
}

// sample times iters operations of b after a barrier, checks the result
// and agrees with the other ranks on the slowest rank's time, whether
// rank 0's deadline has passed and whether any check failed.
func (r *ranker) sample(b *body, iters int) (ns float64, stop, bad bool, err error) {
	b.poison()
	if err := comm.Barrier(r.ctx, r.c); err != nil {
		return 0, false, false, err
	}
	start := time.Now()
	for range iters {
		if err := b.run(r.ctx); err != nil {
			return 0, false, false, err
		}
	}
	elapsed := time.Since(start)
	r.ctlv = [3]float64{float64(elapsed.Nanoseconds()), 0, 0}
	if !b.check() {
		r.ctlv[2] = 1
	}
	if r.rank == 0 && !r.plan.Deadline.IsZero() && time.Now().After(r.plan.Deadline) {
		r.ctlv[1] = 1
	}
	if err := comm.Allreduce(r.ctx, r.c, r.ctl, r.ctl, comm.Max); err != nil {
		return 0, false, false, err
	}
	return r.ctlv[0], r.ctlv[1] != 0, r.ctlv[2] != 0, nil
}

// body is one operation at one size on this rank: one iteration of it,
// how to poison its receive buffers before a sample and how to check
// them after, and how many operations an iteration counts as.
type body struct {
	run    func(ctx context.Context) error
	poison func()
	check  func() bool
	per    int
}

// Window is the number of messages bw and bibw keep in flight at size s:
// OSU's 64, fewer for messages above 2 MiB so that a window holds at most
// 128 MiB (and at least 4 messages).
func Window(s int64) int { return int(min(64, max(4, (128<<20)/s))) }

// Pattern fills buf with the bytes of seed: byte i is i*131 + seed*7 +
// i>>12, truncated (the reference program fills its buffers alike).
func Pattern(buf []byte, seed int) {
	for i := range buf {
		buf[i] = byte(int64(i)*131 + int64(seed)*7 + int64(i)>>12)
	}
}

// pattern returns a new buffer of n bytes filled with Pattern.
func pattern(n int64, seed int) []byte {
	b := make([]byte, n)
	Pattern(b, seed)
	return b
}

// poisonBytes sets every byte of the buffers to 0xFF (for float64
// elements, a NaN: never a right answer).
func poisonBytes(bufs ...[]byte) {
	for _, b := range bufs {
		if len(b) == 0 {
			continue
		}
		b[0] = 0xFF
		for done := 1; done < len(b); done *= 2 {
			copy(b[done:], b[:done])
		}
	}
}

// blk returns the block over s.
func blk[T any](s []T) memspace.Block {
	v, err := memspace.FromSlice(s)
	if err != nil {
		panic(err) // byte and float64 slices are always accepted
	}
	return v.Block()
}

func noop()        {}
func always() bool { return true }

// body builds op's buffers at size s for this rank, as the protocol
// says: send buffers filled once, expected results computed once.
func (r *ranker) body(op Op, s int64, seed int) (*body, error) {
	c, rank, n := r.c, r.rank, r.n
	b := &body{poison: noop, check: always, per: 1}
	switch op.Name {
	case "latency":
		b.per = 2
		sbuf, rbuf, want := pattern(s, seed), make([]byte, s), pattern(s, seed)
		sb, rb := blk(sbuf), blk(rbuf)
		b.poison = func() { poisonBytes(rbuf) }
		b.check = func() bool { return bytes.Equal(rbuf, want) }
		if rank == 0 {
			b.run = func(ctx context.Context) error {
				if err := comm.Send(ctx, c, sb, 1, 1); err != nil {
					return err
				}
				_, err := comm.Recv(ctx, c, rb, 1, 1)
				return err
			}
		} else {
			b.run = func(ctx context.Context) error {
				if _, err := comm.Recv(ctx, c, rb, 0, 1); err != nil {
					return err
				}
				return comm.Send(ctx, c, rb, 0, 1)
			}
		}
	case "bw", "bibw":
		w := Window(s)
		b.per = w
		peer := 1 - rank
		sendSeed, recvSeed := seed, seed
		if op.Name == "bibw" {
			sendSeed, recvSeed = seed+64*rank, seed+64*peer
		}
		var sends, recvs []memspace.Block
		var rbufs, wants [][]byte
		sends0 := op.Name == "bibw" || rank == 0
		recvs0 := op.Name == "bibw" || rank == 1
		for j := range w {
			if sends0 {
				sends = append(sends, blk(pattern(s, sendSeed+j)))
			}
			if recvs0 {
				rb := make([]byte, s)
				rbufs, wants = append(rbufs, rb), append(wants, pattern(s, recvSeed+j))
				recvs = append(recvs, blk(rb))
			}
		}
		ack := blk(make([]byte, 4))
		reqs := make([]comm.Request, 0, 2*w)
		b.poison = func() { poisonBytes(rbufs...) }
		b.check = func() bool {
			for j := range rbufs {
				if !bytes.Equal(rbufs[j], wants[j]) {
					return false
				}
			}
			return true
		}
		b.run = func(ctx context.Context) error {
			reqs = reqs[:0]
			for _, rb := range recvs {
				q, err := c.Irecv(rb, peer, 2)
				if err != nil {
					return err
				}
				reqs = append(reqs, q)
			}
			for _, sb := range sends {
				q, err := c.Isend(sb, peer, 2)
				if err != nil {
					return err
				}
				reqs = append(reqs, q)
			}
			if err := comm.WaitAll(ctx, reqs...); err != nil {
				return err
			}
			switch {
			case op.Name == "bibw":
				return nil
			case rank == 1:
				return comm.Send(ctx, c, ack, 0, 3)
			default:
				_, err := comm.Recv(ctx, c, ack, 1, 3)
				return err
			}
		}
	case "barrier":
		b.run = func(ctx context.Context) error { return comm.Barrier(ctx, c) }
	case "bcast":
		want := pattern(s, seed)
		buf := pattern(s, seed)
		bb := blk(buf)
		if rank != 0 {
			b.poison = func() { poisonBytes(buf) }
			b.check = func() bool { return bytes.Equal(buf, want) }
		}
		b.run = func(ctx context.Context) error { return comm.BcastBlock(ctx, c, bb, 0) }
	case "reduce", "allreduce":
		k := s / 8
		send, recv, want := make([]float64, k), make([]float64, k), make([]float64, k)
		tri := float64(n*(n+1)) / 2
		for i := range send {
			base := float64((int64(i) + int64(seed)) % 1021)
			send[i] = float64(rank+1) * base
			want[i] = base * tri
		}
		sb, rb := blk(send), blk(recv)
		dt := comm.DTypeOf[float64]()
		if op.Name == "allreduce" || rank == 0 {
			b.poison = func() {
				for i := range recv {
					recv[i] = math.NaN()
				}
			}
			b.check = func() bool { return slices.Equal(recv, want) }
		}
		if op.Name == "reduce" {
			b.run = func(ctx context.Context) error { return comm.ReduceBlock(ctx, c, sb, rb, dt, comm.Sum, 0) }
		} else {
			b.run = func(ctx context.Context) error { return comm.AllreduceBlock(ctx, c, sb, rb, dt, comm.Sum) }
		}
	case "allgather", "alltoall":
		sendLen := s
		if op.Name == "alltoall" {
			sendLen = s * int64(n)
		}
		send, recv, want := make([]byte, sendLen), make([]byte, s*int64(n)), make([]byte, s*int64(n))
		for j := range n {
			if op.Name == "allgather" {
				Pattern(want[int64(j)*s:int64(j+1)*s], seed+j)
			} else {
				Pattern(send[int64(j)*s:int64(j+1)*s], seed+rank*n+j)
				Pattern(want[int64(j)*s:int64(j+1)*s], seed+j*n+rank)
			}
		}
		if op.Name == "allgather" {
			Pattern(send, seed+rank)
		}
		sb, rb := blk(send), blk(recv)
		b.poison = func() { poisonBytes(recv) }
		b.check = func() bool { return bytes.Equal(recv, want) }
		if op.Name == "allgather" {
			b.run = func(ctx context.Context) error { return comm.AllgatherBlock(ctx, c, sb, rb) }
		} else {
			b.run = func(ctx context.Context) error { return comm.AlltoallBlock(ctx, c, sb, rb) }
		}
	default:
		return nil, fmt.Errorf("%w: %q is not an operation of a communicator", ErrPlan, op.Name)
	}
	return b, nil
}
