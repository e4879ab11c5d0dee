package mpi

import (
	"fmt"

	"github.com/xpu-go/xpu"
	"github.com/xpu-go/xpu/xerr"
)

// Name is the name the driver is registered under.
const Name = "mpi"

// OptThreadLevel is the key of xpu.Options that sets Options.ThreadLevel:
// "multiple" (the default) or "serialized", in any case. It is the driver's
// only option (see Options in the package documentation).
const OptThreadLevel = "thread_level"

// Undefined is the color of Split for a rank that joins no new
// communicator (MPI_UNDEFINED).
const Undefined = -1

// ThreadLevel is an MPI thread support level (MPI_THREAD_SINGLE …
// MPI_THREAD_MULTIPLE).
type ThreadLevel int

// The thread levels, in MPI's order.
const (
	ThreadSingle     ThreadLevel = iota // MPI_THREAD_SINGLE
	ThreadFunneled                      // MPI_THREAD_FUNNELED
	ThreadSerialized                    // MPI_THREAD_SERIALIZED
	ThreadMultiple                      // MPI_THREAD_MULTIPLE
)

func (l ThreadLevel) String() string {
	switch l {
	case ThreadSingle:
		return "single"
	case ThreadFunneled:
		return "funneled"
	case ThreadSerialized:
		return "serialized"
	case ThreadMultiple:
		return "multiple"
	}
	return fmt.Sprintf("ThreadLevel(%d)", int(l))
}

// Options configure Open. The zero value asks for MPI_THREAD_MULTIPLE.
type Options struct {
	// ThreadLevel is the level asked of MPI_Init_thread: ThreadMultiple
	// (the zero value means ThreadMultiple) or ThreadSerialized. Below
	// ThreadMultiple — asked for, or all that MPI grants — every MPI call is
	// serialised behind one mutex and nothing blocks inside MPI. It takes
	// effect at the first Open of the process, which initialises MPI.
	ThreadLevel ThreadLevel
}

func (o Options) level() (ThreadLevel, error) {
	switch o.ThreadLevel {
	case 0, ThreadMultiple:
		return ThreadMultiple, nil
	case ThreadSerialized:
		return ThreadSerialized, nil
	}
	return 0, xerr.Errorf(Name, "open", xerr.ErrInvalidArgument, "thread level %v (want %v or %v)", o.ThreadLevel, ThreadMultiple, ThreadSerialized)
}

// parseOptions reads the driver's options, refusing a bad value and any
// key it does not know.
func parseOptions(opts xpu.Options) (Options, error) {
	r := opts.Reader(Name)
	multiple, serialized := ThreadMultiple.String(), ThreadSerialized.String()
	level := r.Choice(OptThreadLevel, multiple, multiple, serialized)
	if err := r.Err(); err != nil {
		return Options{}, xerr.Op(Name, "open", err)
	}
	o := Options{ThreadLevel: ThreadMultiple}
	if level == serialized {
		o.ThreadLevel = ThreadSerialized
	}
	return o, nil
}
