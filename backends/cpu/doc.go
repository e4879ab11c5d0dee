// Package cpu is the host backend: the reference implementation of the
// memory space, executor and transfer concepts, the one the conformance
// suite's users compare against. Importing it registers the driver "cpu"
// with package xpu and the host-to-host transfer path:
//
//	import _ "github.com/xpu-go/xpu/backends/cpu"
//
//	b, err := xpu.Open(ctx, "cpu", xpu.Options{"workers": "8"})
//
// The parts can also be used on their own.
//
// Space (NewSpace) is host memory mapped with mmap outside the Go heap:
// stable addresses, any power-of-two alignment up to memspace.MaxAlign, a
// ledger, address lookup, an optional byte limit. Small blocks share
// slabs; large ones get mappings of their own. Free is explicit; a double
// free or a foreign block is an error, never corruption. Close frees what
// is left and reports it as a leak.
//
// Executor (NewExecutor) is a persistent pool of goroutines for data-
// parallel loops (ParallelFor, ParallelRange, executor.Reduce) in which
// the calling goroutine takes part, so loops nest without deadlock; chunks
// are claimed dynamically; a panic in a body or a canceled context stops
// the scheduling of new chunks and comes back as an error. Its streams
// (NewStream) are ordered queues, each served by a goroutine of its own,
// with events that record when they completed.
//
// Each backend Open returns registers transfer.ParallelHost over its
// executor for "host" to "host" until the backend is closed, so large host
// copies are split across the workers of the backend opened last of those
// still open. With no backend open they are copied by the built-in
// memmove path.
//
// Lifetimes: Close the executor (or the backend) to stop its goroutines;
// Close the space to unmap its memory. Everything in the package is safe
// for concurrent use.
//
// # Options
//
// xpu.Open reads these keys of xpu.Options, each documented on its
// constant:
//
//	workers    OptWorkers    workers of the executor; GOMAXPROCS by default
//	limit      OptLimit      cap on the bytes in use ("2 GiB"); none by default
//	hugepages  OptHugePages  "true": transparent huge pages for large blocks
//
// A bad value is an error matching xpu.ErrInvalidArgument, and a key the
// driver does not know one matching xpu.ErrUnknownOption. A key scoped to
// another backend ("procs.timeout") is left to it, so that one set of options
// can serve a fallback chain; "cpu.limit" is read as limit.
package cpu
