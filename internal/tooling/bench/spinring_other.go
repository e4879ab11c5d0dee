//go:build !linux

package bench

import (
	"fmt"
	"runtime"
)

// errSpinRing reports that this system has no SpinRing (it needs
// memfd_create and /proc).
var errSpinRing = fmt.Errorf("bench: spin ring: not on %s", runtime.GOOS)

// NewSpinRing is not supported on this system.
func NewSpinRing() (*SpinRing, SpinOffer, error) { return nil, SpinOffer{}, errSpinRing }

// AttachSpinRing is not supported on this system.
func AttachSpinRing(o SpinOffer) (*SpinRing, error) { return nil, errSpinRing }

// Attached does nothing on this system.
func (s *SpinRing) Attached() {}
