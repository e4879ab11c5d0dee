package memspace

import (
	"github.com/xpu-go/xpu/xerr"
)

// Errors returned by spaces. They are the values of package xerr, so they
// match across packages under errors.Is.
var (
	ErrInvalidArgument = xerr.ErrInvalidArgument
	ErrOutOfMemory     = xerr.ErrOutOfMemory
	ErrNotSupported    = xerr.ErrNotSupported
	ErrClosed          = xerr.ErrClosed
	// ErrDeviceLost reports that the device a space's memory lives on has
	// failed and the memory is gone: a device backend whose device failed
	// returns it, and the fault-injecting wrappers inject it.
	ErrDeviceLost = xerr.ErrDeviceLost

	// ErrDoubleFree reports a Free of a block that is no longer allocated.
	// It also matches ErrInvalidArgument.
	ErrDoubleFree = xerr.NewKind("block freed twice or never allocated", xerr.ErrInvalidArgument)
	// ErrForeignBlock reports a block handed to a space that did not
	// allocate it. It also matches ErrInvalidArgument.
	ErrForeignBlock = xerr.NewKind("block belongs to another space", xerr.ErrInvalidArgument)
	// ErrNotHostAccessible reports a host view asked of memory the host
	// cannot touch (device memory). It also matches ErrNotSupported.
	ErrNotHostAccessible = xerr.NewKind("memory is not host-accessible", xerr.ErrNotSupported)
	// ErrBadElemType reports an element type that may not live outside the
	// Go heap (it holds pointers or has no fixed size). It also matches
	// ErrInvalidArgument.
	ErrBadElemType = xerr.NewKind("element type is not fixed-size and pointer-free", xerr.ErrInvalidArgument)
)

// MaxAlign is the largest alignment any space must honour: 1 GiB.
const MaxAlign = 1 << 30

// Properties describe what a space's memory is and who can touch it.
type Properties struct {
	// Kind names the sort of memory, used as the key of transfer paths:
	// "host", "cuda-device", "cuda-pinned", "cuda-managed", …
	Kind string
	// Device is the device index the memory lives on, or -1 for host memory.
	Device int
	// HostAccessible: the host CPU can load and store the memory directly,
	// so Block.Bytes and Buffer.Host succeed.
	HostAccessible bool
	// DeviceAccessible: kernels on the device can access the memory.
	DeviceAccessible bool
	// Unified: one address is valid on the host and the device (managed).
	Unified bool
	// Pinned: page-locked, may be the target of DMA and RDMA without copies.
	Pinned bool
	// Pageable: ordinary virtual memory the OS may page out.
	Pageable bool
	// Atomics: the memory supports atomic operations from its accessors.
	Atomics bool
	// Alignment is the alignment every allocation gets when a smaller one
	// (or zero) is asked for.
	Alignment int
}

// Space is a memory space: a place memory can be allocated in. Spaces are
// safe for concurrent use.
//
// Allocate must return ErrInvalidArgument for size <= 0, for an alignment
// that is not zero or a power of two, or one above MaxAlign; ErrOutOfMemory
// when the memory cannot be had (a size too large to represent included);
// ErrClosed after the space is closed. Zero alignment means
// Properties().Alignment.
//
// Free must return ErrDoubleFree for a block it does not hold (freed twice,
// or a sub-slice of an allocation), ErrForeignBlock for a block of another
// space, and must leave the space usable in both cases.
type Space interface {
	Name() string
	Properties() Properties
	Allocate(size, align int) (Block, error)
	Free(b Block) error
}

// Stats is a space's ledger.
type Stats struct {
	InUse      int64 // bytes handed out and not yet freed
	Peak       int64 // high-water mark of InUse
	Live       int64 // allocations handed out and not yet freed
	Allocs     int64 // total successful allocations
	Frees      int64 // total successful frees
	Reserved   int64 // bytes held from the underlying source (pools: cached + in use)
	Fragmented int64 // bytes reserved but unusable for the largest free request (pools)
}

// StatsSpace is a space that keeps a ledger. Every space in this module
// does; the conformance suite checks the ledger returns to zero.
type StatsSpace interface {
	Space
	Stats() Stats
}

// Availability answers how much memory a space has.
type Availability interface {
	// Available returns the bytes free and the bytes in total. Either may be
	// -1 when unknown.
	Available() (free, total int64, err error)
}

// Lookuper finds the allocation that contains an address.
type Lookuper interface {
	// Lookup returns the whole allocation containing addr.
	Lookup(addr Addr) (Block, bool)
}

// Closer is a space that releases resources on Close. After Close,
// Allocate returns ErrClosed.
type Closer interface {
	Close() error
}

// Stager is a space whose blocks are best staged for the host in another
// space: one the host can access, which transfers to and from this space
// are fastest through (for CUDA device memory, page-locked memory of the
// same device). Code that needs a host copy of a block the host cannot
// touch (the communicators of package comm) allocates the copy there.
type Stager interface {
	// StagingSpace returns the host-accessible space to stage this
	// space's blocks in, or nil when there is none (the memory is
	// host-accessible itself, say): the Go heap is used then.
	StagingSpace() Space
}

// FreeNotifier is a space that tells observers when memory goes away,
// before it can be reused: caches keyed by allocation — the registrations
// an RDMA communicator keeps for its buffers (lkey and rkey) — drop their
// entries then, so a new allocation at the same address is never taken
// for the old one. With Lookuper (an address to its allocation) it makes
// a space's blocks registrable once and reused for every message.
type FreeNotifier interface {
	// NotifyFree makes the space call f with memory that goes away: each
	// allocation as Free frees it, and at Close each region still mapped
	// (a block that may cover several allocations). Every allocation
	// inside the block f gets is void. f runs before the memory can be
	// reused, with the space's lock held: it must be quick and must not
	// call the space. stop ends the notifications; calling it again does
	// nothing.
	NotifyFree(f func(Block)) (stop func())
}

// Unwrapper is implemented by wrappers (pools, fault injectors, stats) so
// capabilities are found through them.
type Unwrapper interface {
	Unwrap() Space
}

// As finds the first space in the Unwrap chain of s that implements T.
func As[T any](s Space) (T, bool) {
	for s != nil {
		if t, ok := s.(T); ok {
			return t, true
		}
		u, ok := s.(Unwrapper)
		if !ok {
			break
		}
		s = u.Unwrap()
	}
	var zero T
	return zero, false
}

// StatsOf returns the ledger of s, found through wrappers.
func StatsOf(s Space) (Stats, error) {
	if ss, ok := As[StatsSpace](s); ok {
		return ss.Stats(), nil
	}
	return Stats{}, xerr.Detail(ErrNotSupported, "space %s keeps no ledger", s.Name())
}
