//go:build !mpi

package mpi

import (
	"context"

	"github.com/xpu-go/xpu"
	"github.com/xpu-go/xpu/comm"
	"github.com/xpu-go/xpu/memspace"
	"github.com/xpu-go/xpu/xerr"
)

// This file is the build without MPI (no -tags mpi): the same API, every
// entry point failing with an error matching xpu.ErrUnavailable, so that
// programs using the package build everywhere and say why at run time.

const noMPI = "built without MPI support: rebuild with -tags mpi (and libopenmpi-dev or libmpich-dev installed)"

// unavailable is the error of every entry point: "mpi open: built without
// MPI support: …: backend unavailable".
func unavailable(op string) error { return xerr.Errorf(Name, op, xpu.ErrUnavailable, "%s", noMPI) }

// Open reports that the package was built without MPI.
func (driver) Open(ctx context.Context, opts xpu.Options) (*xpu.Backend, error) {
	if _, err := parseOptions(opts); err != nil {
		return nil, err
	}
	return nil, unavailable("open")
}

// Info reports the driver unavailable, with the reason. It lists no
// capabilities: they describe what an opened backend does, and none can be
// opened in this build (the Comm below only fails), so even the
// concept-level ones its type would derive would promise what no call
// delivers.
func (driver) Info(ctx context.Context) xpu.Info {
	return xpu.Info{
		Name:         Name,
		Available:    false,
		Reason:       noMPI,
		Devices:      []xpu.Device{},
		Concepts:     []string{"comm"},
		Capabilities: []string{},
		ElementTypes: append([]string(nil), xpu.NumericTypes...),
	}
}

// Comm is a rank of an MPI communicator. In this build (without MPI) none
// can be made: Open fails, and the methods of a nil or zero Comm fail with
// an error matching xpu.ErrUnavailable.
type Comm struct{ _ [0]func() }

var (
	_ comm.Comm        = (*Comm)(nil)
	_ comm.Blocking    = (*Comm)(nil)
	_ comm.Collectives = (*Comm)(nil)
	_ comm.Notifier    = (*Comm)(nil)
)

// Open reports that the package was built without MPI.
func Open(ctx context.Context, o Options) (*Comm, error) { return nil, unavailable("open") }

// Provided reports that MPI is not initialised.
func Provided() (ThreadLevel, bool) { return 0, false }

// LibraryVersion returns the empty string: no MPI library is linked.
func LibraryVersion() string { return "" }

// Rank returns 0.
func (c *Comm) Rank() int { return 0 }

// Size returns 0.
func (c *Comm) Size() int { return 0 }

// TagUB returns 0.
func (c *Comm) TagUB() int { return 0 }

// Isend fails: no MPI.
func (c *Comm) Isend(buf memspace.Block, dest, tag int) (comm.Request, error) {
	return nil, unavailable("isend")
}

// Irecv fails: no MPI.
func (c *Comm) Irecv(buf memspace.Block, source, tag int) (comm.Request, error) {
	return nil, unavailable("irecv")
}

// Send fails: no MPI.
func (c *Comm) Send(ctx context.Context, buf memspace.Block, dest, tag int) error {
	return unavailable("send")
}

// Recv fails: no MPI.
func (c *Comm) Recv(ctx context.Context, buf memspace.Block, source, tag int) (comm.Status, error) {
	return comm.Status{}, unavailable("recv")
}

// Close does nothing.
func (c *Comm) Close() error { return nil }

// Split fails: no MPI.
func (c *Comm) Split(ctx context.Context, color, key int) (*Comm, error) {
	return nil, unavailable("split")
}

// Dup fails: no MPI.
func (c *Comm) Dup(ctx context.Context) (*Comm, error) { return nil, unavailable("dup") }

// Barrier fails: no MPI.
func (c *Comm) Barrier(ctx context.Context) error { return unavailable("barrier") }

// Bcast fails: no MPI.
func (c *Comm) Bcast(ctx context.Context, buf memspace.Block, root int) error {
	return unavailable("bcast")
}

// Reduce fails: no MPI.
func (c *Comm) Reduce(ctx context.Context, send, recv memspace.Block, dt comm.DType, op comm.Op, root int) error {
	return unavailable("reduce")
}

// Allreduce fails: no MPI.
func (c *Comm) Allreduce(ctx context.Context, send, recv memspace.Block, dt comm.DType, op comm.Op) error {
	return unavailable("allreduce")
}

// Gather fails: no MPI.
func (c *Comm) Gather(ctx context.Context, send, recv memspace.Block, root int) error {
	return unavailable("gather")
}

// Scatter fails: no MPI.
func (c *Comm) Scatter(ctx context.Context, send, recv memspace.Block, root int) error {
	return unavailable("scatter")
}

// Allgather fails: no MPI.
func (c *Comm) Allgather(ctx context.Context, send, recv memspace.Block) error {
	return unavailable("allgather")
}

// Alltoall fails: no MPI.
func (c *Comm) Alltoall(ctx context.Context, send, recv memspace.Block) error {
	return unavailable("alltoall")
}

// ReduceScatter fails: no MPI.
func (c *Comm) ReduceScatter(ctx context.Context, send, recv memspace.Block, dt comm.DType, op comm.Op) error {
	return unavailable("reduce-scatter")
}

// Expose fails: no MPI.
func (c *Comm) Expose(buf memspace.Block) (comm.Region, error) { return nil, unavailable("expose") }

// Put fails: no MPI.
func (c *Comm) Put(src memspace.Block, dst comm.RemoteKey, off int) (comm.Request, error) {
	return nil, unavailable("put")
}

// Get fails: no MPI.
func (c *Comm) Get(dst memspace.Block, src comm.RemoteKey, off int) (comm.Request, error) {
	return nil, unavailable("get")
}

// Flush fails: no MPI.
func (c *Comm) Flush(ctx context.Context, rank int) error { return unavailable("flush") }

// Notify fails: no MPI.
func (c *Comm) Notify(ctx context.Context, rank int, msg []byte) error {
	return unavailable("notify")
}

// WaitNotification fails: no MPI.
func (c *Comm) WaitNotification(ctx context.Context) (comm.Notification, error) {
	return comm.Notification{}, unavailable("wait-notification")
}
