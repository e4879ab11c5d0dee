//go:build rdma && cgo

package verbs

/*
#cgo noescape xv_poll
#cgo nocallback xv_poll
#cgo nocallback xv_wait
#include <stdlib.h>
#include <sys/eventfd.h>
#include "xverbs.h"
*/
import "C"

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"os"
	"slices"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
	"unsafe"

	"github.com/xpu-go/xpu/backends/rdma/internal/fabric"
	"github.com/xpu-go/xpu/xerr"
)

// pollBatch is the completions taken from the provider per crossing.
const pollBatch = 32

// vcontext is an opened device: the fabric.Context of package verbs.
//
// Locks, outermost first: life (read: a call using the protection domain or
// the connection manager; write: Close freeing them), a cmID's mu (its
// rdma_cm_id and queue pair), mu (the maps). cqmu guards the completion
// queue against Close (read: Poll, Wait, Wake).
type vcontext struct {
	info fabric.DeviceInfo
	attr devAttr

	list *(*C.struct_ibv_context) // rdma_get_devices, held until Close
	ctx  *C.struct_ibv_context
	pd   *C.struct_ibv_pd
	ch   *C.struct_ibv_comp_channel
	cq   *C.struct_ibv_cq
	wake C.int // eventfd that Wake writes

	cqmu    sync.RWMutex
	closing atomic.Bool
	broken  atomic.Pointer[error]

	cmChannel

	life   sync.RWMutex
	closed atomic.Bool
	done   chan struct{} // closed when Close begins

	objects // guarded by its mu

	closeOnce sync.Once
	closeErr  error
}

// cmChannel is a context's connection manager event channel, read by its
// event goroutine.
type cmChannel struct {
	cmch   *C.struct_rdma_event_channel
	cmFile *os.File              // a duplicate of cmch's fd, for the netpoller
	cmDone chan struct{}         // closed when the event goroutine ends
	cmErr  atomic.Pointer[error] // why, when not Close
}

// objects are the maps of what a context has made, by what the provider
// reports: its cmIDs by handle, its endpoints by queue pair number, and
// the memory regions it registered.
type objects struct {
	mu    sync.Mutex
	ids   map[uintptr]*cmID
	nextH uintptr
	qps   map[uint32]*endpoint
	mrs   map[*C.struct_ibv_mr]struct{}
}

var _ fabric.Context = (*vcontext)(nil)

// Open opens the device named (or the first with an active port) on the
// connection manager's own device context.
func (provider) Open(name string, cqDepth int) (fabric.Context, error) {
	if cqDepth <= 0 {
		return nil, fmt.Errorf("verbs open: completion queue depth %d: %w", cqDepth, xerr.ErrInvalidArgument)
	}
	var n C.int
	list, errno := C.rdma_get_devices(&n)
	if list == nil || n == 0 {
		if list != nil {
			C.rdma_free_devices(list)
		}
		return nil, fmt.Errorf("verbs open: rdma_get_devices: %w: %w", errnoErr(errno), ErrNoDevice)
	}
	c := &vcontext{
		list:      list,
		wake:      -1,
		done:      make(chan struct{}),
		cmChannel: cmChannel{cmDone: make(chan struct{})},
		objects: objects{
			ids: map[uintptr]*cmID{},
			qps: map[uint32]*endpoint{},
			mrs: map[*C.struct_ibv_mr]struct{}{},
		},
	}
	var names []string
	var errs []error // of devices that could not be described
	for _, d := range unsafe.Slice(list, int(n)) {
		info, attr, err := describe(d)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		names = append(names, info.Name)
		if name == info.Name || name == "" && hasActivePort(info) {
			c.ctx, c.info, c.attr = d, info, attr
			break
		}
	}
	if c.ctx == nil {
		c.release()
		err := fmt.Errorf("verbs open: no device %q (have %v): %w", name, names, ErrNoDevice)
		if name == "" {
			err = fmt.Errorf("verbs open: none of %v has an active port: %w", names, ErrNoDevice)
		}
		return nil, errors.Join(append([]error{err}, errs...)...)
	}
	if err := c.setup(cqDepth); err != nil {
		c.release()
		return nil, fmt.Errorf("verbs open %s: %w", c.info.Name, err)
	}
	go c.dispatch()
	return c, nil
}

