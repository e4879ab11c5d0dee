package rdma

import (
	"context"

	"github.com/xpu-go/xpu/backends/rdma/internal/fabric"
	"github.com/xpu-go/xpu/backends/tcp"
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

// JoinOn joins the job tcfg describes over prov (tests).
func JoinOn(ctx context.Context, prov fabric.Provider, host string, tcfg tcp.Config, cfg Config) (*Comm, error) {
	return join(ctx, prov, "", host, tcfg, cfg)
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
