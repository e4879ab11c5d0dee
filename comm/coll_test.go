package comm_test

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/xpu-go/xpu/comm"
	"github.com/xpu-go/xpu/internal/tooling/testwait"
	"github.com/xpu-go/xpu/memspace"
)

// maxRanks is the largest group the matrix tests use: every group size up
// to it, powers of two and others.
const maxRanks = 9

// blockAlg is a shared algorithm of a reduction, forced.
type blockAlg func(ctx context.Context, c comm.Comm, send, recv memspace.Block, dt comm.DType, op comm.Op) error

// allreduceAlgs are the ways to run an allreduce: the package function
// (which picks by size) and each algorithm forced.
var allreduceAlgs = []struct {
	name string
	fn   blockAlg
}{
	{"auto", comm.AllreduceBlock},
	{"recursive-doubling", comm.AllreduceRecursiveDoubling},
	{"ring", comm.AllreduceRing},
}

// checkAllreduce runs an allreduce of n elements of T with op on p ranks
// and compares every rank's result with the sequential reference.
func checkAllreduce[T comm.Number](t *testing.T, p, n int, op comm.Op, alg blockAlg, inPlace bool) {
	t.Helper()
	want := reference[T](op, p, n)
	got := make([][]T, p)
	run(t, p, protocols[(p+n)%2].opts, func(ctx context.Context, c comm.Comm) error {
		send := buf(t, inputs[T](op, c.Rank(), n))
		recv := send
		if !inPlace {
			recv = buf(t, make([]T, n))
		}
		if err := alg(ctx, c, send.Block(), recv.Block(), comm.DTypeOf[T](), op); err != nil {
			return err
		}
		got[c.Rank()], _ = recv.Host()
		return nil
	})
	for r := range p {
		require.Equal(t, want, got[r], "rank %d of %d, %d elements", r, p, n)
	}
}

func TestAllreduceEveryRankCountAndAlgorithm(t *testing.T) {
	defer comm.SetRingChunk(24)() // three float64: several chunks per block
	for p := 1; p <= maxRanks; p++ {
		for _, n := range counts(p) {
			for _, alg := range allreduceAlgs {
				for _, inPlace := range []bool{false, true} {
					t.Run(fmt.Sprintf("p=%d/n=%d/%s/inplace=%v", p, n, alg.name, inPlace), func(t *testing.T) {
						checkAllreduce[float64](t, p, n, comm.Sum, alg.fn, inPlace)
					})
				}
			}
		}
	}
}

func TestAllreduceLargeTakesRing(t *testing.T) {
	// Above the threshold with the default chunk: several chunks per block.
	n := comm.Thresholds()["allreduce-ring"]/4*3 + 5
	for _, p := range []int{2, 3, 4} {
		t.Run(fmt.Sprint(p), func(t *testing.T) {
			checkAllreduce[int32](t, p, n, comm.Sum, comm.AllreduceBlock, false)
			checkAllreduce[int32](t, p, n, comm.Max, comm.AllreduceBlock, true)
		})
	}
}

// testOps runs every op over T on a few group sizes with each algorithm;
// complex types must refuse Min and Max.
func testOps[T comm.Number](t *testing.T) {
	for _, op := range []comm.Op{comm.Sum, comm.Prod, comm.Min, comm.Max} {
		t.Run(op.String(), func(t *testing.T) {
			if comm.DTypeOf[T]().IsComplex() && (op == comm.Min || op == comm.Max) {
				cs := newGroup(t, 2, protocols[0].opts)
				s := buf(t, make([]T, 3))
				err := comm.Allreduce(testwait.Ctx(t), cs[0], s, s, op)
				require.ErrorIs(t, err, comm.ErrInvalidArgument)
				return
			}
			for _, p := range []int{1, 2, 3, 5, 8} {
				for _, alg := range allreduceAlgs {
					checkAllreduce[T](t, p, 11, op, alg.fn, false)
				}
			}
		})
	}
}

func TestAllreduceOpsAndTypes(t *testing.T) {
	defer comm.SetRingChunk(16)()
	t.Run("int8", testOps[int8])
	t.Run("int16", testOps[int16])
	t.Run("int32", testOps[int32])
	t.Run("int64", testOps[int64])
	t.Run("int", testOps[int])
	t.Run("uint8", testOps[uint8])
	t.Run("uint16", testOps[uint16])
	t.Run("uint32", testOps[uint32])
	t.Run("uint64", testOps[uint64])
	t.Run("uintptr", testOps[uintptr])
	t.Run("float32", testOps[float32])
	t.Run("float64", testOps[float64])
	t.Run("Celsius", testOps[Celsius])
	t.Run("complex64", testOps[complex64])
	t.Run("complex128", testOps[complex128])
}

