//go:build rdma && cgo

package verbs

/*
#cgo noescape xv_post_send
#cgo nocallback xv_post_send
#cgo nocallback xv_post_recv
#include "xverbs.h"
*/
import "C"

import (
	"fmt"
	"sync"
	"sync/atomic"
	"syscall"

	"github.com/xpu-go/xpu/backends/rdma/internal/fabric"
	"github.com/xpu-go/xpu/xerr"
)

// postBatch is the work requests converted on the stack per post; a
// longer list is converted in a slice.
const postBatch = 16

// endpoint is the fabric.Endpoint of package verbs: an RC queue pair made
// by the connection manager on the context's protection domain, its sends
// and receives completing on the context's queue.
type endpoint struct {
	c         *vcontext
	m         *cmID
	qp        *C.struct_ibv_qp
	qpn       uint32
	maxInline int

	lost     chan struct{}
	lostOnce sync.Once
	err      atomic.Pointer[error]
	closed   atomic.Bool
}

var _ fabric.Endpoint = (*endpoint)(nil)

// newEndpoint makes the queue pair on m and then runs connect (rdma_accept
// or rdma_connect) on the id, all under the id's lock.
func (c *vcontext) newEndpoint(m *cmID, cfg fabric.EndpointConfig, connect func(*C.struct_rdma_cm_id) error) (*endpoint, error) {
	if cfg.SendDepth < 0 || cfg.RecvDepth < 0 || cfg.MaxInline < 0 {
		return nil, fmt.Errorf("endpoint config %+v: %w", cfg, xerr.ErrInvalidArgument)
	}
	ep := &endpoint{c: c, m: m, maxInline: cfg.MaxInline, lost: make(chan struct{})}
	err := m.do(func(id *C.struct_rdma_cm_id) error {
		if err := c.sameDevice(id, "the peer"); err != nil {
			return err
		}
		rc := C.xv_create_qp(id, c.pd, c.cq, C.int(max(cfg.SendDepth, 1)), C.int(max(cfg.RecvDepth, 1)), C.int(cfg.MaxInline))
		if rc != 0 {
			return fmt.Errorf("rdma_create_qp (send %d, recv %d, inline %d): %w", cfg.SendDepth, cfg.RecvDepth, cfg.MaxInline, syscall.Errno(rc))
		}
		m.hasQP = true
		ep.qp = id.qp
		ep.qpn = uint32(id.qp.qp_num)
		c.mu.Lock()
		c.qps[ep.qpn] = ep
		c.mu.Unlock()
		m.ep.Store(ep)
		if cfg.PrePost != nil {
			// The receives go on the queue pair before the connection is
			// offered or accepted, so the peer's first SEND finds one.
			if err := cfg.PrePost(prepost{ep}); err != nil {
				return fmt.Errorf("post the first receives: %w", err)
			}
		}
		return connect(id)
	})
	if err != nil {
		if ep.qp != nil {
			ep.Close()
		}
		return nil, err
	}
	return ep, nil
}

// PostSend posts wrs in order. It checks them all first; a failure of the
// provider leaves those before the failed one posted.
func (e *endpoint) PostSend(wrs ...fabric.SendWR) error {
	for i := range wrs {
		if err := e.check(&wrs[i]); err != nil {
			return fmt.Errorf("verbs post send: request %d of %d: %w", i, len(wrs), err)
		}
	}
	e.m.mu.RLock()
	defer e.m.mu.RUnlock()
	if e.m.gone {
		return e.closedErr()
	}
	// One crossing, and one ibv_post_send, for the whole list: up to
	// postBatch converted on the stack, more in a slice (no Go pointers
	// in it, so C may read it).
	var stack [postBatch]C.xv_wr
	buf := stack[:]
	if len(wrs) > postBatch {
		buf = make([]C.xv_wr, len(wrs))
	}
	for i := range wrs {
		fill(&buf[i], &wrs[i])
	}
	var bad C.int
	if rc := C.xv_post_send(e.qp, &buf[0], C.int(len(wrs)), &bad); rc != 0 {
		return fmt.Errorf("verbs post send: ibv_post_send: request %d of %d: %w: %w",
			int(bad), len(wrs), syscall.Errno(rc), fabric.ErrLocal)
	}
	return nil
}

