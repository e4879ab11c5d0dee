package cuda

import (
	"sync"

	"github.com/xpu-go/xpu/memspace"
)

var _ memspace.Stager = (*Space)(nil)

// stagingCache caps the page-locked memory a device space's staging pool
// keeps cached between uses: enough for the pieces a pipelined collective
// of package comm stages, not for every large message ever staged.
const stagingCache = 64 << 20

// staging is a device space's staging space, opened on first use: a
// caching pool over page-locked memory of the same device. Page-locked
// allocations cost far more than the copies they serve (the driver pins
// every page), so the pool keeps them for the next call.
type staging struct {
	mu     sync.Mutex
	closed bool
	pinned *Space
	pool   *memspace.Pool
}

// StagingSpace is where host copies of this space's blocks are best made:
// for device memory (KindDevice), a caching pool over page-locked memory
// (KindPinned) of the same device, opened on the first call and closed with
// s. Pinned and managed memory are host-accessible and need no staging:
// their spaces return nil, and so does a closed space, or one whose pinned
// memory cannot be opened (callers then stage in Go memory, which the
// copies reach too, more slowly). The communicators of package comm stage
// device buffers here.
func (s *Space) StagingSpace() memspace.Space {
	if s.kind != KindDevice {
		return nil
	}
	st := &s.staging
	st.mu.Lock()
	defer st.mu.Unlock()
	if st.closed {
		return nil
	}
	if st.pool != nil {
		return st.pool
	}
	pinned, err := newSpace(s.d.lib, KindPinned, s.d.idx)
	if err != nil {
		return nil
	}
	pool, err := memspace.NewPool(pinned, memspace.PoolOptions{MaxCached: stagingCache})
	if err != nil {
		_ = pinned.Close()
		return nil
	}
	st.pinned, st.pool = pinned, pool
	return pool
}

// closeStaging closes the staging space, if one was opened; later calls
// of StagingSpace return nil. Space.Close calls it.
func (s *Space) closeStaging() error {
	st := &s.staging
	st.mu.Lock()
	defer st.mu.Unlock()
	st.closed = true
	if st.pool == nil {
		return nil
	}
	perr := st.pool.Close()
	cerr := st.pinned.Close()
	st.pool, st.pinned = nil, nil
	if perr != nil {
		return perr
	}
	return cerr
}
