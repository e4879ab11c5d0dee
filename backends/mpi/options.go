package mpi

import (
	"fmt"
	"strings"

	"github.com/xpu-go/xpu"
)

// Name is the name the driver is registered under.
const Name = "mpi"

// OptThreadLevel is the xpu.Open option that sets Options.ThreadLevel:
// "multiple" (the default) or "serialized". Open ignores keys it does not
// know, so that one set of options can serve a fallback chain of backends.
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
	return 0, fmt.Errorf("mpi: thread level %v (want %v or %v): %w", o.ThreadLevel, ThreadMultiple, ThreadSerialized, xpu.ErrInvalidArgument)
}

// parseOptions reads the driver's keys of opts.
func parseOptions(opts xpu.Options) (Options, error) {
	var o Options
	if v, ok := opts[OptThreadLevel]; ok {
		switch strings.ToLower(strings.TrimSpace(v)) {
		case "", "multiple":
			o.ThreadLevel = ThreadMultiple
		case "serialized":
			o.ThreadLevel = ThreadSerialized
		default:
			return o, fmt.Errorf("mpi: option %s=%q (want multiple or serialized): %w", OptThreadLevel, v, xpu.ErrInvalidArgument)
		}
	}
	return o, nil
}
