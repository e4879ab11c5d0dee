package xerr

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
)

// Sentinel errors shared by every concept package. The concept packages
// re-export them under their own names (memspace.ErrOutOfMemory,
// comm.ErrPeerLost, …) with the same values, so errors.Is matches across
// packages and backends.
var (
	// ErrInvalidArgument reports bad input: a zero or negative size, an
	// alignment that is not a power of two, a rank or tag out of range.
	ErrInvalidArgument = errors.New("invalid argument")
	// ErrOutOfMemory reports that a space could not satisfy an allocation.
	ErrOutOfMemory = errors.New("out of memory")
	// ErrNotSupported reports that a backend lacks an operation or path.
	ErrNotSupported = errors.New("not supported")
	// ErrUnavailable reports that a backend cannot be used on this machine
	// (library missing, no device, built without support).
	ErrUnavailable = errors.New("backend unavailable")
	// ErrClosed reports use of a component after Close.
	ErrClosed = errors.New("use of closed component")
	// ErrPeerLost reports that a rank taking part in an operation died or
	// became unreachable.
	ErrPeerLost = errors.New("peer lost")
	// ErrTruncated reports that a message was longer than the receive buffer.
	ErrTruncated = errors.New("message truncated")
	// ErrDeviceLost reports that a device failed and its state is gone.
	ErrDeviceLost = errors.New("device lost")
	// ErrCanceled reports that a request was canceled before it completed.
	ErrCanceled = errors.New("request canceled")
)

// Sub-kinds shared by every transport, defined here once so that each
// backend's re-export is the same value.
var (
	// ErrProtocol reports bytes from a peer that break a wire protocol: an
	// unknown frame, a length over the receiver's limits, a reference to a
	// message that does not exist. It matches ErrInvalidArgument.
	ErrProtocol = NewKind("protocol violation", ErrInvalidArgument)
	// ErrAuth reports a connection that could not prove membership of a
	// job: a wrong secret, a garbled or foreign handshake, a rank or world
	// size that does not fit. It matches ErrInvalidArgument.
	ErrAuth = NewKind("authentication failed", ErrInvalidArgument)
)

// Kind is a named sub-category of a sentinel: errors.Is matches both the kind
// itself and its parent. memspace.ErrDoubleFree is a Kind whose parent is
// ErrInvalidArgument, so callers may test for either.
type Kind struct {
	msg    string
	parent error
}

// NewKind returns a sentinel that also matches parent under errors.Is.
func NewKind(msg string, parent error) *Kind { return &Kind{msg: msg, parent: parent} }

func (k *Kind) Error() string { return k.msg }

// Is reports whether target is k's parent (identity is handled by errors.Is).
func (k *Kind) Is(target error) bool { return k.parent != nil && errors.Is(k.parent, target) }

// Error is an error raised by a backend operation. It carries where the
// failure happened and never loses its cause: Unwrap returns Err.
type Error struct {
	Backend string // backend or component name, e.g. "cpu", "local", "cuda"
	Device  int    // device index, or -1 when not device-specific
	Op      string // operation, e.g. "alloc", "free", "send", "allreduce"
	Err     error  // the cause; matches a sentinel of this package under errors.Is
}

func (e *Error) Error() string {
	var b strings.Builder
	b.WriteString(e.Backend)
	if e.Device >= 0 {
		b.WriteString(":")
		b.WriteString(strconv.Itoa(e.Device))
	}
	if e.Op != "" {
		b.WriteString(" ")
		b.WriteString(e.Op)
	}
	b.WriteString(": ")
	if e.Err != nil {
		b.WriteString(e.Err.Error())
	} else {
		b.WriteString("<nil>")
	}
	return b.String()
}

// Unwrap returns the cause.
func (e *Error) Unwrap() error { return e.Err }

// Op wraps err as an *Error for backend, operation op, with no device.
// A nil err returns nil.
func Op(backend, op string, err error) error {
	if err == nil {
		return nil
	}
	return &Error{Backend: backend, Device: -1, Op: op, Err: err}
}

// Dev wraps err as an *Error for backend, operation op on device. A nil err
// returns nil.
func Dev(backend string, device int, op string, err error) error {
	if err == nil {
		return nil
	}
	return &Error{Backend: backend, Device: device, Op: op, Err: err}
}

// Errorf returns an *Error for backend and operation op, with no device,
// whose cause is the detail formatted from format and args followed by
// sentinel: Errorf("cpu", "alloc", ErrInvalidArgument, "size %d is not
// positive", 0) prints "cpu alloc: size 0 is not positive: invalid
// argument" and matches ErrInvalidArgument. This is the one shape of a
// backend error: one line, the place first, the detail, the sentinel last.
// The args may wrap further errors with %w.
func Errorf(backend, op string, sentinel error, format string, args ...any) error {
	return &Error{Backend: backend, Device: -1, Op: op, Err: Detail(sentinel, format, args...)}
}

// Detail returns the cause of an *Error: the detail formatted from format
// and args, then ": " and sentinel, on one line, matching sentinel (and any
// error args wraps with %w) under errors.Is. Errorf and a Dev of a Detail
// are its usual callers.
func Detail(sentinel error, format string, args ...any) error {
	return fmt.Errorf(format+": %w", append(args, sentinel)...)
}
