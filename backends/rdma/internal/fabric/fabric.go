// Package fabric is the boundary between the rdma communicator and the
// verbs it runs on: registered memory, one completion queue, reliable
// connected endpoints (RC queue pairs) set up through a connection manager,
// and the work requests the protocol posts. It is as thin as the verbs
// themselves, so the protocol above it is the same code over the kernel's
// verbs (package verbs, rdma-core through cgo) and over the simulated
// fabric of the tests (package sim), which checks every rule the hardware
// enforces and some it merely assumes.
//
// Rules an implementation enforces (the simulated fabric strictly):
//   - every local piece of a work request lies inside a memory region
//     registered on the same Context, named by its LKey; every remote piece
//     inside a region of the peer's Context, named by its RKey;
//   - a SEND needs a receive posted on the peer's endpoint, at least as long
//     as the message, when it arrives: there is no receiver-not-ready
//     retrying (a protocol that sends without a credit is broken, and the
//     endpoint goes to the error state);
//   - the bytes of a SEND, WRITE or READ are read from memory when the
//     request executes, after PostSend returns — except Inline sends, whose
//     bytes are copied at post time — so a buffer is reusable only once its
//     request completes;
//   - work requests of one endpoint execute in the order posted, and the
//     peer sees a SEND only after every WRITE posted before it (RC order);
//   - once an endpoint fails (its peer's process died, its QP went to the
//     error state, it was closed), its outstanding requests complete with
//     an error matching ErrFlushed or ErrRemote, and Lost is closed.
package fabric

import (
	"context"
	"errors"
	"time"
	"unsafe"
)

// Errors of a fabric.
var (
	// ErrFlushed: the request was flushed because its endpoint failed or
	// closed before it ran.
	ErrFlushed = errors.New("work request flushed: endpoint in error state")
	// ErrRemote: the peer did not answer or refused the request (retry
	// count exceeded, remote access or operation error, no receive posted).
	ErrRemote = errors.New("remote side failed the request")
	// ErrLocal: the request itself was bad (length, protection, key).
	ErrLocal = errors.New("local work request error")
	// ErrRefused: a connection was rejected or nobody listens there.
	ErrRefused = errors.New("connection refused")
)

// Opcode is the operation of a work request or completion.
type Opcode uint8

const (
	OpSend  Opcode = iota + 1 // two-sided: consumes a receive posted by the peer
	OpWrite                   // one-sided RDMA WRITE into the peer's region
	OpRead                    // one-sided RDMA READ from the peer's region
	OpRecv                    // completion of a posted receive
)

func (o Opcode) String() string {
	switch o {
	case OpSend:
		return "send"
	case OpWrite:
		return "write"
	case OpRead:
		return "read"
	case OpRecv:
		return "recv"
	}
	return "op?"
}

// MR is a registered memory region: [Addr, Addr+Len) of this process,
// pinned, readable and writable locally and by peers holding RKey.
type MR struct {
	Addr uintptr
	Len  int
	LKey uint32
	RKey uint32
	// Handle is the implementation's own (the ibv_mr).
	Handle any
}

// Contains reports whether [p, p+n) lies inside the region.
func (m *MR) Contains(p uintptr, n int) bool {
	return m != nil && p >= m.Addr && n >= 0 && p+uintptr(n) <= m.Addr+uintptr(m.Len)
}

// SGE is a piece of registered local memory.
type SGE struct {
	Addr uintptr
	Len  uint32
	LKey uint32
}

// SendWR is a work request on an endpoint's send queue.
type SendWR struct {
	ID    uint64 // returned in the completion
	Op    Opcode // OpSend, OpWrite or OpRead
	Local SGE    // the source (send, write) or destination (read)
	// Remote is the peer's address and key (write, read).
	RemoteAddr uint64
	RKey       uint32
	// Signaled asks for a completion. Unsignaled requests complete
	// silently once a later signaled one of the endpoint completes; a
	// failed one always completes, with its error.
	Signaled bool
	// Inline copies the bytes at post time (at most
	// EndpointConfig.MaxInline); Local.LKey is then not needed.
	Inline bool
	// Imm, when HasImm, is carried to the peer with a SEND.
	Imm    uint32
	HasImm bool
}

// Completion reports a finished work request.
type Completion struct {
	ID  uint64
	Op  Opcode
	Len int    // bytes received (OpRecv)
	Imm uint32 // immediate data of a SEND received (OpRecv), when HasImm
	// HasImm reports an immediate value came with the message.
	HasImm bool
	// Err is nil on success; otherwise it matches ErrFlushed, ErrRemote or
	// ErrLocal and says which status the hardware gave.
	Err error
}

