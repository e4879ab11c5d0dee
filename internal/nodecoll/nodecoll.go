package nodecoll

import (
	"context"
	"encoding/binary"
	"fmt"
	"runtime"
	"sync/atomic"
	"time"
	"unsafe"

	"github.com/xpu-go/xpu/comm"
	"github.com/xpu-go/xpu/flight"
	"github.com/xpu-go/xpu/impl"
	"github.com/xpu-go/xpu/internal/order"
	"github.com/xpu-go/xpu/internal/shm"
	"github.com/xpu-go/xpu/memspace"
	"github.com/xpu-go/xpu/xerr"
)

const (
	nodeLine  = 128      // a rank's control line
	nodeSmall = 16 << 10 // largest one-step allreduce
	nodeChunk = 256 << 10
	// Tags and Tags+1 are the reserved tags of the setup's messages: a
	// host keeps them free of its own messages.
	Tags    = comm.MaxReservedTag - 62
	nodeNap = 10 * time.Millisecond
	// gateNap is how often a collective that waits for the node's running
	// one (enter) looks again, past its first few looks.
	gateNap = 100 * time.Microsecond
	// A rank's ring of small steps: nodeRing entries of nodeEntry bytes,
	// each the step's length (8 bytes) and kind (4 bytes), then its data
	// from byte 16 on: a small broadcast's bytes and arguments share one
	// cache line. The ring is deep so that ranks sharing processors (a
	// node with more ranks than cores) run many small steps per turn on
	// a processor: each turn costs a switch of process, and 16 entries
	// made 4 ranks on 2 cores wait at every sixteenth broadcast (ADR 45).
	// 1024 entries of 512 bytes: 512 KiB a rank, as much as its slots.
	// An entry's stamp (the low bits of its step, its kind and its
	// length, one word) is written last: a reader waits for it in the
	// entry itself, whose line then brings the step's arguments and first
	// bytes at once, instead of for the writer's control line and then
	// the entry's (ADR 46).
	nodeRing   = 1024
	nodeEntry  = 512
	entryStamp = 0
	entryData  = 16                    // 16-byte aligned
	nodeTiny   = nodeEntry - entryData // largest step through the ring
	// A stamp is step%2^20<<stampStep | kind<<stampKind | length: an entry
	// holds step e or the step nodeRing before it, which the low 20 bits
	// tell apart, and the kind takes 32 bits and the length 12.
	stampStep = 44
	stampKind = 12
	// nodeAhead is how many steps ahead a writer of the ring takes its
	// entry's line for writing (postTiny): far enough that the others
	// have long dropped it, near enough that it is still held when
	// written. Broadcasts of 4 ranks on 2 cores, 12 alternating rounds:
	// 8 ahead 370 ns, 2 ahead 382, 32 ahead 425, none 408 (ADR 46).
	nodeAhead = 8
	// tagNode and tagNodeTable are the reserved tags of the setup's
	// messages (Tags, Tags+1).
	tagNode      = Tags
	tagNodeTable = Tags + 1
)

// Kinds of step, written beside its length for the check of arguments
// (with the root, the type and the operator in the higher bytes).
const (
	kindBarrier uint32 = 1 + iota
	kindBcast
	kindAllreduce
	kindAllgather
	kindAlltoall
	kindReduce
)

// A rank's control line: the step published, per half of the slots the
// step's length in bytes and its operation, type and root (for the check
// of arguments), and per half a small vector inline — all in the first 64
// bytes, the cache line a waiter polls, so that an allreduce of up to
// nodeInline bytes costs one line from each peer. The step whose reduce
// phase is done lies on the next cache line.
const (
	offSeq    = 0
	offLen    = 8  // + 8*half
	offKind   = 24 // + 4*half, 32 bits
	offInline = 32 // + 16*half
	offDone   = 64
	// nodeInline is the largest vector carried in the control line.
	nodeInline = 16
)

type Node struct {
	host     Host
	aborted  abort // host.Aborted, bound once
	opts     Options
	rank     int
	region   *shm.Region
	mem      []byte
	p        int   // ranks of the node
	me       int   // this rank's index among them
	members  []int // the node's ranks, in order (index: their place)
	leaders  []int // every node's lowest rank, in order; nil for a one-node job
	leaderOf []int // by rank: the lowest rank of its node (with leaders)
	closed   bool  // close has run (under the gate)
	slot     int   // bytes of each half of a slot
	rings    int   // offset of the rings in mem
	slots    int   // offset of the slots in mem
	res      int   // offset of the shared results in mem
	step     uint64
	known    uint64 // a step every rank of the node is known to have published
	// gate lets one node collective run at a time (enter); closed and the
	// fields of the steps are the running one's.
	gate uint64

	bell     *atomic.Uint32 // the futex word
	sleepers *atomic.Uint32 // waiters asleep on it
	broken   *atomic.Uint32 // nonzero: the ranks disagreed
}

// nodeLayout returns the offsets of a region for p ranks with slot halves
// of slot bytes: control lines, the bell and flags, rings, slots, shared
// results.
func nodeLayout(p, slot int) (ctl, bell, rings, slots, res, size int) {
	ctl = 0
	bell = p * nodeLine
	rings = bell + nodeLine
	slots = rings + p*nodeRing*nodeEntry
	res = slots + p*2*slot
	size = res + 2*slot
	return
}

