package rdma

import (
	"bytes"
	"context"
	"fmt"
	"net"

	"github.com/xpu-go/xpu/backends/rdma/internal/fabric"
	"github.com/xpu-go/xpu/backends/tcp"
	"github.com/xpu-go/xpu/comm"
	"github.com/xpu-go/xpu/memspace"
	"github.com/xpu-go/xpu/xerr"
)

// Joining a job. The ranks of a job first form a job of the tcp backend
// over the same environment (XPU_* from xpu run, Open MPI's, PMIx's,
// PMI's and Slurm's variables; the rendezvous store at the master address;
// the job secret), as NCCL bootstraps over sockets: it authenticates every
// rank, and carries each rank's connection-manager address to the others.
// The ranks then connect their queue pairs (connect.go), and the tcp job
// is closed — unless every rank runs on this machine: then the ranks keep it
// for their collectives (nodecoll.go).

// addrLen is the fixed size of an address in the exchange.
const addrLen = 64

// join joins the job described by tcfg with this process's rank on device
// dev of prov, its connection manager bound to host.
func join(ctx context.Context, prov fabric.Provider, dev, host string, tcfg tcp.Config, cfg Config) (*Comm, error) {
	cfg, err := cfg.resolve()
	if err != nil {
		return nil, err
	}
	if host == "" {
		if host, err = deviceHost(prov, dev); err != nil {
			return nil, err
		}
	}
	boot, err := tcp.Dial(ctx, tcfg)
	if err != nil {
		return nil, err
	}
	keep := false
	defer func() {
		if !keep {
			_ = boot.Close()
		}
	}()
	fc, err := prov.Open(dev, cqDepth(cfg, boot.Size()))
	if err != nil {
		return nil, xerr.Errorf(Name, "join", errUnavailable, "open device %q: %v", dev, err)
	}
	c, err := newComm(cfg, boot.Rank(), boot.Size(), fc)
	if err != nil {
		_ = fc.Close()
		return nil, err
	}
	ln, err := fc.Listen(net.JoinHostPort(host, "0"))
	if err != nil {
		c.abandon()
		return nil, xerr.Errorf(Name, "join", errUnavailable, "listen on %s: %v", host, err)
	}
	addrs, err := exchange(ctx, boot, ln.Addr())
	if err == nil {
		err = c.connect(ctx, ln, addrs, tcfg.Secret)
	}
	_ = ln.Close()
	if err == nil {
		// Nobody leaves the bootstrap job before every rank is connected,
		// so a rank that failed to connect makes the others fail at once.
		err = comm.Barrier(ctx, boot)
	}
	if err != nil {
		c.abandon()
		return nil, xerr.Errorf(Name, "join", comm.ErrPeerLost, "rank %d of %d: %v", boot.Rank(), boot.Size(), err)
	}
	// The barrier was the tcp job's first collective: it knows whether its
	// collectives run in shared memory (nodecoll.go).
	if boot.OneNode() {
		keep = true
		c.node = newNodeJob(boot)
	}
	c.start()
	return c, nil
}

// exchange gathers every rank's address.
func exchange(ctx context.Context, boot comm.Comm, mine string) ([]string, error) {
	if len(mine) >= addrLen {
		return nil, fmt.Errorf("address %q too long", mine)
	}
	send := make([]byte, addrLen)
	copy(send, mine)
	recv := make([]byte, addrLen*boot.Size())
	sb, _ := memspace.FromSlice(send)
	rb, _ := memspace.FromSlice(recv)
	if err := comm.Allgather(ctx, boot, sb, rb); err != nil {
		return nil, fmt.Errorf("exchange addresses: %w", err)
	}
	addrs := make([]string, boot.Size())
	for i := range addrs {
		a := recv[i*addrLen : (i+1)*addrLen]
		addrs[i] = string(a[:bytes.IndexByte(append(a[:addrLen:addrLen], 0), 0)])
	}
	return addrs, nil
}

// deviceHost returns the IPv4 address of the first active port of dev
// (the first device with one for ""): where the connection manager binds.
func deviceHost(prov fabric.Provider, dev string) (string, error) {
	devs, err := prov.Devices()
	if err != nil {
		return "", xerr.Errorf(Name, "join", errUnavailable, "%v", err)
	}
	for _, d := range devs {
		if dev != "" && d.Name != dev {
			continue
		}
		for _, p := range d.Ports {
			if p.State == "ACTIVE" && p.IPv4 != "" {
				return p.IPv4, nil
			}
		}
	}
	if dev == "" {
		return "", xerr.Errorf(Name, "join", errUnavailable, "no RDMA device has an active port with an IPv4 address (set %s)", EnvAddr)
	}
	return "", xerr.Errorf(Name, "join", errUnavailable, "device %q has no active port with an IPv4 address (set %s)", dev, EnvAddr)
}

// Environment variables the rdma backend reads in a job.
const (
	// EnvDevice names the RDMA device to use ("rxe0", "mlx5_0"); the
	// first with an active port by default.
	EnvDevice = "XPU_RDMA_DEVICE"
	// EnvAddr is the IP address the connection manager binds: by default
	// the IPv4 address of the device's active port.
	EnvAddr = "XPU_RDMA_ADDR"
)
