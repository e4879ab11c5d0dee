package arena

import (
	"context"
	"fmt"
	"math"

	"github.com/xpu-go/xpu"
	"github.com/xpu-go/xpu/memspace"
)

// DefaultCapacity is the arena's size when Open is given no "capacity".
const DefaultCapacity = 64 << 20

func init() { xpu.Register("arena", driver{}) }

type driver struct{}

// Open maps an arena of opts["capacity"] bytes (DefaultCapacity if unset):
// a count of bytes or a size such as "256MiB", as xpu.Options.Bytes reads
// it. A bad capacity is an error matching xpu.ErrInvalidArgument.
func (driver) Open(ctx context.Context, opts xpu.Options) (*xpu.Backend, error) {
	_, set := opts["capacity"]
	capacity, err := opts.Bytes("capacity", DefaultCapacity)
	if err != nil || set && (capacity <= 0 || capacity > math.MaxInt) {
		return nil, fmt.Errorf("arena: %w", opts.Invalid("capacity", `a positive size in bytes such as "268435456" or "256MiB"`))
	}
	s, err := NewSpace(int(capacity))
	if err != nil {
		return nil, err
	}
	b := &xpu.Backend{Memory: s, Spaces: []memspace.Space{s}, Exec: Serial{}}
	b.OnClose(s.Close)
	return b, nil
}

// Info describes the backend; it is always available.
func (driver) Info(ctx context.Context) xpu.Info {
	return xpu.Info{
		Name:         "arena",
		Available:    true,
		Devices:      []xpu.Device{{Index: 0, Name: "host arena", MemoryTotal: DefaultCapacity, MemoryFree: DefaultCapacity}},
		Concepts:     []string{"memory", "executor", "transfer"},
		Capabilities: []string{"memory.stats", "memory.lookup", "memory.available"},
		ElementTypes: xpu.NumericTypes,
	}
}
