package sim

import (
	"fmt"
	"net"
	"sync"
	"time"

	"github.com/xpu-go/xpu/backends/rdma/internal/fabric"
)

type epState uint8

const (
	epConnected epState = iota
	epFailed            // in the error state; err says why
	epClosed            // destroyed
)

// endpoint is one side of a reliable connection.
type endpoint struct {
	c    *Context
	cfg  fabric.EndpointConfig
	lost chan struct{}
	cond *sync.Cond // on c.n.mu: work queued, state changed, or resumed

	// Guarded by c.n.mu.
	peer      *endpoint
	state     epState
	err       error
	sq        []pending // posted, not executed
	rq        []posted  // receives posted, oldest first
	sendOut   int       // send requests posted and not yet retired by Poll
	recvOut   int       // receives posted and not yet retired by Poll
	unretired int       // unsignaled requests executed since the last send completion
}

var _ fabric.Endpoint = (*endpoint)(nil)

// pending is a send request waiting to execute.
type pending struct {
	wr     fabric.SendWR
	inline []byte // the bytes of an inline request, copied at post
	waited bool   // its random delay is over
}

// posted is a posted receive.
type posted struct {
	id  uint64
	sge fabric.SGE
}

// newEndpoint makes a connected endpoint of c and starts its goroutine.
// The caller holds n.mu.
func newEndpoint(c *Context, cfg fabric.EndpointConfig) *endpoint {
	e := &endpoint{c: c, cfg: cfg, lost: make(chan struct{}), cond: sync.NewCond(&c.n.mu)}
	c.eps[e] = struct{}{}
	c.n.endpoints[e] = struct{}{}
	c.wg.Add(1)
	go e.run()
	return e
}

// PostSend checks and queues wrs, all or none.
func (e *endpoint) PostSend(wrs ...fabric.SendWR) error {
	ps := make([]pending, len(wrs))
	for i, wr := range wrs {
		if err := e.check(wr); err != nil {
			return fmt.Errorf("sim: post send %d (id %d): %w", i, wr.ID, err)
		}
		ps[i].wr = wr
		if wr.Inline && wr.Local.Len > 0 {
			ps[i].inline = clone(memAt(wr.Local.Addr, int(wr.Local.Len)))
		}
	}
	n := e.c.n
	n.mu.Lock()
	defer n.mu.Unlock()
	if err := e.postable(); err != nil {
		return fmt.Errorf("sim: post send: %w", err)
	}
	if e.sendOut+len(ps) > e.cfg.SendDepth {
		return fmt.Errorf("sim: post send: send queue full (%d outstanding + %d > depth %d; slots free when Poll takes a signaled completion): %w",
			e.sendOut, len(ps), e.cfg.SendDepth, fabric.ErrLocal)
	}
	e.sq = append(e.sq, ps...)
	e.sendOut += len(ps)
	e.cond.Signal()
	return nil
}

// check validates a send request as ibv_post_send does.
func (e *endpoint) check(wr fabric.SendWR) error {
	switch wr.Op {
	case fabric.OpSend, fabric.OpWrite, fabric.OpRead:
	default:
		return fmt.Errorf("bad opcode %v: %w", wr.Op, fabric.ErrLocal)
	}
	if wr.HasImm && wr.Op != fabric.OpSend {
		return fmt.Errorf("immediate data on a %v: %w", wr.Op, fabric.ErrLocal)
	}
	if wr.Inline {
		if wr.Op == fabric.OpRead {
			return fmt.Errorf("inline read: %w", fabric.ErrLocal)
		}
		if int(wr.Local.Len) > e.cfg.MaxInline {
			return fmt.Errorf("inline %d bytes, more than MaxInline %d: %w", wr.Local.Len, e.cfg.MaxInline, fabric.ErrLocal)
		}
		if wr.Local.Len > 0 && wr.Local.Addr == 0 {
			return fmt.Errorf("inline from address 0: %w", fabric.ErrLocal)
		}
	}
	return nil
}

// postable says why e takes no requests. The caller holds n.mu.
func (e *endpoint) postable() error {
	switch e.state {
	case epFailed:
		return fmt.Errorf("endpoint in the error state: %w", e.err)
	case epClosed:
		return fmt.Errorf("endpoint closed: %w", net.ErrClosed)
	}
	return nil
}