func (e *endpoint) check(w *fabric.SendWR) error {
	switch w.Op {
	case fabric.OpSend, fabric.OpWrite, fabric.OpRead:
	default:
		return fmt.Errorf("operation %v on the send queue: %w", w.Op, fabric.ErrLocal)
	}
	if w.HasImm && w.Op != fabric.OpSend {
		return fmt.Errorf("immediate data with %v (only send): %w", w.Op, fabric.ErrLocal)
	}
	if w.Inline && (w.Op == fabric.OpRead || int(w.Local.Len) > e.maxInline) {
		return fmt.Errorf("inline %v of %d bytes (at most %d, not read): %w", w.Op, w.Local.Len, e.maxInline, fabric.ErrLocal)
	}
	return nil
}

func fill(d *C.xv_wr, w *fabric.SendWR) {
	var op, flags C.uint8_t
	switch w.Op {
	case fabric.OpSend:
		op = C.XV_OP_SEND
	case fabric.OpWrite:
		op = C.XV_OP_WRITE
	case fabric.OpRead:
		op = C.XV_OP_READ
	}
	if w.Signaled {
		flags |= C.XV_SIGNALED
	}
	if w.Inline {
		flags |= C.XV_INLINE
	}
	if w.HasImm {
		flags |= C.XV_IMM
	}
	*d = C.xv_wr{
		id:    C.uint64_t(w.ID),
		addr:  C.uint64_t(w.Local.Addr),
		raddr: C.uint64_t(w.RemoteAddr),
		len:   C.uint32_t(w.Local.Len),
		lkey:  C.uint32_t(w.Local.LKey),
		rkey:  C.uint32_t(w.RKey),
		imm:   C.uint32_t(w.Imm),
		op:    op,
		flags: flags,
	}
}

// PostRecv posts a receive into sge.
func (e *endpoint) PostRecv(id uint64, sge fabric.SGE) error {
	e.m.mu.RLock()
	defer e.m.mu.RUnlock()
	if e.m.gone {
		return e.closedErr()
	}
	return e.postRecv(id, sge)
}

// prepost is the endpoint as EndpointConfig.PrePost sees it: the id's lock
// is held by newEndpoint, so its PostRecv posts without taking it.
type prepost struct{ *endpoint }

func (p prepost) PostRecv(id uint64, sge fabric.SGE) error { return p.postRecv(id, sge) }

// postRecv posts one receive; the caller holds the id's lock.
func (e *endpoint) postRecv(id uint64, sge fabric.SGE) error {
	if rc := C.xv_post_recv(e.qp, C.uint64_t(id), C.uint64_t(sge.Addr), C.uint32_t(sge.Len), C.uint32_t(sge.LKey)); rc != 0 {
		return fmt.Errorf("verbs post recv: ibv_post_recv: %w: %w", syscall.Errno(rc), fabric.ErrLocal)
	}
	return nil
}

// Lost is closed once the endpoint has failed.
func (e *endpoint) Lost() <-chan struct{} { return e.lost }

// Err says why Lost is closed, nil before.
func (e *endpoint) Err() error {
	if p := e.err.Load(); p != nil {
		return *p
	}
	return nil
}

// lose records the first failure and closes Lost; with breakQP it moves
// the queue pair to the error state (its requests flush) and disconnects
// (the peer sees DISCONNECTED).
func (e *endpoint) lose(err error, breakQP bool) {
	first := false
	e.lostOnce.Do(func() {
		e.err.Store(&err)
		close(e.lost)
		first = true
	})
	if !first || !breakQP {
		return
	}
	e.m.mu.RLock()
	defer e.m.mu.RUnlock()
	if !e.m.gone {
		C.xv_qp_error(e.qp)
		C.rdma_disconnect(e.m.id)
	}
}

// Fail moves the queue pair to the error state and disconnects.
func (e *endpoint) Fail() error {
	if e.closed.Load() {
		return e.closedErr()
	}
	e.lose(fmt.Errorf("verbs: endpoint failed by Fail: %w", xerr.ErrPeerLost), true)
	return nil
}

// Close disconnects and destroys the queue pair and its id.
func (e *endpoint) Close() error {
	if e.closed.Swap(true) {
		return nil
	}
	e.lose(e.closedErr(), false)
	e.c.mu.Lock()
	if e.c.qps[e.qpn] == e {
		delete(e.c.qps, e.qpn)
	}
	e.c.mu.Unlock()
	e.m.destroy(true)
	return nil
}

func (e *endpoint) closedErr() error {
	return fmt.Errorf("verbs: endpoint closed: %w", xerr.ErrClosed)
}
