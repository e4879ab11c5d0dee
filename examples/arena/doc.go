// Package arena is an example of a third-party xpu backend, kept in a module
// of its own to show what a backend author writes: a memory space that
// carves a fixed-capacity region (allocated once, off the Go heap) with a
// first-fit free list, and a serial executor that runs every loop on the
// calling goroutine. It registers itself as "arena" and proves itself with
// one call to conformance.Run in arena_test.go.
//
// A fixed arena suits programs that must not touch the system allocator
// after start-up (real-time loops, memory budgets); the capacity is the
// "capacity" option of Open (OptCapacity), in bytes ("268435456" or
// "256MiB").
package arena
