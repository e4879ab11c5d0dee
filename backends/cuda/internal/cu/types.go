package cu

import (
	"errors"
	"strconv"
	"unsafe"
)

// Result is a CUresult other than CUDA_SUCCESS.
type Result int

// The results the backend tells apart.
const (
	ErrInvalidValue            Result = 1
	ErrOutOfMemory             Result = 2
	ErrNotInitialized          Result = 3
	ErrDeinitialized           Result = 4
	ErrStubLibrary             Result = 34
	ErrInsufficientDriver      Result = 35
	ErrDeviceUnavailable       Result = 46
	ErrNoDevice                Result = 100
	ErrInvalidDevice           Result = 101
	ErrInvalidImage            Result = 200
	ErrInvalidContext          Result = 201
	ErrECCUncorrectable        Result = 214
	ErrPeerAccessUnsupported   Result = 217
	ErrInvalidPTX              Result = 218
	ErrUnsupportedPTXVersion   Result = 222
	ErrInvalidHandle           Result = 400
	ErrNotFound                Result = 500
	ErrNotReady                Result = 600
	ErrIllegalAddress          Result = 700
	ErrLaunchOutOfResources    Result = 701
	ErrLaunchTimeout           Result = 702
	ErrPeerAccessAlreadyEnable Result = 704
	ErrPeerAccessNotEnabled    Result = 705
	ErrContextIsDestroyed      Result = 709
	ErrAssert                  Result = 710
	ErrHardwareStack           Result = 714
	ErrIllegalInstruction      Result = 715
	ErrMisalignedAddress       Result = 716
	ErrInvalidAddressSpace     Result = 717
	ErrInvalidPC               Result = 718
	ErrLaunchFailed            Result = 719
	ErrNotPermitted            Result = 800
	ErrNotSupported            Result = 801
	ErrUnknown                 Result = 999
)

var names = map[Result]string{
	ErrInvalidValue: "CUDA_ERROR_INVALID_VALUE", ErrOutOfMemory: "CUDA_ERROR_OUT_OF_MEMORY",
	ErrNotInitialized: "CUDA_ERROR_NOT_INITIALIZED", ErrDeinitialized: "CUDA_ERROR_DEINITIALIZED",
	ErrStubLibrary: "CUDA_ERROR_STUB_LIBRARY", ErrInsufficientDriver: "CUDA_ERROR_INSUFFICIENT_DRIVER",
	ErrDeviceUnavailable: "CUDA_ERROR_DEVICE_UNAVAILABLE", ErrNoDevice: "CUDA_ERROR_NO_DEVICE",
	ErrInvalidDevice: "CUDA_ERROR_INVALID_DEVICE", ErrInvalidImage: "CUDA_ERROR_INVALID_IMAGE",
	ErrInvalidContext: "CUDA_ERROR_INVALID_CONTEXT", ErrECCUncorrectable: "CUDA_ERROR_ECC_UNCORRECTABLE",
	ErrPeerAccessUnsupported: "CUDA_ERROR_PEER_ACCESS_UNSUPPORTED", ErrInvalidPTX: "CUDA_ERROR_INVALID_PTX",
	ErrUnsupportedPTXVersion: "CUDA_ERROR_UNSUPPORTED_PTX_VERSION", ErrInvalidHandle: "CUDA_ERROR_INVALID_HANDLE",
	ErrNotFound: "CUDA_ERROR_NOT_FOUND", ErrNotReady: "CUDA_ERROR_NOT_READY",
	ErrIllegalAddress: "CUDA_ERROR_ILLEGAL_ADDRESS", ErrLaunchOutOfResources: "CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES",
	ErrLaunchTimeout: "CUDA_ERROR_LAUNCH_TIMEOUT", ErrPeerAccessAlreadyEnable: "CUDA_ERROR_PEER_ACCESS_ALREADY_ENABLED",
	ErrPeerAccessNotEnabled: "CUDA_ERROR_PEER_ACCESS_NOT_ENABLED",
	ErrContextIsDestroyed:   "CUDA_ERROR_CONTEXT_IS_DESTROYED", ErrAssert: "CUDA_ERROR_ASSERT",
	ErrHardwareStack: "CUDA_ERROR_HARDWARE_STACK_ERROR", ErrIllegalInstruction: "CUDA_ERROR_ILLEGAL_INSTRUCTION",
	ErrMisalignedAddress: "CUDA_ERROR_MISALIGNED_ADDRESS", ErrInvalidAddressSpace: "CUDA_ERROR_INVALID_ADDRESS_SPACE",
	ErrInvalidPC: "CUDA_ERROR_INVALID_PC", ErrLaunchFailed: "CUDA_ERROR_LAUNCH_FAILED",
	ErrNotPermitted: "CUDA_ERROR_NOT_PERMITTED", ErrNotSupported: "CUDA_ERROR_NOT_SUPPORTED",
	ErrUnknown: "CUDA_ERROR_UNKNOWN",
}

// Name is the code's name in cuda.h, or "CUresult N" for one this package
// does not know.
func (r Result) Name() string {
	if n, ok := names[r]; ok {
		return n
	}
	return "CUresult " + strconv.Itoa(int(r))
}

func (r Result) Error() string { return r.Name() + " (" + strconv.Itoa(int(r)) + ")" }

// Sticky reports whether r leaves the context unusable: after it every
// call on the context fails until the context is torn down (a kernel that
// faulted, a device that fell off the bus).
func (r Result) Sticky() bool {
	switch r {
	case ErrIllegalAddress, ErrLaunchFailed, ErrHardwareStack, ErrIllegalInstruction,
		ErrMisalignedAddress, ErrInvalidAddressSpace, ErrInvalidPC, ErrAssert,
		ErrLaunchTimeout, ErrECCUncorrectable, ErrDeviceUnavailable, ErrContextIsDestroyed:
		return true
	}
	return false
}

