package xpu

import (
	"context"
	"errors"

	"github.com/xpu-go/xpu/comm"
	"github.com/xpu-go/xpu/executor"
	"github.com/xpu-go/xpu/memspace"
	"github.com/xpu-go/xpu/xerr"
)

// Errors of Open, OpenDefault and the drivers, checked with errors.Is; the
// first four are the values of package xerr, which every package of the
// module shares.
var (
	// ErrUnavailable reports a backend that cannot run on this machine (no
	// device, no driver library); the error says why.
	ErrUnavailable = xerr.ErrUnavailable
	// ErrNotSupported reports what a backend cannot do.
	ErrNotSupported = xerr.ErrNotSupported
	// ErrInvalidArgument reports bad input: a bad option value, a bad
	// chain.
	ErrInvalidArgument = xerr.ErrInvalidArgument
	// ErrClosed reports the use of a closed component.
	ErrClosed = xerr.ErrClosed
	// ErrUnknownBackend reports a name no driver is registered under. It
	// also matches ErrInvalidArgument.
	ErrUnknownBackend = xerr.NewKind("unknown backend", xerr.ErrInvalidArgument)
	// ErrUnknownOption reports an option key that the driver being opened
	// does not know (a typo, or a key meant for another backend). It
	// matches ErrInvalidArgument too.
	ErrUnknownOption = xerr.NewKind("unknown option", xerr.ErrInvalidArgument)
)

// Backend is a composition of the four concepts. Any component may be nil:
// a pure communication backend has only Comm. Transfers are not a field:
// they are registered per pair of space kinds in package transfer, because
// copies cross backends (device to host).
type Backend struct {
	// Name is the name the backend was opened under.
	Name string
	// Memory is the backend's default memory space.
	Memory memspace.Space
	// Spaces lists every space the backend offers, Memory first
	// (device, pinned host, managed, …).
	Spaces []memspace.Space
	// Exec runs work; often also an executor.Parallel and executor.Streamer.
	Exec executor.Executor
	// Comm is this process's rank of the job's communicator, when the
	// backend communicates across processes.
	Comm comm.Comm
	// Group makes in-process groups of ranks, when the backend can.
	Group comm.GroupFunc
	// Selection says how Open or OpenDefault chose the backend: the chain
	// of candidates, why, and why each candidate before it was skipped.
	// It is the zero Selection for a Backend made otherwise.
	Selection Selection

	closers []func() error
}

// OnClose registers f to run when the backend is closed, in reverse order
// of registration. Drivers use it to release what they opened.
func (b *Backend) OnClose(f func() error) { b.closers = append(b.closers, f) }

// Close releases the backend's components: its Comm, executor and spaces,
// as the driver registered them. A component the program already closed is
// not an error (its ErrClosed is dropped); every other error is returned,
// joined with errors.Join: separate failures of separate components, one
// line each.
func (b *Backend) Close() error {
	var errs []error
	for i := len(b.closers) - 1; i >= 0; i-- {
		if err := b.closers[i](); err != nil && !errors.Is(err, ErrClosed) {
			errs = append(errs, err)
		}
	}
	b.closers = nil
	return errors.Join(errs...)
}

// Options configure a driver's Open: keys and values are strings so that
// they can come from the command line and the environment ("ranks": "4",
// "device": "0"). Each driver documents its keys and reads them with
// Reader, which refuses a key the driver does not know; a key scoped to one
// backend ("cpu.limit") is read by that backend only, so one set of options
// can serve a fallback chain.
type Options map[string]string

// Driver opens a backend. Drivers are registered by name with Register,
// usually in an init function of the backend's package, and opened with
// Open.
type Driver interface {
	// Open returns a ready backend, or an error matching ErrUnavailable
	// (with the reason) when it cannot run on this machine.
	Open(ctx context.Context, opts Options) (*Backend, error)
	// Info describes the backend without opening it: availability (and why
	// not), devices, concepts, capabilities and element types.
	Info(ctx context.Context) Info
}

