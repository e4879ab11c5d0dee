package conformance

import (
	"sync"

	"github.com/xpu-go/xpu/impl"
	"github.com/xpu-go/xpu/memspace"
	"github.com/xpu-go/xpu/xerr"
)

// opaqueSpace is a space of memory the host cannot touch and no transfer
// path reaches: the "other space" of the foreign-block and unsupported-path
// cases. Its blocks have addresses but no memory behind them.
type opaqueSpace struct {
	name string

	mu   sync.Mutex
	next memspace.Addr
	live map[memspace.Addr]int
}

// opaqueKind is the Kind of opaqueSpace; no transfer path is registered for
// it.
const opaqueKind = "conformance-opaque"

var _ memspace.Space = (*opaqueSpace)(nil)

func (s *opaqueSpace) Name() string { return s.name }

func (s *opaqueSpace) Properties() memspace.Properties {
	return memspace.Properties{Kind: opaqueKind, Device: 0, DeviceAccessible: true, Alignment: 256}
}

func (s *opaqueSpace) Allocate(size, align int) (memspace.Block, error) {
	align, err := impl.CheckAlloc(size, align, 256)
	if err != nil {
		return memspace.Block{}, xerr.Op(s.name, "alloc", err)
	}
	if size > 1<<40 {
		return memspace.Block{}, xerr.Errorf(s.name, "alloc", memspace.ErrOutOfMemory, "%d bytes", size)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.live == nil {
		s.live = map[memspace.Addr]int{}
		s.next = 1 << 40
	}
	a := (s.next + memspace.Addr(align) - 1) &^ (memspace.Addr(align) - 1)
	s.next = a + memspace.Addr(size)
	s.live[a] = size
	return memspace.NewBlock(s, a, size, nil), nil
}

func (s *opaqueSpace) Free(b memspace.Block) error {
	if b.Space() != memspace.Space(s) {
		return xerr.Errorf(s.name, "free", memspace.ErrForeignBlock, "%v", b)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if n, ok := s.live[b.Addr()]; !ok || n != b.Len() {
		return xerr.Errorf(s.name, "free", memspace.ErrDoubleFree, "%v", b)
	}
	delete(s.live, b.Addr())
	return nil
}
