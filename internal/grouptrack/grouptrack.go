// Package grouptrack remembers the groups of ranks a backend's Group made
// in this process, so that closing the backend closes every rank of them:
// the bookkeeping the multi-process backends (tcp, rdma) share.
package grouptrack

import (
	"sync"

	"github.com/xpu-go/xpu/comm"
	"github.com/xpu-go/xpu/xerr"
)

// Tracker remembers groups of ranks of type C. The zero Tracker is ready
// for a backend named by Backend.
type Tracker[C comm.Comm] struct {
	// Backend names the backend in errors.
	Backend string

	mu     sync.Mutex
	closed bool
	groups [][]C
}

// Make makes a group with mk unless the backend is closed (ErrClosed),
// remembers it and returns its ranks as comm.Comm. A group whose making
// CloseAll overtook is closed before Make returns ErrClosed: no rank
// outlives the backend.
func (t *Tracker[C]) Make(mk func() ([]C, error)) ([]comm.Comm, error) {
	closedErr := func() error { return xerr.Errorf(t.Backend, "new group", comm.ErrClosed, "backend closed") }
	t.mu.Lock()
	if t.closed {
		t.mu.Unlock()
		return nil, closedErr()
	}
	t.mu.Unlock()
	cs, err := mk()
	if err != nil {
		return nil, err
	}
	t.mu.Lock()
	if t.closed {
		t.mu.Unlock()
		closeGroups([][]C{cs})
		return nil, closedErr()
	}
	t.groups = append(t.groups, cs)
	t.mu.Unlock()
	out := make([]comm.Comm, len(cs))
	for i, c := range cs {
		out[i] = c
	}
	return out, nil
}

// CloseAll closes every rank of every group made, concurrently, and waits
// for them; later Makes fail with ErrClosed. It returns nil: Close always
// returns, and its error is the rank's own business.
func (t *Tracker[C]) CloseAll() error {
	t.mu.Lock()
	t.closed = true
	groups := t.groups
	t.groups = nil
	t.mu.Unlock()
	closeGroups(groups)
	return nil
}

// closeGroups closes every rank of groups, concurrently, and waits.
func closeGroups[C comm.Comm](groups [][]C) {
	var wg sync.WaitGroup
	for _, cs := range groups {
		for _, c := range cs {
			wg.Go(func() { _ = c.Close() })
		}
	}
	wg.Wait()
}
