package cpu

import (
	"context"
	"errors"
	"fmt"
	"runtime"

	"github.com/xpu-go/xpu"
	"github.com/xpu-go/xpu/memspace"
	"github.com/xpu-go/xpu/xerr"
)

func init() {
	xpu.Register("cpu", Driver{})
	registerHostPath()
}

// Driver opens the CPU backend; it is registered as "cpu". Options:
//
//	workers    number of workers of the executor (1..MaxWorkers);
//	           default GOMAXPROCS
//	limit      cap on the bytes in use in the space: an integer with an
//	           optional suffix K, M, G, T, P (powers of 1024, "KiB" etc.
//	           also accepted; see xpu.Options.Bytes); default none
//	hugepages  "true" to back blocks of 4 MiB and more with transparent
//	           huge pages (SpaceOptions.HugePages); default false
//
// A bad value is an error matching xpu.ErrInvalidArgument. Other keys are
// ignored, so one set of options can serve a fallback chain of backends.
type Driver struct{}

// Open returns a backend with a host Space as its memory and an Executor.
// Closing the backend closes both; a leak of blocks is reported then.
func (Driver) Open(ctx context.Context, opts xpu.Options) (*xpu.Backend, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	cfg, err := parseOptions(opts)
	if err != nil {
		return nil, err
	}
	if !sysHasMmap {
		return nil, xerr.Op("cpu", "open", fmt.Errorf("%w: %s", xpu.ErrUnavailable, errNoMmapText))
	}
	space := NewSpace(cfg.space)
	exec := NewExecutor(cfg.workers)
	b := &xpu.Backend{Name: "cpu", Memory: space, Spaces: []memspace.Space{space}, Exec: exec}
	addCopyExec(exec)
	// A component the user closed already is not an error of the backend's
	// Close. The space closes last, after the work that may use it.
	b.OnClose(func() error { return ignoreClosed(space.Close()) })
	b.OnClose(func() error {
		removeCopyExec(exec)
		return ignoreClosed(exec.Close())
	})
	return b, nil
}

func ignoreClosed(err error) error {
	if errors.Is(err, xerr.ErrClosed) {
		return nil
	}
	return err
}

type config struct {
	workers int
	space   SpaceOptions
}

func parseOptions(opts xpu.Options) (config, error) {
	var c config
	bad := func(err error) (config, error) { return config{}, xerr.Op("cpu", "open", err) }
	// A value that does not parse and one out of range get the same
	// message, which gives the range.
	_, set := opts["workers"]
	n, err := opts.Int("workers", 0)
	if err != nil || set && (n < 1 || n > MaxWorkers) {
		return bad(opts.Invalid("workers", fmt.Sprintf("an integer in [1, %d]", MaxWorkers)))
	}
	c.workers = n
	_, set = opts["limit"]
	limit, err := opts.Bytes("limit", 0)
	if err != nil || set && limit <= 0 {
		return bad(opts.Invalid("limit", "a positive number of bytes such as 1073741824 or 1G"))
	}
	c.space.Limit = limit
	if c.space.HugePages, err = opts.Bool("hugepages", false); err != nil {
		return bad(err)
	}
	return c, nil
}

// Info describes the host: the processor, its memory, and what the backend
// offers.
func (Driver) Info(ctx context.Context) xpu.Info {
	free, total, _ := memInfo()
	info := xpu.Info{
		Name:      "cpu",
		Available: sysHasMmap,
		Devices: []xpu.Device{{
			Index:       0,
			Name:        fmt.Sprintf("%s (%d threads)", cpuModel(), runtime.GOMAXPROCS(0)),
			MemoryTotal: total,
			MemoryFree:  free,
		}},
		Concepts: []string{"memory", "executor", "transfer"},
		Capabilities: []string{"streams", "events.timing", "memory.stats", "memory.lookup",
			"memory.available", "memory.limit", "parallel.nested", "parallel.dynamic"},
		ElementTypes: append(append([]string(nil), xpu.NumericTypes...),
			"bool", "fixed-size pointer-free structs and arrays"),
	}
	if hostPathCapability != "" {
		info.Capabilities = append(info.Capabilities, hostPathCapability)
	}
	if !sysHasMmap {
		info.Reason = errNoMmapText
	}
	return info
}