// PostRecv posts a receive into sge. The SGE is checked when a message
// lands in it.
func (e *endpoint) PostRecv(id uint64, sge fabric.SGE) error {
	n := e.c.n
	n.mu.Lock()
	defer n.mu.Unlock()
	if err := e.postable(); err != nil {
		return fmt.Errorf("sim: post recv (id %d): %w", id, err)
	}
	if e.recvOut >= e.cfg.RecvDepth {
		return fmt.Errorf("sim: post recv (id %d): receive queue full (%d outstanding, depth %d; slots free when Poll takes their completions): %w",
			id, e.recvOut, e.cfg.RecvDepth, fabric.ErrLocal)
	}
	e.rq = append(e.rq, posted{id: id, sge: sge})
	e.recvOut++
	return nil
}

// Lost is closed once the endpoint is in the error state or closed.
func (e *endpoint) Lost() <-chan struct{} { return e.lost }

// Err says why the endpoint was lost; nil while it is connected.
func (e *endpoint) Err() error {
	e.c.n.mu.Lock()
	defer e.c.n.mu.Unlock()
	return e.err
}

// Fail puts the endpoint and its peer in the error state: its requests
// flush, the peer's oldest unexecuted send completes with ErrRemote and
// the rest flush.
func (e *endpoint) Fail() error {
	n := e.c.n
	n.mu.Lock()
	defer n.mu.Unlock()
	if e.state == epClosed {
		return fmt.Errorf("sim: fail: %w", net.ErrClosed)
	}
	if e.state == epConnected {
		e.enterError(fmt.Errorf("sim: endpoint failed by Fail: %w", fabric.ErrFlushed), nil)
		e.peer.enterError(fmt.Errorf("sim: peer endpoint failed: %w", fabric.ErrRemote), errRetryExceeded)
	}
	return nil
}

// Close disconnects: the requests of both sides flush and the peer sees
// the endpoint lost.
func (e *endpoint) Close() error {
	n := e.c.n
	n.mu.Lock()
	defer n.mu.Unlock()
	if e.state == epClosed {
		return fmt.Errorf("sim: close endpoint: %w", net.ErrClosed)
	}
	e.closeLocked()
	return nil
}

// closeLocked disconnects and destroys e. The caller holds n.mu.
func (e *endpoint) closeLocked() {
	if e.state == epConnected {
		e.enterError(fmt.Errorf("sim: endpoint closed: %w", fabric.ErrFlushed), nil)
		e.peer.enterError(fmt.Errorf("sim: peer disconnected: %w", fabric.ErrRemote), nil)
	}
	e.state = epClosed
	delete(e.c.eps, e)
	delete(e.c.n.endpoints, e)
	e.cond.Broadcast()
}

// enterError moves a connected endpoint to the error state: Lost closes and
// every outstanding request completes, the oldest send with head (when not
// nil) and the rest with ErrFlushed. The caller holds n.mu.
func (e *endpoint) enterError(err, head error) {
	if e.state != epConnected {
		return
	}
	e.state, e.err = epFailed, err
	close(e.lost)
	sq, rq := e.sq, e.rq
	e.sq, e.rq = nil, nil
	for i, p := range sq {
		ferr := head
		if i > 0 || head == nil {
			ferr = fmt.Errorf("sim: %v %d flushed: %w", p.wr.Op, p.wr.ID, fabric.ErrFlushed)
		}
		e.complete(p.wr, ferr)
	}
	for _, r := range rq {
		e.c.push(entry{
			c:     fabric.Completion{ID: r.id, Op: fabric.OpRecv, Err: fmt.Errorf("sim: recv %d flushed: %w", r.id, fabric.ErrFlushed)},
			ep:    e,
			recvs: 1,
		})
	}
	e.cond.Broadcast()
}

// complete reports the end of a send request. The caller holds n.mu.
func (e *endpoint) complete(wr fabric.SendWR, err error) {
	if err == nil && !wr.Signaled {
		e.unretired++
		return
	}
	e.c.push(entry{c: fabric.Completion{ID: wr.ID, Op: wr.Op, Err: err}, ep: e, sends: e.unretired + 1})
	e.unretired = 0
}

// run executes the send queue in order until the endpoint leaves the
// connected state.
func (e *endpoint) run() {
	n := e.c.n
	defer e.c.wg.Done()
	n.mu.Lock()
	defer n.mu.Unlock()
	for {
		for e.state == epConnected && (len(e.sq) == 0 || n.paused) {
			e.cond.Wait()
		}
		if e.state != epConnected {
			return
		}
		if p := &e.sq[0]; !p.waited && n.maxDelay > 0 {
			p.waited = true
			d := n.delay()
			n.mu.Unlock()
			time.Sleep(d)
			n.mu.Lock()
			continue
		}
		p := e.sq[0]
		e.sq[0] = pending{}
		e.sq = e.sq[1:]
		e.execute(p)
	}
}

