//go:build !cgo

package fakecuda

import "errors"

// errNoCgo is returned where the fake needs cgo (dlopen).
var errNoCgo = errors.New("fakecuda: the fake CUDA driver's controls need cgo (build with CGO_ENABLED=1)")

// Control drives the test controls of one loaded instance of the fake.
// Without cgo there is none: Attach fails.
type Control struct{}

// Attach needs cgo; without it, it returns an error.
func Attach(path string) (*Control, error) { return nil, errNoCgo }

// Path returns "": without cgo there is no control.
func (c *Control) Path() string { return "" }

// Inject does nothing without cgo.
func (c *Control) Inject(kind Fault, device, count int) {}

// Reset does nothing without cgo.
func (c *Control) Reset() {}

// Stats returns zero counters without cgo.
func (c *Control) Stats() Stats { return Stats{} }

// DeviceStats returns zero counters without cgo.
func (c *Control) DeviceStats(device int) DeviceStats { return DeviceStats{} }
