package rdma

import (
	"context"
	"errors"
	"math"
	"os"
	"time"

	"github.com/xpu-go/xpu"
	"github.com/xpu-go/xpu/backends/rdma/internal/fabric"
	"github.com/xpu-go/xpu/backends/rdma/internal/verbs"
	"github.com/xpu-go/xpu/comm"
	"github.com/xpu-go/xpu/internal/grouptrack"
	"github.com/xpu-go/xpu/internal/jobenv"
	"github.com/xpu-go/xpu/internal/join"
	"github.com/xpu-go/xpu/xerr"
)

// Options of Open: the keys of xpu.Options the driver reads (see Options
// in the package documentation). Each sets what it names in the groups the
// backend makes and in the rank it joins.
const (
	// OptDevice names the RDMA device ("rxe0"); XPU_RDMA_DEVICE, else the
	// first device with an active port, by default.
	OptDevice = "device"
	// OptAddr is the IP address the connection manager binds; XPU_RDMA_ADDR,
	// else the IPv4 address of the device's active port, by default.
	OptAddr = "addr"
	// OptEagerLimit sets Config.EagerLimit: a size in bytes ("16K").
	OptEagerLimit = "eager_limit"
	// OptEagerBudget sets Config.EagerBudget: a size in bytes ("4M").
	OptEagerBudget = "eager_budget"
	// OptSlots sets Config.Slots.
	OptSlots = "slots"
	// OptSpin sets Config.Spin: a Go duration ("50us"); "-1ns" never spins.
	OptSpin = "spin"
	// OptTimeout sets Config.Timeout, the failure-detection bound: a
	// positive Go duration ("3s"); XPU_RDMA_TIMEOUT, else DefaultTimeout,
	// by default.
	OptTimeout = "timeout"
)

// EnvTimeout sets Config.Timeout in a job when no option does.
const EnvTimeout = "XPU_RDMA_TIMEOUT"

// envTimeout reads EnvTimeout: 0 when unset.
func envTimeout() (time.Duration, error) {
	v := os.Getenv(EnvTimeout)
	if v == "" {
		return 0, nil
	}
	d, err := time.ParseDuration(v)
	if err != nil || d <= 0 {
		return 0, xerr.Errorf(Name, "config", xpu.ErrInvalidArgument, "%s=%q: want a positive Go duration", EnvTimeout, v)
	}
	return d, nil
}

func init() { xpu.Register(Name, driver{}) }

type driver struct{}

// options are what Open reads.
type options struct {
	device, addr string
	cfg          Config
}

func parseOptions(opts xpu.Options) (options, error) {
	r := opts.Reader(Name)
	o := options{
		device: r.String(OptDevice, os.Getenv(EnvDevice)),
		addr:   r.String(OptAddr, os.Getenv(EnvAddr)),
	}
	o.cfg.EagerLimit = int(r.Bytes(OptEagerLimit, DefaultEagerLimit, 0, MaxEagerLimit))
	o.cfg.EagerBudget = int(r.Bytes(OptEagerBudget, DefaultEagerBudget, 1, math.MaxInt32))
	o.cfg.Slots = r.Int(OptSlots, DefaultSlots, 4, 1<<14)
	o.cfg.Spin = r.Duration(OptSpin, DefaultSpin, -1, time.Second)
	o.cfg.Timeout = r.Duration(OptTimeout, 0, time.Millisecond, math.MaxInt64)
	if err := r.Err(); err != nil {
		return o, xerr.Op(Name, "open", err)
	}
	if o.cfg.Timeout == 0 {
		d, err := envTimeout()
		if err != nil {
			return o, err
		}
		o.cfg.Timeout = d
	}
	if o.cfg.EagerLimit == 0 {
		o.cfg.EagerLimit = -1 // an option of 0: every message by rendezvous
	}
	return o, nil
}

// provider is the fabric the driver uses: the kernel's verbs.
var provider = verbs.Provider

// usable reports why the driver cannot open dev of prov, or nil.
func usable(prov fabric.Provider, dev string) ([]fabric.DeviceInfo, error) {
	devs, err := prov.Devices()
	if err != nil {
		return nil, xerr.Errorf(Name, "open", xpu.ErrUnavailable, "%w", err)
	}
	for _, d := range devs {
		if dev != "" && d.Name != dev {
			continue
		}
		for _, p := range d.Ports {
			if p.State == "ACTIVE" {
				return devs, nil
			}
		}
	}
	if dev != "" {
		return devs, xerr.Errorf(Name, "open", xpu.ErrUnavailable, "no RDMA device %q with an active port", dev)
	}
	return devs, xerr.Errorf(Name, "open", xpu.ErrUnavailable, "no RDMA device with an active port")
}

