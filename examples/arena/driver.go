package arena

import (
	"context"
	"fmt"
	"strconv"

	"github.com/xpu-go/xpu"
	"github.com/xpu-go/xpu/memspace"
)

// DefaultCapacity is the arena's size when Open is given no "capacity".
const DefaultCapacity = 64 << 20

func init() { xpu.Register("arena", driver{}) }

type driver struct{}

// Open maps an arena of opts["capacity"] bytes (DefaultCapacity if unset).
func (driver) Open(ctx context.Context, opts xpu.Options) (*xpu.Backend, error) {
	capacity := DefaultCapacity
	if v, ok := opts["capacity"]; ok {
		n, err := strconv.Atoi(v)
		if err != nil || n <= 0 {
			return nil, fmt.Errorf("arena: capacity %q is not a positive integer: %w", v, xpu.ErrInvalidArgument)
		}
		capacity = n
	}
	s, err := NewSpace(capacity)
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