func hasActivePort(info fabric.DeviceInfo) bool {
	for _, p := range info.Ports {
		if p.State == "ACTIVE" {
			return true
		}
	}
	return false
}

// setup makes the protection domain, completion channel and queue, the
// wake eventfd and the connection manager's event channel.
func (c *vcontext) setup(cqDepth int) error {
	var errno error
	if c.pd, errno = C.ibv_alloc_pd(c.ctx); c.pd == nil {
		return fmt.Errorf("ibv_alloc_pd: %w", errnoErr(errno))
	}
	if c.ch, errno = C.ibv_create_comp_channel(c.ctx); c.ch == nil {
		return fmt.Errorf("ibv_create_comp_channel: %w", errnoErr(errno))
	}
	if rc := C.xv_set_nonblock(c.ch.fd); rc != 0 {
		return fmt.Errorf("completion channel: %w", syscall.Errno(rc))
	}
	if c.cq, errno = C.ibv_create_cq(c.ctx, C.int(cqDepth), nil, c.ch, 0); c.cq == nil {
		return fmt.Errorf("ibv_create_cq(%d): %w", cqDepth, errnoErr(errno))
	}
	if c.wake, errno = C.eventfd(0, C.EFD_CLOEXEC|C.EFD_NONBLOCK); c.wake < 0 {
		return fmt.Errorf("eventfd: %w", errnoErr(errno))
	}
	if c.cmch, errno = C.rdma_create_event_channel(); c.cmch == nil {
		return fmt.Errorf("rdma_create_event_channel: %w", errnoErr(errno))
	}
	if rc := C.xv_set_nonblock(c.cmch.fd); rc != 0 {
		return fmt.Errorf("event channel: %w", syscall.Errno(rc))
	}
	// The duplicate shares the open file (and its O_NONBLOCK), so the
	// netpoller waits on it for the channel while librdmacm reads the
	// original; closing it stops the dispatcher without touching the
	// channel.
	fd, _, e := syscall.Syscall(syscall.SYS_FCNTL, uintptr(c.cmch.fd), syscall.F_DUPFD_CLOEXEC, 0)
	if e != 0 {
		return fmt.Errorf("event channel: dup: %w", e)
	}
	c.cmFile = os.NewFile(fd, "rdma_cm")
	return nil
}

// release frees what setup made and the device list, in reverse order.
func (c *vcontext) release() {
	if c.cmFile != nil {
		c.cmFile.Close()
	}
	if c.cmch != nil {
		C.rdma_destroy_event_channel(c.cmch)
	}
	if c.wake >= 0 {
		syscall.Close(int(c.wake))
	}
	if c.cq != nil {
		C.ibv_destroy_cq(c.cq)
	}
	if c.ch != nil {
		C.ibv_destroy_comp_channel(c.ch)
	}
	if c.pd != nil {
		C.ibv_dealloc_pd(c.pd)
	}
	if c.list != nil {
		C.rdma_free_devices(c.list)
	}
	c.cmFile, c.cmch, c.wake, c.cq, c.ch, c.pd, c.list = nil, nil, -1, nil, nil, nil, nil
}

// Info describes the device.
func (c *vcontext) Info() fabric.DeviceInfo {
	info := c.info
	info.Ports = slices.Clone(info.Ports)
	return info
}

// enter begins a call that uses the protection domain, the completion
// queue or the connection manager: Close waits for it.
func (c *vcontext) enter() error {
	c.life.RLock()
	if c.closed.Load() {
		c.life.RUnlock()
		return c.errClosed()
	}
	return nil
}

func (c *vcontext) exit() { c.life.RUnlock() }

func (c *vcontext) errClosed() error {
	return fmt.Errorf("verbs %s: context closed: %w", c.info.Name, xerr.ErrClosed)
}