// word returns word off of rank r's control line, for atomic access.
func (n *Node) word(r, off int) *atomic.Uint64 {
	return (*atomic.Uint64)(unsafe.Pointer(&n.mem[r*nodeLine+off]))
}

// The arguments of a step through the slots (its length and kind) are
// written and read with plain accesses, as its data is: a rank writes them
// before it publishes the step, whose atomic store orders them before it,
// and the others read them only once they have seen it published; nobody
// writes them again before every rank has published the next step. Two
// atomic stores (locked exchanges) on the line the other ranks poll made
// an 8-byte allreduce of 2 ranks ~480 ns, plain ones ~350 (ADR 28). The
// ring's entries keep atomic ones: plain, they made small broadcasts
// slower (~200 -> ~255 ns) as they made small reductions faster.

// args returns the words of rank r's arguments in half h, as plain words.
func (n *Node) args(r, h int) (length *uint64, kind *uint32) {
	at := r * nodeLine
	return (*uint64)(unsafe.Pointer(&n.mem[at+offLen+8*h])), (*uint32)(unsafe.Pointer(&n.mem[at+offKind+4*h]))
}

// inline returns half h of rank r's inline vector.
func (n *Node) inline(r int, h uint64) []byte {
	at := r*nodeLine + offInline + int(h)*nodeInline
	return n.mem[at : at+nodeInline : at+nodeInline]
}

// entry returns entry e%nodeRing of rank r's ring.
func (n *Node) entry(r int, e uint64) []byte {
	at := n.entryAt(r, e)
	return n.mem[at : at+nodeEntry : at+nodeEntry]
}

// entryAt is the offset in mem of entry e%nodeRing of rank r's ring.
func (n *Node) entryAt(r int, e uint64) int { return n.rings + (r*nodeRing+int(e%nodeRing))*nodeEntry }

// small returns the first total bytes of a one-step allreduce's vector
// of rank r in half h: inline in its control line, or in its slot.
func (n *Node) small(r int, h uint64, total int) []byte {
	if total <= nodeInline {
		return n.inline(r, h)[:total]
	}
	return n.half(r, h)[:total]
}

// half returns half h of rank r's slot.
func (n *Node) half(r int, h uint64) []byte {
	at := n.slots + (r*2+int(h))*n.slot
	return n.mem[at : at+n.slot : at+n.slot]
}

// result returns half h of the shared result.
func (n *Node) result(h uint64) []byte {
	at := n.res + int(h)*n.slot
	return n.mem[at : at+n.slot : at+n.slot]
}

// A Host is the communicator whose ranks run a node's collectives.
type Host interface {
	// Rank and Size place this rank in the job.
	Rank() int
	Size() int
	// Isend and Irecv carry the setup's messages (tags Tags and Tags+1)
	// and, in a job that spans nodes, the leaders' collectives.
	Isend(b memspace.Block, dest, tag int) (comm.Request, error)
	Irecv(b memspace.Block, src, tag int) (comm.Request, error)
	// Begin starts the host's collective name, numbered as the host
	// numbers its collectives, or says why it may not run. It returns the
	// context the collective runs under: for a light run (a job of one
	// node) ctx itself may do, an abort of the run then being what Aborted
	// reports; otherwise a context that an abort cancels (and Aborted
	// reports nil). End ends the collective with its error and returns
	// what the caller sees. One collective of a Node runs at a time.
	Begin(ctx context.Context, name string, light bool) (context.Context, error)
	End(ctx context.Context, name string, light bool, err error) error
	Aborted() error
	// Lost returns why a peer of the job is lost, nil while none is. Waits
	// call it every few polls: it must be cheap while nothing is lost.
	Lost() error
	// Closed is the error of a collective of a closed host.
	Closed() error
	// Idle is called before a wait sleeps on the region. A host that hears
	// of a lost peer through a progress engine of its own, which may be
	// asleep itself, wakes that engine to listen (rdma arms its completion
	// queue), so that the news ends the sleep within a nap.
	Idle()
}

// Options tune how a node's ranks wait for each other.
type Options struct {
	// Spin is how long a waiter polls before it sleeps (as shm.Polling
	// takes it: negative never polls).
	Spin time.Duration
	// Yield, when set and true, makes every poll give the processor away:
	// the node has more ranks than processors.
	Yield *atomic.Bool
	// Logf, when set, receives why a rank could not attach the region.
	Logf func(format string, args ...any)
}

// abort reports why a light run must stop, nil while it may go on.
type abort func() error

// noAbort is the abort of a run whose context an abort cancels.
func noAbort() error { return nil }

