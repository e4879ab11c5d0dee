package tcp

import (
	"context"
	"math"
	"sync"
	"time"

	"github.com/xpu-go/xpu"
	"github.com/xpu-go/xpu/comm"
	"github.com/xpu-go/xpu/internal/eager"
	"github.com/xpu-go/xpu/internal/join"
	"github.com/xpu-go/xpu/xerr"
)

// Name is the name the driver is registered under.
const Name = "tcp"

// Open options: each sets the field of Config it names in the groups the
// backend makes and in the rank it joins. Open refuses any other key (a
// key scoped to another backend, "cpu.limit", is left to it).
const (
	// OptTimeout sets Config.Timeout: a positive Go duration ("3s").
	OptTimeout = "timeout"
	// OptEagerLimit sets Config.EagerLimit: a size in bytes ("16K") up to
	// MaxEagerLimit, 64 KiB by default; 0 sends every nonempty message by
	// rendezvous.
	OptEagerLimit = eager.OptLimit
	// OptEagerBudget sets Config.EagerBudget: a size in bytes ("4M") from
	// 1 byte to MaxEagerBudget, 4 MiB by default.
	OptEagerBudget = eager.OptBudget
	// OptJoinTimeout sets Config.JoinTimeout: a positive Go duration
	// ("90s"), DefaultJoinTimeout by default; it takes precedence over
	// XPU_JOIN_TIMEOUT.
	OptJoinTimeout = join.OptTimeout
)

func init() { xpu.Register(Name, driver{}) }

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
	t := &tracker{}
	b := &xpu.Backend{Name: Name, Group: t.groupFunc(tmpl)}
	b.OnClose(t.closeAll)
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
	limit, budget := eager.Read(r, eager.Bounds{
		DefaultLimit: DefaultEagerLimit, MaxLimit: MaxEagerLimit,
		DefaultBudget: DefaultEagerBudget, MaxBudget: MaxEagerBudget,
	})
	if err := r.Err(); err != nil {
		return Config{}, xerr.Op(Name, "open", err)
	}
	return Config{Timeout: timeout, JoinTimeout: joinTimeout, EagerLimit: limit, EagerBudget: budget}, nil
}

// Info describes the driver: always available, communication only.
func (driver) Info(ctx context.Context) xpu.Info {
	return xpu.Info{
		Name:      Name,
		Available: true,
		Devices:   []xpu.Device{},
		Concepts:  []string{"comm"},
		Capabilities: append(xpu.CapabilitiesOf((*Comm)(nil)),
			xpu.CapAnySource, xpu.CapAnyTag, xpu.CapCancel, xpu.CapEager, xpu.CapRendezvous, xpu.CapGroup,
			xpu.CapMultiprocess, xpu.CapAuthHMAC, xpu.CapPeerLostTimer),
		ElementTypes: append([]string(nil), xpu.NumericTypes...),
	}
}

// tracker remembers the loopback groups a backend made.
type tracker struct {
	mu     sync.Mutex
	closed bool
	groups [][]*Comm
}

func (t *tracker) groupFunc(tmpl Config) comm.GroupFunc {
	return func(ctx context.Context, n int) ([]comm.Comm, error) {
		t.mu.Lock()
		if t.closed {
			t.mu.Unlock()
			return nil, xerr.Errorf(Name, "new group", comm.ErrClosed, "backend closed")
		}
		t.mu.Unlock()
		cs, err := NewLoopbackGroupConfig(ctx, n, tmpl)
		if err != nil {
			return nil, err
		}
		t.mu.Lock()
		t.groups = append(t.groups, cs)
		t.mu.Unlock()
		out := make([]comm.Comm, n)
		for i, c := range cs {
			out[i] = c
		}
		return out, nil
	}
}

func (t *tracker) closeAll() error {
	t.mu.Lock()
	t.closed = true
	groups := t.groups
	t.groups = nil
	t.mu.Unlock()
	var wg sync.WaitGroup
	for _, cs := range groups {
		for _, c := range cs {
			wg.Add(1)
			go func() {
				defer wg.Done()
				_ = c.Close()
			}()
		}
	}
	wg.Wait()
	return nil
}
