package rdma

import (
	"cmp"
	"context"
	"fmt"

	"github.com/xpu-go/xpu/backends/procs"
	"github.com/xpu-go/xpu/backends/rdma/internal/fabric"
	"github.com/xpu-go/xpu/internal/join"
)

// NewGroupOn makes n ranks in this process over prov (tests).
func NewGroupOn(ctx context.Context, prov fabric.Provider, dev, host string, n int, cfg Config) ([]*Comm, error) {
	return newGroup(ctx, prov, dev, host, n, cfg)
}

// UseProvider makes the driver use prov until restore is called (tests).
func UseProvider(prov fabric.Provider) (restore func()) {
	old := provider
	provider = func() fabric.Provider { return prov }
	return func() { provider = old }
}

// JoinOn joins the job tcfg describes over prov (tests): its rank, size,
// master, secret and join timeout, and its links and node for the
// collectives of one machine.
func JoinOn(ctx context.Context, prov fabric.Provider, host string, tcfg procs.Config, cfg Config) (*Comm, error) {
	jc := jobConfig{form: join.Config{Rank: tcfg.Rank, Size: tcfg.Size, MasterAddr: tcfg.MasterAddr,
		Secret: tcfg.Secret, Listener: tcfg.Listener, Timeout: tcfg.JoinTimeout, Logger: tcfg.Logger, Logf: tcfg.Logf},
		shared: tcfg.Links != procs.LinkTCP, node: tcfg.Node, shmSpin: cmp.Or(tcfg.ShmSpin, procs.DefaultShmSpin)}
	return joinJob(ctx, prov, "", host, jc, cfg)
}

// FabricOf returns the fabric context of c (tests: to kill it).
func FabricOf(c *Comm) fabric.Context { return c.fc }

// HeldFrom returns the eager bytes c holds unmatched from peer.
func HeldFrom(c *Comm, peer int) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.peers[peer].held
}

// InjectRecv makes c act on msg as if it had arrived from peer in one of
// its receive slots (tests: a corrupted message).
func InjectRecv(c *Comm, peer int, msg []byte) {
	c.mu.Lock()
	defer c.mu.Unlock()
	p := c.peers[peer]
	s := p.recvBase
	copy(c.slotBytes(s), msg)
	c.onRecv(p, s, len(msg))
}

// ParseHeader exposes the header decoder to the fuzzer.
func ParseHeader(b []byte) error {
	_, err := parseHeader(b, len(b))
	return err
}

// ErrProtocolKind is ErrProtocol (tests).
var ErrProtocolKind = ErrProtocol

// FailLink forces c's queue pair to peer to the error state.
func FailLink(c *Comm, peer int) error {
	c.mu.Lock()
	ep := c.peers[peer].ep
	c.mu.Unlock()
	return ep.Fail()
}

// Crash makes c die as a killed process does: its device context is
// destroyed with no goodbye (the kernel tears its connections down).
func Crash(c *Comm) error { return c.fc.Close() }

// StrangerDuringJoin forms a job of 2 ranks in this process while a
// stranger — who holds another secret — connects to rank 0 first: it
// returns what the stranger was told and how forming the job went.
func StrangerDuringJoin(ctx context.Context, prov fabric.Provider, host string) (stranger, job error) {
	cfg, _ := Config{}.resolve()
	var cs []*Comm
	var lns []fabric.Listener
	addrs := make([]string, 2)
	defer func() {
		for _, ln := range lns {
			_ = ln.Close()
		}
		for _, c := range cs {
			if c.progressStarted {
				_ = c.Close()
			} else {
				c.abandon()
			}
		}
	}()
	for i := range 2 {
		fc, err := prov.Open("", cqDepth(cfg, 2))
		if err != nil {
			return nil, err
		}
		c, err := newComm(cfg, i, 2, fc)
		if err != nil {
			return nil, err
		}
		cs = append(cs, c)
		ln, err := fc.Listen(host + ":0")
		if err != nil {
			return nil, err
		}
		lns = append(lns, ln)
		addrs[i] = ln.Addr()
	}
	secret := newSecret()
	// The stranger: its own context, the right ranks, another secret.
	sfc, err := prov.Open("", 64)
	if err != nil {
		return nil, err
	}
	defer sfc.Close()
	errc := make(chan error, 1)
	go func() { errc <- cs[0].connect(ctx, lns[0], addrs, secret) }()
	ep, _, serr := sfc.Dial(ctx, addrs[0], fabric.EndpointConfig{SendDepth: 4, RecvDepth: 4}, hello(newSecret(), false, 1, 0, addrs[0]))
	if serr == nil {
		_ = ep.Close()
		serr = fmt.Errorf("the stranger was let in")
	}
	err1 := cs[1].connect(ctx, lns[1], addrs, secret)
	err0 := <-errc // unbounded: rank 0's connect ends with ctx, the caller's bounded context
	if err0 != nil || err1 != nil {
		return serr, fmt.Errorf("rank 0: %v; rank 1: %v", err0, err1)
	}
	for _, c := range cs {
		c.start()
	}
	return serr, nil
}

// RegStats returns the hits and misses of c's registration cache.
func RegStats(c *Comm) (hits, misses int) { return c.regs.stats() }

// Freeze makes c fall silent, as a stopped process does: it sends nothing
// more, heartbeats included.
func Freeze(c *Comm) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.mute = true
}

// SetPollHook makes f run after every poll of a completion queue, with the
// communicator and the number of completions taken (tests: to act in the
// window between a poll and what follows it); restore removes it.
func SetPollHook(f func(c *Comm, n int)) (restore func()) {
	pollHook.Store(&f)
	return func() { pollHook.Store(nil) }
}

// LossesRecorded is how many endpoint losses c's watchers have recorded.
func LossesRecorded(c *Comm) uint64 { return c.lossSeq.Load() }