// Setup maps a region into the ranks of each node, as a collective of
// host that every rank calls at the same point: members are this rank's
// node's ranks in order (this rank among them), from which the node's
// lowest rank makes the region and offers it, with the list of the node's
// ranks, to every other rank of the node; each answers whether it could
// attach (and saw the same ranks), and the lowest rank tells the node
// whether its region is on. Then every rank learns every rank's node and
// verdict: the regions are used only when every node's is on, so that all
// ranks run the collectives alike. Setup returns nil (and no error) when
// the collectives are to run over the host's point-to-point: a region
// failed, or no two ranks share a node.
func Setup(ctx context.Context, h Host, members []int, opts Options) (*Node, error) {
	size := h.Size()
	if size < 2 || len(members) == 0 {
		return nil, nil
	}
	var reg *shm.Region
	ok := true // a node of one needs no region
	if len(members) > 1 {
		var err error
		if reg, err = nodeRegion(ctx, h, members, opts); err != nil {
			return nil, err
		}
		ok = reg != nil
	}
	// Every rank's leader, and whether its node's region is on.
	mine := []int32{int32(members[0]), 0}
	if ok {
		mine[1] = 1
	}
	all := make([]int32, 2*size)
	if len(members) < size {
		if err := nodeTable(ctx, h, mine, all); err != nil {
			if reg != nil {
				reg.Close()
			}
			return nil, err
		}
	} else {
		for j := range size {
			all[2*j], all[2*j+1] = mine[0], mine[1]
		}
	}
	var leaders []int
	leaderOf := make([]int, size)
	for j := range size {
		leaderOf[j] = int(all[2*j])
		if all[2*j+1] == 0 {
			ok = false
		}
		if leaderOf[j] == j {
			leaders = append(leaders, j)
		}
	}
	if !ok || len(leaders) == size {
		// A node's region failed, or no two ranks share a node.
		if reg != nil {
			reg.Close()
		}
		return nil, nil
	}
	n := newNode(h, opts, reg, nodeChunk, members)
	if len(leaders) > 1 {
		n.leaders, n.leaderOf = leaders, leaderOf
	}
	return n, nil
}

// Members returns the ranks of h's job whose key is this rank's, in order:
// the ranks of this rank's node when key is shm.NodeKey of the job's node
// name. It is a collective of h's point-to-point (tag Tags+1).
func Members(ctx context.Context, h Host, key [32]byte) ([]int, error) {
	size, rank := h.Size(), h.Rank()
	keys := make([]byte, 32*size)
	copy(keys[32*rank:], key[:])
	if size > 1 {
		if rank != 0 {
			if err := sendWait(ctx, h, key[:], 0, tagNodeTable); err != nil {
				return nil, err
			}
			if err := recvWait(ctx, h, keys, 0, tagNodeTable); err != nil {
				return nil, err
			}
		} else {
			for j := 1; j < size; j++ {
				if err := recvWait(ctx, h, keys[32*j:32*(j+1)], j, tagNodeTable); err != nil {
					return nil, err
				}
			}
			for j := 1; j < size; j++ {
				if err := sendWait(ctx, h, keys, j, tagNodeTable); err != nil {
					return nil, err
				}
			}
		}
	}
	var members []int
	for j := range size {
		if [32]byte(keys[32*j:32*(j+1)]) == key {
			members = append(members, j)
		}
	}
	return members, nil
}

// OneNode reports whether every rank of the job maps n's region: the
// collectives run in it alone, with no message.
func (n *Node) OneNode() bool { return n.leaders == nil && n.p == n.host.Size() }

// SpansNodes reports whether the job spans nodes: only Barrier, Bcast and
// Allreduce run hierarchically; the other collectives are the host's.
func (n *Node) SpansNodes() bool { return n.leaders != nil }

// nodeTable gathers every rank's entry (2 words) on rank 0, which sends
// the whole table to every rank: with a tag of its own, so that what a
// setup cut short leaves behind never matches another collective.
func nodeTable(ctx context.Context, h Host, mine, all []int32) error {
	bytes := func(v []int32) []byte { return unsafe.Slice((*byte)(unsafe.Pointer(&v[0])), 4*len(v)) }
	if h.Rank() != 0 {
		if err := sendWait(ctx, h, bytes(mine), 0, tagNodeTable); err != nil {
			return err
		}
		return recvWait(ctx, h, bytes(all), 0, tagNodeTable)
	}
	copy(all, mine)
	for j := 1; j < h.Size(); j++ {
		if err := recvWait(ctx, h, bytes(all[2*j:2*j+2]), j, tagNodeTable); err != nil {
			return err
		}
	}
	for j := 1; j < h.Size(); j++ {
		if err := sendWait(ctx, h, bytes(all), j, tagNodeTable); err != nil {
			return err
		}
	}
	return nil
}

// sendWait sends b to dest with a reserved tag and waits for the send.
func sendWait(ctx context.Context, h Host, b []byte, dest, tag int) error {
	return await1(ctx, b, func(blk memspace.Block) (comm.Request, error) { return h.Isend(blk, dest, tag) })
}

// recvWait receives into b from src with a reserved tag.
func recvWait(ctx context.Context, h Host, b []byte, src, tag int) error {
	return await1(ctx, b, func(blk memspace.Block) (comm.Request, error) { return h.Irecv(blk, src, tag) })
}

// await1 starts one operation on b with start and waits for it.
func await1(ctx context.Context, b []byte, start func(memspace.Block) (comm.Request, error)) error {
	blk, err := memspace.FromSlice(b)
	if err != nil {
		return err
	}
	q, err := start(blk.Block())
	if err == nil {
		_, err = q.Wait(ctx)
	}
	return err
}

