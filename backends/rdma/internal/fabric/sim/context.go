package sim

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strconv"
	"sync"
	"time"
	"unsafe"

	"github.com/xpu-go/xpu/backends/rdma/internal/fabric"
)

// Context is an opened simulated device: its registered memory, its
// completion queue, its endpoints and listeners.
type Context struct {
	n       *Network
	ip      string
	info    fabric.DeviceInfo
	cqDepth int

	// Guarded by n.mu.
	cq        []entry
	woken     bool
	armed     bool          // Arm asked for an event at the next completion
	event     bool          // an event was raised that no Wait has taken yet
	waitCh    chan struct{} // closed to end a Wait; nil when none waits
	err       error         // set once closed, killed or broken
	closed    bool
	dead      bool
	byL, byR  map[uint32]*region
	eps       map[*endpoint]struct{}
	listeners map[*listener]struct{}
	dials     map[*request]struct{}

	wg sync.WaitGroup // the endpoints' goroutines
}

var _ fabric.Context = (*Context)(nil)

// entry is a completion queued with the queue slots it frees when polled.
type entry struct {
	c            fabric.Completion
	ep           *endpoint
	sends, recvs int
}

// region is a registered memory region.
type region struct {
	c          *Context
	base       unsafe.Pointer // keeps Go memory alive while registered
	addr       uintptr
	n          int
	lkey, rkey uint32
}

func (r *region) contains(p uintptr, n int) bool {
	return r != nil && n >= 0 && p >= r.addr && p-r.addr <= uintptr(r.n) && uintptr(n) <= uintptr(r.n)-(p-r.addr)
}

// bytes returns [p, p+n) of the region, which contains it.
func (r *region) bytes(p uintptr, n int) []byte {
	return unsafe.Slice((*byte)(unsafe.Add(r.base, p-r.addr)), n)
}

// memAt returns n bytes at address p of this process, for inline data,
// which need no registration.
func memAt(p uintptr, n int) []byte {
	ptr := *(*unsafe.Pointer)(unsafe.Pointer(&p))
	return unsafe.Slice((*byte)(ptr), n)
}

// Info describes the device.
func (c *Context) Info() fabric.DeviceInfo { return c.info }

// Register registers [p, p+n) under a fresh LKey and RKey.
func (c *Context) Register(p unsafe.Pointer, n int) (*fabric.MR, error) {
	if p == nil || n <= 0 {
		return nil, fmt.Errorf("sim: register %p+%d: empty region", p, n)
	}
	c.n.mu.Lock()
	defer c.n.mu.Unlock()
	if c.err != nil {
		return nil, fmt.Errorf("sim: register: %w", c.err)
	}
	r := &region{c: c, base: p, addr: uintptr(p), n: n, lkey: c.n.newKey(), rkey: c.n.newKey()}
	c.byL[r.lkey] = r
	c.byR[r.rkey] = r
	return &fabric.MR{Addr: r.addr, Len: n, LKey: r.lkey, RKey: r.rkey, Handle: r}, nil
}

// Deregister removes a region registered on c; its keys are invalid from
// then on. Deregistering twice is an error.
func (c *Context) Deregister(mr *fabric.MR) error {
	if mr == nil {
		return errors.New("sim: deregister: nil region")
	}
	r, ok := mr.Handle.(*region)
	c.n.mu.Lock()
	defer c.n.mu.Unlock()
	if c.closed {
		return fmt.Errorf("sim: deregister: %w", c.err)
	}
	if !ok || r.c != c || c.byL[r.lkey] != r {
		return fmt.Errorf("sim: deregister %#x+%d: not a region registered on this context", mr.Addr, mr.Len)
	}
	delete(c.byL, r.lkey)
	delete(c.byR, r.rkey)
	return nil
}

// remote returns the region named by rkey for a peer's access, nil when
// there is none or the process died. The caller holds n.mu.
func (c *Context) remote(rkey uint32) *region {
	if c.dead {
		return nil
	}
	return c.byR[rkey]
}

