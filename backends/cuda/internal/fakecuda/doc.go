// Package fakecuda is a test double at the foreign boundary: a fake CUDA
// driver library (libcuda.so.1) written in C, and the Go helpers that
// build it and drive its test controls. It is used only by tests (and
// test helpers), never in the library's run-time path.
//
// The CUDA backend loads libcuda.so.1 at run time with dlopen. On a
// machine without a GPU its tests point the loader at the library Build
// returns, so every driver call the backend makes goes through the fake.
// The fake is strict where the real driver is, and in a few places
// stricter, so that mistakes show up as errors or crashes in tests rather
// than on a GPU:
//
//   - Device memory is a memfd region mapped twice: the addresses handed
//     out are PROT_NONE for the host, so a host dereference of a device
//     pointer crashes; the fake copies through a second, read-write view.
//   - Contexts are current per OS thread; a call that needs one and has
//     none fails with CUDA_ERROR_INVALID_CONTEXT.
//   - Streams are ordered queues served by threads of their own; events
//     complete when a stream reaches them; errors in kernels are
//     asynchronous and sticky until the primary context is reset.
//   - Every copy, memset and kernel checks each range it touches against
//     the live allocations; kernels also check peer access.
//   - Modules are PTX text, checked by a small front end; kernels are the
//     built-in ones (xpu_fill_*, xpu_sum_*, ...) and the test kernels
//     (xpu_test_*), executed by C equivalents.
//
// The fake is configured from the environment when cuInit first succeeds:
// FAKECUDA_DEVICES (default 2), FAKECUDA_MEMORY (bytes per device, default
// 1 GiB), FAKECUDA_DRIVER_VERSION (default 12040), FAKECUDA_NO_DEVICE=1
// (cuInit fails with CUDA_ERROR_NO_DEVICE) and FAKECUDA_NO_PEER=1 (no peer
// access between devices). Each loaded copy of the library has state of
// its own: Copy makes one, and a test that needs a different
// configuration sets the environment before the copy's cuInit.
//
// Choices where the real driver leaves room, or where the fake is
// stricter (a backend that passes against the fake should not rely on
// the opposite):
//
//   - cuMemFree_v2 and cuMemFreeHost do not wait for queued work: work
//     that reaches freed memory faults (CUDA_ERROR_ILLEGAL_ADDRESS, sticky).
//     Synchronize before freeing memory queued work still uses.
//   - A stream passed to a copy, memset or launch must belong to the
//     current context (else CUDA_ERROR_INVALID_HANDLE); cuEventRecord
//     needs the event and the stream in one context.
//   - On a failed context (sticky error, lost device) destroying calls
//     (cuMemFree_v2, cuMemFreeHost, cuStreamDestroy_v2, cuEventDestroy_v2,
//     cuModuleUnload, cuDevicePrimaryCtxRelease_v2) still destroy, then
//     return the error.
//   - A stream waiting for an event whose context failed fails too
//     (sticky, with that context's error, or CUDA_ERROR_LAUNCH_FAILED)
//     instead of hanging.
//   - Fresh device allocations up to 1 MiB are filled with 0xA5; freed
//     memory reads as zero when reused.
//   - cuDriverGetVersion and cuGetErrorName/String work before cuInit, as
//     in the real driver; every other call returns
//     CUDA_ERROR_NOT_INITIALIZED.
//
// Attach opens the same library the backend loads and returns a Control
// for injecting faults (out of memory, failed launches, illegal
// addresses, failed copies, a lost device) and reading the fake's
// counters of live objects, in all and per device, so that a test can
// check that the backend freed what it allocated, and on which device.
package fakecuda