// nodeRegion makes (on the node's lowest rank) or attaches the node's
// region; nil when the node's verdict is off.
func nodeRegion(ctx context.Context, h Host, members []int, opts Options) (*shm.Region, error) {
	_, _, _, _, _, size := nodeLayout(len(members), nodeChunk)
	send := func(j int, b []byte) error { return sendWait(ctx, h, b, j, tagNode) }
	recv := func(j int, b []byte) error { return recvWait(ctx, h, b, j, tagNode) }
	list := make([]byte, 4*len(members))
	for i, j := range members {
		binary.LittleEndian.PutUint32(list[4*i:], uint32(j))
	}
	if leader := members[0]; h.Rank() != leader {
		return attachRegion(h, members[0], size, list, send, recv, opts)
	}
	reg, err := shm.NewRegion(size)
	var offer []byte
	if err == nil {
		offer = reg.Offer().Encode()
	} else {
		offer = shm.RegionOffer{}.Encode()
	}
	offer = append(offer, list...)
	ok := err == nil
	// A member lost on the way leaves the region to nobody: its
	// descriptor and mapping go with it.
	fail := func(err error) (*shm.Region, error) {
		if reg != nil {
			reg.Close()
		}
		return nil, err
	}
	for _, j := range members[1:] {
		if err := send(j, offer); err != nil {
			return fail(err)
		}
	}
	for _, j := range members[1:] {
		var ans [1]byte
		if err := recv(j, ans[:]); err != nil {
			return fail(err)
		}
		ok = ok && ans[0] == 1
	}
	verdict := []byte{0}
	if ok {
		verdict[0] = 1
	}
	for _, j := range members[1:] {
		if err := send(j, verdict); err != nil {
			return fail(err)
		}
	}
	if reg != nil {
		reg.Attached()
		if !ok {
			reg.Close()
			return nil, nil
		}
	}
	return reg, nil
}

// attachRegion takes the leader's offer of a region of size bytes for the
// ranks of list, answers whether this rank could attach, and returns the
// region when the leader's verdict is on.
func attachRegion(h Host, leader, size int, list []byte, send, recv func(int, []byte) error, opts Options) (*shm.Region, error) {
	b := make([]byte, shm.OfferSize+len(list))
	if err := recv(leader, b); err != nil {
		return nil, err
	}
	var reg *shm.Region
	o, err := shm.DecodeRegionOffer(b[:shm.OfferSize])
	switch {
	case err != nil || o.PID == 0:
	case o.Size != size || string(b[shm.OfferSize:]) != string(list):
		err = xerr.Detail(xerr.ErrProtocol, "rank %d offers a node region of %d bytes for other ranks", leader, o.Size)
	default:
		reg, err = shm.AttachRegion(o)
	}
	if err != nil && opts.Logf != nil {
		opts.Logf("rank %d: no node region: %v", h.Rank(), err)
	}
	ans := []byte{0}
	if err == nil && reg != nil {
		ans[0] = 1
	}
	var verdict [1]byte
	err = send(leader, ans)
	if err == nil {
		err = recv(leader, verdict[:])
	}
	if err != nil || verdict[0] != 1 {
		if reg != nil {
			reg.Close()
		}
		return nil, err
	}
	return reg, nil
}

func newNode(h Host, opts Options, reg *shm.Region, slot int, members []int) *Node {
	n := &Node{host: h, aborted: h.Aborted, opts: opts, rank: h.Rank(), region: reg, p: len(members), members: members, slot: slot}
	for i, j := range members {
		if j == n.rank {
			n.me = i
		}
	}
	if reg == nil {
		return n // a node of one
	}
	n.mem = reg.Bytes()
	var bell int
	_, bell, n.rings, n.slots, n.res, _ = nodeLayout(n.p, slot)
	n.bell = (*atomic.Uint32)(unsafe.Pointer(&n.mem[bell]))
	n.sleepers = (*atomic.Uint32)(unsafe.Pointer(&n.mem[bell+4]))
	n.broken = (*atomic.Uint32)(unsafe.Pointer(&n.mem[bell+8]))
	return n
}

// Close unmaps the region; no collective may be running.
func (n *Node) Close() {
	n.enter()
	defer n.leave()
	n.closed = true
	if n.region != nil {
		n.region.Close()
		n.region, n.mem = nil, nil
	}
}

// run runs body as the host's collective name, one at a time: a light one
// (no derived context: an abort is what Host.Aborted reports) for a
// one-node job; for a job that spans nodes, whose leaders talk over the
// host's point-to-point with the shared algorithms, a full one, whose
// abort cancels the context those wait with. body is called here and
// nowhere else, so that it costs no allocation.
func (n *Node) run(ctx context.Context, name string, body func(ctx context.Context, run abort) error) error {
	n.enter() // one node collective at a time
	defer n.leave()
	light := n.leaders == nil
	cctx, err := n.host.Begin(ctx, name, light)
	if err != nil {
		return err
	}
	switch {
	case n.closed:
		err = n.host.Closed()
	case light:
		err = body(cctx, n.aborted)
	default:
		err = body(cctx, noAbort)
	}
	return n.host.End(ctx, name, light, err)
}

// enter waits until no other collective of the node runs (nor Close),
// and takes the gate: a compare-and-swap, where a mutex took a locked
// instruction to lock and another to unlock (ADR 46). Collectives side by
// side on one communicator are a program's error, and Close waits for the
// collective it ends: a caller that finds the gate taken looks again,
// yielding, then every gateNap, until the running one leaves.
func (n *Node) enter() {
	if atomic.CompareAndSwapUint64(&n.gate, 0, 1) {
		return
	}
	for tries := 0; !atomic.CompareAndSwapUint64(&n.gate, 0, 1); tries++ {
		if tries < 64 {
			runtime.Gosched()
		} else {
			time.Sleep(gateNap)
		}
	}
}

// leave frees the gate: a release store, after which the next enter sees
// everything the collective wrote.
func (n *Node) leave() { order.Release(&n.gate, 0) }

// across is the job's leaders as a communicator of their own (rank i is
// leaders[i]), over this rank's links, for the shared algorithms.
type across struct{ n *Node }

