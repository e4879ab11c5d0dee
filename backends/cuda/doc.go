// Package cuda is the GPU backend: NVIDIA devices through the CUDA driver
// API, loaded at run time (package internal/cu), so the module builds and
// its tests run on machines without a GPU, a toolkit or headers, and one
// binary runs on both kinds of machine.
//
//	b, err := xpu.Open(ctx, "cuda", xpu.Options{"device": "1"})
//
// A backend is one device: Memory is its device memory (KindDevice, which
// the host cannot touch: a host view is memspace.ErrNotHostAccessible,
// never a crash), and Spaces adds page-locked host memory (KindPinned) and
// managed memory (KindManaged). Every space keeps a ledger, answers
// Lookup, and reports the device's free memory. memspace.Pool serves
// device memory unchanged.
//
// The Executor's streams are CUDA streams and its events CUDA events:
// record, cross-stream and cross-device waits, queries, elapsed time
// (executor.TimedEvent). Host work and waits on other backends' events run
// in stream order without a driver callback (see Stream). Path copies
// between CUDA and host memory and between devices, synchronously or in
// stream order; it is registered with package transfer while a backend is
// open, so transfer.Copy between any cpu and cuda buffers just works.
//
// Kernels: LoadModule loads PTX text (the JIT's log in the error),
// Module.Function finds a kernel and Function.Launch launches it with a
// typed argument list. Built-in kernels, shipped as PTX: Fill, Scale,
// Axpy, Add and the reductions Sum, Min and Max.
//
// # Sharing device memory between processes
//
// Device memory of one process is mapped by another process of the same
// machine through the driver's IPC handles (cuIpcGetMemHandle,
// cuIpcOpenMemHandle_v2, cuIpcCloseMemHandle; docs/adr/0040). A device
// Space is a memspace.Sharer: Share(b) returns a memspace.Shared of kind
// ShareKind whose Handle is the 64-byte CUipcMemHandle of the driver
// allocation holding b, Size that allocation's span, and Offset b's place
// from the driver's base (a block aligned above Alignment starts past
// it). The handle is taken once per allocation and dropped by Free; a new
// allocation gets a new handle even at the same address. Pinned and
// managed memory do not share (memspace.ErrNotShareable).
//
// Every Space is a memspace.Importer: Import(sh) maps the allocation in
// the space's device context and returns a block of an Imported space,
// whose properties are those of that device's memory, so that
// transfer.CopyBlock copies between it and host, pinned or device memory
// as between any device blocks; done releases it. The space opens each
// handle once (the driver counts opens of one handle in a context, and
// so does the cache): imports of one handle share the mapping, which is
// kept once unused among the KeepUnused most recently used, until Forget
// (the owner freed the allocation or ended) or Close. While a backend is
// open its device space is registered with memspace.RegisterImporter, so
// that a receiver whose own buffer is host memory finds an importer.
//
// A handle that cannot be opened fails with an error matching
// memspace.ErrNotShareable that gives the driver's code and what it
// means: a freed allocation, a forged or corrupted handle, another
// machine's, one of a process that has ended, the process's own (the
// driver does not open those), a device without peer access; and a
// driver without the IPC entry points. The caller moves the bytes
// another way. An exporter must not free an allocation that is still
// mapped elsewhere: the driver leaves that undefined; the fake faults
// the importer's next copy (sticky, xerr.ErrDeviceLost), so a stale cache
// shows in tests.
//
// # Options
//
// xpu.Open reads these keys of xpu.Options, each documented on its
// constant:
//
//	device   OptDevice   index of the device; 0 by default
//	library  OptLibrary  path of the driver library; $XPU_CUDA_LIBRARY, else libcuda.so.1
//
// A bad value is an error matching xpu.ErrInvalidArgument, and a key the
// driver does not know one matching xpu.ErrUnknownOption. A key scoped to
// another backend ("cpu.limit") is left to it, so that one set of options
// can serve a fallback chain; "cuda.device" is read as device.
//
// # Devices and OS threads
//
// A device index is chosen per space and executor; every driver call
// makes that device's primary context current on the OS thread it runs on,
// in the same crossing into C (goroutines move between threads; CUDA
// contexts are per thread).
//
// # Errors
//
// Errors match the project's sentinels: an exhausted device
// xerr.ErrOutOfMemory, a bad argument xerr.ErrInvalidArgument, a kernel
// that faulted or a device that failed xerr.ErrDeviceLost (the driver's
// error is sticky: every call on the device fails until the backend is
// closed and reopened), no driver or device xpu.ErrUnavailable. The
// driver's own code is in the message.
//
// # Testing without a GPU
//
// The package's tests build a fake libcuda (internal/fakecuda) whose device
// memory the host cannot touch, whose streams are real ordered queues on
// their own threads, whose IPC handles are opened by other processes, and
// which injects faults; the whole conformance suite runs through it.
// EnvLibrary points the backend at it. The IPC tests start the test
// binary again as the exporting process (TestIPCExporter).
package cuda
