// Definitions shared by kernels.cu and testkernels.cu: the CUDA keywords
// as clang attributes (no CUDA header is used) and the grid-stride
// indexing of 1-D launches.

#ifndef XPU_COMMON_CUH
#define XPU_COMMON_CUH

#define GLOBAL __attribute__((global))
#define DEVICE __attribute__((device))
#define SHARED __attribute__((shared))
#define INLINE __attribute__((always_inline))

// The special registers, unsigned (clang's builtins return int).
static DEVICE INLINE unsigned thread_x() { return __nvvm_read_ptx_sreg_tid_x(); }
static DEVICE INLINE unsigned block_x() { return __nvvm_read_ptx_sreg_ctaid_x(); }
static DEVICE INLINE unsigned block_dim_x() {
  return __nvvm_read_ptx_sreg_ntid_x();
}
static DEVICE INLINE unsigned grid_dim_x() {
  return __nvvm_read_ptx_sreg_nctaid_x();
}

// blockIdx.x*blockDim.x + threadIdx.x, in 64 bits.
static DEVICE INLINE unsigned long long global_index() {
  return (unsigned long long)block_x() * block_dim_x() + thread_x();
}

// gridDim.x*blockDim.x, in 64 bits.
static DEVICE INLINE unsigned long long grid_stride() {
  return (unsigned long long)grid_dim_x() * block_dim_x();
}

#endif