func (a across) Rank() int {
	for i, j := range a.n.leaders {
		if j == a.n.rank {
			return i
		}
	}
	return -1
}
func (a across) Size() int { return len(a.n.leaders) }
func (a across) Isend(b memspace.Block, dest, tag int) (comm.Request, error) {
	return a.n.host.Isend(b, a.n.leaders[dest], tag)
}
func (a across) Irecv(b memspace.Block, src, tag int) (comm.Request, error) {
	if src != comm.AnySource {
		src = a.n.leaders[src]
	}
	return a.n.host.Irecv(b, src, tag)
}
func (a across) Close() error { return nil }

// FlightRecorder returns none (comm.Recording): the collectives across
// the nodes are parts of the collective the user called, which the
// communicator records.
func (a across) FlightRecorder() *flight.Recorder { return nil }

// leaderIndex returns the place of rank's leader among the leaders.
func (n *Node) leaderIndex(rank int) int {
	for i, j := range n.leaders {
		if j == n.leaderOf[rank] {
			return i
		}
	}
	return -1
}

// Barrier, Bcast and Allreduce of the job (Reduce of a one-node job only):
// within the node, then across the leaders when the job spans nodes, then
// within the node again.

func (n *Node) jobBarrier(ctx context.Context, run abort) error {
	if err := n.barrier(ctx, run); err != nil || n.leaders == nil {
		return err
	}
	if n.me == 0 {
		if err := comm.Barrier(ctx, across{n}); err != nil {
			return err
		}
	}
	return n.barrier(ctx, run)
}

func (n *Node) jobBcast(ctx context.Context, run abort, buf memspace.Block, root int) error {
	b, err := buf.Bytes()
	if err != nil {
		return err
	}
	if n.leaders == nil {
		return n.bcast(ctx, run, b, n.index(root))
	}
	mine := n.leaderOf[root] == n.members[0]
	if mine {
		if err := n.bcast(ctx, run, b, n.index(root)); err != nil {
			return err
		}
	}
	if n.me == 0 {
		if err := comm.BcastBlock(ctx, across{n}, buf, n.leaderIndex(root)); err != nil {
			return err
		}
	}
	if mine {
		return nil
	}
	return n.bcast(ctx, run, b, 0)
}

func (n *Node) jobAllreduce(ctx context.Context, run abort, send, recv memspace.Block, dt comm.DType, op comm.Op) error {
	if err := n.allreduce(ctx, run, send, recv, dt, op); err != nil || n.leaders == nil {
		return err
	}
	if n.me == 0 {
		if err := comm.AllreduceBlock(ctx, across{n}, recv, recv, dt, op); err != nil {
			return err
		}
	}
	b, err := recv.Bytes()
	if err != nil {
		return err
	}
	return n.bcast(ctx, run, b, 0)
}

// index returns the place of rank among the node's ranks.
func (n *Node) index(rank int) int {
	for i, j := range n.members {
		if j == rank {
			return i
		}
	}
	return -1
}

// errDisagree is the error of a node collective whose ranks passed
// different arguments.
func (n *Node) errDisagree() error {
	return xerr.Detail(xerr.ErrInvalidArgument,
		"rank %d: the ranks called a collective with different arguments (length, type, operation or root)", n.rank)
}

// publish stores v in word off of this rank's line and wakes sleepers.
func (n *Node) publish(off int, v uint64) {
	// Swap, not Store: sleepers is loaded next, and a waiter adds itself
	// to them before it looks at this word (a store then a load on each
	// side needs a full fence, which Store is not under the race
	// detector; see the fence comment of internal/shm's conn.go).
	n.word(n.me, off).Swap(v)
	if n.sleepers.Load() > 0 {
		n.bell.Add(1)
		shm.Wake(n.bell)
	}
}

// await waits until word off of rank only (of every rank when -1) is at
// least v: polling, then sleeping on the bell; it fails when a peer is lost, the
// ranks disagree, or ctx ends.
func (n *Node) await(ctx context.Context, run abort, off int, v uint64, only int) error {
	return n.wait(ctx, run, func() bool {
		if only >= 0 {
			return n.word(only, off).Load() >= v
		}
		for j := range n.p {
			if n.word(j, off).Load() < v {
				return false
			}
		}
		return true
	})
}

// wait waits until ready: polling, then sleeping on the bell; it fails
// when a peer is lost, the ranks disagree, or ctx ends. What ready looks
// at is published before the bell is rung (publish).
func (n *Node) wait(ctx context.Context, run abort, ready func() bool) error {
	if ready() {
		return nil
	}
	spin := n.opts.Spin
	yield := n.opts.Yield != nil && n.opts.Yield.Load()
	var until time.Time
	for polls := 1; ; polls++ {
		if ready() {
			return nil
		}
		// The reasons to stop (the group's state, the run's abort, the
		// context) cost several polls to check: they are checked every 16
		// polls while polling, and before every sleep.
		spinning := shm.Polling(spin, yield, polls, &until)
		if !spinning || polls%16 == 1 {
			if err := n.blocked(ctx, run); err != nil {
				// A peer that published and then left (its close or death
				// is what was seen) has published: look once more.
				if ready() {
					return nil
				}
				return err
			}
		}
		if spinning {
			continue
		}
		n.host.Idle()
		n.sleepers.Add(1)
		b := n.bell.Load()
		if !ready() {
			shm.Wait(n.bell, b, nodeNap)
		}
		n.sleepers.Add(^uint32(0))
	}
}

