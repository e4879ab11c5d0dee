package conformance

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/xpu-go/xpu/comm"
	"github.com/xpu-go/xpu/memspace"
)

// Device buffers in communicators: the section "comm/device" passes blocks
// of the spaces DeviceSpaces gives — device memory, which the host cannot
// touch, above all — to the calls of package comm: Send and Recv, the
// package functions Isend and Irecv, Sendrecv, and the collectives. Where
// the communicator takes such a block itself (comm.DeviceNative) it must
// move its bytes; elsewhere package comm stages it through host memory.
// Either way the bytes must arrive, and a receive must have put them in
// the device block by the time it reports completion.

// DeviceSpaces gives the section "comm/device" spaces whose blocks its
// cases pass to the communicator: a GPU's device memory above all, or
// any space with transfer paths to and from host memory. Rank r uses
// spaces[(r+k) % len(spaces)] for its k-th buffer of a case, so that with
// two spaces (two devices) neighbouring ranks use different ones. The
// spaces stay the caller's: open for the whole suite, and closed by the
// caller. Without the option the section is skipped, saying so.
//
// The cases hold the communicator to what package comm promises for such
// blocks (see Device memory in its documentation): a communicator that
// claims to take a block (DeviceNative) must deliver its bytes; one that
// does not gets host stand-ins, which any transport moves.
func DeviceSpaces(spaces ...memspace.Space) Option {
	return Option{func(c *config) { c.deviceSpaces = append([]memspace.Space(nil), spaces...) }}
}

// ruleDevice is what the cases of "comm/device" check.
var ruleDevice = rule{"a block the host cannot touch is either taken by the communicator (comm.DeviceNative), " +
	"which must then move its bytes, or staged by package comm through host memory; either way a receive's bytes " +
	"are in the block, and only there, when the receive reports completion (Wait, Test, WaitAll)", guideCommAnchor}

// Tags of the device cases.
const (
	devTag      = 400
	devTagTrunc = 450
)

// devSizes are the message lengths of the device cases: tiny, odd, and
// larger than the eager limit of most transports.
var devSizes = []int{1, 13, 70001}

// deviceCases are the cases of the section "device", in groups of at
// most maxRanks ranks.
func deviceCases(spaces []memspace.Space, maxRanks int) []rankCase {
	needs := needsDeviceSpaces(spaces)
	d := devCase{spaces}
	upTo := func(ns ...int) []int {
		var out []int
		for _, n := range ns {
			if n <= maxRanks {
				out = append(out, n)
			}
		}
		if len(out) == 0 {
			out = ns[:1]
		}
		return out
	}
	return []rankCase{
		{name: "send-recv", ns: []int{2}, span: 2, needs: needs, body: d.sendRecv, stall: ruleDevice},
		{name: "isend-irecv", ns: []int{2}, span: 2, needs: needs, body: d.isendIrecv, stall: ruleDevice},
		{name: "truncated", ns: []int{2}, span: 2, needs: needs, body: d.truncated, stall: ruleTruncated},
		{name: "sendrecv", ns: upTo(2, 3), capped: true, needs: needs, body: d.sendrecv, stall: ruleDevice},
		{name: "bcast", ns: upTo(1, 2, 3), needs: needs, body: d.bcast, stall: ruleCollective},
		{name: "allreduce", ns: upTo(1, 2, 3), needs: needs, body: d.allreduce, stall: ruleCollective},
		{name: "allgather", ns: upTo(1, 2, 3), needs: needs, body: d.allgather, stall: ruleCollective},
		{name: "mixed", ns: upTo(2, 3), needs: needs, body: d.mixed, stall: ruleCollective},
	}
}

// needsDeviceSpaces says why the device cases cannot run with spaces.
func needsDeviceSpaces(spaces []memspace.Space) func(comm.Comm) string {
	return func(comm.Comm) string {
		if len(spaces) == 0 {
			return "no device space: pass conformance.DeviceSpaces (device memory, say) to test device buffers in communicators"
		}
		for _, sp := range spaces {
			if _, why := newBlockIO(sp); why != "" {
				return why
			}
		}
		return ""
	}
}

// devCase holds the spaces of the device cases.
type devCase struct{ spaces []memspace.Space }

// devBlock is a block of a space for a device case: b, the first n bytes
// of an allocation with guard bytes after them, which no call may write.
type devBlock struct {
	all, b memspace.Block
	io     blockIO
	seed   int // of the guard's pattern
}

