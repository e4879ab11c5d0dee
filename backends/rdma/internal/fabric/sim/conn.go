package sim

import (
	"context"
	"errors"
	"fmt"
	"net"
	"slices"

	"github.com/xpu-go/xpu/backends/rdma/internal/fabric"
)

// listener accepts connection requests at one address.
type listener struct {
	c    *Context
	addr string

	// Guarded by c.n.mu.
	backlog []*request
	ready   chan struct{} // closed and replaced when backlog grows or l closes
	closed  bool
}

var _ fabric.Listener = (*listener)(nil)

func (l *listener) Addr() string { return l.addr }

// Accept returns the oldest request not yet taken.
func (l *listener) Accept(ctx context.Context) (fabric.Request, error) {
	n := l.c.n
	for {
		n.mu.Lock()
		if l.closed {
			n.mu.Unlock()
			return nil, fmt.Errorf("sim: accept on %s: %w", l.addr, net.ErrClosed)
		}
		if len(l.backlog) > 0 {
			r := l.backlog[0]
			l.backlog = l.backlog[1:]
			n.mu.Unlock()
			return r, nil
		}
		ch := l.ready
		n.mu.Unlock()
		select {
		case <-ch:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
}

// Close stops listening; requests not yet taken are refused.
func (l *listener) Close() error {
	l.c.n.mu.Lock()
	defer l.c.n.mu.Unlock()
	if l.closed {
		return fmt.Errorf("sim: close listener %s: %w", l.addr, net.ErrClosed)
	}
	l.closeLocked()
	return nil
}

// closeLocked closes l. The caller holds n.mu.
func (l *listener) closeLocked() {
	if l.closed {
		return
	}
	l.closed = true
	delete(l.c.n.listeners, l.addr)
	delete(l.c.listeners, l)
	for _, r := range l.backlog {
		r.answer(reqRejected, nil)
	}
	l.backlog = nil
	l.notify()
}

// notify wakes the goroutines in Accept. The caller holds n.mu.
func (l *listener) notify() {
	close(l.ready)
	l.ready = make(chan struct{})
}

// remove drops r from the backlog, if it is there. The caller holds n.mu.
func (l *listener) remove(r *request) {
	if i := slices.Index(l.backlog, r); i >= 0 {
		l.backlog = slices.Delete(l.backlog, i, i+1)
	}
}

type reqState uint8

const (
	reqPending  reqState = iota
	reqAccepted          // ep and reply are set
	reqRejected          // by the listener, or its closing
	reqAborted           // the dialing context closed or died; err says so
	reqCanceled          // the dialer gave up (its ctx ended)
)

// request is a connection request from a Dial in progress.
type request struct {
	l       *listener
	from    *Context
	cfg     fabric.EndpointConfig
	private []byte
	done    chan struct{} // closed once answered

	// Guarded by n.mu.
	state reqState
	ep    *endpoint // the dialer's endpoint
	reply []byte
	err   error
}

var _ fabric.Request = (*request)(nil)

func (r *request) Private() []byte { return clone(r.private) }

// answer settles a pending request. The caller holds n.mu.
func (r *request) answer(s reqState, err error) {
	if r.state != reqPending {
		return
	}
	r.state, r.err = s, err
	close(r.done)
}

// Accept connects the dialer: both endpoints are connected when it
// returns.
func (r *request) Accept(cfg fabric.EndpointConfig, reply []byte) (fabric.Endpoint, error) {
	if err := checkConfig(cfg); err != nil {
		return nil, err
	}
	if len(reply) > fabric.MaxPrivate {
		return nil, fmt.Errorf("sim: accept: %d bytes of private data, more than %d", len(reply), fabric.MaxPrivate)
	}
	n := r.l.c.n
	n.mu.Lock()
	if err := r.unanswered(); err != nil {
		n.mu.Unlock()
		return nil, fmt.Errorf("sim: accept: %w", err)
	}
	lc := r.l.c
	if lc.err != nil {
		n.mu.Unlock()
		return nil, fmt.Errorf("sim: accept: %w", lc.err)
	}
	local, remote := newEndpoint(lc, cfg), newEndpoint(r.from, r.cfg)
	local.peer, remote.peer = remote, local
	n.mu.Unlock()
	// Both sides' receives are posted before either can send, as
	// rdma_cm allows on a queue pair not yet connected.
	var perr error
	if r.cfg.PrePost != nil {
		perr = r.cfg.PrePost(remote)
	}
	if perr == nil && cfg.PrePost != nil {
		perr = cfg.PrePost(local)
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	err := perr
	if err == nil {
		err = r.unanswered()
	}
	if err == nil {
		err = lc.err
	}
	if err != nil {
		local.closeLocked()
		remote.closeLocked()
		if perr != nil {
			r.answer(reqAborted, fmt.Errorf("sim: prepost: %w", perr))
		}
		return nil, fmt.Errorf("sim: accept: %w", err)
	}
	r.ep, r.reply = remote, clone(reply)
	r.answer(reqAccepted, nil)
	return local, nil
}

// Reject refuses the request: the Dial fails with ErrRefused.
func (r *request) Reject() error {
	n := r.l.c.n
	n.mu.Lock()
	defer n.mu.Unlock()
	if err := r.unanswered(); err != nil {
		return fmt.Errorf("sim: reject: %w", err)
	}
	r.answer(reqRejected, nil)
	return nil
}

// unanswered says why r can no longer be answered. The caller holds n.mu.
func (r *request) unanswered() error {
	switch r.state {
	case reqPending:
		return nil
	case reqCanceled:
		return errors.New("the dialer gave up")
	case reqAborted:
		return r.err
	}
	return errors.New("request already answered")
}