// blocked says why a wait must end.
func (n *Node) blocked(ctx context.Context, run abort) error {
	if n.broken.Load() != 0 {
		return n.errDisagree()
	}
	if err := run(); err != nil {
		return err
	}
	if err := n.host.Lost(); err != nil {
		return fmt.Errorf("a rank of the node is lost: %w", err)
	}
	if err := ctx.Err(); err != nil {
		if cause := context.Cause(ctx); cause != nil {
			return cause
		}
		return err
	}
	return nil
}

// begin starts step e: it waits until every rank has published e-1.
func (n *Node) begin(ctx context.Context, run abort) (uint64, error) {
	n.step++
	e := n.step
	if n.known >= e-1 {
		return e, nil
	}
	return e, n.awaitAll(ctx, run, e-1)
}

// beginTiny starts step e through the ring: it waits until every rank has
// published e-nodeRing+1, so that nobody still reads what this rank last
// wrote in entry e%nodeRing.
func (n *Node) beginTiny(ctx context.Context, run abort) (uint64, error) {
	n.step++
	e := n.step
	if e < nodeRing || n.known >= e-nodeRing+1 {
		return e, nil
	}
	return e, n.awaitAll(ctx, run, e-nodeRing+1)
}

// postTiny begins a step through the ring and publishes data, with its
// arguments (its length and kind), in this rank's entry, stamped last; it
// returns the step.
func (n *Node) postTiny(ctx context.Context, run abort, data []byte, kind uint32) (uint64, error) {
	e, err := n.beginTiny(ctx, run)
	if err != nil {
		return e, err
	}
	ent := n.entry(n.me, e)
	// The entry nodeAhead steps on was read by the others a lap ago: take
	// its line now, so that writing it then waits for no one.
	shm.PrefetchWrite(&n.entry(n.me, e+nodeAhead)[0])
	copy(ent[entryData:], data)
	n.stamp(n.me, e).Store(stampOf(e, kind, len(data)))
	n.publish(offSeq, e)
	return e, nil
}

// stampOf is the stamp of step e of kind with length bytes.
func stampOf(e uint64, kind uint32, length int) uint64 {
	return e<<stampStep | uint64(kind)<<stampKind | uint64(length)
}

// stamp returns the stamp of entry e%nodeRing of rank r's ring.
func (n *Node) stamp(r int, e uint64) *atomic.Uint64 {
	return (*atomic.Uint64)(unsafe.Pointer(&n.mem[n.entryAt(r, e)+entryStamp]))
}

// awaitTiny waits until rank only (every other rank when -1) has stamped
// its entry of step e. A rank's entry e%nodeRing holds step e, or the step
// nodeRing before, until this rank publishes e: nobody writes an entry
// again before every rank has published the step nodeRing before it.
func (n *Node) awaitTiny(ctx context.Context, run abort, e uint64, only int) error {
	return n.wait(ctx, run, func() bool {
		if only >= 0 {
			return n.stamp(only, e).Load()>>stampStep == e%(1<<(64-stampStep))
		}
		for j := range n.p {
			if j != n.me && n.stamp(j, e).Load()>>stampStep != e%(1<<(64-stampStep)) {
				return false
			}
		}
		return true
	})
}

// agreeTiny checks that the ranks of only (every rank when -1) described
// step e alike in their entries, as agree does; they have stamped them.
func (n *Node) agreeTiny(e uint64, length int, kind uint32, only int) error {
	want := stampOf(e, kind, length)
	for j := range n.p {
		if only >= 0 && j != only {
			continue
		}
		if n.stamp(j, e).Load() != want {
			return n.disagree()
		}
	}
	return nil
}

// awaitAll waits until every rank has published step v, and remembers it.
func (n *Node) awaitAll(ctx context.Context, run abort, v uint64) error {
	if err := n.await(ctx, run, offSeq, v, -1); err != nil {
		return err
	}
	// Remember the step every rank has reached, which may be past v: a
	// root that runs ahead through the ring then waits (and polls its
	// readers' lines) only when they have fallen behind again, not at
	// every step once the ring is full.
	low := n.word(0, offSeq).Load()
	for j := 1; j < n.p; j++ {
		low = min(low, n.word(j, offSeq).Load())
	}
	n.known = max(n.known, v, low)
	return nil
}

// describe records the arguments of step e for the others to check, in
// the words of half e%2: a rank that goes on to step e+1 leaves them be.
// Words that already hold them are not written again: the others poll
// this line, and a write takes it from them (a collective called again
// and again with the same arguments writes none).
func (n *Node) describe(e uint64, length int, kind uint32) {
	l, k := n.args(n.me, int(e%2))
	if *l != uint64(length) {
		*l = uint64(length)
	}
	if *k != kind {
		*k = kind
	}
}

// agree checks that the ranks of only (every rank when -1) described step
// e alike; on a mismatch the node's collectives break, on every rank.
func (n *Node) agree(e uint64, length int, kind uint32, only int) error {
	h := int(e % 2)
	for j := range n.p {
		if only >= 0 && j != only {
			continue
		}
		if l, k := n.args(j, h); *l != uint64(length) || *k != kind {
			return n.disagree()
		}
	}
	return nil
}

