package comm

import (
	"context"

	"github.com/xpu-go/xpu/flight"

	"github.com/xpu-go/xpu/memspace"
	"github.com/xpu-go/xpu/xerr"
)

// Blocking one-sided transfers that stage, as Send and Recv do (ADR 21):
// a local block the host cannot touch (device memory) moves through a
// host stand-in in its space's staging space, copied by the transfer
// paths in the stream order they keep, unless the communicator moves it
// itself (DeviceNative: procs copies it through the target's mapping of
// it, CUDA IPC). The OneSided methods of other communicators do not stage
// — like Isend, they refuse such a block with an error matching
// ErrNotSupported. A region is the transport's to reach: local
// and procs expose device memory, copying each transfer's bytes into and
// out of it with its space's copies (see OneSided.Expose).

// Put writes src into the region dst names, off bytes into it, and
// returns once the bytes are in place at the target (or ctx ends, or the
// transfer fails). A src the host cannot touch is staged.
func Put(ctx context.Context, c OneSided, src memspace.Block, dst RemoteKey, off int) (err error) {
	if !validComm(c) {
		return xerr.Detail(ErrInvalidArgument, "comm: Put: a nil communicator")
	}
	t := FlightRecorder(c).Post(flight.OpPut, dst.Rank, 0, int64(src.Len()))
	defer func() { endFlight(t, err) }()
	if !needsStage(src) || takesDevice(c, src) {
		r, err := c.Put(src, dst, off)
		if err != nil {
			return err
		}
		_, err = Await(ctx, r)
		return err
	}
	return stagedFrom(ctx, "put", src, func(h memspace.Block) (Request, error) { return c.Put(h, dst, off) })
}

// Get reads the region src names, from off bytes into it, into dst, and
// returns once the bytes are in dst (or ctx ends, or the transfer
// fails). A dst the host cannot touch is staged: the bytes land in a host
// stand-in first and are copied into dst once the Get has completed.
func Get(ctx context.Context, c OneSided, dst memspace.Block, src RemoteKey, off int) (err error) {
	if !validComm(c) {
		return xerr.Detail(ErrInvalidArgument, "comm: Get: a nil communicator")
	}
	t := FlightRecorder(c).Post(flight.OpGet, src.Rank, 0, int64(dst.Len()))
	defer func() { endFlight(t, err) }()
	if !needsStage(dst) || takesDevice(c, dst) {
		r, err := c.Get(dst, src, off)
		if err != nil {
			return err
		}
		_, err = Await(ctx, r)
		return err
	}
	s := &staging{name: "get"}
	h, err := s.standIn(dst)
	if err != nil {
		return err
	}
	s.out(dst, h)
	if err := s.start(ctx); err != nil {
		_ = s.free()
		return err
	}
	r, err := c.Get(h, src, off)
	if err != nil {
		_ = s.free()
		return err
	}
	_, err = Await(ctx, r)
	if err != nil {
		s.freeWhenSettled(r)
		return err
	}
	return s.finish(ctx, nil)
}
