package conformance_test

import (
	"context"
	"sync"
	"time"

	"github.com/xpu-go/xpu/comm"
	"github.com/xpu-go/xpu/memspace"
)

// This file holds what the broken communicators of the suite's own tests
// share: a wrapper of every request of a communicator, and one that
// reorders its messages.

// reqWrapper is a communicator whose requests are those of the
// communicator underneath, wrapped by wrap. It has no Unwrap: nothing of
// the communicator underneath is used but Isend and Irecv.
type reqWrapper struct {
	comm.Comm
	wrap func(comm.Request) comm.Request
}

func (c reqWrapper) Isend(buf memspace.Block, dest, tag int) (comm.Request, error) {
	r, err := c.Comm.Isend(buf, dest, tag)
	if err != nil {
		return nil, err
	}
	return c.wrap(r), nil
}

func (c reqWrapper) Irecv(buf memspace.Block, source, tag int) (comm.Request, error) {
	r, err := c.Comm.Irecv(buf, source, tag)
	if err != nil {
		return nil, err
	}
	return c.wrap(r), nil
}

// unwrapping is a reqWrapper that comm.As sees through: the native
// blocking calls and collectives of the communicator underneath serve.
type unwrapping struct{ reqWrapper }

// Unwrap returns the communicator underneath.
func (c unwrapping) Unwrap() comm.Comm { return c.Comm }

// wrapRequests returns a wrapper, seen through by comm.As, of a
// communicator whose requests wrap wraps.
func wrapRequests(wrap func(comm.Request) comm.Request) func(c comm.Comm) comm.Comm {
	return func(c comm.Comm) comm.Comm { return unwrapping{reqWrapper{Comm: c, wrap: wrap}} }
}

// swapComm sends the messages that swap selects two by two in swapped
// order, per (destination, tag): such a send is held until the next one to
// the same place has gone, until it is waited for, or for a few
// milliseconds at most (so that the transport still makes progress). The
// other messages pass untouched. It has no Unwrap: every call, the
// collectives' included, comes down to its Isend.
type swapComm struct {
	comm.Comm
	swap func(b memspace.Block, tag int) bool

	mu   sync.Mutex
	held map[[2]int]*swapHeld
}

type swapHeld struct {
	c    *swapComm
	key  [2]int
	buf  memspace.Block
	once sync.Once
	req  comm.Request
	err  error
}

func newSwapComm(c comm.Comm, swap func(b memspace.Block, tag int) bool) *swapComm {
	return &swapComm{Comm: c, swap: swap, held: map[[2]int]*swapHeld{}}
}

func (c *swapComm) Isend(buf memspace.Block, dest, tag int) (comm.Request, error) {
	if !c.swap(buf, tag) || dest < 0 || dest >= c.Size() {
		return c.Comm.Isend(buf, dest, tag)
	}
	k := [2]int{dest, tag}
	c.mu.Lock()
	h := c.held[k]
	if h == nil {
		h = &swapHeld{c: c, key: k, buf: buf}
		c.held[k] = h
		c.mu.Unlock()
		time.AfterFunc(5*time.Millisecond, h.flush)
		return h, nil
	}
	delete(c.held, k)
	c.mu.Unlock()
	r, err := c.Comm.Isend(buf, dest, tag) // the later message first
	h.flush()
	return r, err
}

// flush sends h if it has not gone yet.
func (h *swapHeld) flush() {
	h.c.mu.Lock()
	if h.c.held[h.key] == h {
		delete(h.c.held, h.key)
	}
	h.c.mu.Unlock()
	h.once.Do(func() { h.req, h.err = h.c.Comm.Isend(h.buf, h.key[0], h.key[1]) })
}

func (h *swapHeld) Wait(ctx context.Context) (comm.Status, error) {
	h.flush()
	if h.err != nil {
		return comm.Status{}, h.err
	}
	return h.req.Wait(ctx)
}

func (h *swapHeld) Test() (comm.Status, bool, error) {
	h.flush()
	if h.err != nil {
		return comm.Status{}, true, h.err
	}
	return h.req.Test()
}

func (h *swapHeld) Cancel() error {
	h.flush()
	if h.err != nil {
		return nil
	}
	return h.req.Cancel()
}

// reorderComm is a swapComm of the messages with user tags that comm.As
// sees through: reserved tags pass untouched, and the native collectives
// of the communicator underneath serve, so the collectives still work.
type reorderComm struct{ *swapComm }

func newReorderComm(c comm.Comm) comm.Comm {
	return reorderComm{newSwapComm(c, func(_ memspace.Block, tag int) bool { return tag >= 0 && tag <= comm.MaxTag })}
}

// Unwrap returns the communicator underneath.
func (c reorderComm) Unwrap() comm.Comm { return c.Comm }