// disagree breaks the node's collectives, on every rank, and returns the
// error of arguments that differ.
func (n *Node) disagree() error {
	n.broken.Store(1)
	n.bell.Add(1)
	shm.Wake(n.bell)
	return n.errDisagree()
}

// barrier: publish, and wait for every rank.
func (n *Node) barrier(ctx context.Context, run abort) error {
	if n.p == 1 {
		return nil
	}
	e, err := n.begin(ctx, run)
	if err != nil {
		return err
	}
	n.describe(e, 0, kindBarrier)
	n.publish(offSeq, e)
	if err := n.awaitAll(ctx, run, e); err != nil {
		return err
	}
	return n.agree(e, 0, kindBarrier, -1)
}

// bcast copies buf on the node's rank of index root to every rank of the
// node, a chunk per step.
func (n *Node) bcast(ctx context.Context, run abort, buf []byte, root int) error {
	if n.p == 1 {
		return nil
	}
	kind := kindBcast | uint32(root)<<8
	if len(buf) <= nodeTiny {
		if n.me == root {
			_, err := n.postTiny(ctx, run, buf, kind)
			return err
		}
		e, err := n.beginTiny(ctx, run)
		if err != nil {
			return err
		}
		if err := n.awaitTiny(ctx, run, e, root); err != nil {
			return err
		}
		if err := n.agreeTiny(e, len(buf), kind, root); err != nil {
			return err
		}
		copy(buf, n.entry(root, e)[entryData:])
		n.publish(offSeq, e)
		return nil
	}
	for off := 0; off < len(buf); off += n.slot {
		k := min(n.slot, len(buf)-off)
		e, err := n.begin(ctx, run)
		if err != nil {
			return err
		}
		h := e % 2
		if n.me == root {
			copy(n.half(root, h), buf[off:off+k])
			n.describe(e, len(buf), kind)
			n.publish(offSeq, e)
			continue
		}
		if err := n.await(ctx, run, offSeq, e, root); err != nil {
			return err
		}
		if err := n.agree(e, len(buf), kind, root); err != nil {
			return err
		}
		copy(buf[off:off+k], n.half(root, h))
		n.publish(offSeq, e)
	}
	return nil
}

// allreduce reduces send over every rank into recv (host bytes of blocks
// sendB and recvB).
func (n *Node) allreduce(ctx context.Context, run abort, send, recv memspace.Block, dt comm.DType, op comm.Op) error {
	sendB, recvB, err := hostPair(send, recv)
	if err != nil {
		return err
	}
	return n.allreduceBytes(ctx, run, sendB, recvB, dt, op)
}

// allreduceBytes reduces sendB over every rank into recvB.
func (n *Node) allreduceBytes(ctx context.Context, run abort, sendB, recvB []byte, dt comm.DType, op comm.Op) error {
	if n.p == 1 {
		if &sendB[0] != &recvB[0] {
			copy(recvB, sendB)
		}
		return nil
	}
	kind := kindAllreduce | uint32(dt)<<8 | uint32(op)<<16
	total := len(sendB)
	if total <= nodeSmall {
		e, err := n.begin(ctx, run)
		if err != nil {
			return err
		}
		h := e % 2
		if total <= nodeInline {
			copy(n.inline(n.me, h), sendB)
		} else {
			copy(n.half(n.me, h), sendB)
		}
		n.describe(e, total, kind)
		n.publish(offSeq, e)
		if err := n.awaitAll(ctx, run, e); err != nil {
			return err
		}
		if err := n.agree(e, total, kind, -1); err != nil {
			return err
		}
		return foldBytes(recvB, n.p, func(j int) []byte { return n.small(j, h, total) }, dt, op)
	}
	for off := 0; off < total; off += n.slot {
		k := min(n.slot, total-off)
		e, lo, hi, err := n.reduceStep(ctx, run, sendB[off:off+k], total, kind, dt, op)
		if err != nil {
			return err
		}
		// The shared result of this half is rewritten two steps on, once
		// every rank has begun the next: this rank has copied it out.
		res := n.result(e % 2)
		copy(recvB[off+lo:off+hi], res[lo:hi])
		if err := n.await(ctx, run, offDone, e, -1); err != nil {
			return err
		}
		copy(recvB[off:off+lo], res[:lo])
		copy(recvB[off+hi:off+k], res[hi:k])
	}
	return nil
}

// foldBytes reduces vec(j) of every rank j of p, in rank order, into dst:
// dst = vec(1) op vec(0), then dst = vec(j) op dst — the same bits on
// every rank that folds the same vectors.
func foldBytes(dst []byte, p int, vec func(j int) []byte, dt comm.DType, op comm.Op) error {
	if err := impl.ReduceBytes(dst, vec(1), vec(0), dt, op); err != nil {
		return err
	}
	for j := 2; j < p; j++ {
		if err := impl.ReduceBytes(dst, vec(j), dst, dt, op); err != nil {
			return err
		}
	}
	return nil
}

