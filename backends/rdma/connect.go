package rdma

import (
	"cmp"
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/binary"
	"fmt"
	"sync"

	"github.com/xpu-go/xpu/backends/rdma/internal/fabric"
	"github.com/xpu-go/xpu/comm"
	"github.com/xpu-go/xpu/xerr"
)

// Connections. Every pair of ranks shares one reliable connected queue
// pair, set up through the connection manager as TCP connections are: the
// higher rank dials the lower rank's listener. The connection request
// carries the dialer's rank and an HMAC-SHA256 over the job secret, the
// two ranks and the listener's address; the reply carries the listener's
// own. A process without the secret is rejected, and the job goes on.

// ErrAuth reports a connection whose peer could not prove it holds the
// job secret: the same value as every backend's (xerr.ErrAuth), matching
// comm.ErrInvalidArgument. A rank that fails to connect for it fails its
// join with an error that matches comm.ErrPeerLost too.
var ErrAuth = xerr.ErrAuth

const (
	helloMagic = "XPUr"
	helloLen   = 4 + 4 + 4 + sha256.Size
)

// hello is the private data of a connection request (welcome false) or
// of its reply (welcome true) from rank from to rank to at addr.
func hello(secret []byte, welcome bool, from, to int, addr string) []byte {
	b := make([]byte, helloLen)
	copy(b, helloMagic)
	binary.LittleEndian.PutUint32(b[4:], uint32(from))
	binary.LittleEndian.PutUint32(b[8:], uint32(to))
	copy(b[12:], helloMAC(secret, welcome, from, to, addr))
	return b
}

func helloMAC(secret []byte, welcome bool, from, to int, addr string) []byte {
	m := hmac.New(sha256.New, secret)
	if welcome {
		m.Write([]byte("xpu-rdma-welcome\x00"))
	} else {
		m.Write([]byte("xpu-rdma-hello\x00"))
	}
	var n [8]byte
	binary.LittleEndian.PutUint32(n[:], uint32(from))
	binary.LittleEndian.PutUint32(n[4:], uint32(to))
	m.Write(n[:])
	m.Write([]byte(addr))
	return m.Sum(nil)
}

// checkHello verifies private data (which the connection manager may have
// padded) and returns the sender's rank.
func checkHello(secret []byte, b []byte, welcome bool, to int, addr string) (int, error) {
	if len(b) < helloLen || string(b[:4]) != helloMagic {
		return -1, xerr.Detail(ErrAuth, "%d bytes of private data that are not an xpu greeting", len(b))
	}
	from := int(binary.LittleEndian.Uint32(b[4:]))
	if int(binary.LittleEndian.Uint32(b[8:])) != to {
		return -1, xerr.Detail(ErrAuth, "a greeting for rank %d, not %d", binary.LittleEndian.Uint32(b[8:]), to)
	}
	if !hmac.Equal(b[12:helloLen], helloMAC(secret, welcome, from, to, addr)) {
		return -1, xerr.Detail(ErrAuth, "a greeting from %s rank %d without the job secret", map[bool]string{true: "listening", false: "dialing"}[welcome], from)
	}
	return from, nil
}

// newSecret makes a random secret for a group in this process.
func newSecret() []byte {
	b := make([]byte, 32)
	_, _ = rand.Read(b)
	return b
}

func (c *Comm) endpointConfig(p *peer) fabric.EndpointConfig {
	return fabric.EndpointConfig{
		SendDepth: c.sendDepth,
		RecvDepth: c.cfg.Slots,
		PrePost:   func(ep fabric.Endpoint) error { return c.prepost(p, ep) },
	}
}

// connect connects c to every peer: it dials the lower ranks at addrs and
// accepts the higher ones on ln (at addrs[c.rank]). Rejected strangers do
// not count.
func (c *Comm) connect(ctx context.Context, ln fabric.Listener, addrs []string, secret []byte) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var (
		wg    sync.WaitGroup
		mu    sync.Mutex
		first error
	)
	fail := func(err error) {
		mu.Lock()
		if first == nil {
			first = err
		}
		mu.Unlock()
		cancel()
	}
	if want := c.size - 1 - c.rank; want > 0 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := c.acceptAbove(ctx, ln, want, addrs[c.rank], secret); err != nil {
				fail(err)
			}
		}()
	}
	for j := range c.rank {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := c.dialBelow(ctx, j, addrs[j], secret); err != nil {
				fail(err)
			}
		}()
	}
	wg.Wait()
	return first
}

