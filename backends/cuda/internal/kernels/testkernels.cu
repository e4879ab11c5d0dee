// Source of the test-only kernels (testkernels.ptx), used by the CUDA
// backend's tests and benchmarks, never by the backend itself. Compiled as
// kernels.cu is; see internal/ptxgen.

#include "common.cuh"

// Does nothing: measures launch overhead.
extern "C" GLOBAL void xpu_test_empty() {}

// p[i] = i, grid-stride.
extern "C" GLOBAL void xpu_test_iota_u32(unsigned int *p,
                                          unsigned long long n) {
  for (unsigned long long i = global_index(); i < n; i += grid_stride())
    p[i] = (unsigned int)i;
}

static DEVICE INLINE unsigned long long globaltimer() {
  unsigned long long t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
}

// Thread 0 of block 0 waits ns nanoseconds by %globaltimer; the others
// return at once.
extern "C" GLOBAL void xpu_test_sleep(unsigned long long ns) {
  if (thread_x() != 0 || block_x() != 0)
    return;
  const unsigned long long start = globaltimer();
  while (globaltimer() - start < ns) {
  }
}

// Thread 0 of block 0 stores v at *p (a bad p is an illegal address).
extern "C" GLOBAL void xpu_test_store(unsigned long long *p,
                                       unsigned long long v) {
  if (thread_x() == 0 && block_x() == 0)
    *p = v;
}
