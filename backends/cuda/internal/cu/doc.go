// Package cu loads the CUDA driver API (libcuda.so.1) at run time and
// calls it: the one place of the cuda backend that touches the foreign
// library. Nothing links against CUDA at build time, so the module builds
// and vets on a machine without a toolkit, headers or driver, and one
// binary runs on machines with and without a GPU.
//
// The loading is cgo over dlopen and dlsym (docs/adr/0019 says why rather
// than purego, with the call overhead of both measured). Built with
// CGO_ENABLED=0 the package keeps its API and Open fails with
// ErrNoCgo.
//
// Every entry point the backend calls must be there for Open to succeed,
// but for the IPC ones (cuIpcGetMemHandle, cuIpcOpenMemHandle_v2 or the
// older cuIpcOpenMemHandle, cuIpcCloseMemHandle), which are optional: a
// driver without them loads, HasIPC reports false and the IPC calls fail
// with ErrNoIPC.
//
// # Contexts and OS threads
//
// A CUDA context is current per OS thread, and goroutines move between
// threads. Every call that needs a context takes it as its first argument,
// and the C trampoline makes it current (cuCtxSetCurrent) and then makes
// the call, in one crossing into C, during which the goroutine cannot
// move: no call ever runs under another device's context or none.
//
// # Errors
//
// A failed call returns a Result, the driver's CUresult, whose Error names
// the code ("CUDA_ERROR_OUT_OF_MEMORY (2): out of memory"). Mapping results
// to the project's sentinels is the backend's business (package cuda).
package cu
