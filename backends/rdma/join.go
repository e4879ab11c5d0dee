package rdma

import (
	"cmp"
	"context"
	"fmt"
	"net"

	"github.com/xpu-go/xpu/backends/rdma/internal/fabric"
	"github.com/xpu-go/xpu/comm"
	"github.com/xpu-go/xpu/internal/join"
	"github.com/xpu-go/xpu/xerr"
)

// joinJob joins the job jc describes with this process's rank on device dev
// of prov, its connection manager bound to host (see boot.go).
func joinJob(ctx context.Context, prov fabric.Provider, dev, host string, jc jobConfig, cfg Config) (*Comm, error) {
	cfg, err := cfg.resolve()
	if err != nil {
		return nil, err
	}
	if host == "" {
		if host, err = deviceHost(prov, dev); err != nil {
			return nil, err
		}
	}
	form := jc.form
	form.Backend, form.StepTimeout = Name, cfg.Timeout
	job, err := join.Dial(ctx, form)
	if err != nil {
		return nil, xerr.Op(Name, "join", fmt.Errorf("rank %d of %d: %w", form.Rank, form.Size, err))
	}
	defer job.Close()
	fc, err := prov.Open(dev, cqDepth(cfg, job.Size))
	if err != nil {
		return nil, xerr.Errorf(Name, "join", errUnavailable, "open device %q: %w", dev, err)
	}
	c, err := newComm(cfg, job.Rank, job.Size, fc)
	if err != nil {
		_ = fc.Close()
		return nil, err
	}
	ln, err := fc.Listen(net.JoinHostPort(host, "0"))
	if err != nil {
		c.abandon()
		return nil, xerr.Errorf(Name, "join", errUnavailable, "listen on %s: %w", host, err)
	}
	bound := cmp.Or(form.Timeout, join.DefaultTimeout)
	if bound < 0 {
		bound = bootStep
	}
	addrs, err := exchange(ctx, job, ln.Addr(), bound)
	if err == nil {
		err = c.connect(ctx, ln, addrs, form.Secret)
	}
	_ = ln.Close()
	if err == nil {
		// Nobody leaves the bootstrap before every rank is connected, so
		// a rank that failed to connect makes the others fail at once.
		err = meet(ctx, job, bound)
	}
	if err != nil {
		c.abandon()
		return nil, xerr.Errorf(Name, "join", comm.ErrPeerLost, "rank %d of %d: %w", job.Rank, job.Size, err)
	}
	c.start()
	node, err := setupNode(ctx, c, jc)
	if err != nil {
		_ = c.Close()
		return nil, xerr.Errorf(Name, "join", comm.ErrPeerLost, "rank %d of %d: the collectives of one machine: %w", job.Rank, job.Size, err)
	}
	c.mu.Lock()
	c.node = node
	c.mu.Unlock()
	return c, nil
}

// deviceHost returns the IPv4 address of the first active port of dev
// (the first device with one for ""): where the connection manager binds.
func deviceHost(prov fabric.Provider, dev string) (string, error) {
	devs, err := prov.Devices()
	if err != nil {
		return "", xerr.Errorf(Name, "join", errUnavailable, "%w", err)
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
