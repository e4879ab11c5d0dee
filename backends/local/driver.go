package local

import (
	"context"
	"errors"
	"math"
	"sync"

	"github.com/xpu-go/xpu"
	"github.com/xpu-go/xpu/comm"
	"github.com/xpu-go/xpu/internal/p2p"
	"github.com/xpu-go/xpu/xerr"
)

// Name is the name the driver is registered under and the backend its
// errors name.
const Name = "local"

// Options of Open: the keys of xpu.Options the driver reads (see Options
// in the package documentation), sizes in bytes, a decimal integer with an
// optional unit K, M, G, T, P in powers of 1024 ("4096", "64K", "1 MiB").
// The procs backend reads the same keys with the same meaning.
const (
	// OptEagerLimit sets the largest message sent eagerly, from 0 (no
	// eager messages: Options.EagerLimit < 0) to math.MaxInt; default
	// DefaultEagerLimit.
	OptEagerLimit = "eager_limit"
	// OptEagerBudget sets Options.EagerBudget, from 1 to math.MaxInt;
	// default DefaultEagerBudget.
	OptEagerBudget = "eager_budget"
)

func init() { xpu.Register(Name, driver{}) }

type driver struct{}

// Open returns a backend whose Group makes in-process groups. It has no
// memory space, executor or job communicator. Closing the backend closes
// every rank of its groups still open.
//
// Its options are the Opt constants (see Options in the package
// documentation).
func (driver) Open(ctx context.Context, opts xpu.Options) (*xpu.Backend, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	r := opts.Reader(Name)
	var o Options
	o.EagerLimit, o.EagerBudget = p2p.Read(r, p2p.Bounds{
		DefaultLimit: DefaultEagerLimit, MaxLimit: math.MaxInt,
		DefaultBudget: DefaultEagerBudget, MaxBudget: math.MaxInt,
	})
	if err := r.Err(); err != nil {
		return nil, xerr.Op(Name, "open", err)
	}
	t := &tracker{groups: map[*[]comm.Comm]struct{}{}}
	b := &xpu.Backend{Name: Name, Group: t.groupFunc(o)}
	b.OnClose(t.closeAll)
	return b, nil
}

// Info describes the driver: always available, communication only.
func (driver) Info(ctx context.Context) xpu.Info {
	return xpu.Info{
		Name:      Name,
		Available: true,
		Devices:   []xpu.Device{},
		Concepts:  []string{"comm"},
		Capabilities: append(xpu.CapabilitiesOf((*Comm)(nil)),
			xpu.CapAnySource, xpu.CapAnyTag, xpu.CapCancel, xpu.CapEager, xpu.CapRendezvous, xpu.CapGroup, xpu.CapKill),
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
			return nil, xerr.Errorf(Name, "new group", comm.ErrClosed, "backend closed")
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
