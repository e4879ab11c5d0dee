package procs

import (
	"context"
	"math"
	"time"

	"github.com/xpu-go/xpu"
	"github.com/xpu-go/xpu/comm"
	"github.com/xpu-go/xpu/internal/grouptrack"
	"github.com/xpu-go/xpu/internal/p2p"
	"github.com/xpu-go/xpu/internal/shm"
	"github.com/xpu-go/xpu/xerr"
)

// Name is the name the driver is registered under.
const Name = "procs"

// Options of Open: the keys of xpu.Options the driver reads (see Options
// in the package documentation). Each sets the field of Config it names in
// the groups the backend makes and in the rank it joins.
const (
	// OptTimeout sets Config.Timeout: a positive Go duration ("3s").
	OptTimeout = "timeout"
	// OptEagerLimit sets Config.EagerLimit: a size in bytes ("16K") up to
	// MaxEagerLimit, 64 KiB by default; 0 sends every nonempty message by
	// rendezvous.
	OptEagerLimit = "eager_limit"
	// OptEagerBudget sets Config.EagerBudget: a size in bytes ("4M") from
	// 1 byte to MaxEagerBudget, 4 MiB by default.
	OptEagerBudget = "eager_budget"
	// OptJoinTimeout sets Config.JoinTimeout: a positive Go duration
	// ("90s"), DefaultJoinTimeout by default; it takes precedence over
	// XPU_JOIN_TIMEOUT.
	OptJoinTimeout = "join_timeout"
	// OptLinks sets Config.Links: "auto" (the default), "tcp" or "shm";
	// it takes precedence over XPU_LINKS.
	OptLinks = "links"
	// OptShmRing sets Config.ShmRing: a size in bytes ("256K"), a power
	// of two from 4 KiB to 64 MiB, 256 KiB by default; it takes precedence
	// over XPU_SHM_RING.
	OptShmRing = "shm_ring"
)

func init() {
	xpu.Register(Name, driver{})
	// The backend's name before it was renamed (ADR 32).
	xpu.RegisterAlias(formerName, Name)
}

// formerName is the name the backend had, and answers to, as an alias.
const formerName = "tcp"

type driver struct{}

// Open returns a backend with Group, which makes loopback groups in this
// process, and — when the environment names a job (InJob: xpu run,
// mpirun, a PMIx or PMI launcher, srun) — Comm, this process's rank of
// that job, joined as FromEnv does: within the join timeout (the option
// join_timeout, else XPU_JOIN_TIMEOUT, else DefaultJoinTimeout) and ctx,
// whichever ends first. It has no memory space or executor.
// Closing the backend closes Comm and every rank of its groups still open.
func (driver) Open(ctx context.Context, opts xpu.Options) (*xpu.Backend, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	tmpl, err := optionsConfig(opts)
	if err != nil {
		return nil, err
	}
	links := opts.Reader(Name).String(OptLinks, "")
	t := &grouptrack.Tracker[*Comm]{Backend: Name}
	b := &xpu.Backend{Name: Name, Group: groupFunc(t, tmpl)}
	b.OnClose(t.CloseAll)
	if InJob() {
		cfg, err := ConfigFromEnv()
		if err != nil {
			return nil, err
		}
		if tmpl.Timeout != 0 {
			cfg.Timeout = tmpl.Timeout
		}
		if tmpl.JoinTimeout != 0 {
			cfg.JoinTimeout = tmpl.JoinTimeout
		}
		cfg.EagerLimit, cfg.EagerBudget = tmpl.EagerLimit, tmpl.EagerBudget
		if links != "" {
			cfg.Links = tmpl.Links
		}
		if tmpl.ShmRing != 0 {
			cfg.ShmRing = tmpl.ShmRing
		}
		c, err := Dial(ctx, cfg)
		if err != nil {
			return nil, err
		}
		b.Comm = c
		b.OnClose(c.Close)
	}
	return b, nil
}

// optionsConfig reads opts into the fields of a Config they set; Timeout
// and JoinTimeout stay zero (the default, or XPU_TCP_TIMEOUT and
// XPU_JOIN_TIMEOUT in a job) unless set.
func optionsConfig(opts xpu.Options) (Config, error) {
	r := opts.Reader(Name)
	timeout := r.Duration(OptTimeout, 0, time.Nanosecond, math.MaxInt64)
	joinTimeout := r.Duration(OptJoinTimeout, 0, time.Nanosecond, math.MaxInt64)
	limit, budget := p2p.Read(r, p2p.Bounds{
		DefaultLimit: DefaultEagerLimit, MaxLimit: MaxEagerLimit,
		DefaultBudget: DefaultEagerBudget, MaxBudget: MaxEagerBudget,
	})
	links := r.Choice(OptLinks, "auto", "auto", "tcp", "shm")
	ring := r.Bytes(OptShmRing, 0, shm.MinRing, shm.MaxRing)
	if err := r.Err(); err != nil {
		return Config{}, xerr.Op(Name, "open", err)
	}
	if ring&(ring-1) != 0 {
		return Config{}, xerr.Errorf(Name, "open", xerr.ErrInvalidArgument, "option %s=%d is not a power of two", OptShmRing, ring)
	}
	mode, _ := ParseLinkMode(links)
	return Config{Timeout: timeout, JoinTimeout: joinTimeout, EagerLimit: limit, EagerBudget: budget,
		Links: mode, ShmRing: int(ring)}, nil
}

// Info describes the driver: always available, communication only. Its
// devices are the kinds of link it makes: TCP sockets, and shared memory
// where this machine allows it (the reason where it does not), saying
// whether large messages go by single copy or through the rings (and why).
func (driver) Info(ctx context.Context) xpu.Info {
	caps := append(xpu.CapabilitiesOf((*Comm)(nil)),
		xpu.CapAnySource, xpu.CapAnyTag, xpu.CapCancel, xpu.CapEager, xpu.CapRendezvous, xpu.CapGroup,
		xpu.CapMultiprocess, xpu.CapAuthHMAC, xpu.CapPeerLostTimer)
	devs := []xpu.Device{{Index: 0, Name: "sockets", MemoryTotal: -1, MemoryFree: -1,
		Transport: "TCP: ranks on other nodes (all ranks with " + EnvLinks + "=tcp)"}}
	shmDev := xpu.Device{Index: 1, Name: "shared memory", MemoryTotal: -1, MemoryFree: -1}
	if ok, detail := shm.Probe(); ok {
		caps = append(caps, xpu.CapSharedMemory)
		shmDev.Transport = "ranks of one node: " + detail + "; large messages: " + singleCopyInfo() + "; " + ipcInfo()
	} else {
		shmDev.Transport = "unavailable here (" + detail + "): ranks of one node use TCP"
	}
	return xpu.Info{
		Name:         Name,
		Available:    true,
		Devices:      append(devs, shmDev),
		Concepts:     []string{"comm"},
		Capabilities: caps,
		ElementTypes: append([]string(nil), xpu.NumericTypes...),
	}
}

// groupFunc makes loopback groups of tmpl, remembered by t so that closing
// the backend closes them.
func groupFunc(t *grouptrack.Tracker[*Comm], tmpl Config) comm.GroupFunc {
	return func(ctx context.Context, n int) ([]comm.Comm, error) {
		return t.Make(func() ([]*Comm, error) { return NewLoopbackGroupConfig(ctx, n, tmpl) })
	}
}
