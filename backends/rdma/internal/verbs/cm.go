//go:build rdma && cgo

package verbs

/*
#cgo noescape xv_get_event
#cgo nocallback xv_get_event
#include <errno.h>
#include <sys/socket.h>
#include "xverbs.h"
*/
import "C"

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
	"unsafe"

	"github.com/xpu-go/xpu/backends/rdma/internal/fabric"
	"github.com/xpu-go/xpu/xerr"
)

// Timeouts of the connection manager's steps. Dial bounds them further by
// its context; Request.Accept has none, so acceptTimeout bounds its wait
// for the dialer's confirmation (the connection manager reports a lost
// dialer long before).
const (
	resolveTimeout = 5 * time.Second
	acceptTimeout  = 30 * time.Second
	listenBacklog  = 64
)

// cmID is an rdma_cm_id of the context and what routes its events: the
// dispatcher finds it by the handle stored in the id's context field.
type cmID struct {
	c *vcontext
	h uintptr

	// mu guards id and its queue pair: read to use them, write to destroy.
	mu    sync.RWMutex
	id    *C.struct_rdma_cm_id
	hasQP bool
	gone  bool

	events chan cmEvent // events while connecting; dropped when full
	ln     *listener    // set for a listening id before it is shared
	ep     atomic.Pointer[endpoint]
}

type cmEvent struct {
	typ     C.int
	status  int
	private []byte // as sent, length-prefixed and maybe padded
}

func (e cmEvent) String() string {
	return C.GoString(C.rdma_event_str(uint32(e.typ)))
}

// newID creates an rdma_cm_id on the context's event channel.
func (c *vcontext) newID(ln *listener) (*cmID, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed.Load() {
		return nil, c.errClosed()
	}
	c.nextH++
	m := &cmID{c: c, h: c.nextH, events: make(chan cmEvent, 8), ln: ln}
	if rc := C.xv_create_id(c.cmch, C.uintptr_t(m.h), &m.id); rc != 0 {
		return nil, fmt.Errorf("rdma_create_id: %w", syscall.Errno(rc))
	}
	c.ids[m.h] = m
	return m, nil
}

// adopt takes the new id of a connection request into the context; false
// when the context is closing (the caller rejects the request).
func (c *vcontext) adopt(id *C.struct_rdma_cm_id) (*cmID, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed.Load() {
		return nil, false
	}
	c.nextH++
	m := &cmID{c: c, h: c.nextH, id: id, events: make(chan cmEvent, 8)}
	C.xv_set_handle(id, C.uintptr_t(m.h))
	c.ids[m.h] = m
	return m, true
}

// do runs f on the id unless it was destroyed, inside the context's life.
func (m *cmID) do(f func(id *C.struct_rdma_cm_id) error) error {
	if err := m.c.enter(); err != nil {
		return err
	}
	defer m.c.exit()
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.gone {
		return m.c.errClosed()
	}
	return f(m.id)
}

// destroy disconnects (when asked), destroys the queue pair and the id, and
// forgets the handle. It is idempotent.
func (m *cmID) destroy(disconnect bool) {
	m.mu.Lock()
	if !m.gone {
		m.gone = true
		if m.hasQP {
			if disconnect {
				C.rdma_disconnect(m.id)
			}
			C.rdma_destroy_qp(m.id)
		}
		C.rdma_destroy_id(m.id)
	}
	m.mu.Unlock()
	m.c.mu.Lock()
	delete(m.c.ids, m.h)
	m.c.mu.Unlock()
}

// reject refuses a connection request and destroys its id.
func (m *cmID) reject() {
	m.mu.Lock()
	if !m.gone {
		C.rdma_reject(m.id, nil, 0)
	}
	m.mu.Unlock()
	m.destroy(false)
}

// await returns the next event of the id.
func (m *cmID) await(ctx context.Context) (cmEvent, error) {
	select {
	case e := <-m.events:
		return e, nil
	case <-ctx.Done():
		return cmEvent{}, ctx.Err()
	case <-m.c.done:
		return cmEvent{}, m.c.errClosed()
	case <-m.c.cmDone:
		return cmEvent{}, m.c.cmStopped()
	}
}

// cmStopped is the error of a wait for events when the event goroutine
// has ended.
func (c *vcontext) cmStopped() error {
	if p := c.cmErr.Load(); p != nil {
		return *p
	}
	return c.errClosed()
}