// Device describes one device of a backend. Index, Name and the memory
// figures are always set. The fields after them are optional: a backend
// that knows them (the CUDA backend, through NVML) fills them in, and the
// others leave them at their zero value, which means unknown and which the
// JSON form omits.
type Device struct {
	Index       int    `json:"index"`
	Name        string `json:"name"`
	MemoryTotal int64  `json:"memory_total"` // bytes, -1 when unknown
	MemoryFree  int64  `json:"memory_free"`  // bytes, -1 when unknown

	// UUID is the device's persistent identifier ("GPU-8f6c…").
	UUID string `json:"uuid,omitempty"`
	// ComputeCapability is the version of the device's architecture as
	// its vendor writes it ("9.0").
	ComputeCapability string `json:"compute_capability,omitempty"`
	// PCIBusID is the device's PCI address, domain:bus:device.function in
	// lower-case hexadecimal ("0000:18:00.0").
	PCIBusID string `json:"pci_bus_id,omitempty"`
	// NUMANode points at the number of the NUMA node nearest the device;
	// nil when unknown (node 0 is a node like any other, hence a pointer).
	NUMANode *int `json:"numa_node,omitempty"`
	// CPUAffinity lists, in increasing order, the numbers of the CPUs
	// nearest the device: those a thread feeding it is best pinned to.
	CPUAffinity []int `json:"cpu_affinity,omitempty"`
	// Links says how the device reaches the other devices of the backend,
	// one Link per peer whose path is known, in increasing order of Peer.
	Links []Link `json:"links,omitempty"`

	// Transport says how a network device (an RDMA NIC) reaches its peers:
	// "RoCE", "InfiniBand" or "iWARP". Empty for a compute device.
	Transport string `json:"transport,omitempty"`
	// MaxRegion is the largest memory region, in bytes, a network device
	// registers for RDMA; 0 when unknown.
	MaxRegion uint64 `json:"max_region,omitempty"`
	// Ports lists a network device's ports.
	Ports []Port `json:"ports,omitempty"`
}

// Port is one port of a network device.
type Port struct {
	Num       int    `json:"num"`
	State     string `json:"state"`      // "ACTIVE", "DOWN", …
	LinkLayer string `json:"link_layer"` // "Ethernet" (RoCE) or "InfiniBand"
	MTU       int    `json:"mtu"`        // active MTU in bytes
	Speed     string `json:"speed,omitempty"`
	// GIDs are the port's global identifiers, in table order.
	GIDs []string `json:"gids,omitempty"`
	// Netdev is the network interface a RoCE port is bound to, and Addr
	// its IPv4 address, when known.
	Netdev string `json:"netdev,omitempty"`
	Addr   string `json:"addr,omitempty"`
}

// Link is the path from a device to one peer device of the same backend.
type Link struct {
	// Peer is the Index of the device at the other end.
	Peer int `json:"peer"`
	// Kind is "nvlink" for a direct NVLink connection (through NVSwitches
	// included) and "pcie" for a path through the PCIe hierarchy, whose
	// length Level gives.
	Kind string `json:"kind"`
	// NVLinks is the number of active NVLinks joining the two devices; 0
	// for a PCIe path.
	NVLinks int `json:"nvlinks,omitempty"`
	// Level is, for a PCIe path, the nearest common ancestor of the two
	// devices, nearest first: "internal" (the same board), "single" (at most
	// one PCIe switch), "multiple" (several switches, no host bridge),
	// "hostbridge" (a host bridge), "node" (host bridges of one NUMA node)
	// and "system" (across NUMA nodes). Empty for NVLink.
	Level string `json:"level,omitempty"`
}

// Info answers what a backend is and whether it can run here.
type Info struct {
	Name         string   `json:"name"`
	Aliases      []string `json:"aliases,omitempty"` // other names it answers to (RegisterAlias)
	Available    bool     `json:"available"`
	Reason       string   `json:"reason,omitempty"`  // why not available
	Library      string   `json:"library,omitempty"` // foreign library and version, when one is used
	Devices      []Device `json:"devices"`
	Concepts     []string `json:"concepts"`     // of "memory", "executor", "comm", "transfer"
	Capabilities []string `json:"capabilities"` // e.g. "streams", "events.timing", "collectives.native"
	ElementTypes []string `json:"element_types"`
}

// NumericTypes is the list of element types every reduction accepts.
var NumericTypes = []string{"int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64",
	"float32", "float64", "complex64", "complex128"}
