//go:build !linux

package shm

import (
	"fmt"
	"runtime"
)

// ErrUnsupported reports that this operating system has no shared-memory
// segments of this package (they need memfd_create and /proc).
var ErrUnsupported = fmt.Errorf("shm: no shared-memory segments on %s", runtime.GOOS)

// Create is not supported on this system.
func Create(ringSize int) (*Segment, error) { return nil, ErrUnsupported }

// Attach is not supported on this system.
func Attach(o Offer) (*Segment, error) { return nil, ErrUnsupported }

// Attached does nothing on this system.
func (s *Segment) Attached() {}

// Close does nothing on this system.
func (s *Segment) Close() { s.mem = nil }