// dispatch reads the connection manager's events until Close closes the
// duplicate of the channel's fd.
func (c *vcontext) dispatch() {
	defer close(c.cmDone)
	raw, err := c.cmFile.SyscallConn()
	if err != nil {
		c.cmFailed(err)
		return
	}
	var ev C.xv_cm_event
	for {
		var rc C.int
		err := raw.Read(func(uintptr) bool {
			rc = C.xv_get_event(c.cmch, &ev)
			return rc != C.EAGAIN
		})
		if err != nil {
			if !errors.Is(err, os.ErrClosed) { // not Close: the netpoller refused the fd
				c.cmFailed(err)
			}
			return
		}
		if rc != 0 {
			c.cmFailed(fmt.Errorf("rdma_get_cm_event: %w", syscall.Errno(rc)))
			return
		}
		c.route(&ev)
	}
}

// cmFailed breaks every endpoint when the event channel itself fails:
// without it, no disconnection would be seen. Waiters for events see
// cmDone closed and this error.
func (c *vcontext) cmFailed(err error) {
	err = fmt.Errorf("verbs %s: connection manager events: %w: %w", c.info.Name, err, xerr.ErrDeviceLost)
	c.cmErr.Store(&err)
	c.mu.Lock()
	var eps []*endpoint
	for _, m := range c.ids {
		if ep := m.ep.Load(); ep != nil {
			eps = append(eps, ep)
		}
	}
	c.mu.Unlock()
	for _, ep := range eps {
		ep.lose(err, true)
	}
}

// route hands an event to whoever waits for it.
func (c *vcontext) route(ev *C.xv_cm_event) {
	e := cmEvent{typ: C.int(ev.event), status: int(ev.status)}
	if n := int(min(ev.private_len, C.uint32_t(len(ev.private_data)))); n > 0 {
		e.private = make([]byte, n)
		for i := range e.private {
			e.private[i] = byte(ev.private_data[i])
		}
	}
	c.mu.Lock()
	m := c.ids[uintptr(ev.handle)]
	c.mu.Unlock()
	if e.typ == C.RDMA_CM_EVENT_CONNECT_REQUEST {
		c.request(m, ev.id, e)
		return
	}
	if m == nil {
		return // destroyed meanwhile
	}
	if ep := m.ep.Load(); ep != nil {
		switch e.typ {
		case C.RDMA_CM_EVENT_DISCONNECTED, C.RDMA_CM_EVENT_TIMEWAIT_EXIT:
			ep.lose(fmt.Errorf("verbs: peer disconnected (%v): %w", e, xerr.ErrPeerLost), true)
		case C.RDMA_CM_EVENT_DEVICE_REMOVAL:
			ep.lose(fmt.Errorf("verbs: device %s removed: %w", c.info.Name, xerr.ErrDeviceLost), true)
		}
	}
	if m.ln != nil && e.typ == C.RDMA_CM_EVENT_DEVICE_REMOVAL {
		m.ln.fail(fmt.Errorf("verbs: device %s removed: %w", c.info.Name, xerr.ErrDeviceLost))
	}
	if e.typ == C.RDMA_CM_EVENT_DEVICE_REMOVAL {
		err := fmt.Errorf("verbs: device %s removed: %w", c.info.Name, xerr.ErrDeviceLost)
		c.broken.CompareAndSwap(nil, &err)
	}
	select {
	case m.events <- e:
	default:
	}
}

// request offers a connection request to its listener, or rejects it.
func (c *vcontext) request(lm *cmID, id *C.struct_rdma_cm_id, e cmEvent) {
	private, err := unframe(e.private)
	var m *cmID
	ok := false
	if lm != nil && lm.ln != nil && err == nil {
		m, ok = c.adopt(id)
	}
	if !ok {
		C.rdma_reject(id, nil, 0)
		C.rdma_destroy_id(id)
		return
	}
	if !lm.ln.offer(&request{m: m, private: private}) {
		m.reject()
	}
}

// frame puts the length of private data in front of it: the connection
// manager pads private data to a fixed size on InfiniBand and RoCE.
func frame(p []byte) ([]byte, error) {
	if len(p) > fabric.MaxPrivate {
		return nil, fmt.Errorf("%d bytes of private data, at most %d: %w", len(p), fabric.MaxPrivate, xerr.ErrInvalidArgument)
	}
	return append([]byte{byte(len(p))}, p...), nil
}

