//go:build !linux

package shm

import (
	"errors"
	"fmt"
	"runtime"
)

// Errors of ReadFrom and WriteTo.
var (
	// ErrFault reports an address range that is not mapped.
	ErrFault = errors.New("shm: single copy: address range not mapped")
	// ErrNotPermitted reports that single copies cannot be made: on this
	// system, never.
	ErrNotPermitted = errors.New("shm: single copy not permitted")
	// ErrNoProcess reports that the process does not exist.
	ErrNoProcess = errors.New("shm: single copy: no such process")
)

var errNoCMA = fmt.Errorf("%w: no process_vm_readv on %s", ErrNotPermitted, runtime.GOOS)

// ReadFrom is not supported on this system.
func ReadFrom(pid int, dst []byte, addr uint64) error { return errNoCMA }

// MaxVec is the most ranges one ReadVec call takes.
const MaxVec = 1024

// ReadVec is not supported on this system.
func ReadVec(pid int, dst [][]byte, addrs []uint64) error { return errNoCMA }

// WriteVec is not supported on this system.
func WriteVec(pid int, src [][]byte, addrs []uint64) error { return errNoCMA }

// WriteTo is not supported on this system.
func WriteTo(pid int, addr uint64, src []byte) error { return errNoCMA }

// SingleCopy reports that this system has no single-copy transfers.
func SingleCopy() (bool, string) { return false, errNoCMA.Error() }
