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
//   - IPC handles (cuIpcGetMemHandle, cuIpcOpenMemHandle_v2 and its
//     older name, cuIpcCloseMemHandle) are opened by other processes:
//     see "IPC" below.
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
// # IPC
//
// The first cuIpcGetMemHandle of a process creates its IPC table, a memfd
// holding a random secret, the fds of the device memfds, and a slot per
// exported allocation (serial, offset, size, device, live). A handle (64
// bytes; IPCHandleBootID and IPCHandleBootIDSize locate the boot id in
// it) names the machine (the kernel's boot id), the exporting process,
// its table, the slot and a serial unique in the process, with a MAC keyed
// by the secret and a checksum. cuIpcGetMemHandle takes the base of a
// device allocation (anything else: CUDA_ERROR_INVALID_VALUE) and returns
// the same handle until the allocation is freed. An importer opens the
// exporter's memfds through /proc/<pid>/fd (the rights a debugger needs to
// read the process) and maps the allocation's pages at a fresh address
// that is PROT_NONE for the host, with a read-write view it copies
// through; range checks of copies, memsets and kernels know the mapping.
// A mapping is of the context that opened it: the device it counts as is
// that context's. Nothing goes to /dev/shm.
//
// cuIpcOpenMemHandle_v2 returns, where the real driver's code is known,
// that code, and otherwise one chosen here:
//
//   - a handle of this process: CUDA_ERROR_INVALID_CONTEXT (the driver's);
//   - bad magic, checksum or MAC (random bytes, a flipped byte), or bad
//     flags: CUDA_ERROR_INVALID_VALUE (the driver's for a bad handle);
//   - another machine's (the boot id differs): CUDA_ERROR_INVALID_DEVICE;
//   - a freed allocation (the slot's serial differs or it is not live):
//     CUDA_ERROR_INVALID_HANDLE;
//   - an exporter that has ended (its /proc entries are gone):
//     CUDA_ERROR_NOT_FOUND;
//   - memory of another device with FAKECUDA_NO_PEER=1:
//     CUDA_ERROR_PEER_ACCESS_UNSUPPORTED; without it, and without the flag
//     CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS or peer access enabled in the
//     context: CUDA_ERROR_PEER_ACCESS_NOT_ENABLED (705). The flag does
//     not enable peer access for later calls.
//
// As in the real driver, a handle opened again in the same context
// returns the same address and counts one more open; cuIpcCloseMemHandle
// takes one open back and unmaps at the last; a close more than opened is
// CUDA_ERROR_INVALID_VALUE. On a failed context it still closes, then
// returns the context's error. A reset context unmaps what it still had
// open, counted as leaked. Where the real driver leaves it undefined, the
// fake is strict: once the exporter has freed an allocation that is
// mapped elsewhere, every copy, memset or kernel through the mapping
// faults with CUDA_ERROR_ILLEGAL_ADDRESS, sticky on the importer's
// context; opening that handle again is CUDA_ERROR_INVALID_HANDLE.
// Stats counts live mappings (IPCMappings, part of Live), successful opens
// in total (IPCOpens) and live exports (IPCExports).
//
// Attach opens the same library the backend loads and returns a Control
// for injecting faults (out of memory, failed launches, illegal
// addresses, failed copies, a lost device) and reading the fake's
// counters of live objects, in all and per device, so that a test can
// check that the backend freed what it allocated, and on which device.
package fakecuda
