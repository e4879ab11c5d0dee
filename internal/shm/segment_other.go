//go:build !linux

package shm

import (
	"fmt"
	"runtime"
	"sync/atomic"
	"time"
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

// NewRegion is not supported on this system.
func NewRegion(size int) (*Region, error) { return nil, ErrUnsupported }

// AttachRegion is not supported on this system.
func AttachRegion(o RegionOffer) (*Region, error) { return nil, ErrUnsupported }

// Offer returns the zero offer on this system.
func (r *Region) Offer() RegionOffer { return RegionOffer{} }

// Attached does nothing on this system.
func (r *Region) Attached() {}

// Close does nothing on this system.
func (r *Region) Close() { r.mem = nil }

// Wait sleeps for d on this system.
func Wait(w *atomic.Uint32, val uint32, d time.Duration) {
	if w.Load() == val {
		time.Sleep(d)
	}
}

// Wake does nothing on this system.
func Wake(w *atomic.Uint32) {}

// Offer returns the zero offer on this system.
func (s *Segment) Offer() Offer { return Offer{} }
