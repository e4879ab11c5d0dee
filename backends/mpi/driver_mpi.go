//go:build mpi

package mpi

import (
	"context"
	"runtime"
	"strconv"

	"github.com/xpu-go/xpu"
)

// Open opens this process's rank of MPI_COMM_WORLD (see the package
// function Open) as a backend with only Comm; closing the backend closes
// it. The option OptThreadLevel ("multiple" or "serialized") is read, and
// any other key not scoped to another backend refused.
func (driver) Open(ctx context.Context, opts xpu.Options) (*xpu.Backend, error) {
	o, err := parseOptions(opts)
	if err != nil {
		return nil, err
	}
	c, err := Open(ctx, o)
	if err != nil {
		return nil, err
	}
	b := &xpu.Backend{Name: Name, Comm: c}
	b.OnClose(c.Close)
	return b, nil
}

// baseCapabilities are the behaviour capabilities of every build with MPI;
// Info adds the concept-level ones of *Comm and the thread level's.
var baseCapabilities = []string{xpu.CapAnySource, xpu.CapAnyTag, xpu.CapCancelRecv,
	xpu.CapCollectivesNB, xpu.CapInPlace, xpu.CapSplit, xpu.CapDup}

// Info describes the driver without initialising MPI: the library version
// (MPI answers it before initialisation), the launch (rank and size from
// MPI once it is initialised, from the launcher's environment before), and
// the thread level once known, and GOMAXPROCS (see Speed in the package
// documentation).
func (driver) Info(ctx context.Context) xpu.Info {
	info := xpu.Info{
		Name:         Name,
		Available:    true,
		Devices:      []xpu.Device{},
		Concepts:     []string{"comm"},
		Capabilities: append(xpu.CapabilitiesOf((*Comm)(nil)), baseCapabilities...),
		ElementTypes: append([]string(nil), xpu.NumericTypes...),
	}
	lib.mu.Lock()
	state, provided := lib.state, lib.provided
	lib.mu.Unlock()
	rank, size, fromMPI := 0, 0, false
	switch state {
	case libUp:
		lock()
		rank, size = cRank(cWorld()), cSize(cWorld())
		unlock()
		fromMPI = true
		if serial {
			info.Capabilities = append(info.Capabilities, xpu.CapThreadsSerial)
		} else {
			info.Capabilities = append(info.Capabilities, xpu.CapThreadsMulti)
		}
	case libDown:
		info.Available = false
		info.Reason = "MPI was finalized in this process (its last communicator closed); MPI cannot be initialised twice"
	default:
		info.Capabilities = append(info.Capabilities, xpu.CapThreadsUnknown)
	}
	info.Library = LibraryVersion() + "; " + launchText(rank, size, fromMPI)
	if state == libUp {
		info.Library += "; thread level " + provided.String()
	}
	info.Library += "; " + procsText(runtime.GOMAXPROCS(0))
	return info
}

// procsText reports GOMAXPROCS for Info, and at 1 (a rank bound to one
// core, mpirun's default for up to 2 ranks) what it costs.
func procsText(n int) string {
	s := "GOMAXPROCS " + strconv.Itoa(n)
	if n == 1 {
		s += " (MPI calls of 20 µs or more run slower: give the rank 2 or more, e.g. mpirun --bind-to none or -x GOMAXPROCS=2)"
	}
	return s
}