func TestAllreduceTyped(t *testing.T) {
	// The typed function with a named type, and every rank gets the same.
	const p, n = 5, 9
	want := reference[Celsius](comm.Sum, p, n)
	run(t, p, protocols[0].opts, func(ctx context.Context, c comm.Comm) error {
		recv := buf(t, make([]Celsius, n))
		if err := comm.Allreduce(ctx, c, buf(t, inputs[Celsius](comm.Sum, c.Rank(), n)), recv, comm.Sum); err != nil {
			return err
		}
		got, _ := recv.Host()
		assert.Equal(t, want, got)
		return nil
	})
}

// reduceAlgs are the ways to run a reduce.
var reduceAlgs = []struct {
	name string
	fn   func(ctx context.Context, c comm.Comm, send, recv memspace.Block, dt comm.DType, op comm.Op, root int) error
}{
	{"auto", comm.ReduceBlock},
	{"binomial", comm.ReduceBinomial},
	{"ring-gather", comm.ReduceRingGather},
}

func TestReduce(t *testing.T) {
	defer comm.SetRingChunk(16)()
	for p := 1; p <= maxRanks; p++ {
		for _, n := range counts(p) {
			for _, alg := range reduceAlgs {
				for _, root := range roots(p) {
					t.Run(fmt.Sprintf("p=%d/n=%d/%s/root=%d", p, n, alg.name, root), func(t *testing.T) {
						op := []comm.Op{comm.Sum, comm.Max, comm.Prod}[(p+n)%3]
						want := reference[int64](op, p, n)
						var got []int64
						run(t, p, protocols[(p+root)%2].opts, func(ctx context.Context, c comm.Comm) error {
							send := buf(t, inputs[int64](op, c.Rank(), n))
							var recv memspace.Block
							if c.Rank() == root {
								if root%2 == 0 { // in place
									recv = send.Block()
									got, _ = send.Host()
								} else {
									got = make([]int64, n)
									recv = buf(t, got).Block()
								}
							}
							return alg.fn(ctx, c, send.Block(), recv, comm.DTypeOf[int64](), op, root)
						})
						require.Equal(t, want, got)
					})
				}
			}
		}
	}
}

func TestReduceLarge(t *testing.T) {
	// Above the threshold: ring reduce-scatter then gather, default chunks.
	n := comm.Thresholds()["reduce-ring"]/8 + 3
	for _, p := range []int{2, 3} {
		want := reference[float64](comm.Sum, p, n)
		got := make([]float64, n)
		run(t, p, protocols[p%2].opts, func(ctx context.Context, c comm.Comm) error {
			var recv *memspace.Buffer[float64]
			if c.Rank() == p-1 {
				recv = buf(t, got)
			}
			return comm.Reduce(ctx, c, buf(t, inputs[float64](comm.Sum, c.Rank(), n)), recv, comm.Sum, p-1)
		})
		require.Equal(t, want, got, "%d ranks", p)
	}
}

func TestReduceTypedNilRecvOffRoot(t *testing.T) {
	const p, n, root = 4, 5, 2
	want := reference[uint16](comm.Sum, p, n)
	got := make([]uint16, n)
	run(t, p, protocols[0].opts, func(ctx context.Context, c comm.Comm) error {
		var recv *memspace.Buffer[uint16]
		if c.Rank() == root {
			recv = buf(t, got)
		}
		return comm.Reduce(ctx, c, buf(t, inputs[uint16](comm.Sum, c.Rank(), n)), recv, comm.Sum, root)
	})
	require.Equal(t, want, got)
}

// roots returns the roots tested with p ranks: first, last and middle.
func roots(p int) []int {
	rs := []int{0}
	if p > 1 {
		rs = append(rs, p-1)
	}
	if p > 2 {
		rs = append(rs, p/2)
	}
	return rs
}

func TestBcast(t *testing.T) {
	defer comm.SetRingChunk(10)() // bytes: chunks that split elements
	algs := []struct {
		name string
		fn   func(ctx context.Context, c comm.Comm, buf memspace.Block, root int) error
	}{
		{"auto", comm.BcastBlock},
		{"binomial", comm.BcastBinomial},
		{"scatter-allgather", comm.BcastScatterAllgather},
	}
	for p := 1; p <= maxRanks; p++ {
		for _, n := range append(counts(p), 0) {
			for _, alg := range algs {
				for _, root := range roots(p) {
					t.Run(fmt.Sprintf("p=%d/n=%d/%s/root=%d", p, n, alg.name, root), func(t *testing.T) {
						want := payload(root, n)
						got := make([][]vec3, p)
						run(t, p, protocols[(p+n)%2].opts, func(ctx context.Context, c comm.Comm) error {
							s := make([]vec3, n)
							if c.Rank() == root {
								s = payload(root, n)
							}
							got[c.Rank()] = s
							if alg.name == "auto" {
								return comm.Bcast(ctx, c, buf(t, s), root)
							}
							return alg.fn(ctx, c, buf(t, s).Block(), root)
						})
						for r := range p {
							require.Equal(t, want, got[r], "rank %d", r)
						}
					})
				}
			}
		}
	}
}

