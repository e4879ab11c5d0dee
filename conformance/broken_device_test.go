package conformance_test

import (
	"context"
	"testing"

	"github.com/xpu-go/xpu/comm"
	"github.com/xpu-go/xpu/conformance"
	"github.com/xpu-go/xpu/memspace"
	"github.com/xpu-go/xpu/transfer"
)

// TestSuiteCatchesBrokenDeviceComms runs each TestBrokenDevice… test in a
// child process and checks that the cases of "comm/device" it is written
// for fail, and the others pass.
func TestSuiteCatchesBrokenDeviceComms(t *testing.T) {
	t.Parallel()
	runChildren(t, []childCase{
		// A communicator that claims device blocks and receives them into
		// a host scratch buffer it drops: every receive into a device
		// block is caught; the collectives, which stage, are not.
		{test: "TestBrokenDeviceDropped/^comm$/^device$", want: []string{
			"--- FAIL: TestBrokenDeviceDropped/comm/device/send-recv/n=2",
			"--- FAIL: TestBrokenDeviceDropped/comm/device/isend-irecv/n=2",
			"--- FAIL: TestBrokenDeviceDropped/comm/device/sendrecv/n=2",
			"--- FAIL: TestBrokenDeviceDropped/comm/device/mixed/n=2",
			"1 bytes device to device with comm.Send and comm.Recv: the received block, a block of fake-device: ",
			"a block the host cannot touch is either taken by the communicator (comm.DeviceNative)",
		}, absent: []string{
			"--- FAIL: TestBrokenDeviceDropped/comm/device/bcast",
			"--- FAIL: TestBrokenDeviceDropped/comm/device/allreduce",
			"--- FAIL: TestBrokenDeviceDropped/comm/device/allgather",
		}},
		// A communicator whose device receives are copied out only in
		// Wait, and only when they succeed: Test reports a receive done
		// before its bytes are in the block, and the prefix of a truncated
		// message never reaches its block.
		{test: "TestBrokenDeviceLateCopy/^comm$/^device$", want: []string{
			"--- FAIL: TestBrokenDeviceLateCopy/comm/device/isend-irecv/n=2",
			"--- FAIL: TestBrokenDeviceLateCopy/comm/device/truncated/n=2",
			"a device block of 1 bytes when Test first reported its receive done, a block of fake-device: ",
			"comm.Recv of a 100-byte message into a 40-byte device block (Status.Count ",
		}, absent: []string{
			"--- FAIL: TestBrokenDeviceLateCopy/comm/device/send-recv",
			"--- FAIL: TestBrokenDeviceLateCopy/comm/device/sendrecv",
		}},
		// Native collectives that claim device buffers and do nothing.
		{test: "TestBrokenDeviceCollectives/^comm$/^device$", want: []string{
			"--- FAIL: TestBrokenDeviceCollectives/comm/device/bcast/n=2",
			"--- FAIL: TestBrokenDeviceCollectives/comm/device/allreduce/n=2",
			"--- FAIL: TestBrokenDeviceCollectives/comm/device/allgather/n=2",
			"--- FAIL: TestBrokenDeviceCollectives/comm/device/mixed/n=2",
			"comm.Allreduce (sum, in place false) of 1 int32: the sum, a block of fake-device: ",
			"(this rank's buffers on the device, some ranks' on the host)",
		}, absent: []string{
			"--- FAIL: TestBrokenDeviceCollectives/comm/device/send-recv",
			"--- FAIL: TestBrokenDeviceCollectives/comm/device/isend-irecv",
			"--- FAIL: TestBrokenDeviceCollectives/comm/device/truncated",
			"--- FAIL: TestBrokenDeviceCollectives/comm/device/sendrecv",
		}},
	})
}

func TestBrokenDeviceDropped(t *testing.T) {
	onlyInChild(t)
	conformance.TestComm(t, wrappedGroup(func(c comm.Comm) comm.Comm { return droppedDevice{c} }),
		conformance.DeviceSpaces(newFakeDevice()))
}

// droppedDevice claims every device block (DeviceNative): it sends them
// as package comm would (staged), but receives them into host memory it
// then drops.
type droppedDevice struct{ comm.Comm }

