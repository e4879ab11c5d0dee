// host.cc runs the kernels of kernels.cu on the CPU, to test what the
// source computes where there is no GPU (host_test.go builds and drives it;
// it checks the source's semantics, not the PTX code generation).
//
// Each block of a launch runs as blockDim coroutines (ucontext) sharing one
// dynamic shared memory; __syncthreads switches to the next one, so every
// thread of the block reaches a barrier before any passes it. Blocks run
// one after another.
//
// It reads commands from stdin, one a line:
//
//	buf ID SIZE COUNT HEX...     make buffer ID of COUNT elements of SIZE bytes
//	launch NAME GRID BLOCK SHARED ARG...
//	                             ARG is bID (the address of buffer ID) or xHEX
//	                             (a value, the low bytes of a 64-bit word)
//	dump ID                      print "ID HEX..." of buffer ID
//
// Buffers are given and printed as hexadecimal 64-bit words, one an element
// (4-byte elements in the low half). Errors go to stderr and exit 1.

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <ucontext.h>

// The CUDA builtins kernels.cu uses, for the host.
static unsigned host_tid, host_ctaid, host_ntid, host_nctaid;
static ucontext_t host_scheduler, *host_threads;
static void host_barrier() {
  swapcontext(&host_threads[host_tid], &host_scheduler);
}

#define __nvvm_read_ptx_sreg_tid_x() ((int)host_tid)
#define __nvvm_read_ptx_sreg_ctaid_x() ((int)host_ctaid)
#define __nvvm_read_ptx_sreg_ntid_x() ((int)host_ntid)
#define __nvvm_read_ptx_sreg_nctaid_x() ((int)host_nctaid)
#define __syncthreads() host_barrier()

#include "../kernels.cu"

// The dynamic shared memory of a block, at most 1024 8-byte elements. The
// bytes beyond a launch's SHARED are poisoned, and checked after it.
enum { kMaxShared = 1024 * 8 };
unsigned char xpu_reduce_shared[kMaxShared + 64] __attribute__((aligned(8)));

typedef void (*entry)(void **args);
struct kernel {
  const char *name;
  entry fn;
};