// alloc returns a block of n bytes of the space of rank me's k-th buffer,
// or of host memory when host is set, holding data (n bytes), followed by
// guard bytes.
func (d devCase) alloc(ctx context.Context, me, k int, host bool, data []byte) (*devBlock, error) {
	sp := memspace.Space(memspace.GoHeap)
	if !host {
		sp = d.spaces[(me+k)%len(d.spaces)]
	}
	n := len(data)
	io, why := newBlockIO(sp)
	if why != "" {
		return nil, errors.New(why)
	}
	var all memspace.Block
	if host {
		all = blk(make([]byte, n+guard))
	} else {
		var err error
		if all, err = sp.Allocate(n+guard, 0); err != nil {
			return nil, fmt.Errorf("Allocate(%d) in %s: %w", n+guard, sp.Name(), err)
		}
	}
	db := &devBlock{all: all, io: io, seed: n + 7*k + 1}
	b, err := all.Slice(0, n)
	if err == nil {
		db.b = b
		err = io.write(ctx, all, append(append([]byte(nil), data...), pattern(db.seed, guard)...))
	}
	if err != nil {
		_ = db.free()
		return nil, err
	}
	return db, nil
}

// read returns the block's bytes, and an error when its guard changed.
func (db *devBlock) read(ctx context.Context) ([]byte, error) {
	got, err := db.io.read(ctx, db.all)
	if err != nil {
		return nil, err
	}
	n := db.b.Len()
	if d := diff(pattern(db.seed, guard), got[n:]); d != "" {
		return nil, fmt.Errorf("the %d bytes after a %d-byte block of %s were written: %s: %v", guard, n, db.all.Space().Name(), d, ruleDevice)
	}
	return got[:n], nil
}

// check compares the block with want.
func (db *devBlock) check(ctx context.Context, what string, want []byte) error {
	got, err := db.read(ctx)
	if err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	if d := diff(want, got); d != "" {
		return fmt.Errorf("%s, a block of %s: %s: %v", what, db.all.Space().Name(), d, ruleDevice)
	}
	return nil
}

func (db *devBlock) free() error {
	if db.all.Space() == memspace.Space(memspace.GoHeap) {
		return nil
	}
	return db.all.Space().Free(db.all)
}

// freeAll frees blocks, keeping err or else the first error of a free.
func freeAll(err error, dbs ...*devBlock) error {
	for _, db := range dbs {
		if db == nil {
			continue
		}
		if ferr := db.free(); err == nil && ferr != nil {
			err = fmt.Errorf("Free: %w", ferr)
		}
	}
	return err
}

// sendRecv sends device blocks with comm.Send and receives them with
// comm.Recv: device to device, device to host and host to device.
func (d devCase) sendRecv(ctx context.Context, me, n int, cm comm.Comm) error {
	legs := []struct {
		from             int
		fromHost, toHost bool
		what             string
	}{
		{0, false, false, "device to device"},
		{1, false, true, "device to host"},
		{0, true, false, "host to device"},
	}
	for k, size := range devSizes {
		for l, leg := range legs {
			tag, seed := devTag+3*k+l, 10*k+l
			if err := d.oneMessage(ctx, me, cm, leg.from, tag, seed, size, leg.fromHost, leg.toHost); err != nil {
				return fmt.Errorf("%d bytes %s with comm.Send and comm.Recv: %w", size, leg.what, err)
			}
		}
	}
	return nil
}

// oneMessage sends size bytes from rank from to the other of ranks 0 and 1.
func (d devCase) oneMessage(ctx context.Context, me int, cm comm.Comm, from, tag, seed, size int, fromHost, toHost bool) error {
	if me == from {
		sb, err := d.alloc(ctx, me, 0, fromHost, pattern(seed, size))
		if err != nil {
			return err
		}
		return freeAll(comm.Send(ctx, cm, sb.b, 1-me, tag), sb)
	}
	rb, err := d.alloc(ctx, me, 1, toHost, make([]byte, size))
	if err != nil {
		return err
	}
	st, err := comm.Recv(ctx, cm, rb.b, from, tag)
	if err == nil {
		err = checkStatus("Recv", st, from, tag, size)
	}
	if err == nil {
		err = rb.check(ctx, "the received block", pattern(seed, size))
	}
	return freeAll(err, rb)
}

