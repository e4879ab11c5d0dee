//go:build mpi

package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/xpu-go/xpu/backends/mpi"
	"github.com/xpu-go/xpu/comm"
	"github.com/xpu-go/xpu/internal/tooling/bench/stats"
	"github.com/xpu-go/xpu/memspace"
)

func main() {
	reps := flag.Int("reps", 11, "repetitions of each measurement (the median is printed)")
	minDur := flag.Duration("min", 50*time.Millisecond, "least duration of one repetition")
	threads := flag.String("threads", "multiple", "thread level: multiple or serialized")
	ctxKind := flag.String("ctx", "background", "context of every call: background (direct MPI calls) or deadline (watched nonblocking calls)")
	only := flag.String("only", "", "run only the measurements whose name contains this")
	ref := flag.Bool("ref", true, "also time the C reference loops in process, alternating with the Go repetitions")
	warm := flag.Float64("warm", 0.2, "untimed run before each timed repetition, as a fraction of its iterations")
	flag.Parse()
	o := mpi.Options{ThreadLevel: mpi.ThreadMultiple}
	if *threads == "serialized" {
		o.ThreadLevel = mpi.ThreadSerialized
	}
	c, err := mpi.Open(context.Background(), o)
	if err != nil {
		fmt.Fprintln(os.Stderr, "mpibench:", err)
		os.Exit(1)
	}
	b := &bench{c: c, reps: *reps, min: *minDur, ctx: context.Background(), only: *only, ref: *ref, warm: *warm}
	if *ctxKind == "deadline" {
		ctx, cancel := context.WithTimeout(context.Background(), time.Hour)
		defer cancel()
		b.ctx = ctx
	}
	if err := b.run(); err != nil {
		fmt.Fprintln(os.Stderr, "mpibench:", err)
		c.Close()
		os.Exit(1)
	}
	if err := c.Close(); err != nil {
		fmt.Fprintln(os.Stderr, "mpibench:", err)
		os.Exit(1)
	}
}

type bench struct {
	c    *mpi.Comm
	reps int
	min  time.Duration
	ctx  context.Context
	only string
	ref  bool
	warm float64
}

func (b *bench) run() error {
	const KiB, MiB = 1 << 10, 1 << 20
	type fns = func(n int) (func(int) error, []refLoop)
	cases := []struct {
		op    string
		sizes []int
		make  fns
	}{
		{"pingpong", []int{8, 4 * MiB}, b.pingpong},
		{"allreduce", []int{8, 64 * KiB, 64 * MiB}, b.allreduce},
		{"bcast", []int{8, 64 * KiB, 4 * MiB}, b.bcast},
		{"alltoall", []int{8, 64 * KiB}, b.alltoall},
	}
	for _, cs := range cases {
		if cs.op == "pingpong" && b.c.Size() < 2 {
			continue
		}
		for _, n := range cs.sizes {
			f, refs := cs.make(n)
			if err := b.measure(cs.op, n, f, refs); err != nil {
				return err
			}
		}
	}
	return nil
}

func hostBuf[T any](n int) (memspace.Block, []T) {
	s := make([]T, n)
	buf, err := memspace.FromSlice(s)
	if err != nil {
		panic(err)
	}
	return buf.Block(), s
}

// pingpong: rank 0 sends n bytes to rank 1, which sends them back; one
// iteration is a round trip, reported halved (ranks above 1 idle).
func (b *bench) pingpong(n int) (func(iters int) error, []refLoop) {
	blk, _ := hostBuf[byte](n)
	ref := []refLoop{
		{"ref", func(iters int) { refPingpong(blk.HostPointer(), n, iters, b.c.Rank()) }},
		{"ref-probe", func(iters int) { refPingpongProbe(blk.HostPointer(), n, iters, b.c.Rank()) }},
	}
	return func(iters int) error {
		switch b.c.Rank() {
		case 0:
			for range iters {
				if err := comm.Send(b.ctx, b.c, blk, 1, 1); err != nil {
					return err
				}
				if _, err := comm.Recv(b.ctx, b.c, blk, 1, 1); err != nil {
					return err
				}
			}
		case 1:
			for range iters {
				if _, err := comm.Recv(b.ctx, b.c, blk, 0, 1); err != nil {
					return err
				}
				if err := comm.Send(b.ctx, b.c, blk, 0, 1); err != nil {
					return err
				}
			}
		}
		return nil
	}, ref
}

// allreduce: a sum of n/8 float64.
func (b *bench) allreduce(n int) (func(iters int) error, []refLoop) {
	sb, _ := hostBuf[float64](n / 8)
	rb, _ := hostBuf[float64](n / 8)
	ref := []refLoop{{"ref", func(iters int) { refAllreduce(sb.HostPointer(), rb.HostPointer(), n/8, iters) }}}
	return func(iters int) error {
		for range iters {
			if err := comm.AllreduceBlock(b.ctx, b.c, sb, rb, comm.Float64, comm.Sum); err != nil {
				return err
			}
		}
		return nil
	}, ref
}

// bcast: n bytes from rank 0.
func (b *bench) bcast(n int) (func(iters int) error, []refLoop) {
	blk, _ := hostBuf[byte](n)
	ref := []refLoop{{"ref", func(iters int) { refBcast(blk.HostPointer(), n, iters) }}}
	return func(iters int) error {
		for range iters {
			if err := comm.BcastBlock(b.ctx, b.c, blk, 0); err != nil {
				return err
			}
		}
		return nil
	}, ref
}

