package cuda

import (
	"errors"

	"github.com/xpu-go/xpu"
	"github.com/xpu-go/xpu/backends/cuda/internal/cu"
	"github.com/xpu-go/xpu/xerr"
)

// sentinel maps a driver result to the project's sentinel.
func sentinel(r cu.Result) error {
	switch {
	case r == cu.ErrOutOfMemory:
		return xerr.ErrOutOfMemory
	case r.Sticky():
		return xerr.ErrDeviceLost
	case r == cu.ErrNoDevice, r == cu.ErrInsufficientDriver, r == cu.ErrStubLibrary, r == cu.ErrNotInitialized, r == cu.ErrDeinitialized:
		return xpu.ErrUnavailable
	case r == cu.ErrNotSupported, r == cu.ErrPeerAccessUnsupported:
		return xerr.ErrNotSupported
	}
	return xerr.ErrInvalidArgument
}

// driverErr turns an error of package cu into the project's shape: the
// driver's code and words, then the sentinel, on one line. Other errors
// pass through.
func driverErr(err error) error {
	if err == nil {
		return nil
	}
	r, ok := cu.ResultOf(err)
	if !ok {
		return err
	}
	s := sentinel(r)
	if r.Sticky() {
		return xerr.Detail(s, "%v: the device's context has failed and must be reopened", r)
	}
	return xerr.Detail(s, "%w", err)
}

// devErr is driverErr placed on device dev and operation op.
func devErr(dev int, op string, err error) error {
	if err == nil {
		return nil
	}
	var e *xerr.Error
	if errors.As(err, &e) {
		return err
	}
	return xerr.Dev(Name, dev, op, driverErr(err))
}

// sticky reports whether err is the driver's sticky error: the context (or
// the device) has failed, and tearing it down is all that is left to do.
func sticky(err error) bool {
	r, ok := cu.ResultOf(err)
	return ok && r.Sticky()
}

// closing drops a sticky error: releasing what a failed context holds
// cannot fail in any way the caller can act on, and the context's
// teardown frees it.
func closing(err error) error {
	if sticky(err) {
		return nil
	}
	return err
}