// isendIrecv: rank 0 starts a send of a device block of each size with
// comm.Isend, rank 1 a receive into a device block with comm.Irecv; rank
// 1 polls them with Test and, as each reports it done, reads its block —
// before any Wait. Then WaitAll and Wait report the same again.
func (d devCase) isendIrecv(ctx context.Context, me, n int, cm comm.Comm) error {
	var blocks []*devBlock
	var reqs []comm.Request
	for k, size := range devSizes {
		var db *devBlock
		var r comm.Request
		var err error
		if me == 0 {
			if db, err = d.alloc(ctx, me, k, false, pattern(100+k, size)); err == nil {
				if r, err = comm.Isend(cm, db.b, 1, devTag+k); err != nil {
					err = fmt.Errorf("comm.Isend of %d bytes: %w", size, err)
				}
			}
		} else if db, err = d.alloc(ctx, me, k, false, make([]byte, size)); err == nil {
			if r, err = comm.Irecv(cm, db.b, 0, devTag+k); err != nil {
				err = fmt.Errorf("comm.Irecv of %d bytes: %w", size, err)
			}
		}
		if db != nil {
			blocks = append(blocks, db)
		}
		if err != nil {
			cancelAll(reqs)
			return freeAll(err, blocks...)
		}
		reqs = append(reqs, r)
	}
	err := d.pollReceives(ctx, me, reqs, blocks)
	if err == nil {
		if werr := comm.WaitAll(ctx, reqs...); werr != nil {
			err = fmt.Errorf("comm.WaitAll: %w", werr)
		}
	} else {
		cancelAll(reqs)
	}
	return freeAll(err, blocks...)
}

// pollReceives is rank 1's part of isendIrecv (rank 0 has nothing to
// poll): Test each receive until it is done, and check its block then.
func (d devCase) pollReceives(ctx context.Context, me int, reqs []comm.Request, blocks []*devBlock) error {
	if me != 1 {
		return nil
	}
	for k, r := range reqs {
		size := devSizes[k]
		st, err, done := pollTest(ctx, r)
		switch {
		case !done && ctx.Err() == nil:
			return fmt.Errorf("Test of a receive of %d bytes into a device block never reported it done within %v: %v", size, lostBound, ruleTest)
		case !done || err != nil:
			return fmt.Errorf("Test of a receive of %d bytes into a device block: %w", size, err)
		}
		if err := checkStatus("Test of a receive into a device block", st, 0, devTag+k, size); err != nil {
			return err
		}
		if err := blocks[k].check(ctx, fmt.Sprintf("a device block of %d bytes when Test first reported its receive done", size), pattern(100+k, size)); err != nil {
			return err
		}
		if err := settled(ctx, fmt.Sprintf("a receive of %d bytes into a device block", size), r, st, nil); err != nil {
			return err
		}
	}
	return nil
}

// cancelAll cancels requests and waits for them briefly, so that none
// uses a block about to be freed.
func cancelAll(reqs []comm.Request) {
	for _, r := range reqs {
		_ = r.Cancel()
	}
	ctx, stop := context.WithTimeout(context.Background(), lostBound)
	defer stop()
	for _, r := range reqs {
		_, _ = r.Wait(ctx)
	}
}