func unframe(b []byte) ([]byte, error) {
	if len(b) == 0 {
		return nil, nil
	}
	n := int(b[0])
	if n > fabric.MaxPrivate || 1+n > len(b) {
		return nil, fmt.Errorf("malformed private data (length byte %d of %d bytes)", n, len(b))
	}
	return append([]byte(nil), b[1:1+n]...), nil
}

// parseAddr parses "ip:port" into what the C side takes.
func parseAddr(addr string) (family C.int, ip [16]C.uint8_t, port C.int, err error) {
	ap, err := netip.ParseAddrPort(addr)
	if err != nil {
		return 0, ip, 0, fmt.Errorf("address %q: want ip:port: %w", addr, xerr.ErrInvalidArgument)
	}
	a := ap.Addr().Unmap()
	family = C.AF_INET6
	b := a.As16()
	if a.Is4() {
		family = C.AF_INET
		b4 := a.As4()
		copy(b[:], b4[:])
	}
	for i := range b {
		ip[i] = C.uint8_t(b[i])
	}
	return family, ip, C.int(ap.Port()), nil
}

// sameDevice checks that the connection manager bound the id to the
// context's device (an address of another device's netdev does not).
func (c *vcontext) sameDevice(id *C.struct_rdma_cm_id, addr string) error {
	if id.verbs == nil || id.verbs == c.ctx {
		return nil
	}
	return fmt.Errorf("%s is reached through device %s, not %s: %w", addr,
		C.GoString(C.ibv_get_device_name(id.verbs.device)), c.info.Name, xerr.ErrInvalidArgument)
}

// listener is the fabric.Listener of package verbs.
type listener struct {
	c    *vcontext
	m    *cmID
	addr string
	reqs chan *request

	mu     sync.Mutex
	closed bool
	err    error
	once   sync.Once
	done   chan struct{} // closed once the listening id is destroyed
}

var _ fabric.Listener = (*listener)(nil)

// Listen binds addr and listens on it.
func (c *vcontext) Listen(addr string) (fabric.Listener, error) {
	family, ip, port, err := parseAddr(addr)
	if err != nil {
		return nil, fmt.Errorf("verbs listen: %w", err)
	}
	ln := &listener{c: c, reqs: make(chan *request, listenBacklog), done: make(chan struct{})}
	m, err := c.newID(ln)
	if err != nil {
		return nil, fmt.Errorf("verbs listen %s: %w", addr, err)
	}
	ln.m = m
	err = m.do(func(id *C.struct_rdma_cm_id) error {
		if rc := C.xv_bind(id, family, &ip[0], port); rc != 0 {
			return fmt.Errorf("rdma_bind_addr: %w", syscall.Errno(rc))
		}
		if err := c.sameDevice(id, addr); err != nil {
			return err
		}
		if rc, errno := C.rdma_listen(id, listenBacklog); rc != 0 {
			return fmt.Errorf("rdma_listen: %w", errnoErr(errno))
		}
		ap, _ := netip.ParseAddrPort(addr)
		ln.addr = netip.AddrPortFrom(ap.Addr(), uint16(C.xv_src_port(id))).String()
		return nil
	})
	if err != nil {
		m.destroy(false)
		return nil, fmt.Errorf("verbs listen %s: %w", addr, err)
	}
	return ln, nil
}

// Addr is the address listened on, with the port bound.
func (ln *listener) Addr() string { return ln.addr }

func (ln *listener) offer(r *request) bool {
	ln.mu.Lock()
	defer ln.mu.Unlock()
	if ln.closed {
		return false
	}
	select {
	case ln.reqs <- r:
		return true
	default:
		return false // backlog full
	}
}

// Accept returns the next connection request.
func (ln *listener) Accept(ctx context.Context) (fabric.Request, error) {
	select {
	case r := <-ln.reqs:
		return r, nil
	case <-ctx.Done():
		return nil, ctx.Err()
	case <-ln.done:
		ln.mu.Lock()
		defer ln.mu.Unlock()
		return nil, ln.err
	case <-ln.c.cmDone:
		return nil, ln.c.cmStopped()
	}
}

// fail closes the listener with err (the device went away).
func (ln *listener) fail(err error) { ln.shut(err) }

// Close stops listening and rejects the requests not yet accepted.
func (ln *listener) Close() error {
	ln.shut(fmt.Errorf("verbs: listener %s closed: %w", ln.addr, xerr.ErrClosed))
	return nil
}

