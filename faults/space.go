package faults

import (
	"fmt"
	"time"

	"github.com/xpu-go/xpu/memspace"
)

// Space wraps a memory space and consults an injector before each Allocate
// (Kind Alloc) and Free (Kind Free). An injected Free failure leaves the
// block allocated. Blocks are re-labelled as the wrapper's (same address,
// length and host mapping), so frees through Buffer.Free come back through
// the injector too. Capabilities of the inner space are found through
// Unwrap.
type Space struct {
	inner memspace.Space
	inj   Injector
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

// Allocate allocates from the inner space unless the injector fails it.
func (s *Space) Allocate(size, align int) (memspace.Block, error) {
	op := Op{Kind: Alloc, Rank: -1, Peer: -1, Size: size}
	f := s.inj.Inject(op)
	if f.Delay > 0 {
		time.Sleep(f.Delay)
	}
	if f.Err != nil {
		return memspace.Block{}, inject(op, f.Err)
	}
	b, err := s.inner.Allocate(size, align)
	if err != nil {
		return b, err
	}
	return memspace.NewBlock(s, b.Addr(), b.Len(), b.HostPointer()), nil
}

// Free frees in the inner space unless the injector fails it.
func (s *Space) Free(b memspace.Block) error {
	op := Op{Kind: Free, Rank: -1, Peer: -1, Size: b.Len()}
	f := s.inj.Inject(op)
	if f.Delay > 0 {
		time.Sleep(f.Delay)
	}
	if f.Err != nil {
		return inject(op, f.Err)
	}
	if b.Space() != memspace.Space(s) {
		return fmt.Errorf("faults: free of %v: %w", b, memspace.ErrForeignBlock)
	}
	return s.inner.Free(memspace.NewBlock(s.inner, b.Addr(), b.Len(), b.HostPointer()))
}

// Unwrap returns the inner space.
func (s *Space) Unwrap() memspace.Space { return s.inner }
