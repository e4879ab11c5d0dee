package local

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/xpu-go/xpu"
	"github.com/xpu-go/xpu/comm"
)

// Name is the name the driver is registered under.
const Name = "local"

// Open options, decimal integers in bytes. Open ignores keys it does not
// know, so that one set of options can serve a fallback chain of backends.
const (
	// OptEagerLimit sets Options.EagerLimit (0: DefaultEagerLimit;
	// negative: no eager messages).
	OptEagerLimit = "eager_limit"
	// OptEagerBudget sets Options.EagerBudget (0: DefaultEagerBudget;
	// negative: no bound).
	OptEagerBudget = "eager_budget"
)

func init() { xpu.Register(Name, driver{}) }

type driver struct{}

// Open returns a backend whose Group makes in-process groups. It has no
// memory space, executor or job communicator. Closing the backend closes
// every rank of its groups still open.
func (driver) Open(ctx context.Context, opts xpu.Options) (*xpu.Backend, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	var o Options
	var err error
	if o.EagerLimit, err = opts.Int(OptEagerLimit, 0); err != nil {
		return nil, opErr("open", err)
	}
	if o.EagerBudget, err = opts.Int(OptEagerBudget, 0); err != nil {
		return nil, opErr("open", err)
	}
	t := &tracker{groups: map[*[]comm.Comm]struct{}{}}
	b := &xpu.Backend{Name: Name, Group: t.groupFunc(o)}
	b.OnClose(t.closeAll)
	return b, nil
}

// Info describes the driver: always available, communication only.
func (driver) Info(ctx context.Context) xpu.Info {
	return xpu.Info{
		Name:         Name,
		Available:    true,
		Devices:      []xpu.Device{},
		Concepts:     []string{"comm"},
		Capabilities: []string{"p2p", "blocking", "anysource", "anytag", "cancel", "eager", "rendezvous", "group", "kill"},
		ElementTypes: append([]string(nil), xpu.NumericTypes...),
	}
}

// tracker remembers the groups a backend made and not yet fully closed.
type tracker struct {
	mu     sync.Mutex
	closed bool
	groups map[*[]comm.Comm]struct{}
}

func (t *tracker) groupFunc(o Options) comm.GroupFunc {
	return func(ctx context.Context, n int) ([]comm.Comm, error) {
		t.mu.Lock()
		defer t.mu.Unlock()
		if t.closed {
			return nil, opErr("new group", fmt.Errorf("backend closed: %w", comm.ErrClosed))
		}
		key := new([]comm.Comm)
		cs, err := groupFunc(ctx, n, o, func() {
			t.mu.Lock()
			delete(t.groups, key)
			t.mu.Unlock()
		})
		if err != nil {
			return nil, err
		}
		*key = cs
		t.groups[key] = struct{}{}
		return cs, nil
	}
}

func (t *tracker) closeAll() error {
	t.mu.Lock()
	t.closed = true
	var all [][]comm.Comm
	for k := range t.groups {
		all = append(all, *k)
	}
	t.mu.Unlock()
	var errs []error
	for _, cs := range all {
		for _, c := range cs {
			errs = append(errs, c.Close())
		}
	}
	return errors.Join(errs...)
}