// push queues a completion. The caller holds n.mu.
func (c *Context) push(e entry) {
	if e.c.Err != nil {
		if errors.Is(e.c.Err, fabric.ErrFlushed) {
			c.n.stats.Flushed++
		} else {
			c.n.stats.Errors++
		}
	}
	if c.err != nil {
		return // closed, dead or broken: nobody polls
	}
	if len(c.cq) >= c.cqDepth {
		c.err = fmt.Errorf("sim: completion queue overrun (%d completions not polled): %w", c.cqDepth, fabric.ErrLocal)
		for ep := range c.eps {
			ep.enterError(c.err, nil)
			ep.peer.enterError(fmt.Errorf("sim: peer's completion queue overran: %w", fabric.ErrRemote), errRetryExceeded)
		}
		c.cq = nil
		c.signal()
		return
	}
	c.cq = append(c.cq, e)
	if c.armed {
		// An armed queue raises one event, at the next completion.
		c.armed = false
		c.event = true
		c.signal()
	}
}

// signal ends a Wait in progress. The caller holds n.mu.
func (c *Context) signal() {
	if c.waitCh != nil {
		close(c.waitCh)
		c.waitCh = nil
	}
}

// Poll takes up to len(out) completions without blocking, oldest first.
// It frees the queue slots of the requests it reports.
func (c *Context) Poll(out []fabric.Completion) (int, error) {
	c.n.mu.Lock()
	defer c.n.mu.Unlock()
	if c.err != nil {
		return 0, c.err
	}
	k := min(len(out), len(c.cq))
	for i, e := range c.cq[:k] {
		out[i] = e.c
		e.ep.sendOut -= e.sends
		e.ep.recvOut -= e.recvs
	}
	c.cq = append(c.cq[:0], c.cq[k:]...)
	return k, nil
}

// Wait returns at once when a completion is queued or Wake was called
// since the last Wait; otherwise it blocks until one of them happens or d
// passes. It returns an error only once the context is closed, killed or
// broken.
func (c *Context) Wait(d time.Duration) error {
	c.n.mu.Lock()
	if c.err != nil {
		c.n.mu.Unlock()
		return c.err
	}
	if c.woken || c.event || d <= 0 {
		c.woken, c.event = false, false
		c.n.mu.Unlock()
		return nil
	}
	if c.waitCh == nil {
		c.waitCh = make(chan struct{})
	}
	ch := c.waitCh
	c.n.mu.Unlock()

	t := time.NewTimer(d)
	select {
	case <-ch:
	case <-t.C:
	}
	t.Stop()

	c.n.mu.Lock()
	defer c.n.mu.Unlock()
	c.woken, c.event = false, false
	if c.err != nil {
		return c.err
	}
	return nil
}

// Arm asks for an event at the next completion, as ibv_req_notify_cq
// does: what is already queued raises none.
func (c *Context) Arm() error {
	c.n.mu.Lock()
	defer c.n.mu.Unlock()
	if c.err != nil {
		return c.err
	}
	c.armed = true
	return nil
}

// Wake makes a Wait in progress, or else the next one, return.
func (c *Context) Wake() {
	c.n.mu.Lock()
	defer c.n.mu.Unlock()
	c.woken = true
	c.signal()
}

// Listen listens on addr, "ip:port" with ip the host's address (or empty
// or 0.0.0.0, meaning it) and port 0 for a free one.
func (c *Context) Listen(addr string) (fabric.Listener, error) {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return nil, fmt.Errorf("sim: listen: %w", err)
	}
	if host != "" && host != "0.0.0.0" && host != c.ip {
		return nil, fmt.Errorf("sim: listen %s: cannot assign requested address (the device has %s)", addr, c.ip)
	}
	p, err := strconv.Atoi(port)
	if err != nil || p < 0 || p > 65535 {
		return nil, fmt.Errorf("sim: listen %s: bad port", addr)
	}
	c.n.mu.Lock()
	defer c.n.mu.Unlock()
	if c.err != nil {
		return nil, fmt.Errorf("sim: listen: %w", c.err)
	}
	if p == 0 {
		p = c.n.freePort(c.ip)
	}
	key := net.JoinHostPort(c.ip, strconv.Itoa(p))
	if _, used := c.n.listeners[key]; used {
		return nil, fmt.Errorf("sim: listen %s: address already in use", key)
	}
	l := &listener{c: c, addr: key, ready: make(chan struct{})}
	c.n.listeners[key] = l
	c.listeners[l] = struct{}{}
	return l, nil
}