func TestBcastLarge(t *testing.T) {
	// Above the threshold: scatter then ring allgather, default chunks.
	n := comm.Thresholds()["bcast-scatter"]/12*2 + 1
	for _, p := range []int{3, 4} {
		want := payload(1, n)
		run(t, p, protocols[p%2].opts, func(ctx context.Context, c comm.Comm) error {
			s := make([]vec3, n)
			if c.Rank() == 1 {
				copy(s, want)
			}
			if err := comm.Bcast(ctx, c, buf(t, s), 1); err != nil {
				return err
			}
			assert.Equal(t, want, s, "rank %d", c.Rank())
			return nil
		})
	}
}

func TestGatherScatter(t *testing.T) {
	for p := 1; p <= maxRanks; p++ {
		for _, n := range []int{0, 1, 3} {
			for _, root := range roots(p) {
				t.Run(fmt.Sprintf("p=%d/n=%d/root=%d", p, n, root), func(t *testing.T) {
					// Gather: the root gets every rank's payload in order.
					all := make([]vec3, 0, p*n)
					for r := range p {
						all = append(all, payload(r, n)...)
					}
					gathered := make([]vec3, p*n)
					run(t, p, protocols[p%2].opts, func(ctx context.Context, c comm.Comm) error {
						var recv *memspace.Buffer[vec3]
						send := buf(t, payload(c.Rank(), n))
						if c.Rank() == root {
							recv = buf(t, gathered)
							if p%2 == 1 { // in place: the root's part is already in its slot
								copy(gathered[root*n:], payload(root, n))
								var err error
								if send, err = recv.Slice(root*n, root*n+n); err != nil {
									return err
								}
							}
						}
						return comm.Gather(ctx, c, send, recv, root)
					})
					require.Equal(t, all, gathered)

					// Scatter: rank r gets part r of the root's vector.
					parts := make([][]vec3, p)
					run(t, p, protocols[(p+1)%2].opts, func(ctx context.Context, c comm.Comm) error {
						var send *memspace.Buffer[vec3]
						if c.Rank() == root {
							send = buf(t, append([]vec3(nil), all...))
						}
						parts[c.Rank()] = make([]vec3, n)
						return comm.Scatter(ctx, c, send, buf(t, parts[c.Rank()]), root)
					})
					for r := range p {
						require.Equal(t, payload(r, n), parts[r], "rank %d", r)
					}
				})
			}
		}
	}
}

func TestAllgather(t *testing.T) {
	defer comm.SetRingChunk(8)()
	algs := []struct {
		name string
		fn   func(ctx context.Context, c comm.Comm, send, recv memspace.Block) error
	}{
		{"auto", comm.AllgatherBlock},
		{"bruck", comm.AllgatherBruck},
		{"ring", comm.AllgatherRing},
	}
	for p := 1; p <= maxRanks; p++ {
		for _, n := range []int{0, 1, 2, 5} {
			for _, alg := range algs {
				t.Run(fmt.Sprintf("p=%d/n=%d/%s", p, n, alg.name), func(t *testing.T) {
					want := []vec3{}
					for r := range p {
						want = append(want, payload(r, n)...)
					}
					got := make([][]vec3, p)
					run(t, p, protocols[(p+n)%2].opts, func(ctx context.Context, c comm.Comm) error {
						got[c.Rank()] = make([]vec3, p*n)
						recv := buf(t, got[c.Rank()])
						send := buf(t, payload(c.Rank(), n))
						if alg.name == "auto" {
							if n%2 == 1 { // in place
								copy(got[c.Rank()][c.Rank()*n:], payload(c.Rank(), n))
								var err error
								if send, err = recv.Slice(c.Rank()*n, c.Rank()*n+n); err != nil {
									return err
								}
							}
							return comm.Allgather(ctx, c, send, recv)
						}
						if n == 0 {
							return nil
						}
						return alg.fn(ctx, c, send.Block(), recv.Block())
					})
					for r := range p {
						require.Equal(t, want, got[r], "rank %d", r)
					}
				})
			}
		}
	}
}

