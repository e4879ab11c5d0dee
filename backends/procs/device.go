package procs

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"unsafe"

	"github.com/xpu-go/xpu/comm"
	"github.com/xpu-go/xpu/flight"
	"github.com/xpu-go/xpu/internal/stage"
	"github.com/xpu-go/xpu/memspace"
	"github.com/xpu-go/xpu/transfer"
	"github.com/xpu-go/xpu/xerr"
)

// Blocks the host cannot touch (GPU memory). Comm is comm.DeviceNative:
// Isend and Irecv take such a block as it is, where its space has
// transfer paths to and from host memory, and move it in one of two ways
// (docs/adr/0041-device-blocks-on-procs-links.md):
//
//   - Mapped (ipc.go): to a peer on a shared-memory link, a block whose
//     space shares it (memspace.Sharer) is announced by its description
//     (memspace.Shared) instead of its bytes; the receiver maps it
//     (memspace.Importer), copies from it into its receive block with
//     transfer.CopyBlock, and answers, upon which the send completes. A
//     receiver that cannot map it answers with a clear-to-send, and the
//     bytes come through the link as those of any large message.
//   - Staged: everywhere else (a TCP link, a send to this rank, a block
//     its space cannot share) a send copies the block into a host
//     stand-in at Isend and sends the stand-in, freed once the send
//     completes; a receive into such a block takes an ordinary message
//     into a host stand-in allocated when the message matches, and
//     copies what arrived into the block before the receive completes.
//
// Host blocks never come here: Isend, Send, Irecv and Recv take this way
// only where they failed before, on a block that is not host-accessible.

// Paths of device messages, as DevicePath names them.
const (
	// DevicePathIPC: the receiver copied the last device message from
	// the sender's memory, mapped into its own (CUDA IPC).
	DevicePathIPC = "ipc"
	// DevicePathStaged: the last device message went through host
	// memory of both ranks, as bytes over the link.
	DevicePathStaged = "staged"
)

const (
	pathNone uint32 = iota
	pathIPC
	pathStaged
)

var _ comm.DeviceNative = (*Comm)(nil)

// devState is what a request of a block the host cannot touch carries
// (request.dev), and an unexpected announcement by mapping too.
type devState struct {
	blk   memspace.Block // the caller's block
	stand memspace.Block // its host stand-in; the zero Block while none
	// shared is the description an unexpected announcement carried.
	shared memspace.Shared
	// ipc says that a send was announced by its description (mapped).
	ipc bool
	// claim is taken by the one goroutine that settles the request: it
	// copies the stand-in out, frees it, and completes the request.
	claim atomic.Bool
}

// TakesDevice reports whether Isend and Irecv take b as it is
// (comm.DeviceNative): a block the host can touch, or one whose space has
// transfer paths to and from host memory — its staging space's
// (memspace.Stager), else the Go heap's.
func (c *Comm) TakesDevice(b memspace.Block) bool {
	if b.HostAccessible() || b.IsZero() {
		return true
	}
	sp := b.Space()
	if sp == nil {
		return false
	}
	host := stage.Space(sp)
	if _, err := transfer.Lookup(host, sp); err != nil {
		return false
	}
	_, err := transfer.Lookup(sp, host)
	return err == nil
}

// DevicePath says how the last message of a block the host cannot touch
// went between this rank and peer: DevicePathIPC when the receiver copied
// it from the sender's memory, mapped; DevicePathStaged when it went
// through host memory (a TCP link, this rank itself, a space that cannot
// share its memory, a receiver that cannot map it); "" before the first,
// and for a peer out of range.
func (c *Comm) DevicePath(peer int) string {
	if peer < 0 || peer >= c.size {
		return ""
	}
	switch c.devPaths[peer].Load() {
	case pathIPC:
		return DevicePathIPC
	case pathStaged:
		return DevicePathStaged
	}
	return ""
}

// notePath records the path of a device message with peer, and logs
// (debug) when the path changes.
func (c *Comm) notePath(peer int, p uint32) {
	if c.devPaths[peer].Swap(p) != p {
		name := DevicePathIPC
		if p == pathStaged {
			name = DevicePathStaged
		}
		c.logger().Debug("procs: device messages", "rank", c.rank, "peer", peer, "path", name)
	}
}

