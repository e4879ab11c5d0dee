//go:build mpi

package mpi_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/xpu-go/xpu/backends/mpi"
	"github.com/xpu-go/xpu/comm"
	"github.com/xpu-go/xpu/memspace"
)

// TestSPMDCollectives checks every collective, for every element type and
// reduction, every root and the in-place forms, against a sequential
// computation, on both paths (direct and watched with a context).
func TestSPMDCollectives(t *testing.T) {
	c := rank(t)
	testCollectives(t, c, "world")
}

func testCollectives(t *testing.T, c *mpi.Comm, prefix string) {
	for _, cx := range contexts {
		run := func(name string, body func(t *testing.T, ctx context.Context)) {
			spmd(t, c, prefix+"/"+cx.name+"/"+name, func(t *testing.T) {
				ctx, cancel := cx.make()
				defer cancel()
				body(t, ctx)
			})
		}
		run("barrier", func(t *testing.T, ctx context.Context) {
			for range 3 {
				require.NoError(t, comm.Barrier(ctx, c))
			}
		})
		run("bcast", func(t *testing.T, ctx context.Context) { testBcast(t, ctx, c) })
		run("gather-scatter", func(t *testing.T, ctx context.Context) { testGatherScatter(t, ctx, c) })
		run("allgather", func(t *testing.T, ctx context.Context) { testAllgather(t, ctx, c) })
		run("alltoall", func(t *testing.T, ctx context.Context) { testAlltoall(t, ctx, c) })
		run("reductions", func(t *testing.T, ctx context.Context) {
			for _, test := range []func(*testing.T, context.Context, *mpi.Comm){
				testReductions[int8], testReductions[int16], testReductions[int32], testReductions[int64],
				testReductions[uint8], testReductions[uint16], testReductions[uint32], testReductions[uint64],
				testReductions[float32], testReductions[float64], testReductions[complex64], testReductions[complex128],
				testReductions[celsius],
			} {
				test(t, ctx, c)
			}
		})
		run("large", func(t *testing.T, ctx context.Context) { testLarge(t, ctx, c) })
	}
}

// celsius is a named type: it reduces as its underlying float32.
type celsius float32

func testBcast(t *testing.T, ctx context.Context, c *mpi.Comm) {
	p, r := c.Size(), c.Rank()
	for _, n := range []int{1, 1000, 1 << 20} {
		for root := range p {
			b := make([]byte, n)
			if r == root {
				copy(b, pattern(n, root))
			}
			bb, err := memspace.FromSlice(b)
			require.NoError(t, err)
			require.NoError(t, comm.Bcast(ctx, c, bb, root))
			require.Equal(t, pattern(n, root), b, "n=%d root=%d", n, root)
		}
	}
}

func testGatherScatter(t *testing.T, ctx context.Context, c *mpi.Comm) {
	p, r := c.Size(), c.Rank()
	for _, m := range []int{1, 100, 65537} {
		for root := range p {
			for _, inplace := range []bool{false, true} {
				name := fmt.Sprintf("m=%d root=%d inplace=%v", m, root, inplace)
				// Gather.
				all := make([]byte, p*m)
				send := pattern(m, r)
				sb := buf(t, send)
				if inplace && r == root {
					copy(all[r*m:], send)
					s, err := buf(t, all).Slice(r*m, m)
					require.NoError(t, err)
					sb = s
				}
				var rb memspace.Block
				if r == root {
					rb = buf(t, all)
				}
				require.NoError(t, comm.GatherBlock(ctx, c, sb, rb, root), name)
				if r == root {
					for i := range p {
						require.Equal(t, pattern(m, i), all[i*m:(i+1)*m], "gather %s: slot %d", name, i)
					}
				}
				// Scatter back the blocks of the root, shifted.
				var src memspace.Block
				if r == root {
					for i := range p {
						copy(all[i*m:], pattern(m, i+1000))
					}
					src = buf(t, all)
				}
				got := make([]byte, m)
				db := buf(t, got)
				if inplace && r == root {
					s, err := buf(t, all).Slice(r*m, m)
					require.NoError(t, err)
					db = s
				}
				require.NoError(t, comm.ScatterBlock(ctx, c, src, db, root), name)
				if inplace && r == root {
					require.Equal(t, pattern(m, r+1000), all[r*m:(r+1)*m], "scatter in place %s", name)
				} else {
					require.Equal(t, pattern(m, r+1000), got, "scatter %s", name)
				}
			}
		}
	}
}

