package faults

import (
	"sync/atomic"
	"time"

	"github.com/xpu-go/xpu/memspace"
	"github.com/xpu-go/xpu/xerr"
)

// Space wraps a memory space and consults an injector before each Allocate
// (Kind Alloc) and Free (Kind Free). An injected Free failure leaves the
// block allocated. Blocks are re-labelled as the wrapper's (same address,
// length and host mapping), so frees through Buffer.Free come back through
// the injector too. Capabilities of the inner space are found through
// Unwrap.
//
// Once its device is lost (by a Fault with LoseDevice, or by LoseDevice),
// every Allocate and Free fails at once with an error matching
// xerr.ErrDeviceLost, without consulting the injector, as every call on a
// failed device does; the blocks still allocated stay so in the inner
// space, which a test may free through Unwrap.
type Space struct {
	inner memspace.Space
	inj   Injector
	lost  atomic.Bool
}

var (
	_ memspace.Space     = (*Space)(nil)
	_ memspace.Unwrapper = (*Space)(nil)
)

// WrapSpace returns s wrapped with inj.
func WrapSpace(s memspace.Space, inj Injector) *Space { return &Space{inner: s, inj: inj} }

// Name returns the inner space's name with a "faults:" prefix.
func (s *Space) Name() string { return "faults:" + s.inner.Name() }

// Properties returns the inner space's.
func (s *Space) Properties() memspace.Properties { return s.inner.Properties() }

// LoseDevice makes the space's device lost: every later Allocate and Free
// fails with an error matching xerr.ErrDeviceLost.
func (s *Space) LoseDevice() { s.lost.Store(true) }

// DeviceLost reports whether the space's device is lost.
func (s *Space) DeviceLost() bool { return s.lost.Load() }

// consult asks the injector about op, and returns the error op fails with:
// an injected one, or the loss of the device.
func (s *Space) consult(op Op) error {
	if s.lost.Load() {
		return inject(op, xerr.ErrDeviceLost)
	}
	f := s.inj.Inject(op)
	if f.Delay > 0 {
		time.Sleep(f.Delay)
	}
	switch {
	case f.Err != nil:
		return inject(op, f.Err)
	case f.LoseDevice:
		s.lost.Store(true)
		return inject(op, xerr.ErrDeviceLost)
	}
	return nil
}

// Allocate allocates from the inner space unless the injector fails it.
func (s *Space) Allocate(size, align int) (memspace.Block, error) {
	if err := s.consult(Op{Kind: Alloc, Rank: -1, Peer: -1, Size: size}); err != nil {
		return memspace.Block{}, err
	}
	b, err := s.inner.Allocate(size, align)
	if err != nil {
		return b, err
	}
	return memspace.NewBlock(s, b.Addr(), b.Len(), b.HostPointer()), nil
}

// Free frees in the inner space unless the injector fails it.
func (s *Space) Free(b memspace.Block) error {
	if err := s.consult(Op{Kind: Free, Rank: -1, Peer: -1, Size: b.Len()}); err != nil {
		return err
	}
	if b.Space() != memspace.Space(s) {
		return xerr.Errorf(Name, "free", memspace.ErrForeignBlock, "%v", b)
	}
	return s.inner.Free(memspace.NewBlock(s.inner, b.Addr(), b.Len(), b.HostPointer()))
}

// Unwrap returns the inner space.
func (s *Space) Unwrap() memspace.Space { return s.inner }