#define ENTRIES(T)                                                             \
  {"xpu_fill_" #T,                                                             \
   [](void **a) { xpu_fill_##T(*(T **)a[0], *(T *)a[1], *(u64 *)a[2]); }},     \
      {"xpu_scale_" #T,                                                        \
       [](void **a) { xpu_scale_##T(*(T **)a[0], *(T *)a[1], *(u64 *)a[2]); }}, \
      {"xpu_axpy_" #T,                                                         \
       [](void **a) {                                                          \
         xpu_axpy_##T(*(T **)a[0], *(const T **)a[1], *(T *)a[2],              \
                      *(u64 *)a[3]);                                           \
       }},                                                                     \
      {"xpu_add_" #T,                                                          \
       [](void **a) {                                                          \
         xpu_add_##T(*(T **)a[0], *(const T **)a[1], *(const T **)a[2],        \
                     *(u64 *)a[3]);                                            \
       }},                                                                     \
      {"xpu_sum_" #T,                                                          \
       [](void **a) {                                                          \
         xpu_sum_##T(*(T **)a[0], *(const T **)a[1], *(u64 *)a[2]);            \
       }},                                                                     \
      {"xpu_min_" #T,                                                          \
       [](void **a) {                                                          \
         xpu_min_##T(*(T **)a[0], *(const T **)a[1], *(u64 *)a[2]);            \
       }},                                                                     \
      {"xpu_max_" #T, [](void **a) {                                           \
         xpu_max_##T(*(T **)a[0], *(const T **)a[1], *(u64 *)a[2]);            \
       }},

static const kernel kernels[] = {ENTRIES(i32) ENTRIES(i64) ENTRIES(u32)
                                     ENTRIES(u64) ENTRIES(f32) ENTRIES(f64)};

static void fail(const char *what, const char *arg) {
  fprintf(stderr, "host: %s %s\n", what, arg ? arg : "");
  exit(1);
}

enum { kMaxBufs = 16, kMaxArgs = 8 };
static struct {
  unsigned size;
  unsigned long long count;
  unsigned char *p;
} bufs[kMaxBufs];

static unsigned long long read_u64(const char *s, int base) {
  char *end;
  unsigned long long v = strtoull(s, &end, base);
  if (*s == 0 || *end != 0) fail("bad number", s);
  return v;
}

enum { kMaxBlock = 1024, kStack = 32 << 10 };
static entry host_fn;
static void **host_args;
static bool host_done[kMaxBlock];

static void run_thread() {
  host_fn(host_args);
  host_done[host_tid] = true;
}  // returns to host_scheduler (uc_link)

static void launch(entry fn, unsigned grid, unsigned block, unsigned shared,
                   void **args) {
  static ucontext_t threads[kMaxBlock];
  static char *stacks;
  if (shared > kMaxShared) fail("shared memory too large", 0);
  if (block == 0 || block > kMaxBlock) fail("bad block size", 0);
  if (!stacks) stacks = (char *)malloc((size_t)kMaxBlock * kStack);
  host_threads = threads;
  host_fn = fn;
  host_args = args;
  host_nctaid = grid;
  host_ntid = block;
  for (unsigned b = 0; b < grid; b++) {
    host_ctaid = b;
    memset(xpu_reduce_shared, 0xa5, sizeof xpu_reduce_shared);
    for (unsigned t = 0; t < block; t++) {
      getcontext(&threads[t]);
      threads[t].uc_stack.ss_sp = stacks + (size_t)t * kStack;
      threads[t].uc_stack.ss_size = kStack;
      threads[t].uc_link = &host_scheduler;
      makecontext(&threads[t], run_thread, 0);
      host_done[t] = false;
    }
    // Rounds: each runs every thread to its next barrier or its end.
    for (bool live = true; live;) {
      live = false;
      for (unsigned t = 0; t < block; t++) {
        if (host_done[t]) continue;
        host_tid = t;
        swapcontext(&host_scheduler, &threads[t]);
        live = live || !host_done[t];
      }
    }
    for (unsigned i = shared; i < sizeof xpu_reduce_shared; i++)
      if (xpu_reduce_shared[i] != 0xa5) fail("write beyond the shared memory", 0);
  }
}

int main() {
  static char line[1 << 22];
  while (fgets(line, sizeof line, stdin)) {
    char *save, *tok[1 << 16];
    int n = 0;
    for (char *t = strtok_r(line, " \n", &save); t && n < (1 << 16);
         t = strtok_r(0, " \n", &save))
      tok[n++] = t;
    if (n == 0) continue;
    if (!strcmp(tok[0], "buf") && n >= 4) {
      unsigned id = read_u64(tok[1], 10), size = read_u64(tok[2], 10);
      unsigned long long count = read_u64(tok[3], 10);
      if (id >= kMaxBufs || (size != 4 && size != 8) || n != 4 + (int)count)
        fail("bad buf", tok[1]);
      free(bufs[id].p);
      bufs[id].size = size;
      bufs[id].count = count;
      bufs[id].p = (unsigned char *)calloc(count + 1, size);
      for (unsigned long long i = 0; i < count; i++) {
        unsigned long long v = read_u64(tok[4 + i], 16);
        memcpy(bufs[id].p + i * size, &v, size);  // little endian
      }
    } else if (!strcmp(tok[0], "launch") && n >= 5) {
      entry fn = 0;
      for (const kernel &k : kernels)
        if (!strcmp(k.name, tok[1])) fn = k.fn;
      if (!fn) fail("no kernel", tok[1]);
      unsigned long long slots[kMaxArgs];
      void *args[kMaxArgs];
      if (n - 5 > kMaxArgs) fail("too many arguments", tok[1]);
      for (int i = 5; i < n; i++) {
        if (tok[i][0] == 'b') {
          unsigned id = read_u64(tok[i] + 1, 10);
          if (id >= kMaxBufs || !bufs[id].p) fail("no buffer", tok[i]);
          slots[i - 5] = (unsigned long long)bufs[id].p;
        } else if (tok[i][0] == 'x') {
          slots[i - 5] = read_u64(tok[i] + 1, 16);
        } else {
          fail("bad argument", tok[i]);
        }
        args[i - 5] = &slots[i - 5];
      }
      launch(fn, read_u64(tok[2], 10), read_u64(tok[3], 10),
             read_u64(tok[4], 10), args);
    } else if (!strcmp(tok[0], "dump") && n == 2) {
      unsigned id = read_u64(tok[1], 10);
      if (id >= kMaxBufs || !bufs[id].p) fail("no buffer", tok[1]);
      printf("%u", id);
      for (unsigned long long i = 0; i < bufs[id].count; i++) {
        unsigned long long v = 0;
        memcpy(&v, bufs[id].p + i * bufs[id].size, bufs[id].size);
        printf(" %llx", v);
      }
      printf("\n");
      fflush(stdout);
    } else {
      fail("bad command", tok[0]);
    }
  }
  return 0;
}