func (c droppedDevice) Unwrap() comm.Comm               { return c.Comm }
func (c droppedDevice) TakesDevice(memspace.Block) bool { return true }

func (c droppedDevice) Isend(b memspace.Block, dest, tag int) (comm.Request, error) {
	return comm.Isend(c.Comm, b, dest, tag)
}

func (c droppedDevice) Irecv(b memspace.Block, source, tag int) (comm.Request, error) {
	if b.HostAccessible() || b.IsZero() {
		return c.Comm.Irecv(b, source, tag)
	}
	return c.Comm.Irecv(hostScratch(b.Len()), source, tag)
}

// hostScratch is n bytes of Go memory.
func hostScratch(n int) memspace.Block {
	b, err := memspace.FromSlice(make([]byte, n))
	if err != nil {
		panic(err)
	}
	return b.Block()
}

func TestBrokenDeviceLateCopy(t *testing.T) {
	onlyInChild(t)
	conformance.TestComm(t, wrappedGroup(func(c comm.Comm) comm.Comm { return lateCopy{droppedDevice{c}} }),
		conformance.DeviceSpaces(newFakeDevice()))
}

// lateCopy receives device blocks into host scratch memory and copies it
// into the block in Wait only, and only when the receive succeeded: Test
// reports the receive done before the copy, and the prefix of a truncated
// message never reaches the block.
type lateCopy struct{ droppedDevice }

func (c lateCopy) Irecv(b memspace.Block, source, tag int) (comm.Request, error) {
	if b.HostAccessible() || b.IsZero() {
		return c.Comm.Irecv(b, source, tag)
	}
	h := hostScratch(b.Len())
	r, err := c.Comm.Irecv(h, source, tag)
	if err != nil {
		return nil, err
	}
	return copyOnWait{r, b, h}, nil
}

type copyOnWait struct {
	comm.Request
	dst, h memspace.Block
}

func (r copyOnWait) Wait(ctx context.Context) (comm.Status, error) {
	st, err := r.Request.Wait(ctx)
	if err == nil {
		if cerr := transfer.CopyBlock(ctx, r.dst, r.h); cerr != nil && err == nil {
			err = cerr
		}
	}
	return st, err
}

func TestBrokenDeviceCollectives(t *testing.T) {
	onlyInChild(t)
	conformance.TestComm(t, wrappedGroup(func(c comm.Comm) comm.Comm { return idleDeviceColl{c} }),
		conformance.DeviceSpaces(newFakeDevice()))
}

// idleDeviceColl has native collectives that claim every call with a
// device buffer, and return at once having done nothing; they decline the
// others.
type idleDeviceColl struct{ comm.Comm }

var _ comm.Collectives = idleDeviceColl{}

func (c idleDeviceColl) Unwrap() comm.Comm { return c.Comm }

// claim returns nil, claiming the call, when a block is device memory.
func claim(bs ...memspace.Block) error {
	for _, b := range bs {
		if !b.IsZero() && !b.HostAccessible() {
			return nil
		}
	}
	return comm.ErrFallback
}

func (c idleDeviceColl) Barrier(context.Context) error { return comm.ErrFallback }
func (c idleDeviceColl) Bcast(_ context.Context, buf memspace.Block, _ int) error {
	return claim(buf)
}
func (c idleDeviceColl) Reduce(_ context.Context, send, recv memspace.Block, _ comm.DType, _ comm.Op, _ int) error {
	return claim(send, recv)
}
func (c idleDeviceColl) Allreduce(_ context.Context, send, recv memspace.Block, _ comm.DType, _ comm.Op) error {
	return claim(send, recv)
}
func (c idleDeviceColl) Gather(_ context.Context, send, recv memspace.Block, _ int) error {
	return claim(send, recv)
}
func (c idleDeviceColl) Scatter(_ context.Context, send, recv memspace.Block, _ int) error {
	return claim(send, recv)
}
func (c idleDeviceColl) Allgather(_ context.Context, send, recv memspace.Block) error {
	return claim(send, recv)
}
func (c idleDeviceColl) Alltoall(_ context.Context, send, recv memspace.Block) error {
	return claim(send, recv)
}
func (c idleDeviceColl) ReduceScatter(_ context.Context, send, recv memspace.Block, _ comm.DType, _ comm.Op) error {
	return claim(send, recv)
}