// EndpointConfig sizes an endpoint's queues.
type EndpointConfig struct {
	SendDepth int // outstanding send-queue requests
	RecvDepth int // outstanding posted receives
	MaxInline int // bytes a SEND may carry inline (0: none)
	// PrePost, when set, is called with the new endpoint after its queue
	// pair exists and before the connection is offered (Dial) or accepted
	// (Request.Accept): the receives it posts are in place before the
	// peer can send. An error from it aborts the connection.
	PrePost func(Endpoint) error
}

// DeviceInfo describes an RDMA device and its ports, for xpu info.
type DeviceInfo struct {
	Name      string
	NodeGUID  string
	Transport string // "InfiniBand", "RoCE", "iWARP"
	FWVersion string
	MaxMRSize uint64
	MaxQP     int
	MaxCQE    int
	MaxSGE    int
	Ports     []PortInfo
}

// PortInfo describes one port of a device.
type PortInfo struct {
	Num       int
	State     string // "ACTIVE", "DOWN", …
	LinkLayer string // "Ethernet" (RoCE) or "InfiniBand"
	MTU       int    // active MTU in bytes
	Speed     string // "10 Gb/s", when known
	GIDs      []string
	// Netdev is the network interface a RoCE port is bound to, and IPv4 its
	// first IPv4 address (what the connection manager binds), when known.
	Netdev string
	IPv4   string
}

// Provider finds devices and opens them.
type Provider interface {
	// Devices lists the RDMA devices present. An error says why none can
	// be listed (no library, no kernel support).
	Devices() ([]DeviceInfo, error)
	// Open opens the device named (or the first active one for "") with
	// one protection domain and one completion queue of cqDepth entries.
	Open(name string, cqDepth int) (Context, error)
}

// Context is an opened device: a protection domain, one completion queue
// for every endpoint's sends and receives, and the connection manager.
// Its methods are safe for concurrent use; Poll is called by one goroutine
// at a time, Wait by one goroutine (the progress engine).
type Context interface {
	Info() DeviceInfo
	// Register pins and registers [p, p+n) for local write and remote
	// read and write.
	Register(p unsafe.Pointer, n int) (*MR, error)
	// Deregister releases a region. The memory must not be in use by a
	// request.
	Deregister(mr *MR) error

	// Poll takes up to len(out) completions without blocking. Poll may be
	// called by one goroutine while another is in Wait.
	Poll(out []Completion) (int, error)
	// Arm asks for an event at the next completion. What completed before
	// raises none: a caller arms, polls once more, and waits only if that
	// found nothing.
	Arm() error
	// Wait blocks until an event since the last Arm, a Wake, or d. It
	// takes no completion (Poll does), so other goroutines may poll
	// meanwhile. It returns nil in every case but a broken device.
	Wait(d time.Duration) error
	// Wake makes a Wait in progress (or the next one) return.
	Wake()

	// Listen starts accepting connections on addr ("ip:port", port 0 for
	// any); Listener.Addr says where.
	Listen(addr string) (Listener, error)
	// Dial connects to a listener, offering private (at most
	// MaxPrivate bytes) and returning the listener's reply.
	Dial(ctx context.Context, addr string, cfg EndpointConfig, private []byte) (Endpoint, []byte, error)

	// Close destroys the context; it closes every endpoint and listener
	// first.
	Close() error
}

// MaxPrivate is the private data a connection request or reply carries.
const MaxPrivate = 48

// Listener accepts connections.
type Listener interface {
	Addr() string
	// Accept returns the next connection request.
	Accept(ctx context.Context) (Request, error)
	Close() error
}

// Request is a connection request not yet answered.
type Request interface {
	Private() []byte
	// Accept makes the endpoint and answers with reply.
	Accept(cfg EndpointConfig, reply []byte) (Endpoint, error)
	// Reject refuses the request.
	Reject() error
}

// Endpoint is a connected reliable endpoint (an RC queue pair).
type Endpoint interface {
	// PostSend posts work requests on the send queue, in order.
	PostSend(wrs ...SendWR) error
	// PostRecv posts a receive into sge, completing with id.
	PostRecv(id uint64, sge SGE) error
	// Lost is closed once the endpoint has failed or the peer disconnected;
	// Err then says why.
	Lost() <-chan struct{}
	Err() error
	// Fail forces the endpoint to the error state (tests, and a protocol
	// error seen above it): its requests flush, the peer sees it lost.
	Fail() error
	// Close disconnects and destroys the endpoint; outstanding requests
	// are flushed.
	Close() error
}
