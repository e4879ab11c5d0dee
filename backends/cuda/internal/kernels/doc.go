// Package kernels holds the CUDA backend's built-in kernels: their PTX,
// embedded in the binary, and a table of their names and parameter lists.
//
// The kernels are written in kernels.cu (test-only ones in
// testkernels.cu) and compiled to PTX by clang 14's NVPTX back end for
// sm_70 (PTX ISA 6.0); the driver JIT-compiles the PTX for the GPU that
// loads it. The generated files are committed, so building needs no
// compiler; after a change to a source, regenerate them with
//
//	go generate ./backends/cuda/internal/kernels
//
// The tests check that the committed PTX has one entry per kernel of the
// table (Kernels, TestKernels) with the parameters it lists and, where
// clang-14 is installed, that the PTX is what the sources compile to and
// that kernels.cu, compiled for the host and run there a coroutine per
// CUDA thread (testdata/host.cc), computes what the spec says.
//
// # Kernels
//
// Every kernel name is "xpu_<op>_<type>", type one of i32, i64, u32, u64,
// f32, f64 (see Name). Arguments are passed by value as the driver passes
// them; a pointer is an 8-byte device address and n a uint64 element
// count.
//
//	xpu_fill_<t>(T *p, T v, uint64 n)                    p[i] = v
//	xpu_scale_<t>(T *p, T a, uint64 n)                   p[i] = a * p[i]
//	xpu_axpy_<t>(T *y, const T *x, T a, uint64 n)        y[i] = a * x[i] + y[i]
//	xpu_add_<t>(T *z, const T *x, const T *y, uint64 n)  z[i] = x[i] + y[i]
//	xpu_sum_<t>(T *out, const T *in, uint64 n)           out[b] = partial sum of block b
//	xpu_min_<t>(T *out, const T *in, uint64 n)           out[b] = partial minimum
//	xpu_max_<t>(T *out, const T *in, uint64 n)           out[b] = partial maximum
//
// The elementwise kernels (fill, scale, axpy, add) loop over i with a
// 1-D grid stride and take any 1-D grid and block; z of add may be x or y.
// Integers wrap; a*x + y is rounded twice (no fused multiply-add).
//
// The reductions (sum, min, max) take a 1-D grid of G blocks of B threads,
// B a power of two in [MinReduceBlock, MaxReduceBlock] (the backend uses
// ReduceBlock), and exactly B*size(T) bytes of dynamic shared memory
// (Kernel.SharedBytes). Thread t of block b folds the elements
// b*B + t + k*G*B (k = 0, 1, ...; below n) into an accumulator that starts
// at the identity; the block combines its B accumulators in a tree (for
// s = B/2, B/4, ..., 1, slot t < s folds in slot t+s) and thread 0 writes
// out[b]. A block without elements writes the identity: 0 for sum; the
// type's maximum (+Inf for floats) for min; its minimum (-Inf) for max.
// A second launch with G = 1 over the G partials reduces them to one; out
// may then be in. Float min and max are fmin and fmax: a NaN is ignored
// when the other operand is not NaN. As the accumulators start at the
// identity, an input of NaNs only comes out as the identity (+Inf for min),
// not NaN; a sum with a NaN is NaN.
//
// The test kernels (TestPTX, TestKernels) are for the backend's tests and
// benchmarks only:
//
//	xpu_test_empty()                        does nothing
//	xpu_test_iota_u32(uint32 *p, uint64 n)  p[i] = i, grid-stride
//	xpu_test_sleep(uint64 ns)               thread 0 of block 0 spins ns nanoseconds on %globaltimer
//	xpu_test_store(uint64 *p, uint64 v)     thread 0 of block 0 stores v at *p
package kernels

//go:generate go run gen.go
