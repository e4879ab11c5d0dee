package sim

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"strconv"
	"sync"
	"time"

	"github.com/xpu-go/xpu/backends/rdma/internal/fabric"
)

// Network is one simulated fabric: the contexts opened through its
// providers reach each other and nothing else. Its zero value is not
// usable; call New.
type Network struct {
	mu        sync.Mutex
	rng       *rand.Rand
	maxDelay  time.Duration
	keys      map[uint32]struct{}
	listeners map[string]*listener
	nextPort  int
	nextHost  int
	paused    bool
	endpoints map[*endpoint]struct{}
	stats     Stats
}

// Option configures a Network.
type Option func(*Network)

// WithSeed seeds the Network's random choices: memory keys and delays.
// The default seed is fixed.
func WithSeed(seed uint64) Option {
	return func(n *Network) { n.rng = rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15)) }
}

// WithDelays makes every work request wait a random time below max before
// it executes, so that requests of different endpoints interleave in many
// orders. The default is no delay.
func WithDelays(max time.Duration) Option {
	return func(n *Network) { n.maxDelay = max }
}

// Stats counts what a Network executed.
type Stats struct {
	// Sends, Writes and Reads count requests executed successfully, and
	// SendBytes, WriteBytes and ReadBytes the bytes they moved.
	Sends, Writes, Reads             uint64
	SendBytes, WriteBytes, ReadBytes uint64
	// RNR counts SENDs that found no receive posted on the peer
	// (receiver not ready): a correct protocol never causes one.
	RNR uint64
	// Errors counts requests that completed with an error of their own
	// (RNR included); Flushed those flushed by an endpoint's failure.
	Errors, Flushed uint64
}

// New returns an empty Network.
func New(opts ...Option) *Network {
	n := &Network{
		keys:      make(map[uint32]struct{}),
		listeners: make(map[string]*listener),
		nextPort:  18515,
		endpoints: make(map[*endpoint]struct{}),
	}
	WithSeed(1)(n)
	for _, o := range opts {
		o(n)
	}
	return n
}

// Provider returns a provider for the host with IPv4 address ip, or, for
// "", the next of 10.0.0.1, 10.0.0.2, …. Its one device is "sim0"; every
// Context opened through it listens on ip.
func (n *Network) Provider(ip string) *Provider {
	n.mu.Lock()
	defer n.mu.Unlock()
	if ip == "" {
		n.nextHost++
		ip = fmt.Sprintf("10.%d.%d.%d", n.nextHost>>16&0xff, n.nextHost>>8&0xff, n.nextHost&0xff)
	}
	return &Provider{n: n, ip: ip}
}

// Stats returns the counts so far.
func (n *Network) Stats() Stats {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.stats
}

// Pause stops every endpoint from executing requests until Resume; posts
// still queue. It makes "after post, before execution" observable.
func (n *Network) Pause() {
	n.mu.Lock()
	n.paused = true
	n.mu.Unlock()
}

// Resume lets requests execute again after Pause.
func (n *Network) Resume() {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.paused = false
	for e := range n.endpoints {
		e.cond.Broadcast()
	}
}

// Kill simulates the death of the process owning c, a Context of this
// Network: its endpoints fail without a disconnect (their peers see them
// lost, and the oldest request each peer has not executed completes with
// ErrRemote, the rest flushed), its listeners close, its dials fail, its
// memory becomes unreachable, and its own Poll and Wait return an error.
// c must still be closed to end its goroutines.
func (n *Network) Kill(c fabric.Context) error {
	sc, ok := c.(*Context)
	if !ok || sc.n != n {
		return fmt.Errorf("sim: Kill: %T is not a context of this network", c)
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	if sc.err != nil {
		return fmt.Errorf("sim: Kill: %w", sc.err)
	}
	sc.dead = true
	sc.err = errors.New("sim: the process of this context was killed")
	for e := range sc.eps {
		e.enterError(sc.err, nil)
		e.peer.enterError(fmt.Errorf("sim: peer process died: %w", fabric.ErrRemote), errRetryExceeded)
	}
	sc.shutLocked(sc.err)
	return nil
}

var errRetryExceeded = fmt.Errorf("sim: transport retry counter exceeded (peer unreachable): %w", fabric.ErrRemote)

// newKey returns a memory key never handed out before. The caller holds mu.
func (n *Network) newKey() uint32 {
	for {
		k := n.rng.Uint32()
		if _, used := n.keys[k]; k != 0 && !used {
			n.keys[k] = struct{}{}
			return k
		}
	}
}

// delay returns a random delay for one request. The caller holds mu.
func (n *Network) delay() time.Duration {
	if n.maxDelay <= 0 {
		return 0
	}
	return time.Duration(n.rng.Int64N(int64(n.maxDelay)))
}

// freePort returns a port no listener of ip uses. The caller holds mu.
func (n *Network) freePort(ip string) int {
	for {
		p := n.nextPort
		n.nextPort++
		if n.nextPort > 65535 {
			n.nextPort = 1024
		}
		if _, used := n.listeners[net.JoinHostPort(ip, strconv.Itoa(p))]; !used {
			return p
		}
	}
}

// Provider is the provider of one simulated host.
type Provider struct {
	n  *Network
	ip string
}

var _ fabric.Provider = (*Provider)(nil)

// IP returns the host's IPv4 address.
func (p *Provider) IP() string { return p.ip }

// Devices lists the host's one device, "sim0".
func (p *Provider) Devices() ([]fabric.DeviceInfo, error) {
	return []fabric.DeviceInfo{p.info()}, nil
}

const (
	deviceName = "sim0"
	maxCQE     = 1 << 22
)

func (p *Provider) info() fabric.DeviceInfo {
	return fabric.DeviceInfo{
		Name:      deviceName,
		NodeGUID:  "5100:0000:0000:0001",
		Transport: "RoCE",
		FWVersion: "sim",
		MaxMRSize: 1 << 40,
		MaxQP:     1 << 16,
		MaxCQE:    maxCQE,
		MaxSGE:    1,
		Ports: []fabric.PortInfo{{
			Num:       1,
			State:     "ACTIVE",
			LinkLayer: "Ethernet",
			MTU:       4096,
			Speed:     "100 Gb/s",
			GIDs:      []string{"::ffff:" + p.ip},
			Netdev:    "sim0",
			IPv4:      p.ip,
		}},
	}
}

// Open opens "sim0" (or "") with a completion queue of cqDepth entries.
// The result is a *Context.
func (p *Provider) Open(name string, cqDepth int) (fabric.Context, error) {
	if name != "" && name != deviceName {
		return nil, fmt.Errorf("sim: no RDMA device %q (only %q)", name, deviceName)
	}
	if cqDepth <= 0 || cqDepth > maxCQE {
		return nil, fmt.Errorf("sim: completion queue depth %d out of range [1, %d]", cqDepth, maxCQE)
	}
	return &Context{
		n:         p.n,
		ip:        p.ip,
		info:      p.info(),
		cqDepth:   cqDepth,
		byL:       make(map[uint32]*region),
		byR:       make(map[uint32]*region),
		eps:       make(map[*endpoint]struct{}),
		listeners: make(map[*listener]struct{}),
		dials:     make(map[*request]struct{}),
	}, nil
}