// alltoall: n bytes to every rank.
func (b *bench) alltoall(n int) (func(iters int) error, []refLoop) {
	p := b.c.Size()
	sb, _ := hostBuf[byte](n * p)
	rb, _ := hostBuf[byte](n * p)
	ref := []refLoop{{"ref", func(iters int) { refAlltoall(sb.HostPointer(), rb.HostPointer(), n, iters) }}}
	return func(iters int) error {
		for range iters {
			if err := comm.AlltoallBlock(b.ctx, b.c, sb, rb); err != nil {
				return err
			}
		}
		return nil
	}, ref
}

// refLoop is a C reference loop: its figures print as
// "<prefix>/<name>" and "ratio<suffix of prefix>/<name>".
type refLoop struct {
	prefix string
	run    func(iters int)
}

// measure times f, the Go operation, and refs, the same in C (ping-pong:
// also with the backend's probe before each receive): it calibrates the
// iteration count on rank 0 (shared with every rank), then runs reps
// repetitions of each, alternating, each started by a barrier and timed on
// every rank; a repetition's time is the slowest rank's. Each timed
// repetition follows an untimed one of b.warm of its iterations, the same
// for Go and C: a C loop is one long cgo call, during which the Go
// runtime takes the goroutine's processor away and puts its monitor
// thread to sleep, and the first milliseconds of Go calls after it run
// slowly while the runtime wakes (64 KiB collectives: 10% slower) — a
// transition of this benchmark, not of a Go program. It prints the
// medians and, per reference, the median of the repetitions' ratios
// (Go/C), which pairs each Go repetition with the C one next to it.
func (b *bench) measure(op string, n int, f func(iters int) error, refs []refLoop) error {
	name := fmt.Sprintf("mpi/%s/%s", op, size(n))
	if b.only != "" && !strings.Contains(name, b.only) {
		return nil
	}
	ctx := context.Background()
	iters := 1
	for {
		if err := comm.Barrier(ctx, b.c); err != nil {
			return err
		}
		t0 := time.Now()
		if err := f(iters); err != nil {
			return fmt.Errorf("%s: %w", name, err)
		}
		d := b.slowest(time.Since(t0))
		if d >= b.min/4 || iters >= 1<<24 {
			iters = max(1, int(float64(iters)*float64(b.min)/float64(max(d, 1))))
			break
		}
		iters *= 4
	}
	// Every rank must run the same count: take rank 0's.
	cnt := []int64{int64(iters)}
	cb, _ := memspace.FromSlice(cnt)
	if err := comm.Bcast(ctx, b.c, cb, 0); err != nil {
		return err
	}
	iters = int(cnt[0])
	per := func(d time.Duration) float64 {
		v := float64(d.Nanoseconds()) / float64(iters)
		if op == "pingpong" {
			v /= 2
		}
		return v
	}
	if !b.ref {
		refs = nil
	}
	var goT []float64
	cT := make([][]float64, len(refs))
	ratio := make([][]float64, len(refs))
	warm := int(float64(iters) * b.warm)
	for range b.reps {
		if warm > 0 {
			if err := f(warm); err != nil {
				return fmt.Errorf("%s: %w", name, err)
			}
		}
		if err := comm.Barrier(ctx, b.c); err != nil {
			return err
		}
		t0 := time.Now()
		if err := f(iters); err != nil {
			return fmt.Errorf("%s: %w", name, err)
		}
		g := per(b.slowest(time.Since(t0)))
		goT = append(goT, g)
		for i, ref := range refs {
			if warm > 0 {
				ref.run(warm)
			}
			if err := comm.Barrier(ctx, b.c); err != nil {
				return err
			}
			t0 = time.Now()
			ref.run(iters)
			r := per(b.slowest(time.Since(t0)))
			cT[i] = append(cT[i], r)
			ratio[i] = append(ratio[i], g/r)
		}
	}
	if b.c.Rank() == 0 {
		fmt.Printf("%s %.3f us\n", name, stats.Median(goT)/1e3)
		for i, ref := range refs {
			fmt.Printf("%s/%s %.3f us\n", ref.prefix, name, stats.Median(cT[i])/1e3)
			fmt.Printf("ratio%s/%s %.3f x\n", strings.TrimPrefix(ref.prefix, "ref"), name, stats.Median(ratio[i]))
		}
	}
	return nil
}

// slowest returns the largest d over the ranks.
func (b *bench) slowest(d time.Duration) time.Duration {
	v := []int64{int64(d)}
	vb, _ := memspace.FromSlice(v)
	if err := comm.Allreduce(context.Background(), b.c, vb, vb, comm.Max); err != nil {
		panic(err)
	}
	return time.Duration(v[0])
}

func size(n int) string {
	switch {
	case n >= 1<<20 && n%(1<<20) == 0:
		return fmt.Sprintf("%dMiB", n>>20)
	case n >= 1<<10 && n%(1<<10) == 0:
		return fmt.Sprintf("%dKiB", n>>10)
	}
	return fmt.Sprintf("%dB", n)
}
