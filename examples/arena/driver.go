package arena

import (
	"context"
	"math"

	"github.com/xpu-go/xpu"
	"github.com/xpu-go/xpu/memspace"
	"github.com/xpu-go/xpu/xerr"
)

// Name is the name the driver is registered under and the backend its
// errors name.
const Name = "arena"

// DefaultCapacity is the arena's size when Open is given no OptCapacity.
const DefaultCapacity = 64 << 20

// OptCapacity is the option that sets the arena's size: a size in bytes
// from 1 to math.MaxInt, as a count ("268435456") or with a unit in powers
// of 1024 ("256MiB").
const OptCapacity = "capacity"

func init() { xpu.Register(Name, driver{}) }

type driver struct{}

// Open maps an arena of OptCapacity bytes (DefaultCapacity if unset). A bad
// capacity is an error matching xpu.ErrInvalidArgument, and any other key
// one matching xpu.ErrUnknownOption (keys scoped to another backend,
// "cpu.limit", are skipped).
func (driver) Open(ctx context.Context, opts xpu.Options) (*xpu.Backend, error) {
	r := opts.Reader(Name)
	capacity := r.Bytes(OptCapacity, DefaultCapacity, 1, math.MaxInt)
	if err := r.Err(); err != nil {
		return nil, xerr.Op(Name, "open", err)
	}
	s, err := NewSpace(int(capacity))
	if err != nil {
		return nil, err
	}
	b := &xpu.Backend{Name: Name, Memory: s, Spaces: []memspace.Space{s}, Exec: Serial{}}
	b.OnClose(s.Close)
	return b, nil
}

// Info describes the backend; it is always available. Its capabilities are
// those its types implement.
func (driver) Info(ctx context.Context) xpu.Info {
	return xpu.Info{
		Name:         Name,
		Available:    true,
		Devices:      []xpu.Device{{Index: 0, Name: "host arena", MemoryTotal: DefaultCapacity, MemoryFree: DefaultCapacity}},
		Concepts:     []string{"memory", "executor", "transfer"},
		Capabilities: xpu.CapabilitiesOf((*Space)(nil), Serial{}),
		ElementTypes: xpu.NumericTypes,
	}
}