// reduceStep runs the first phase of a chunk of a reduction through the
// slots (Allreduce, Reduce): every rank copies its piece of the chunk,
// chunk, into its slot, publishes, waits for every rank and checks their
// arguments (total bytes, kind), then reduces part me of the chunk (whole
// elements) over every slot into the step's shared result, and publishes
// it done. It returns the step and the bounds of this rank's part.
func (n *Node) reduceStep(ctx context.Context, run abort, chunk []byte, total int, kind uint32, dt comm.DType, op comm.Op) (e uint64, lo, hi int, err error) {
	if e, err = n.begin(ctx, run); err != nil {
		return e, 0, 0, err
	}
	h := e % 2
	copy(n.half(n.me, h), chunk)
	n.describe(e, total, kind)
	n.publish(offSeq, e)
	if err := n.awaitAll(ctx, run, e); err != nil {
		return e, 0, 0, err
	}
	if err := n.agree(e, total, kind, -1); err != nil {
		return e, 0, 0, err
	}
	k, es := len(chunk), dt.Size()
	lo = (k / es * n.me / n.p) * es
	hi = (k / es * (n.me + 1) / n.p) * es
	if err := n.fold(lo, hi, h, dt, op); err != nil {
		return e, 0, 0, err
	}
	n.publish(offDone, e)
	return e, lo, hi, nil
}

// reduce reduces send over every rank of a one-node job into recv on the
// rank of index root.
func (n *Node) reduce(ctx context.Context, run abort, send, recv memspace.Block, dt comm.DType, op comm.Op, root int) error {
	sendB, err := send.Bytes()
	if err != nil {
		return err
	}
	var recvB []byte
	if n.me == root {
		if recvB, err = recv.Bytes(); err != nil {
			return err
		}
	}
	if n.p == 1 {
		copy(recvB, sendB)
		return nil
	}
	kind := kindReduce | uint32(dt)<<8 | uint32(op)<<12 | uint32(root)<<16
	total := len(sendB)
	if total <= nodeTiny {
		e, err := n.postTiny(ctx, run, sendB, kind)
		if err != nil || n.me != root {
			return err
		}
		if err := n.awaitTiny(ctx, run, e, -1); err != nil {
			return err
		}
		if err := n.agreeTiny(e, total, kind, -1); err != nil {
			return err
		}
		return foldBytes(recvB, n.p, func(j int) []byte { return n.entry(j, e)[entryData : entryData+total] }, dt, op)
	}
	for off := 0; off < total; off += n.slot {
		k := min(n.slot, total-off)
		e, _, _, err := n.reduceStep(ctx, run, sendB[off:off+k], total, kind, dt, op)
		if err != nil {
			return err
		}
		if n.me != root {
			// The shared result of this half is rewritten two steps on,
			// once every rank has begun the next: the root has copied it.
			continue
		}
		if err := n.await(ctx, run, offDone, e, -1); err != nil {
			return err
		}
		copy(recvB[off:off+k], n.result(e % 2)[:k])
	}
	return nil
}

// exchange moves size bytes between every pair of the node's ranks
// through their slots (Allgather and Alltoall), in steps of at most a
// slot's share per pair: at each step every rank copies piece [off,
// off+k) of out(j) into part j of its slot half — one part for all when
// shared (Allgather: the same bytes for every rank) — publishes, waits for
// every rank, and copies its part of every rank j's slot into in(j).
func (n *Node) exchange(ctx context.Context, run abort, size int, kind uint32, shared bool,
	out, in func(j int) []byte) error {
	share := n.slot / n.p
	if shared {
		share = n.slot
	}
	for off := 0; off < size; off += share {
		k := min(share, size-off)
		e, err := n.begin(ctx, run)
		if err != nil {
			return err
		}
		h := e % 2
		mine := n.half(n.me, h)
		if shared {
			copy(mine[:k], out(0)[off:off+k])
		} else {
			for j := range n.p {
				copy(mine[j*share:j*share+k], out(j)[off:off+k])
			}
		}
		n.describe(e, size, kind)
		n.publish(offSeq, e)
		if err := n.awaitAll(ctx, run, e); err != nil {
			return err
		}
		if err := n.agree(e, size, kind, -1); err != nil {
			return err
		}
		part := n.me * share
		if shared {
			part = 0
		}
		for j := range n.p {
			copy(in(j)[off:off+k], n.half(j, h)[part:part+k])
		}
	}
	return nil
}

// allgather concatenates send of every rank of a one-node job into recv.
func (n *Node) allgather(ctx context.Context, run abort, send, recv memspace.Block) error {
	s, r, err := hostPair(send, recv)
	if err != nil {
		return err
	}
	k := len(s)
	return n.exchange(ctx, run, k, kindAllgather, true, func(int) []byte { return s }, func(j int) []byte { return r[j*k : (j+1)*k] })
}

// alltoall sends part j of send to rank j of a one-node job.
func (n *Node) alltoall(ctx context.Context, run abort, send, recv memspace.Block) error {
	s, r, err := hostPair(send, recv)
	if err != nil {
		return err
	}
	k := len(s) / n.p
	return n.exchange(ctx, run, k, kindAlltoall, false, func(j int) []byte { return s[j*k : (j+1)*k] },
		func(j int) []byte { return r[j*k : (j+1)*k] })
}

// hostPair returns the host views of a collective's two blocks.
func hostPair(send, recv memspace.Block) ([]byte, []byte, error) {
	s, err := send.Bytes()
	if err != nil {
		return nil, nil, err
	}
	r, err := recv.Bytes()
	return s, r, err
}

// fold reduces bytes [lo, hi) of half h of every slot, in rank order, into
// bytes [lo, hi) of half h of the shared result.
func (n *Node) fold(lo, hi int, h uint64, dt comm.DType, op comm.Op) error {
	if hi <= lo {
		return nil
	}
	return foldBytes(n.result(h)[lo:hi], n.p, func(j int) []byte { return n.half(j, h)[lo:hi] }, dt, op)
}