// ResultOf returns the Result err carries, if any.
func ResultOf(err error) (Result, bool) {
	var r Result
	ok := errors.As(err, &r)
	return r, ok
}

func check(code int) error {
	if code == 0 {
		return nil
	}
	return Result(code)
}

// ErrNoIPC is the error of the IPC calls of a driver that lacks their
// entry points (Lib.HasIPC).
var ErrNoIPC = errors.New("the driver lacks the IPC entry points (cuIpcGetMemHandle, cuIpcOpenMemHandle_v2, cuIpcCloseMemHandle)")

// IPCHandle is a CUipcMemHandle: what names a device allocation to
// another process of the machine.
type IPCHandle [IPCHandleSize]byte

// IPCHandleSize is the size of a CUipcMemHandle (CU_IPC_HANDLE_SIZE).
const IPCHandleSize = 64

// IPCLazyEnablePeerAccess (CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS) lets
// IpcOpenMemHandle map memory of another device, enabling peer access
// as needed.
const IPCLazyEnablePeerAccess = 1

// ErrNoCgo is Open's error in a binary built with CGO_ENABLED=0.
var ErrNoCgo = errors.New("built without cgo, which loading libcuda needs: rebuild with CGO_ENABLED=1")

// DevPtr is a device address (CUdeviceptr). Under unified addressing a
// pinned or managed host address is one too.
type DevPtr uint64

// Handles of driver objects. The zero value is no object.
type (
	// Context is a CUcontext.
	Context struct{ p unsafe.Pointer }
	// Stream is a CUstream.
	Stream struct{ p unsafe.Pointer }
	// Event is a CUevent.
	Event struct{ p unsafe.Pointer }
	// Module is a CUmodule.
	Module struct{ p unsafe.Pointer }
	// Function is a CUfunction.
	Function struct{ p unsafe.Pointer }
)

// IsZero reports whether c is no context.
func (c Context) IsZero() bool { return c.p == nil }

// IsZero reports whether s is no stream.
func (s Stream) IsZero() bool { return s.p == nil }

// IsZero reports whether e is no event.
func (e Event) IsZero() bool { return e.p == nil }

// Device attributes (CUdevice_attribute) the backend reads.
const (
	AttrMaxThreadsPerBlock      = 1
	AttrMaxBlockDimX            = 2
	AttrMaxBlockDimY            = 3
	AttrMaxBlockDimZ            = 4
	AttrMaxGridDimX             = 5
	AttrMaxGridDimY             = 6
	AttrMaxGridDimZ             = 7
	AttrMaxSharedPerBlock       = 8
	AttrMultiprocessorCount     = 16
	AttrPCIBusID                = 33
	AttrPCIDeviceID             = 34
	AttrUnifiedAddressing       = 41
	AttrPCIDomainID             = 50
	AttrComputeCapabilityMajor  = 75
	AttrComputeCapabilityMinor  = 76
	AttrManagedMemory           = 83
	AttrConcurrentManagedAccess = 89
)

// Flags.
const (
	StreamNonBlocking     = 1 // CU_STREAM_NON_BLOCKING
	EventDefault          = 0 // CU_EVENT_DEFAULT
	EventBlockingSync     = 1 // CU_EVENT_BLOCKING_SYNC
	EventDisableTiming    = 2 // CU_EVENT_DISABLE_TIMING
	MemHostAllocPortable  = 1 // CU_MEMHOSTALLOC_PORTABLE
	MemHostAllocDeviceMap = 2 // CU_MEMHOSTALLOC_DEVICEMAP
	MemAttachGlobal       = 1 // CU_MEM_ATTACH_GLOBAL
)

// MinDriverVersion is the oldest driver Open accepts: 12.0, the first to
// export every entry point the backend calls.
const MinDriverVersion = 12000

// Dim3 is a grid or block shape.
type Dim3 struct{ X, Y, Z uint32 }

// Args packs a kernel's arguments as cuLaunchKernel reads them: each in a
// slot of its own, kernelParams[i] pointing at slot i. Add values of the
// kernel's parameter types in order.
type Args struct {
	buf  []uint64 // 8-byte slots; a 16-byte value takes two
	offs []int32  // slot index of each argument
}

// Reset empties a for reuse.
func (a *Args) Reset() { a.buf, a.offs = a.buf[:0], a.offs[:0] }

// Len is the number of arguments.
func (a *Args) Len() int { return len(a.offs) }

// Ptr adds a device address.
func (a *Args) Ptr(p DevPtr) { a.U64(uint64(p)) }

// U64 adds an 8-byte value.
func (a *Args) U64(v uint64) {
	a.offs = append(a.offs, int32(len(a.buf)))
	a.buf = append(a.buf, v)
}

// U32 adds a 4-byte value.
func (a *Args) U32(v uint32) { a.U64(uint64(v)) }

// U16 adds a 2-byte value.
func (a *Args) U16(v uint16) { a.U64(uint64(v)) }

// U8 adds a 1-byte value.
func (a *Args) U8(v uint8) { a.U64(uint64(v)) }

// U128 adds a 16-byte value (lo first).
func (a *Args) U128(lo, hi uint64) {
	a.offs = append(a.offs, int32(len(a.buf)))
	a.buf = append(a.buf, lo, hi)
}

// MaxArgs is the most arguments a launch takes.
const MaxArgs = 64