func testAllgather(t *testing.T, ctx context.Context, c *mpi.Comm) {
	p, r := c.Size(), c.Rank()
	for _, m := range []int{1, 333, 70000} {
		for _, inplace := range []bool{false, true} {
			all := make([]byte, p*m)
			sb := buf(t, pattern(m, r))
			if inplace {
				copy(all[r*m:], pattern(m, r))
				s, err := buf(t, all).Slice(r*m, m)
				require.NoError(t, err)
				sb = s
			}
			require.NoError(t, comm.AllgatherBlock(ctx, c, sb, buf(t, all)))
			for i := range p {
				require.Equal(t, pattern(m, i), all[i*m:(i+1)*m], "m=%d inplace=%v slot %d", m, inplace, i)
			}
		}
	}
}

func testAlltoall(t *testing.T, ctx context.Context, c *mpi.Comm) {
	p, r := c.Size(), c.Rank()
	for _, m := range []int{1, 100, 40000} {
		send, recv := make([]byte, p*m), make([]byte, p*m)
		for j := range p {
			copy(send[j*m:], pattern(m, r*10+j))
		}
		require.NoError(t, comm.AlltoallBlock(ctx, c, buf(t, send), buf(t, recv)))
		for i := range p {
			require.Equal(t, pattern(m, i*10+r), recv[i*m:(i+1)*m], "m=%d from rank %d", m, i)
		}
	}
	// Typed form.
	s, rv := make([]int64, p), make([]int64, p)
	for j := range s {
		s[j] = int64(r*100 + j)
	}
	sb, _ := memspace.FromSlice(s)
	rb, _ := memspace.FromSlice(rv)
	require.NoError(t, comm.Alltoall(ctx, c, sb, rb))
	for i := range rv {
		assert.Equal(t, int64(i*100+r), rv[i])
	}
}

// value is element i of rank r for a reduction with op: small integers
// (and Gaussian integers), so that every result is exact and fits every
// type, whatever order MPI combines them in.
func value(op comm.Op, complexT, signed bool, r, i int) (int, int) {
	switch op {
	case comm.Prod:
		if signed {
			return (r+i)%5 - 2, (r*3+i)%3 - 1 // in [-2, 2] and [-1, 1]
		}
		return (r + i) % 4, 0 // in [0, 3]
	default:
		if signed {
			return (r*7+i*3)%11 - 5, (r+i*5)%7 - 3
		}
		return (r*7 + i*3) % 11, 0
	}
}

// reference reduces value over p ranks sequentially.
func reference(op comm.Op, complexT, signed bool, p, i int) (int, int) {
	re, im := value(op, complexT, signed, 0, i)
	if !complexT {
		im = 0
	}
	for r := 1; r < p; r++ {
		a, b := value(op, complexT, signed, r, i)
		if !complexT {
			b = 0
		}
		switch op {
		case comm.Sum:
			re, im = re+a, im+b
		case comm.Prod:
			re, im = re*a-im*b, re*b+im*a
		case comm.Min:
			re = min(re, a)
		case comm.Max:
			re = max(re, a)
		}
	}
	return re, im
}