// Dial connects to the listener at exactly addr (as its Addr says),
// offering private; it returns the connected endpoint and the reply.
func (c *Context) Dial(ctx context.Context, addr string, cfg fabric.EndpointConfig, private []byte) (fabric.Endpoint, []byte, error) {
	if err := checkConfig(cfg); err != nil {
		return nil, nil, err
	}
	if len(private) > fabric.MaxPrivate {
		return nil, nil, fmt.Errorf("sim: dial %s: %d bytes of private data, more than %d", addr, len(private), fabric.MaxPrivate)
	}
	if err := ctx.Err(); err != nil {
		return nil, nil, err
	}
	c.n.mu.Lock()
	if c.err != nil {
		c.n.mu.Unlock()
		return nil, nil, fmt.Errorf("sim: dial: %w", c.err)
	}
	l := c.n.listeners[addr]
	if l == nil {
		c.n.mu.Unlock()
		return nil, nil, fmt.Errorf("sim: dial %s: nobody listens: %w", addr, fabric.ErrRefused)
	}
	r := &request{l: l, from: c, cfg: cfg, private: clone(private), done: make(chan struct{})}
	l.backlog = append(l.backlog, r)
	l.notify()
	c.dials[r] = struct{}{}
	c.n.mu.Unlock()

	select {
	case <-r.done:
	case <-ctx.Done():
	}

	c.n.mu.Lock()
	defer c.n.mu.Unlock()
	delete(c.dials, r)
	switch r.state {
	case reqAccepted:
		return r.ep, clone(r.reply), nil
	case reqRejected:
		return nil, nil, fmt.Errorf("sim: dial %s: rejected: %w", addr, fabric.ErrRefused)
	case reqAborted:
		return nil, nil, r.err
	}
	r.state = reqCanceled
	l.remove(r)
	return nil, nil, ctx.Err()
}

// Close closes every endpoint (its peers see it disconnect) and listener,
// ends the context's goroutines and drops its memory regions. It reports
// regions still registered, unless the context was killed.
func (c *Context) Close() error {
	c.n.mu.Lock()
	if c.closed {
		c.n.mu.Unlock()
		return fmt.Errorf("sim: close: %w", net.ErrClosed)
	}
	for e := range c.eps {
		e.closeLocked()
	}
	c.closed = true
	if c.err == nil {
		c.err = fmt.Errorf("sim: context closed: %w", net.ErrClosed)
	}
	c.shutLocked(c.err)
	leaked := len(c.byL)
	c.byL, c.byR = nil, nil
	dead := c.dead
	c.n.mu.Unlock()
	c.wg.Wait()
	if leaked > 0 && !dead {
		return fmt.Errorf("sim: context closed with %d memory regions still registered", leaked)
	}
	return nil
}

// shutLocked closes the listeners, fails the dials in flight and empties
// the completion queue of a context that is going away. The caller holds
// n.mu.
func (c *Context) shutLocked(err error) {
	for l := range c.listeners {
		l.closeLocked()
	}
	for r := range c.dials {
		r.l.remove(r)
		r.answer(reqAborted, fmt.Errorf("sim: dial: %w", err))
	}
	c.cq = nil
	c.signal()
}

func checkConfig(cfg fabric.EndpointConfig) error {
	if cfg.SendDepth < 0 || cfg.RecvDepth < 0 || cfg.MaxInline < 0 || cfg.SendDepth+cfg.RecvDepth == 0 {
		return fmt.Errorf("sim: bad endpoint config %+v", cfg)
	}
	return nil
}

func clone(b []byte) []byte {
	if len(b) == 0 {
		return nil
	}
	return append([]byte(nil), b...)
}