// truncated receives messages longer than their device block, with
// comm.Recv and comm.Irecv: ErrTruncated, the first Status.Count bytes
// (the prefix a backend delivers, if any) in the block, the rest of the
// block unchanged, nothing written past it, and the message consumed: the
// next one arrives.
func (d devCase) truncated(ctx context.Context, me, n int, cm comm.Comm) error {
	msgs := []struct{ size, into int }{{100, 40}, {70001, 1000}}
	if me == 1 {
		for k, m := range msgs {
			for j, size := range []int{m.size, 10} {
				// How a send of a truncated message ends is the sender's
				// business; it must end.
				if err := comm.Send(ctx, cm, blk(pattern(200+2*k+j, size)), 0, devTagTrunc+k); isCtxErr(err) {
					return fmt.Errorf("Send of %d bytes: %w", size, err)
				}
			}
		}
		return nil
	}
	for k, m := range msgs {
		initial := pattern(300+k, m.into)
		db, err := d.alloc(ctx, me, k, false, initial)
		if err != nil {
			return err
		}
		var st comm.Status
		how := "comm.Recv"
		if k%2 == 0 {
			st, err = comm.Recv(ctx, cm, db.b, 1, devTagTrunc+k)
		} else {
			how = "comm.Irecv"
			var r comm.Request
			if r, err = comm.Irecv(cm, db.b, 1, devTagTrunc+k); err == nil {
				st, err = r.Wait(ctx)
			}
		}
		what := fmt.Sprintf("%s of a %d-byte message into a %d-byte device block", how, m.size, m.into)
		if !errors.Is(err, comm.ErrTruncated) {
			return freeAll(fmt.Errorf("%s: error %v, want ErrTruncated: %v", what, err, ruleTruncated), db)
		}
		c := min(max(st.Count, 0), m.into)
		want := append(pattern(200+2*k, m.size)[:c:c], initial[c:]...)
		if err := db.check(ctx, fmt.Sprintf("%s (Status.Count %d)", what, st.Count), want); err != nil {
			return freeAll(err, db)
		}
		// The message after it arrives whole.
		if err := freeAll(nil, db); err != nil {
			return err
		}
		if db, err = d.alloc(ctx, me, k, false, make([]byte, m.into)); err != nil {
			return err
		}
		st, err = comm.Recv(ctx, cm, db.b, 1, devTagTrunc+k)
		if err == nil {
			err = checkStatus("the message after a truncated one (the truncated one must be consumed)", st, 1, devTagTrunc+k, 10)
		}
		if err == nil {
			want := append(pattern(201+2*k, 10), make([]byte, m.into-10)...)
			err = db.check(ctx, "the message after a truncated one", want)
		}
		if err := freeAll(err, db); err != nil {
			return fmt.Errorf("after %s: %w", what, err)
		}
	}
	return nil
}

// sendrecv exchanges device blocks around a ring with comm.Sendrecv.
func (d devCase) sendrecv(ctx context.Context, me, n int, cm comm.Comm) error {
	next, prev := (me+1)%n, (me+n-1)%n
	for k, size := range devSizes {
		sb, err := d.alloc(ctx, me, 0, false, pattern(500+me+10*k, size))
		if err != nil {
			return err
		}
		rb, err := d.alloc(ctx, me, 1, false, make([]byte, size))
		if err != nil {
			return freeAll(err, sb)
		}
		st, err := comm.Sendrecv(ctx, cm, sb.b, next, devTag+k, rb.b, prev, devTag+k)
		if err == nil {
			err = checkStatus("Sendrecv", st, prev, devTag+k, size)
		}
		if err == nil {
			err = rb.check(ctx, "the block Sendrecv received", pattern(500+prev+10*k, size))
		}
		if err := freeAll(err, sb, rb); err != nil {
			return fmt.Errorf("comm.Sendrecv of %d bytes of device memory around a ring: %w", size, err)
		}
	}
	return nil
}

// devCounts are the int32 counts of the device collectives.
var devCounts = []int{1, 1000, 40003}

// onDevice tells whether rank me's buffers are on the device in a case
// that mixes memory kinds, or (all) in one that does not.
type onDevice func(me int) bool

func allOnDevice(int) bool     { return true }
func evenOnDevice(me int) bool { return me%2 == 0 }

// bcast broadcasts device blocks from each root.
func (d devCase) bcast(ctx context.Context, me, n int, cm comm.Comm) error {
	return d.bcastOn(ctx, me, n, cm, allOnDevice)
}

func (d devCase) bcastOn(ctx context.Context, me, n int, cm comm.Comm, dev onDevice) error {
	for _, root := range roots(n) {
		for _, size := range devSizes {
			data := make([]byte, size)
			if me == root {
				data = pattern(600+root, size)
			}
			db, err := d.alloc(ctx, me, 0, !dev(me), data)
			if err != nil {
				return err
			}
			err = comm.BcastBlock(ctx, cm, db.b, root)
			if err == nil {
				err = db.check(ctx, "the broadcast block", pattern(600+root, size))
			}
			if err := freeAll(err, db); err != nil {
				return fmt.Errorf("comm.Bcast of %d bytes from root %d%s: %w", size, root, where(dev, me), err)
			}
		}
	}
	return nil
}

// where says where rank me's buffers are, in a case that mixes them.
func where(dev onDevice, me int) string {
	switch {
	case dev(0) && dev(1):
		return ""
	case dev(me):
		return " (this rank's buffers on the device, some ranks' on the host)"
	}
	return " (this rank's buffers on the host, some ranks' on the device)"
}