// execute runs one send request. The caller holds n.mu.
func (e *endpoint) execute(p pending) {
	wr := p.wr
	st := &e.c.n.stats
	local := p.inline
	if !wr.Inline && wr.Local.Len > 0 {
		r := e.c.byL[wr.Local.LKey]
		if !r.contains(wr.Local.Addr, int(wr.Local.Len)) {
			e.fail(wr, fmt.Errorf("sim: %v %d: local protection error: [%#x, +%d) is not in a region of this context with lkey %#x: %w",
				wr.Op, wr.ID, wr.Local.Addr, wr.Local.Len, wr.Local.LKey, fabric.ErrLocal),
				fmt.Errorf("sim: peer endpoint failed (local protection error): %w", fabric.ErrRemote), errRetryExceeded)
			return
		}
		local = r.bytes(wr.Local.Addr, int(wr.Local.Len))
	}
	peer := e.peer
	switch wr.Op {
	case fabric.OpSend:
		if len(peer.rq) == 0 {
			st.RNR++
			e.fail(wr, fmt.Errorf("sim: send %d: receiver not ready (no receive posted on the peer; no RNR retry): %w", wr.ID, fabric.ErrRemote),
				fmt.Errorf("sim: a SEND arrived with no receive posted: %w", fabric.ErrRemote), nil)
			return
		}
		rv := peer.rq[0]
		peer.rq = peer.rq[1:]
		var rerr error
		switch r := peer.c.byL[rv.sge.LKey]; {
		case len(local) > int(rv.sge.Len):
			rerr = fmt.Errorf("sim: recv %d: local length error: a %d-byte message into %d bytes: %w", rv.id, len(local), rv.sge.Len, fabric.ErrLocal)
		case rv.sge.Len > 0 && !r.contains(rv.sge.Addr, int(rv.sge.Len)):
			rerr = fmt.Errorf("sim: recv %d: local protection error: [%#x, +%d) is not in a region of this context with lkey %#x: %w",
				rv.id, rv.sge.Addr, rv.sge.Len, rv.sge.LKey, fabric.ErrLocal)
		default:
			if len(local) > 0 {
				copy(r.bytes(rv.sge.Addr, len(local)), local)
			}
			peer.c.push(entry{
				c:     fabric.Completion{ID: rv.id, Op: fabric.OpRecv, Len: len(local), Imm: wr.Imm, HasImm: wr.HasImm},
				ep:    peer,
				recvs: 1,
			})
			st.Sends++
			st.SendBytes += uint64(len(local))
			e.complete(wr, nil)
			return
		}
		peer.c.push(entry{c: fabric.Completion{ID: rv.id, Op: fabric.OpRecv, Err: rerr}, ep: peer, recvs: 1})
		e.fail(wr, fmt.Errorf("sim: send %d: remote invalid request: the peer's receive failed: %w", wr.ID, fabric.ErrRemote),
			fmt.Errorf("sim: endpoint failed: %w", rerr), nil)
	case fabric.OpWrite, fabric.OpRead:
		var remote []byte
		if len(local) > 0 {
			r := peer.c.remote(wr.RKey)
			if !r.contains(uintptr(wr.RemoteAddr), len(local)) {
				e.fail(wr, fmt.Errorf("sim: %v %d: remote access error: [%#x, +%d) is not in a region of the peer with rkey %#x: %w",
					wr.Op, wr.ID, wr.RemoteAddr, len(local), wr.RKey, fabric.ErrRemote),
					fmt.Errorf("sim: endpoint failed: the peer's %v hit a bad remote address or key: %w", wr.Op, fabric.ErrRemote), nil)
				return
			}
			remote = r.bytes(uintptr(wr.RemoteAddr), len(local))
		}
		if wr.Op == fabric.OpWrite {
			copy(remote, local)
			st.Writes++
			st.WriteBytes += uint64(len(local))
		} else {
			copy(local, remote)
			st.Reads++
			st.ReadBytes += uint64(len(local))
		}
		e.complete(wr, nil)
	}
}

// fail completes wr with err and puts e (err) and its peer (perr, with
// phead for its oldest send) in the error state. The caller holds n.mu.
func (e *endpoint) fail(wr fabric.SendWR, err, perr, phead error) {
	e.complete(wr, err)
	e.enterError(err, nil)
	e.peer.enterError(perr, phead)
}