// Register registers [p, p+n) with the protection domain.
func (c *vcontext) Register(p unsafe.Pointer, n int) (*fabric.MR, error) {
	if p == nil || n <= 0 {
		return nil, fmt.Errorf("verbs register: %d bytes at %p: %w", n, p, xerr.ErrInvalidArgument)
	}
	if err := c.enter(); err != nil {
		return nil, err
	}
	defer c.exit()
	mr, errno := C.xv_reg_mr(c.pd, C.uintptr_t(uintptr(p)), C.size_t(n))
	if mr == nil {
		return nil, fmt.Errorf("verbs register: ibv_reg_mr of %d bytes: %w", n, errnoErr(errno))
	}
	c.mu.Lock()
	c.mrs[mr] = struct{}{}
	c.mu.Unlock()
	return &fabric.MR{Addr: uintptr(p), Len: n, LKey: uint32(mr.lkey), RKey: uint32(mr.rkey), Handle: mr}, nil
}

// Deregister releases a region registered on this context.
func (c *vcontext) Deregister(m *fabric.MR) error {
	var mr *C.struct_ibv_mr
	if m != nil {
		mr, _ = m.Handle.(*C.struct_ibv_mr)
	}
	if mr == nil {
		return fmt.Errorf("verbs deregister: not a region of package verbs: %w", xerr.ErrInvalidArgument)
	}
	if err := c.enter(); err != nil {
		return err
	}
	defer c.exit()
	c.mu.Lock()
	_, ok := c.mrs[mr]
	delete(c.mrs, mr)
	c.mu.Unlock()
	if !ok {
		return fmt.Errorf("verbs deregister: region not registered here (deregistered twice?): %w", xerr.ErrInvalidArgument)
	}
	if rc := C.ibv_dereg_mr(mr); rc != 0 {
		return fmt.Errorf("verbs deregister: ibv_dereg_mr: %w", syscall.Errno(rc))
	}
	return nil
}

// Poll takes up to len(out) completions without blocking: first those
// that Wait found, then the queue's.
func (c *vcontext) Poll(out []fabric.Completion) (int, error) {
	if len(out) == 0 {
		return 0, nil
	}
	c.cqmu.RLock()
	defer c.cqmu.RUnlock()
	if c.closing.Load() {
		return 0, c.errClosed()
	}
	n := 0
	var buf [pollBatch]C.xv_wc
	for n < len(out) {
		want := min(len(out)-n, pollBatch)
		k := int(C.xv_poll(c.cq, &buf[0], C.int(want)))
		if k < 0 {
			return n, fmt.Errorf("verbs poll %s: ibv_poll_cq failed: %w", c.info.Name, xerr.ErrDeviceLost)
		}
		for i := range k {
			c.complete(&buf[i], &out[n])
			n++
		}
		if k < want {
			break
		}
	}
	return n, nil
}

// complete converts a completion; a failure other than a flush breaks its
// endpoint.
func (c *vcontext) complete(w *C.xv_wc, out *fabric.Completion) {
	*out = fabric.Completion{ID: uint64(w.id)}
	if w.status != C.IBV_WC_SUCCESS {
		err := wcError(int(w.status), uint32(w.vendor_err))
		out.Err = err
		if w.status != C.IBV_WC_WR_FLUSH_ERR {
			c.mu.Lock()
			ep := c.qps[uint32(w.qp_num)]
			c.mu.Unlock()
			if ep != nil {
				ep.lose(err, true)
			}
		}
		return
	}
	switch w.opcode {
	case C.IBV_WC_SEND:
		out.Op = fabric.OpSend
	case C.IBV_WC_RDMA_WRITE:
		out.Op = fabric.OpWrite
	case C.IBV_WC_RDMA_READ:
		out.Op = fabric.OpRead
	case C.IBV_WC_RECV, C.IBV_WC_RECV_RDMA_WITH_IMM:
		out.Op = fabric.OpRecv
	}
	out.Len = int(w.len)
	if w.flags&C.IBV_WC_WITH_IMM != 0 {
		out.Imm, out.HasImm = uint32(w.imm), true
	}
}

// Wait arms the completion queue and blocks until it raises an event, Wake
// is called or d passes. Completions that arrived before the arming are
// found by polling once more after it; Wait then returns at once and Poll
// hands them out.
func (c *vcontext) Wait(d time.Duration) error {
	c.cqmu.RLock()
	defer c.cqmu.RUnlock()
	if c.closing.Load() {
		return c.errClosed()
	}
	if p := c.broken.Load(); p != nil {
		return *p
	}
	ms := 0
	if d > 0 {
		ms = int(min((d+time.Millisecond-1)/time.Millisecond, math.MaxInt32))
	}
	if k := C.xv_wait(c.ch, c.wake, C.int(ms)); k < 0 {
		err := fmt.Errorf("verbs wait %s: %w: %w", c.info.Name, syscall.Errno(-k), xerr.ErrDeviceLost)
		c.broken.Store(&err)
		return err
	}
	return nil
}