// isDevice reports whether the error err of hostArgs for buf is that buf
// is a block the host cannot touch: the call then takes the device way.
func isDevice(buf memspace.Block, err error) bool {
	return !buf.HostAccessible() && !buf.IsZero() && errors.Is(err, memspace.ErrNotHostAccessible)
}

// noPath is the error of a call op with a block whose space has no
// transfer path to and from host memory.
func noPath(op string, b memspace.Block) error {
	return xerr.Errorf(Name, op, memspace.ErrNotHostAccessible,
		"buffer %v is not host-accessible, and its space has no transfer path to and from host memory", b)
}

// isendDevice is Isend of buf, a block the host cannot touch: mapped by
// the peer when the link and the space allow it, else staged.
func (c *Comm) isendDevice(buf memspace.Block, dest, tag int) (comm.Request, error) {
	if !c.TakesDevice(buf) {
		return nil, noPath("send", buf)
	}
	r := &request{c: c, kind: kindSend, peer: dest, other: dest, tag: tag, dev: &devState{blk: buf}}
	r.Flight = c.flightPost(flight.OpSend, dest, tag, buf.Len())
	if dest != c.rank && buf.Len() > 0 {
		if l := c.links[dest]; l != nil && l.shm != nil {
			if s, ok := c.share(buf, dest); ok {
				if err := l.announceIPC(r, s); err != nil {
					r.Flight.End(err, false)
					return nil, err
				}
				return r, nil
			}
		}
	}
	c.notePath(dest, pathStaged)
	if err := r.dev.stageIn(); err != nil {
		r.Flight.End(err, false)
		return nil, err
	}
	r.buf = hostView(r.dev.stand)
	var err error
	if dest == c.rank {
		_, err = c.sendSelf(r)
	} else {
		var done bool
		if done, err = c.links[dest].sendMsg(r, r.buf, tag); err != nil {
			r.Flight.End(err, false)
		} else if done {
			r.Completed(r.sendStatus(), nil)
		}
	}
	if err != nil {
		_ = r.dev.free()
		return nil, err
	}
	if r.IsDone() && r.dev.claim.CompareAndSwap(false, true) {
		// Completed as it started (copied, or written at once): the
		// stand-in is no longer read.
		_ = r.dev.free()
	}
	return r, nil
}

// irecvDevice is Irecv into buf, a block the host cannot touch.
func (c *Comm) irecvDevice(buf memspace.Block, source, tag int) (comm.Request, error) {
	if !c.TakesDevice(buf) {
		return nil, noPath("recv", buf)
	}
	r := &request{c: c, kind: kindRecv, peer: source, tag: tag, dev: &devState{blk: buf}}
	r.Flight = c.flightPost(flight.OpRecv, source, tag, buf.Len())
	if _, err := c.irecv(r); err != nil {
		r.Flight.End(err, false)
		return nil, err
	}
	if r.IsDone() && r.dev.claim.CompareAndSwap(false, true) {
		// Completed as it started (a message held, or sent by this rank),
		// into a stand-in no one else knows of: copied out here.
		st, err := r.Result()
		st, err = r.dev.settle(r, st, err)
		return &settled{st: st, err: err}, nil
	}
	return r, nil
}

// sendDevice and recvDevice are Send and Recv of a block the host cannot
// touch: the request of Isend or Irecv, awaited as comm.Await does.
func (c *Comm) sendDevice(ctx context.Context, buf memspace.Block, dest, tag int) error {
	r, err := c.isendDevice(buf, dest, tag)
	if err != nil {
		return err
	}
	_, err = comm.Await(ctx, r)
	return err
}

func (c *Comm) recvDevice(ctx context.Context, buf memspace.Block, source, tag int) (comm.Status, error) {
	r, err := c.irecvDevice(buf, source, tag)
	if err != nil {
		return comm.Status{}, err
	}
	return comm.Await(ctx, r)
}

// settled is the request of a device receive that completed as it
// started: its outcome alone.
type settled struct {
	st  comm.Status
	err error
}