// int32s encodes v.
func int32s(v []int32) []byte {
	b := make([]byte, 4*len(v))
	for i, x := range v {
		binary.LittleEndian.PutUint32(b[4*i:], uint32(x))
	}
	return b
}

// allreduce sums int32 device blocks, into another block and in place.
func (d devCase) allreduce(ctx context.Context, me, n int, cm comm.Comm) error {
	return d.allreduceOn(ctx, me, n, cm, allOnDevice)
}

func (d devCase) allreduceOn(ctx context.Context, me, n int, cm comm.Comm, dev onDevice) error {
	for _, count := range devCounts {
		sum := make([]int32, count)
		for r := range n {
			for i, v := range elems(r, count) {
				sum[i] += v
			}
		}
		for _, inPlace := range []bool{false, true} {
			sb, err := d.alloc(ctx, me, 0, !dev(me), int32s(elems(me, count)))
			if err != nil {
				return err
			}
			rb := sb
			if !inPlace {
				if rb, err = d.alloc(ctx, me, 1, !dev(me), make([]byte, 4*count)); err != nil {
					return freeAll(err, sb)
				}
			}
			err = comm.AllreduceBlock(ctx, cm, sb.b, rb.b, comm.Int32, comm.Sum)
			if err == nil {
				err = rb.check(ctx, "the sum", int32s(sum))
			}
			if !inPlace {
				err = freeAll(err, rb)
			}
			if err := freeAll(err, sb); err != nil {
				return fmt.Errorf("comm.Allreduce (sum, in place %v) of %d int32%s: %w", inPlace, count, where(dev, me), err)
			}
		}
	}
	return nil
}

// allgather gathers device blocks on every rank.
func (d devCase) allgather(ctx context.Context, me, n int, cm comm.Comm) error {
	return d.allgatherOn(ctx, me, n, cm, allOnDevice)
}

func (d devCase) allgatherOn(ctx context.Context, me, n int, cm comm.Comm, dev onDevice) error {
	for _, size := range devSizes[:2] {
		var want []byte
		for r := range n {
			want = append(want, pattern(700+r, size)...)
		}
		sb, err := d.alloc(ctx, me, 0, !dev(me), pattern(700+me, size))
		if err != nil {
			return err
		}
		rb, err := d.alloc(ctx, me, 1, !dev(me), make([]byte, n*size))
		if err != nil {
			return freeAll(err, sb)
		}
		err = comm.AllgatherBlock(ctx, cm, sb.b, rb.b)
		if err == nil {
			err = rb.check(ctx, "the gathered block", want)
		}
		if err := freeAll(err, sb, rb); err != nil {
			return fmt.Errorf("comm.Allgather of %d bytes a rank%s: %w", size, where(dev, me), err)
		}
	}
	return nil
}

// mixedChunk is the piece of the mixed case's Allreduce on a communicator
// that stages in pieces (comm.StageInPieces).
const mixedChunk = 4096

// mixed runs the collectives with device buffers on the even ranks and
// host buffers on the odd ones, an Allreduce of the same on a
// communicator that stages in pieces, and a message from a host block of
// rank 1 into a device block of rank 0.
func (d devCase) mixed(ctx context.Context, me, n int, cm comm.Comm) error {
	if err := d.bcastOn(ctx, me, n, cm, evenOnDevice); err != nil {
		return err
	}
	if err := d.allreduceOn(ctx, me, n, cm, evenOnDevice); err != nil {
		return err
	}
	if err := d.allgatherOn(ctx, me, n, cm, evenOnDevice); err != nil {
		return err
	}
	pc, err := comm.StageInPieces(ctx, cm, mixedChunk)
	if err != nil {
		return fmt.Errorf("comm.StageInPieces(%d): %w", mixedChunk, err)
	}
	if err := d.allreduceOn(ctx, me, n, pc, evenOnDevice); err != nil {
		return fmt.Errorf("in pieces of %d bytes: %w", mixedChunk, err)
	}
	if me > 1 {
		return nil
	}
	if err := d.oneMessage(ctx, me, cm, 1, devTag, 800, devSizes[2], true, false); err != nil {
		return fmt.Errorf("%d bytes from a host block of rank 1 to a device block of rank 0: %w", devSizes[2], err)
	}
	return nil
}