// setEP gives p its endpoint; false when it has one already.
func (c *Comm) setEP(p *peer, ep fabric.Endpoint) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if p.ep != nil {
		return false
	}
	p.ep = ep
	return true
}

// acceptAbove accepts the connections of the want ranks above this one on
// ln (at mine), rejecting requests that do not prove the secret.
func (c *Comm) acceptAbove(ctx context.Context, ln fabric.Listener, want int, mine string, secret []byte) error {
	for got := 0; got < want; {
		req, err := ln.Accept(ctx)
		if err != nil {
			return fmt.Errorf("accept the connections of ranks above %d: %w", c.rank, err)
		}
		from, err := checkHello(secret, req.Private(), false, c.rank, mine)
		if err != nil || from <= c.rank || from >= c.size {
			_ = req.Reject()
			continue
		}
		p := c.peers[from]
		ep, err := req.Accept(c.endpointConfig(p), hello(secret, true, c.rank, from, mine))
		if err != nil {
			return fmt.Errorf("accept rank %d: %w", from, err)
		}
		if !c.setEP(p, ep) {
			_ = ep.Close()
			continue
		}
		got++
	}
	return nil
}

// dialBelow connects to rank j, below this one, at addr, and checks that
// the answer proves the secret.
func (c *Comm) dialBelow(ctx context.Context, j int, addr string, secret []byte) error {
	p := c.peers[j]
	ep, reply, err := c.fc.Dial(ctx, addr, c.endpointConfig(p), hello(secret, false, c.rank, j, addr))
	if err != nil {
		return fmt.Errorf("connect to rank %d at %s: %w", j, addr, err)
	}
	if from, err := checkHello(secret, reply, true, c.rank, addr); err != nil || from != j {
		_ = ep.Close()
		if err == nil {
			err = fmt.Errorf("the answer came from rank %d", from)
		}
		return xerr.Detail(ErrAuth, "connect to rank %d at %s: %w", j, addr, err)
	}
	c.setEP(p, ep)
	return nil
}

// abandon releases a rank that never started (a failed group or join).
func (c *Comm) abandon() {
	for _, p := range c.peers {
		if p != nil && p.ep != nil {
			_ = p.ep.Close()
		}
	}
	c.regs.close()
	_ = c.fc.Deregister(c.mr)
	_ = c.fc.Close()
	_ = syscallMunmap(c.arena)
}

// newGroup makes n ranks in this process, each with its own context on the
// device named dev of prov, listening on host (an IP address).
func newGroup(ctx context.Context, prov fabric.Provider, dev, host string, n int, cfg Config) ([]*Comm, error) {
	if n < 1 {
		return nil, xerr.Errorf(Name, "group", comm.ErrInvalidArgument, "%d ranks", n)
	}
	cfg, err := cfg.resolve()
	if err != nil {
		return nil, err
	}
	cs := make([]*Comm, 0, n)
	lns := make([]fabric.Listener, 0, n)
	cleanup := func() {
		for _, ln := range lns {
			_ = ln.Close()
		}
		for _, c := range cs {
			c.abandon()
		}
	}
	addrs := make([]string, n)
	for i := range n {
		fc, err := prov.Open(dev, cqDepth(cfg, n))
		if err != nil {
			cleanup()
			return nil, xerr.Errorf(Name, "group", errUnavailable, "open device %q: %w", dev, err)
		}
		c, err := newComm(cfg, i, n, fc)
		if err != nil {
			_ = fc.Close()
			cleanup()
			return nil, err
		}
		cs = append(cs, c)
		ln, err := fc.Listen(host + ":0")
		if err != nil {
			cleanup()
			return nil, xerr.Errorf(Name, "group", errUnavailable, "listen on %s: %w", host, err)
		}
		lns = append(lns, ln)
		addrs[i] = ln.Addr()
	}
	secret := newSecret()
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i, c := range cs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = c.connect(ctx, lns[i], addrs, secret)
		}()
	}
	wg.Wait()
	for _, ln := range lns {
		_ = ln.Close()
	}
	lns = nil
	if err := cmp.Or(errs...); err != nil {
		cleanup()
		return nil, xerr.Errorf(Name, "group", comm.ErrPeerLost, "%w", err)
	}
	for _, c := range cs {
		c.start()
	}
	return cs, nil
}

// cqDepth sizes the completion queue for every endpoint's requests.
func cqDepth(cfg Config, n int) int {
	return max(n-1, 1)*(cfg.Slots+cfg.Slots+readDepth+oneDepth+4) + 16
}