// shut closes the listener once; a concurrent caller waits until the id
// is destroyed (its port free again) and the queued requests rejected.
func (ln *listener) shut(err error) {
	ln.once.Do(func() {
		ln.mu.Lock()
		ln.closed, ln.err = true, err
		ln.mu.Unlock()
		ln.m.destroy(false)
		close(ln.done)
		for {
			select {
			case r := <-ln.reqs:
				r.Reject()
			default:
				return
			}
		}
	})
}

// request is the fabric.Request of package verbs.
type request struct {
	m        *cmID
	private  []byte
	answered atomic.Bool
}

var _ fabric.Request = (*request)(nil)

func (r *request) Private() []byte { return r.private }

// Reject refuses the request.
func (r *request) Reject() error {
	if r.answered.Swap(true) {
		return fmt.Errorf("verbs reject: request answered already: %w", xerr.ErrInvalidArgument)
	}
	r.m.reject()
	return nil
}

// Accept makes the queue pair, accepts with reply and waits until the
// dialer confirms.
func (r *request) Accept(cfg fabric.EndpointConfig, reply []byte) (fabric.Endpoint, error) {
	if r.answered.Swap(true) {
		return nil, fmt.Errorf("verbs accept: request answered already: %w", xerr.ErrInvalidArgument)
	}
	c, m := r.m.c, r.m
	framed, err := frame(reply)
	if err != nil {
		m.reject()
		return nil, fmt.Errorf("verbs accept: %w", err)
	}
	ep, err := c.newEndpoint(m, cfg, func(id *C.struct_rdma_cm_id) error {
		if rc := C.xv_accept(id, (*C.uint8_t)(unsafe.Pointer(&framed[0])), C.int(len(framed)), C.int(min(c.attr.maxRdAtom, 255)), C.int(min(c.attr.maxInitRdAtom, 255))); rc != 0 {
			return fmt.Errorf("rdma_accept: %w", syscall.Errno(rc))
		}
		return nil
	})
	if err != nil {
		m.reject()
		return nil, fmt.Errorf("verbs accept: %w", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), acceptTimeout)
	defer cancel()
	for {
		e, err := m.await(ctx)
		if err != nil {
			ep.Close()
			return nil, fmt.Errorf("verbs accept: waiting for the dialer: %w", err)
		}
		switch e.typ {
		case C.RDMA_CM_EVENT_ESTABLISHED:
			return ep, nil
		case C.RDMA_CM_EVENT_CONNECT_ERROR, C.RDMA_CM_EVENT_UNREACHABLE, C.RDMA_CM_EVENT_REJECTED,
			C.RDMA_CM_EVENT_DISCONNECTED, C.RDMA_CM_EVENT_DEVICE_REMOVAL:
			ep.Close()
			return nil, fmt.Errorf("verbs accept: %v (status %d): %w", e, e.status, xerr.ErrPeerLost)
		}
	}
}

// Dial connects to a listener at addr.
func (c *vcontext) Dial(ctx context.Context, addr string, cfg fabric.EndpointConfig, private []byte) (fabric.Endpoint, []byte, error) {
	ep, reply, err := c.dial(ctx, addr, cfg, private)
	if err != nil {
		return nil, nil, fmt.Errorf("verbs dial %s: %w", addr, err)
	}
	return ep, reply, nil
}

func (c *vcontext) dial(ctx context.Context, addr string, cfg fabric.EndpointConfig, private []byte) (fabric.Endpoint, []byte, error) {
	family, ip, port, err := parseAddr(addr)
	if err != nil {
		return nil, nil, err
	}
	framed, err := frame(private)
	if err != nil {
		return nil, nil, err
	}
	if err := ctx.Err(); err != nil {
		return nil, nil, err
	}
	m, err := c.newID(nil)
	if err != nil {
		return nil, nil, err
	}
	var ep *endpoint
	ok := false
	defer func() {
		switch {
		case ok:
		case ep != nil:
			ep.Close()
		default:
			m.destroy(false)
		}
	}()
	if err := c.resolve(ctx, m, addr, family, ip, port); err != nil {
		return nil, nil, err
	}
	ep, err = c.newEndpoint(m, cfg, func(id *C.struct_rdma_cm_id) error {
		if rc := C.xv_connect(id, (*C.uint8_t)(unsafe.Pointer(&framed[0])), C.int(len(framed)), C.int(min(c.attr.maxRdAtom, 255)), C.int(min(c.attr.maxInitRdAtom, 255))); rc != 0 {
			return cmError("rdma_connect", rc)
		}
		return nil
	})
	if err != nil {
		return nil, nil, err
	}
	reply, err := awaitEstablished(ctx, m)
	if err != nil {
		return nil, nil, err
	}
	ok = true
	return ep, reply, nil
}

