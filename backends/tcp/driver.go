package tcp

import (
	"context"
	"fmt"
	"sync"

	"github.com/xpu-go/xpu"
	"github.com/xpu-go/xpu/comm"
)

// Name is the name the driver is registered under.
const Name = "tcp"

// Open options. Open ignores keys it does not know, so that one set of
// options can serve a fallback chain of backends.
const (
	// OptTimeout sets Config.Timeout (a Go duration, "3s").
	OptTimeout = "timeout"
	// OptEagerLimit sets Config.EagerLimit (bytes).
	OptEagerLimit = "eager_limit"
	// OptEagerBudget sets Config.EagerBudget (bytes).
	OptEagerBudget = "eager_budget"
)

func init() { xpu.Register(Name, driver{}) }

type driver struct{}

// Open returns a backend with Group, which makes loopback groups in this
// process, and — when the environment names a job (InJob: xpu run, mpirun,
// a PMI launcher, srun) — Comm, this process's rank of that job, joined as
// FromEnv does. It has no memory space or executor. Closing the backend
// closes Comm and every rank of its groups still open.
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
		cfg.EagerLimit, cfg.EagerBudget = tmpl.EagerLimit, tmpl.EagerBudget
		dctx := ctx
		if _, ok := ctx.Deadline(); !ok {
			var cancel context.CancelFunc
			dctx, cancel = context.WithTimeout(ctx, DefaultInitTimeout)
			defer cancel()
		}
		c, err := Dial(dctx, cfg)
		if err != nil {
			return nil, err
		}
		b.Comm = c
		b.OnClose(c.Close)
	}
	return b, nil
}

func optionsConfig(opts xpu.Options) (Config, error) {
	var cfg Config
	_, set := opts[OptTimeout]
	d, err := opts.Duration(OptTimeout, 0)
	if err != nil || set && d <= 0 {
		return cfg, opErr("open", opts.Invalid(OptTimeout, `a positive duration such as "3s"`))
	}
	cfg.Timeout = d
	if cfg.EagerLimit, err = opts.Int(OptEagerLimit, 0); err != nil {
		return cfg, opErr("open", err)
	}
	if cfg.EagerLimit > 1<<30 {
		return cfg, opErr("open", opts.Invalid(OptEagerLimit, "bytes, at most 1 GiB (negative: every message by rendezvous)"))
	}
	if cfg.EagerBudget, err = opts.Int(OptEagerBudget, 0); err != nil {
		return cfg, opErr("open", err)
	}
	if cfg.EagerBudget < 0 || cfg.EagerBudget > 1<<40 {
		return cfg, opErr("open", opts.Invalid(OptEagerBudget, "bytes, from 0 (the default) to 1 TiB"))
	}
	return cfg, nil
}

// Info describes the driver: always available, communication only.
func (driver) Info(ctx context.Context) xpu.Info {
	return xpu.Info{
		Name:      Name,
		Available: true,
		Devices:   []xpu.Device{},
		Concepts:  []string{"comm"},
		Capabilities: []string{"p2p", "anysource", "anytag", "cancel", "eager", "rendezvous", "group", "multiprocess",
			"collectives.native", "auth.hmac", "peer-lost.timeout"},
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
			return nil, opErr("new group", fmt.Errorf("backend closed: %w", comm.ErrClosed))
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