func TestAllgatherLarge(t *testing.T) {
	n := comm.Thresholds()["allgather-ring"]/12/3 + 7 // ring for p >= 3
	for _, p := range []int{3, 5} {
		var want []vec3
		for r := range p {
			want = append(want, payload(r, n)...)
		}
		run(t, p, protocols[p%2].opts, func(ctx context.Context, c comm.Comm) error {
			recv := make([]vec3, p*n)
			if err := comm.Allgather(ctx, c, buf(t, payload(c.Rank(), n)), buf(t, recv)); err != nil {
				return err
			}
			assert.Equal(t, want, recv, "rank %d", c.Rank())
			return nil
		})
	}
}

func TestAlltoall(t *testing.T) {
	for p := 1; p <= maxRanks; p++ {
		for _, m := range []int{0, 1, 3} {
			t.Run(fmt.Sprintf("p=%d/m=%d", p, m), func(t *testing.T) {
				// Rank r's part j is labelled (r, j, k); rank j must get part
				// j of every rank, in rank order.
				got := make([][]vec3, p)
				run(t, p, protocols[(p+m)%2].opts, func(ctx context.Context, c comm.Comm) error {
					send := make([]vec3, p*m)
					for j := range p {
						for k := range m {
							send[j*m+k] = vec3{float32(c.Rank()), float32(j), float32(k)}
						}
					}
					got[c.Rank()] = make([]vec3, p*m)
					return comm.Alltoall(ctx, c, buf(t, send), buf(t, got[c.Rank()]))
				})
				for j := range p {
					for r := range p {
						for k := range m {
							require.Equal(t, vec3{float32(r), float32(j), float32(k)}, got[j][r*m+k], "rank %d, from %d", j, r)
						}
					}
				}
			})
		}
	}
}

func TestReduceScatter(t *testing.T) {
	defer comm.SetRingChunk(8)()
	for p := 1; p <= maxRanks; p++ {
		for _, m := range []int{0, 1, 3, 7} {
			t.Run(fmt.Sprintf("p=%d/m=%d", p, m), func(t *testing.T) {
				op := []comm.Op{comm.Sum, comm.Min, comm.Prod}[(p+m)%3]
				want := reference[int32](op, p, p*m)
				got := make([][]int32, p)
				run(t, p, protocols[(p+m)%2].opts, func(ctx context.Context, c comm.Comm) error {
					got[c.Rank()] = make([]int32, m)
					return comm.ReduceScatter(ctx, c, buf(t, inputs[int32](op, c.Rank(), p*m)), buf(t, got[c.Rank()]), op)
				})
				for r := range p {
					require.Equal(t, want[r*m:(r+1)*m], got[r], "rank %d", r)
				}
			})
		}
	}
}

func TestBarrier(t *testing.T) {
	// No rank may leave round k before every rank has entered it.
	const rounds = 5
	for p := 1; p <= maxRanks; p++ {
		t.Run(fmt.Sprint(p), func(t *testing.T) {
			var entered [rounds]atomic.Int32
			run(t, p, protocols[p%2].opts, func(ctx context.Context, c comm.Comm) error {
				for k := range rounds {
					entered[k].Add(1)
					if err := comm.Barrier(ctx, c); err != nil {
						return err
					}
					if n := entered[k].Load(); n != int32(p) {
						return fmt.Errorf("rank %d left barrier %d with %d of %d ranks in", c.Rank(), k, n, p)
					}
				}
				return nil
			})
		})
	}
}

func TestMixedSequence(t *testing.T) {
	// Different kinds, sizes and algorithms back to back, as every rank
	// calls them in the same order: messages of one never match another.
	defer comm.SetRingChunk(32)()
	const p = 6
	for _, proto := range protocols {
		t.Run(proto.name, func(t *testing.T) {
			run(t, p, proto.opts, func(ctx context.Context, c comm.Comm) error {
				for i := range 6 {
					n := []int{1, 5000, 3, 2}[i%4]
					want := reference[int64](comm.Sum, p, n)
					s := buf(t, inputs[int64](comm.Sum, c.Rank(), n))
					if err := comm.Allreduce(ctx, c, s, s, comm.Sum); err != nil {
						return err
					}
					got, _ := s.Host()
					if !assert.Equal(t, want, got) {
						return fmt.Errorf("allreduce %d", i)
					}
					b := make([]int64, n)
					if c.Rank() == i%p {
						copy(b, want)
					}
					if err := comm.Bcast(ctx, c, buf(t, b), i%p); err != nil {
						return err
					}
					if !assert.Equal(t, want, b) {
						return fmt.Errorf("bcast %d", i)
					}
					if err := comm.Barrier(ctx, c); err != nil {
						return err
					}
					all := make([]int64, p*n)
					if err := comm.Allgather(ctx, c, buf(t, b), buf(t, all)); err != nil {
						return err
					}
					for r := range p {
						if !assert.Equal(t, want, all[r*n:(r+1)*n]) {
							return fmt.Errorf("allgather %d", i)
						}
					}
				}
				return nil
			})
		})
	}
}