func (s *settled) Wait(context.Context) (comm.Status, error) { return s.st, s.err }
func (s *settled) Test() (comm.Status, bool, error)          { return s.st, true, s.err }
func (s *settled) Cancel() error                             { return nil }

// stageIn copies the whole block into a new host stand-in (a send).
func (d *devState) stageIn() error {
	if d.blk.Len() == 0 {
		return nil
	}
	h := allocStand(stage.Space(d.blk.Space()), d.blk.Len())
	// Isend takes no context: the copy is the device's, bounded by it.
	if err := transfer.CopyBlock(context.Background(), h, d.blk); err != nil {
		_ = stage.Free(h)
		return xerr.Op(Name, "send", fmt.Errorf("copying %v into its host stand-in: %w", d.blk, err))
	}
	d.stand = h
	return nil
}

// standIn gives the receive r a host stand-in for what fits of a message
// of n bytes, when the message matches it: r then takes the message as a
// receive into host memory does.
func (d *devState) standIn(r *request, n int) {
	k := min(n, d.blk.Len())
	if k == 0 || d.stand.Len() > 0 {
		return
	}
	d.stand = allocStand(stage.Space(d.blk.Space()), k)
	r.buf = hostView(d.stand)
}

// settle ends the request r, which its claim is taken for, with st and
// err: a receive copies the bytes its stand-in took (the whole message,
// or what fits of a truncated one) into the block; the stand-in is freed.
// It returns the request's outcome.
func (d *devState) settle(r *request, st comm.Status, err error) (comm.Status, error) {
	if d.stand.Len() == 0 {
		return st, err
	}
	if r.kind == kindRecv && (err == nil || errors.Is(err, comm.ErrTruncated)) {
		if n := min(st.Count, d.stand.Len()); n > 0 {
			if cerr := copyPrefix(d.blk, d.stand, n); cerr != nil {
				st, err = comm.Status{}, xerr.Op(Name, "recv", fmt.Errorf("copying the message from its host stand-in into %v: %w", d.blk, cerr))
			}
		}
	}
	if r.kind == kindRecv {
		r.buf = nil
	}
	if ferr := d.free(); ferr != nil && err == nil {
		err = xerr.Op(Name, r.op(), ferr)
	}
	return st, err
}

// free frees the stand-in, if any.
func (d *devState) free() error {
	h := d.stand
	d.stand = memspace.Block{}
	if err := stage.Free(h); err != nil {
		return fmt.Errorf("freeing the host stand-in %v: %w", h, err)
	}
	return nil
}

// op names the operation of the request r in errors.
func (r *request) op() string {
	if r.kind == kindRecv {
		return "recv"
	}
	return "send"
}

// copyPrefix copies the first n bytes of src into dst. It runs once the
// message has arrived, which is delivered whatever the caller's context.
func copyPrefix(dst, src memspace.Block, n int) error {
	d, err := dst.Slice(0, n)
	if err != nil {
		return err
	}
	s, err := src.Slice(0, n)
	if err != nil {
		return err
	}
	return transfer.CopyBlock(context.Background(), d, s)
}

// allocStand allocates a host stand-in of n bytes (n > 0) in sp, or on
// the Go heap when sp has none to give: a stand-in allocated once a
// message has matched has nowhere to fail to.
func allocStand(sp memspace.Space, n int) memspace.Block {
	if b, err := stage.Alloc(sp, n); err == nil {
		return b
	}
	return stage.Heap(n)
}

// hostView returns the bytes of a host block.
func hostView(b memspace.Block) []byte {
	if b.Len() == 0 {
		return nil
	}
	return unsafe.Slice((*byte)(b.HostPointer()), b.Len())
}

// bytesBlock returns p as a block of the Go heap's kind: a receive's host
// buffer, for a copy from a mapped block.
func bytesBlock(p []byte) memspace.Block {
	if len(p) == 0 {
		return memspace.NewBlock(memspace.GoHeap, 0, 0, nil)
	}
	ptr := unsafe.Pointer(unsafe.SliceData(p))
	return memspace.NewBlock(memspace.GoHeap, memspace.Addr(uintptr(ptr)), len(p), ptr)
}