// Open returns a backend with Group, which makes groups of ranks in this
// process over the device, and — when the environment names a job (xpu
// run, mpirun, a PMIx or PMI launcher, srun) — Comm, this process's rank
// of that job, joined as FromEnv does. It has no memory space or
// executor. Without rdma-core (a build without -tags rdma) or without an
// RDMA device with an active port it fails with xpu.ErrUnavailable and the
// reason. Closing the backend closes Comm and every rank of its groups
// still open.
func (driver) Open(ctx context.Context, opts xpu.Options) (*xpu.Backend, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	o, err := parseOptions(opts)
	if err != nil {
		return nil, err
	}
	prov := provider()
	if _, err := usable(prov, o.device); err != nil {
		return nil, err
	}
	t := &grouptrack.Tracker[*Comm]{Backend: Name}
	b := &xpu.Backend{Name: Name, Group: groupFunc(t, prov, o)}
	b.OnClose(t.CloseAll)
	if join.InJob(jobenv.OS) {
		jc, err := jobFromEnv()
		if err != nil {
			return nil, err
		}
		c, err := joinJob(ctx, prov, o.device, o.addr, jc, o.cfg)
		if err != nil {
			return nil, err
		}
		b.Comm = c
		b.OnClose(c.Close)
	}
	return b, nil
}

// FromEnv joins the job described by the environment (as every
// multi-process backend reads it, docs/launching.md) and returns this process's rank, on the device XPU_RDMA_DEVICE
// names (else the first with an active port), the connection manager bound
// to XPU_RDMA_ADDR (else the port's IPv4 address). Joining is bounded by
// the join timeout and by ctx, whichever ends first.
func FromEnv(ctx context.Context) (*Comm, error) {
	return FromEnvConfig(ctx, Config{})
}

// FromEnvConfig is FromEnv with a Config of the protocol's settings.
func FromEnvConfig(ctx context.Context, cfg Config) (*Comm, error) {
	jc, err := jobFromEnv()
	if err != nil {
		return nil, err
	}
	if cfg.Timeout == 0 {
		if cfg.Timeout, err = envTimeout(); err != nil {
			return nil, err
		}
	}
	prov := provider()
	dev := os.Getenv(EnvDevice)
	if _, err := usable(prov, dev); err != nil {
		return nil, err
	}
	return joinJob(ctx, prov, dev, os.Getenv(EnvAddr), jc, cfg)
}

// Info describes the driver: available when built with rdma-core and a
// device has an active port; its devices with their ports, GIDs, MTU and
// largest memory region.
func (driver) Info(ctx context.Context) xpu.Info {
	in := xpu.Info{
		Name:     Name,
		Devices:  []xpu.Device{},
		Concepts: []string{"comm"},
		Capabilities: append(xpu.CapabilitiesOf((*Comm)(nil)),
			xpu.CapAnySource, xpu.CapAnyTag, xpu.CapCancel, xpu.CapEager, xpu.CapRendezvous, xpu.CapGroup,
			xpu.CapMultiprocess, xpu.CapAuthHMAC),
		ElementTypes: append([]string(nil), xpu.NumericTypes...),
	}
	devs, err := usable(provider(), os.Getenv(EnvDevice))
	if errors.Is(err, verbs.ErrNotBuilt) {
		// No call of this build can work: promise nothing.
		in.Reason = verbs.ErrNotBuilt.Error()
		in.Capabilities = []string{}
		return in
	}
	if verbs.Built {
		in.Library = "rdma-core (libibverbs.so.1, librdmacm.so.1)"
	}
	for i, d := range devs {
		in.Devices = append(in.Devices, deviceOf(i, d))
	}
	if err != nil {
		in.Reason = err.Error()
		if e, ok := err.(*xerr.Error); ok {
			in.Reason = e.Err.Error()
		}
		return in
	}
	in.Available = true
	return in
}

func deviceOf(i int, d fabric.DeviceInfo) xpu.Device {
	x := xpu.Device{Index: i, Name: d.Name, MemoryTotal: -1, MemoryFree: -1, Transport: d.Transport, MaxRegion: d.MaxMRSize}
	for _, p := range d.Ports {
		x.Ports = append(x.Ports, xpu.Port{Num: p.Num, State: p.State, LinkLayer: p.LinkLayer, MTU: p.MTU, Speed: p.Speed,
			GIDs: append([]string(nil), p.GIDs...), Netdev: p.Netdev, Addr: p.IPv4})
	}
	return x
}

// groupFunc makes groups of ranks in this process over the device,
// remembered by t so that closing the backend closes them.
func groupFunc(t *grouptrack.Tracker[*Comm], prov fabric.Provider, o options) comm.GroupFunc {
	return func(ctx context.Context, n int) ([]comm.Comm, error) {
		return t.Make(func() ([]*Comm, error) {
			host := o.addr
			if host == "" {
				var err error
				if host, err = deviceHost(prov, o.device); err != nil {
					return nil, err
				}
			}
			return newGroup(ctx, prov, o.device, host, n, o.cfg)
		})
	}
}