// Arm asks for an event at the next completion (ibv_req_notify_cq).
func (c *vcontext) Arm() error {
	c.cqmu.RLock()
	defer c.cqmu.RUnlock()
	if c.closing.Load() {
		return c.errClosed()
	}
	if rc := C.ibv_req_notify_cq(c.cq, 0); rc != 0 {
		return fmt.Errorf("verbs arm %s: ibv_req_notify_cq: %w: %w", c.info.Name, syscall.Errno(rc), xerr.ErrDeviceLost)
	}
	return nil
}

// Wake makes a Wait in progress, or the next one, return.
func (c *vcontext) Wake() {
	c.cqmu.RLock()
	defer c.cqmu.RUnlock()
	if !c.closing.Load() {
		c.kick()
	}
}

func (c *vcontext) kick() {
	var one [8]byte
	binary.NativeEndian.PutUint64(one[:], 1)
	syscall.Write(int(c.wake), one[:])
}

// Close closes every endpoint and listener, stops the event goroutine,
// deregisters what is still registered and frees the device's resources.
func (c *vcontext) Close() error {
	c.closeOnce.Do(func() { c.closeErr = c.close() })
	return c.closeErr
}

func (c *vcontext) close() error {
	c.mu.Lock()
	c.closed.Store(true)
	close(c.done)
	ids := make([]*cmID, 0, len(c.ids))
	for _, m := range c.ids {
		ids = append(ids, m)
	}
	c.mu.Unlock()
	for _, m := range ids {
		switch {
		case m.ep.Load() != nil:
			m.ep.Load().Close()
		case m.ln != nil:
			m.ln.Close()
		default:
			m.destroy(false)
		}
	}
	c.cmFile.Close()
	<-c.cmDone

	c.closing.Store(true)
	c.kick()
	c.cqmu.Lock()
	defer c.cqmu.Unlock()
	c.life.Lock()
	defer c.life.Unlock()

	var errs []error
	c.mu.Lock()
	for mr := range c.mrs {
		if rc := C.ibv_dereg_mr(mr); rc != 0 {
			errs = append(errs, fmt.Errorf("ibv_dereg_mr: %w", syscall.Errno(rc)))
		}
	}
	clear(c.mrs)
	c.mu.Unlock()
	c.release()
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("verbs close %s: %w", c.info.Name, err)
	}
	return nil
}

// completionError is a failed completion: the hardware's status, matching
// fabric.ErrFlushed, ErrRemote or ErrLocal.
type completionError struct {
	status int
	vendor uint32
	kind   error
}

func wcError(status int, vendor uint32) error {
	e := &completionError{status: status, vendor: vendor, kind: fabric.ErrLocal}
	switch status {
	case C.IBV_WC_WR_FLUSH_ERR:
		e.kind = fabric.ErrFlushed
	case C.IBV_WC_RETRY_EXC_ERR, C.IBV_WC_RNR_RETRY_EXC_ERR, C.IBV_WC_REM_INV_REQ_ERR,
		C.IBV_WC_REM_ACCESS_ERR, C.IBV_WC_REM_OP_ERR, C.IBV_WC_REM_INV_RD_REQ_ERR,
		C.IBV_WC_REM_ABORT_ERR, C.IBV_WC_BAD_RESP_ERR, C.IBV_WC_RESP_TIMEOUT_ERR:
		e.kind = fabric.ErrRemote
	}
	return e
}

func (e *completionError) Error() string {
	return fmt.Sprintf("verbs: work request failed: %s (status %d, vendor error %#x): %v",
		C.GoString(C.ibv_wc_status_str(uint32(e.status))), e.status, e.vendor, e.kind)
}

// Unwrap returns fabric.ErrFlushed, ErrRemote or ErrLocal.
func (e *completionError) Unwrap() error { return e.kind }
