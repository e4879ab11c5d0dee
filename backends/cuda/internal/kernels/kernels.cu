// Source of the xpu CUDA backend's built-in kernels (kernels.ptx).
//
// Compiled to PTX by clang's NVPTX back end without the CUDA toolkit: see
// internal/ptxgen for the exact command (go generate runs gen.go). The
// CUDA attributes and thread-index reads are spelled with clang's own
// attributes and NVVM builtins, so no CUDA header is needed. Compiled with -fwrapv (integer
// arithmetic wraps) and -ffp-contract=off (a*x + y is a multiply then an
// add, never fused), so results match a plain C implementation.
//
// The semantics are fixed by the backend's spec; kernels.go mirrors the
// names and parameter lists in Go, and its tests check the PTX against them.

#include "common.cuh"

// ---- Element types ---------------------------------------------------------

typedef int i32;
typedef long long i64;
typedef unsigned int u32;
typedef unsigned long long u64;
typedef float f32;
typedef double f64;

// Identities of min (the type's maximum) and max (the type's minimum).
template <typename T> struct limits;
template <> struct limits<i32> {
  static DEVICE i32 hi() { return 2147483647; }
  static DEVICE i32 lo() { return -2147483647 - 1; }
};
template <> struct limits<i64> {
  static DEVICE i64 hi() { return 9223372036854775807LL; }
  static DEVICE i64 lo() { return -9223372036854775807LL - 1; }
};
template <> struct limits<u32> {
  static DEVICE u32 hi() { return 0xffffffffU; }
  static DEVICE u32 lo() { return 0; }
};
template <> struct limits<u64> {
  static DEVICE u64 hi() { return 0xffffffffffffffffULL; }
  static DEVICE u64 lo() { return 0; }
};
template <> struct limits<f32> {
  static DEVICE f32 hi() { return __builtin_inff(); }
  static DEVICE f32 lo() { return -__builtin_inff(); }
};
template <> struct limits<f64> {
  static DEVICE f64 hi() { return __builtin_inf(); }
  static DEVICE f64 lo() { return -__builtin_inf(); }
};

// ---- Reduction operators ---------------------------------------------------

template <typename T> struct op_sum {
  static DEVICE T identity() { return T(0); }
  static DEVICE T apply(T a, T b) { return a + b; }
};

template <typename T> struct op_min {
  static DEVICE T identity() { return limits<T>::hi(); }
  static DEVICE T apply(T a, T b) { return b < a ? b : a; }
};
// fmin semantics: a NaN operand is ignored unless both are NaN.
template <> struct op_min<f32> {
  static DEVICE f32 identity() { return limits<f32>::hi(); }
  static DEVICE f32 apply(f32 a, f32 b) { return __builtin_fminf(a, b); }
};
template <> struct op_min<f64> {
  static DEVICE f64 identity() { return limits<f64>::hi(); }
  static DEVICE f64 apply(f64 a, f64 b) { return __builtin_fmin(a, b); }
};

template <typename T> struct op_max {
  static DEVICE T identity() { return limits<T>::lo(); }
  static DEVICE T apply(T a, T b) { return b > a ? b : a; }
};
// fmax semantics: a NaN operand is ignored unless both are NaN.
template <> struct op_max<f32> {
  static DEVICE f32 identity() { return limits<f32>::lo(); }
  static DEVICE f32 apply(f32 a, f32 b) { return __builtin_fmaxf(a, b); }
};
template <> struct op_max<f64> {
  static DEVICE f64 identity() { return limits<f64>::lo(); }
  static DEVICE f64 apply(f64 a, f64 b) { return __builtin_fmax(a, b); }
};

// ---- Kernel bodies -----------------------------------------------------------

// Elementwise kernels: a 1-D grid-stride loop, any 1-D grid and block.

template <typename T> static DEVICE INLINE void fill(T *p, T v, u64 n) {
  for (u64 i = global_index(); i < n; i += grid_stride()) p[i] = v;
}

template <typename T> static DEVICE INLINE void scale(T *p, T a, u64 n) {
  for (u64 i = global_index(); i < n; i += grid_stride()) p[i] = a * p[i];
}

template <typename T>
static DEVICE INLINE void axpy(T *y, const T *x, T a, u64 n) {
  for (u64 i = global_index(); i < n; i += grid_stride()) y[i] = a * x[i] + y[i];
}

// z may alias x or y: each element is read before it is written, by the
// same thread.
template <typename T>
static DEVICE INLINE void add(T *z, const T *x, const T *y, u64 n) {
  for (u64 i = global_index(); i < n; i += grid_stride()) z[i] = x[i] + y[i];
}

// Dynamic shared memory of a reduction: exactly blockDim.x elements of T,
// sized by the launch.
extern SHARED __attribute__((aligned(8))) unsigned char xpu_reduce_shared[];

// reduce: launched with G blocks of B threads, B a power of two in
// [32, 1024], and B*sizeof(T) bytes of dynamic shared memory. Thread t of
// block b folds elements b*B + t + k*G*B (k = 0, 1, ...) into an
// accumulator that starts at the identity; the block combines its B
// accumulators in a tree (s = B/2, B/4, ..., 1: slot t folds in slot t+s,
// for t < s) and thread 0 writes out[b]. A block without elements writes
// the identity. out may be in (a second pass with G = 1 over the
// partials): every read of in precedes the first barrier.
template <typename T, typename Op>
static DEVICE INLINE void reduce(T *out, const T *in, u64 n) {
  T *sh = reinterpret_cast<T *>(xpu_reduce_shared);
  const u32 t = thread_x();
  const u32 B = block_dim_x();
  const u32 b = block_x();
  T acc = Op::identity();
  for (u64 i = (u64)b * B + t; i < n; i += grid_stride())
    acc = Op::apply(acc, in[i]);
  sh[t] = acc;
  __syncthreads();
  for (u32 s = B / 2; s > 0; s /= 2) {
    if (t < s) sh[t] = Op::apply(sh[t], sh[t + s]);
    __syncthreads();
  }
  if (t == 0) out[b] = sh[0];
}

// ---- Entry points ------------------------------------------------------------

#define XPU_KERNELS(T)                                                        \
  extern "C" GLOBAL void xpu_fill_##T(T *p, T v, u64 n) { fill<T>(p, v, n); } \
  extern "C" GLOBAL void xpu_scale_##T(T *p, T a, u64 n) {                    \
    scale<T>(p, a, n);                                                        \
  }                                                                           \
  extern "C" GLOBAL void xpu_axpy_##T(T *y, const T *x, T a, u64 n) {         \
    axpy<T>(y, x, a, n);                                                      \
  }                                                                           \
  extern "C" GLOBAL void xpu_add_##T(T *z, const T *x, const T *y, u64 n) {   \
    add<T>(z, x, y, n);                                                       \
  }                                                                           \
  extern "C" GLOBAL void xpu_sum_##T(T *out, const T *in, u64 n) {            \
    reduce<T, op_sum<T> >(out, in, n);                                        \
  }                                                                           \
  extern "C" GLOBAL void xpu_min_##T(T *out, const T *in, u64 n) {            \
    reduce<T, op_min<T> >(out, in, n);                                        \
  }                                                                           \
  extern "C" GLOBAL void xpu_max_##T(T *out, const T *in, u64 n) {            \
    reduce<T, op_max<T> >(out, in, n);                                        \
  }

XPU_KERNELS(i32)
XPU_KERNELS(i64)
XPU_KERNELS(u32)
XPU_KERNELS(u64)
XPU_KERNELS(f32)
XPU_KERNELS(f64)