func testReductions[T comm.Number](t *testing.T, ctx context.Context, c *mpi.Comm) {
	p, r := c.Size(), c.Rank()
	dt := comm.DTypeOf[T]()
	cplx := dt.IsComplex()
	signed := dt != comm.Uint8 && dt != comm.Uint16 && dt != comm.Uint32 && dt != comm.Uint64
	ops := []comm.Op{comm.Sum, comm.Prod, comm.Min, comm.Max}
	if cplx {
		ops = ops[:2]
	}
	for _, op := range ops {
		for _, n := range []int{1, 7, 1000} {
			name := fmt.Sprintf("%v %v n=%d", dt, op, n)
			in := func() []T {
				s := make([]T, n)
				for i := range s {
					s[i] = mk[T](value(op, cplx, signed, r, i))
				}
				return s
			}
			want := make([]T, n)
			for i := range want {
				want[i] = mk[T](reference(op, cplx, signed, p, i))
			}
			// Allreduce, then in place.
			send, recv := in(), make([]T, n)
			sb, _ := memspace.FromSlice(send)
			rb, _ := memspace.FromSlice(recv)
			require.NoError(t, comm.Allreduce(ctx, c, sb, rb, op), name)
			require.Equal(t, want, recv, "allreduce %s", name)
			require.Equal(t, in(), send, "allreduce %s: the send buffer changed", name)
			io := in()
			iob, _ := memspace.FromSlice(io)
			require.NoError(t, comm.Allreduce(ctx, c, iob, iob, op), name)
			require.Equal(t, want, io, "allreduce in place %s", name)
			// Reduce to every root, in place at the root every other time.
			for root := range p {
				send := in()
				sb, _ := memspace.FromSlice(send)
				var rb *memspace.Buffer[T]
				out := make([]T, n)
				if r == root {
					rb, _ = memspace.FromSlice(out)
					if root%2 == 1 {
						rb, out = sb, send
					}
				}
				require.NoError(t, comm.Reduce(ctx, c, sb, rb, op, root), "%s root %d", name, root)
				if r == root {
					require.Equal(t, want, out, "reduce %s root %d", name, root)
				}
			}
			// Reduce-scatter: block j of rank r's input is in() shifted by j.
			full := make([]T, p*n)
			for j := range p {
				for i := range n {
					full[j*n+i] = mk[T](value(op, cplx, signed, r, i+j))
				}
			}
			part := make([]T, n)
			fb, _ := memspace.FromSlice(full)
			pb, _ := memspace.FromSlice(part)
			require.NoError(t, comm.ReduceScatter(ctx, c, fb, pb, op), name)
			for i := range n {
				require.Equal(t, mk[T](reference(op, cplx, signed, p, i+r)), part[i], "reduce-scatter %s element %d", name, i)
			}
		}
	}
}

// testLarge runs collectives big enough for MPI's pipelined algorithms.
func testLarge(t *testing.T, ctx context.Context, c *mpi.Comm) {
	p, r := c.Size(), c.Rank()
	const n = 1 << 19 // 4 MiB of float64
	x := make([]float64, n)
	for i := range x {
		x[i] = float64((r + i) % 1000)
	}
	xb, _ := memspace.FromSlice(x)
	require.NoError(t, comm.Allreduce(ctx, c, xb, xb, comm.Sum))
	for i := 0; i < n; i += 997 {
		want := 0.0
		for q := range p {
			want += float64((q + i) % 1000)
		}
		require.Equal(t, want, x[i], "element %d", i)
	}
}

// TestSPMDCollectiveErrors checks the refusals of the native collectives.
func TestSPMDCollectiveErrors(t *testing.T) {
	c := rank(t)
	spmd(t, c, "errors", func(t *testing.T) {
		ctx := context.Background()
		b := buf(t, make([]float32, 4))
		p := c.Size()
		require.ErrorIs(t, c.Bcast(ctx, b, p), comm.ErrInvalidArgument, "bad root")
		require.ErrorIs(t, c.Reduce(ctx, b, b, comm.Float32, comm.Sum, -1), comm.ErrInvalidArgument, "bad root")
		require.ErrorIs(t, c.Allreduce(ctx, b, b, comm.Complex64, comm.Max), comm.ErrInvalidArgument, "max of complex")
		require.ErrorIs(t, c.Allreduce(ctx, b, b, comm.InvalidDType, comm.Sum), comm.ErrInvalidArgument, "no type")
		require.ErrorIs(t, c.Allreduce(ctx, b, b, comm.Float32, comm.Op(99)), comm.ErrInvalidArgument, "no op")
		dev := memspace.NewBlock(deviceSpace{}, 0x1000, 16, nil)
		require.ErrorIs(t, c.Allreduce(ctx, dev, dev, comm.Float32, comm.Sum), comm.ErrFallback, "device memory is declined")
		require.ErrorIs(t, comm.AllreduceBlock(ctx, c, dev, dev, comm.Float32, comm.Sum), comm.ErrNotSupported,
			"and the shared algorithms cannot take it either")
		//nolint:staticcheck // a nil context is the bad input under test
		require.ErrorIs(t, c.Barrier(nil), comm.ErrInvalidArgument)
	})
}
