// Package memspace defines memory spaces — places memory can be allocated
// in, such as host memory, GPU device memory, pinned or managed memory — and
// typed buffers in them.
//
// A Space allocates and frees Blocks: a Block is a region (space, address,
// length) and is a plain value. Device addresses are integers (Addr), never
// Go pointers; a block of host-accessible memory also carries its host
// mapping, so Block.Bytes and Buffer.Host give a view without asking the
// space. Free is explicit: nothing is freed by the garbage collector, and a
// double free or a block of another space is an error that leaves the space
// usable, never corruption.
//
// Buffer[T] adds the element type. Alloc[T] accepts only fixed-size,
// pointer-free types (CheckElem), so memory the garbage collector does not
// scan never holds Go pointers; user types such as a float16 or a Vec4
// struct are fine.
//
// Optional capabilities are separate interfaces found with As, through
// wrappers that implement Unwrapper: StatsSpace (a ledger: bytes in use,
// peak, live allocations), Availability, Lookuper (address to allocation),
// Closer and Stager (where a block the host cannot touch is best copied
// for the host). Pool is a caching allocator that wraps any Space and serves
// device memory unchanged.
//
// Spaces are safe for concurrent use. Buffers are not safe for concurrent
// Free.
//
// Implementers: the argument check of Allocate (impl.CheckAlloc, formerly
// in this package) is in package impl, with the other helpers for backends;
// its errors carry no name, for the space to wrap with its own
// (xerr.Op(name, "alloc", err)), which the conformance suite checks.
package memspace
