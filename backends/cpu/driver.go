package cpu

import (
	"context"
	"errors"
	"fmt"
	"math"
	"runtime"

	"github.com/xpu-go/xpu"
	"github.com/xpu-go/xpu/memspace"
	"github.com/xpu-go/xpu/transfer"
	"github.com/xpu-go/xpu/xerr"
)

// Name is the name the driver is registered under and the backend its
// errors name.
const Name = "cpu"

// Options of Open: the keys of xpu.Options the driver reads (see Options
// in the package documentation).
const (
	// OptWorkers sets the number of workers of the executor (NewExecutor):
	// an integer in [1, MaxWorkers]; GOMAXPROCS by default.
	OptWorkers = "workers"
	// OptLimit sets the cap on the bytes in use in the space
	// (SpaceOptions.Limit): a size in bytes from 1 to math.MaxInt64, with
	// an optional unit K, M, G, T, P in powers of 1024 ("64K", "2 GiB");
	// none by default.
	OptLimit = "limit"
	// OptHugePages, "true", backs blocks of 4 MiB and more with transparent
	// huge pages (SpaceOptions.HugePages); false by default.
	OptHugePages = "hugepages"
)

func init() {
	xpu.Register(Name, Driver{})
}

// Driver opens the CPU backend; it is registered as "cpu". Its options are
// the Opt constants (see Options in the package documentation).
type Driver struct{}

// Open returns a backend with a host Space as its memory and an Executor.
// While the backend is open, its executor's workers split large host to
// host copies: Open registers transfer.ParallelHost(exec) for "host" to
// "host", and Close removes it (the built-in memmove serves again, or the
// path of a cpu backend opened earlier and still open). Closing the backend closes both; a
// leak of blocks is reported then.
func (Driver) Open(ctx context.Context, opts xpu.Options) (*xpu.Backend, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	r := opts.Reader(Name)
	workers := r.Int(OptWorkers, 0, 1, MaxWorkers)
	so := SpaceOptions{
		Limit:     r.Bytes(OptLimit, 0, 1, math.MaxInt64),
		HugePages: r.Bool(OptHugePages, false),
	}
	if err := r.Err(); err != nil {
		return nil, xerr.Op(Name, "open", err)
	}
	if !sysHasMmap {
		return nil, xerr.Errorf(Name, "open", xpu.ErrUnavailable, "%s", errNoMmapText)
	}
	space := NewSpace(so)
	exec := NewExecutor(workers)
	b := &xpu.Backend{Name: Name, Memory: space, Spaces: []memspace.Space{space}, Exec: exec}
	unregister := transfer.Register("host", "host", transfer.ParallelHost(exec))
	// A component the user closed already is not an error of the backend's
	// Close. The space closes last, after the work that may use it.
	b.OnClose(func() error { return ignoreClosed(space.Close()) })
	b.OnClose(func() error {
		unregister()
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

// Info describes the host: the processor, its memory, and what the backend
// offers.
func (Driver) Info(ctx context.Context) xpu.Info {
	free, total, _ := memInfo()
	info := xpu.Info{
		Name:      Name,
		Available: sysHasMmap,
		Devices: []xpu.Device{{
			Index:       0,
			Name:        fmt.Sprintf("%s (%d threads)", cpuModel(), runtime.GOMAXPROCS(0)),
			MemoryTotal: total,
			MemoryFree:  free,
		}},
		Concepts: []string{"memory", "executor", "transfer"},
		Capabilities: append(xpu.CapabilitiesOf((*Space)(nil), (*Executor)(nil), (*Event)(nil)),
			xpu.CapMemoryLimit, xpu.CapParallelNested, xpu.CapParallelDynamic, xpu.CapTransferHostPar),
		ElementTypes: append(append([]string(nil), xpu.NumericTypes...),
			"bool", "fixed-size pointer-free structs and arrays"),
	}
	if !sysHasMmap {
		info.Reason = errNoMmapText
	}
	return info
}