// resolve resolves the address (family, ip, port) of addr, then the route
// to it, on m, which must reach it through this context's device.
func (c *vcontext) resolve(ctx context.Context, m *cmID, addr string, family C.int, ip [16]C.uint8_t, port C.int) error {
	timeout := C.int(resolveTimeout / time.Millisecond)
	if dl, has := ctx.Deadline(); has {
		timeout = C.int(max(1, min(time.Until(dl), resolveTimeout)/time.Millisecond))
	}

	err := m.do(func(id *C.struct_rdma_cm_id) error {
		if rc := C.xv_resolve_addr(id, family, &ip[0], port, timeout); rc != 0 {
			return cmError("rdma_resolve_addr", rc)
		}
		return nil
	})
	if err != nil {
		return err
	}
	if err := expect(ctx, m, C.RDMA_CM_EVENT_ADDR_RESOLVED); err != nil {
		return err
	}
	err = m.do(func(id *C.struct_rdma_cm_id) error {
		if err := c.sameDevice(id, addr); err != nil {
			return err
		}
		if rc, errno := C.rdma_resolve_route(id, timeout); rc != 0 {
			return cmError("rdma_resolve_route", errnoOf(errno))
		}
		return nil
	})
	if err != nil {
		return err
	}
	return expect(ctx, m, C.RDMA_CM_EVENT_ROUTE_RESOLVED)
}

// awaitEstablished waits until the connection m asked for is established,
// and returns the private data of the reply.
func awaitEstablished(ctx context.Context, m *cmID) ([]byte, error) {
	for {
		e, err := m.await(ctx)
		if err != nil {
			return nil, err
		}
		switch e.typ {
		case C.RDMA_CM_EVENT_ESTABLISHED:
			return unframe(e.private)
		case C.RDMA_CM_EVENT_CONNECT_RESPONSE:
			continue // not sent with a queue pair; ignore
		default:
			return nil, eventError(e)
		}
	}
}

// expect waits for an event of type want; any other is the failure.
func expect(ctx context.Context, m *cmID, want C.int) error {
	e, err := m.await(ctx)
	if err != nil {
		return err
	}
	if e.typ != want {
		return eventError(e)
	}
	return nil
}

// eventError describes a failed step of connecting. A rejection, an
// unreachable peer or one nobody answers matches fabric.ErrRefused.
func eventError(e cmEvent) error {
	switch e.typ {
	case C.RDMA_CM_EVENT_REJECTED:
		why := "rejected"
		switch e.status {
		case 8: // IB_CM_REJ_INVALID_SERVICE_ID
			why = "nobody listens there"
		case 28: // IB_CM_REJ_CONSUMER_DEFINED
			why = "rejected by the listener"
		}
		return fmt.Errorf("%s (%v, status %d): %w", why, e, e.status, fabric.ErrRefused)
	case C.RDMA_CM_EVENT_UNREACHABLE, C.RDMA_CM_EVENT_CONNECT_ERROR:
		return fmt.Errorf("%v (status %d): %w", e, e.status, fabric.ErrRefused)
	case C.RDMA_CM_EVENT_ADDR_ERROR, C.RDMA_CM_EVENT_ROUTE_ERROR:
		return cmError(e.String(), C.int(-e.status))
	}
	return fmt.Errorf("unexpected %v (status %d)", e, e.status)
}

// cmError wraps an errno of the connection manager; the errnos of a peer
// that cannot be reached also match fabric.ErrRefused.
func cmError(op string, errno C.int) error {
	en := syscall.Errno(errno)
	switch en {
	case syscall.ECONNREFUSED, syscall.EHOSTUNREACH, syscall.ENETUNREACH, syscall.ETIMEDOUT:
		return fmt.Errorf("%s: %w: %w", op, en, fabric.ErrRefused)
	}
	return fmt.Errorf("%s: %w", op, en)
}

func errnoOf(err error) C.int {
	var en syscall.Errno
	if errors.As(err, &en) {
		return C.int(en)
	}
	return C.EIO
}
