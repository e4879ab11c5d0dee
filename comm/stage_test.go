package comm_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"
	"unsafe"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/xpu-go/xpu/backends/local"
	"github.com/xpu-go/xpu/comm"
	"github.com/xpu-go/xpu/internal/tooling/testwait"
	"github.com/xpu-go/xpu/memspace"
	"github.com/xpu-go/xpu/transfer"
	"github.com/xpu-go/xpu/xerr"
)

// The tests of staging run the blocking calls on buffers of stageDev, a
// fake device whose memory the host cannot view, and compare every result
// with the same call on host buffers.

const (
	stageDevKind    = "test-stage-device"
	stagePinnedKind = "test-stage-pinned"
	// stageTestChunk is the staging piece the tests set: 10 int32s, so
	// that a few dozen elements go in several pieces, the last one short.
	stageTestChunk = 40
)

// errFakeFault is what stageDev's faults return.
var errFakeFault = fmt.Errorf("injected copy fault: %w", memspace.ErrDeviceLost)

// stageDev is device memory the host cannot view: its blocks have no host
// pointer, and their bytes live in a Go map the registered paths reach.
// It keeps a ledger, and implements memspace.Stager: blocks are staged in
// whose space is pinned, when set.
type stageDev struct {
	name   string
	pinned *stagePinned

	mu    sync.Mutex
	next  memspace.Addr
	live  map[memspace.Addr][]byte
	stats memspace.Stats

	// fault, when set, is asked before every copy to or from this space,
	// with the direction (up: host to device) and the offset of the
	// device block in its allocation; an error fails the copy.
	fault atomic.Pointer[func(up bool, off int) error]
	// copies counts the copies to and from this space.
	copies atomic.Int64
}

func newStageDev(name string) *stageDev {
	return &stageDev{name: name, next: 0x10000, live: map[memspace.Addr][]byte{}}
}

func (d *stageDev) Name() string { return d.name }
func (d *stageDev) Properties() memspace.Properties {
	return memspace.Properties{Kind: stageDevKind, Device: 0, DeviceAccessible: true, Alignment: 256}
}

func (d *stageDev) Allocate(size, align int) (memspace.Block, error) {
	if size <= 0 {
		return memspace.Block{}, fmt.Errorf("stage-dev: alloc of %d bytes: %w", size, memspace.ErrInvalidArgument)
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	addr := d.next
	d.next += memspace.Addr((size + 4095) &^ 4095)
	d.live[addr] = make([]byte, size)
	d.stats.InUse += int64(size)
	d.stats.Live++
	d.stats.Allocs++
	return memspace.NewBlock(d, addr, size, nil), nil
}

func (d *stageDev) Free(b memspace.Block) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	if b.Space() != memspace.Space(d) {
		return fmt.Errorf("stage-dev: free of %v: %w", b, memspace.ErrForeignBlock)
	}
	mem, ok := d.live[b.Addr()]
	if !ok || len(mem) != b.Len() {
		return fmt.Errorf("stage-dev: free of %v: %w", b, memspace.ErrDoubleFree)
	}
	delete(d.live, b.Addr())
	d.stats.InUse -= int64(len(mem))
	d.stats.Live--
	d.stats.Frees++
	return nil
}

func (d *stageDev) Stats() memspace.Stats {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.stats
}

// view returns the bytes of b and its offset in its allocation.
func (d *stageDev) view(b memspace.Block) ([]byte, int, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	for base, mem := range d.live {
		if b.Addr() >= base && b.Addr()+memspace.Addr(b.Len()) <= base+memspace.Addr(len(mem)) {
			off := int(b.Addr() - base)
			return mem[off : off+b.Len()], off, nil
		}
	}
	return nil, 0, fmt.Errorf("stage-dev: %v is not allocated: %w", b, memspace.ErrInvalidArgument)
}

// StagingSpace makes stageDev a memspace.Stager: its blocks are staged
// in its pinned memory, or on the Go heap without.
func (d *stageDev) StagingSpace() memspace.Space {
	if d.pinned == nil {
		return nil
	}
	return d.pinned
}

// stagePinned is host memory with a ledger, standing for a device's pinned
// memory: the staging space of a stagerDev. Allocations beyond its budget
// fail with ErrOutOfMemory.
type stagePinned struct {
	mu    sync.Mutex
	live  map[memspace.Addr][]uint64
	stats memspace.Stats
	left  int // allocations left in the budget; negative: no limit
}

func newStagePinned() *stagePinned { return &stagePinned{live: map[memspace.Addr][]uint64{}, left: -1} }

// budget lets n more allocations succeed (all of them for a negative n).
func (s *stagePinned) budget(n int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.left = n
}

func (s *stagePinned) Name() string { return "test-stage-pinned" }
func (s *stagePinned) Properties() memspace.Properties {
	return memspace.Properties{Kind: stagePinnedKind, Device: -1, HostAccessible: true, Pinned: true, Alignment: 8}
}

func (s *stagePinned) Allocate(size, align int) (memspace.Block, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.left == 0 {
		return memspace.Block{}, fmt.Errorf("stage-pinned: %d bytes: %w", size, memspace.ErrOutOfMemory)
	}
	if s.left > 0 {
		s.left--
	}
	w := make([]uint64, (size+7)/8)
	p := unsafe.Pointer(unsafe.SliceData(w))
	b := memspace.NewBlock(s, memspace.Addr(uintptr(p)), size, p)
	s.live[b.Addr()] = w
	s.stats.InUse += int64(size)
	s.stats.Live++
	s.stats.Allocs++
	return b, nil
}

func (s *stagePinned) Free(b memspace.Block) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if b.Space() != memspace.Space(s) {
		return fmt.Errorf("stage-pinned: free of %v: %w", b, memspace.ErrForeignBlock)
	}
	if _, ok := s.live[b.Addr()]; !ok {
		return fmt.Errorf("stage-pinned: free of %v: %w", b, memspace.ErrDoubleFree)
	}
	delete(s.live, b.Addr())
	s.stats.InUse -= int64(b.Len())
	s.stats.Live--
	s.stats.Frees++
	return nil
}

func (s *stagePinned) Stats() memspace.Stats {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.stats
}

// stageCopy is the path between stageDev and host memory (and between two
// stageDev blocks).
func stageCopy(ctx context.Context, dst, src memspace.Block) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	side := func(b memspace.Block, up bool) ([]byte, error) {
		d, ok := memspace.As[*stageDev](b.Space())
		if !ok {
			return b.Bytes()
		}
		d.copies.Add(1)
		mem, off, err := d.view(b)
		if err != nil {
			return nil, err
		}
		if f := d.fault.Load(); f != nil {
			if err := (*f)(up, off); err != nil {
				return nil, err
			}
		}
		return mem, nil
	}
	dm, err := side(dst, true)
	if err != nil {
		return err
	}
	sm, err := side(src, false)
	if err != nil {
		return err
	}
	copy(dm, sm)
	return nil
}

// registerStagePaths registers stageCopy between stageDev and the host
// kinds for the duration of the test.
func registerStagePaths(t testing.TB) {
	p := transfer.PathFunc(stageCopy)
	for _, k := range []string{"host", stagePinnedKind, stageDevKind} {
		t.Cleanup(transfer.Register(stageDevKind, k, p))
		if k != stageDevKind {
			t.Cleanup(transfer.Register(k, stageDevKind, p))
		}
	}
}

// stageRank is one rank's device: its memory and, with a stager, the
// pinned memory its buffers are staged in. The device is wrapped, so that
// the stager is found through Unwrap.
type stageRank struct {
	dev    *stageDev
	pinned *stagePinned // nil: staged on the Go heap
	space  memspace.Space
}

func newStageRanks(p int, stager bool) []*stageRank {
	rs := make([]*stageRank, p)
	for i := range rs {
		r := &stageRank{dev: newStageDev(fmt.Sprintf("stage-dev:%d", i))}
		if stager {
			r.pinned = newStagePinned()
			r.dev.pinned = r.pinned
		}
		r.space = stageWrap{r.dev}
		rs[i] = r
	}
	return rs
}

// stageWrap is a wrapper of a space (as a pool or a fault injector is):
// its blocks are its own, and capabilities (Stager) are found through
// Unwrap.
type stageWrap struct{ d *stageDev }

func (w stageWrap) Unwrap() memspace.Space          { return w.d }
func (w stageWrap) Name() string                    { return "wrapped-" + w.d.Name() }
func (w stageWrap) Properties() memspace.Properties { return w.d.Properties() }

func (w stageWrap) Allocate(size, align int) (memspace.Block, error) {
	b, err := w.d.Allocate(size, align)
	if err != nil {
		return b, err
	}
	return memspace.NewBlock(w, b.Addr(), b.Len(), nil), nil
}

func (w stageWrap) Free(b memspace.Block) error {
	if b.Space() != memspace.Space(w) {
		return fmt.Errorf("%s: free of %v: %w", w.Name(), b, memspace.ErrForeignBlock)
	}
	return w.d.Free(memspace.NewBlock(w.d, b.Addr(), b.Len(), nil))
}

// checkLedgers checks that nothing is left in the ranks' device and
// staging memory.
func checkLedgers(t testing.TB, rs []*stageRank) {
	t.Helper()
	for i, r := range rs {
		assert.Zero(t, r.dev.Stats().Live, "rank %d: device blocks left", i)
		if r.pinned != nil {
			st := r.pinned.Stats()
			assert.Zero(t, st.Live, "rank %d: staging blocks left", i)
			assert.Equal(t, st.Allocs, st.Frees, "rank %d: staging allocations and frees", i)
		}
	}
}

// devBuf returns a buffer of r's device holding vals (an empty one for no
// values) and a function that copies it back and frees it.
func devBuf(t testing.TB, r *stageRank, vals []int32) (*memspace.Buffer[int32], func() []int32) {
	t.Helper()
	whole, err := memspace.Alloc[int32](r.space, max(len(vals), 1))
	require.NoError(t, err)
	b, err := whole.Slice(0, len(vals))
	require.NoError(t, err)
	if len(vals) > 0 {
		require.NoError(t, transfer.Copy(testwait.Ctx(t), b, buf(t, vals)))
	}
	return b, func() []int32 {
		out := make([]int32, len(vals))
		if len(vals) > 0 {
			require.NoError(t, transfer.Copy(testwait.Ctx(t), buf(t, out), b))
		}
		require.NoError(t, whole.Free())
		return out
	}
}

// stageCase is a blocking call run on every rank. bufs gives rank's
// buffers (nil for an argument the rank does not pass) for n elements a
// rank; op runs the call on them.
type stageCase struct {
	name string
	// pieces: Allreduce, Reduce, Bcast, staged in pieces: when the data
	// exceeds a piece, every rank must stage or none.
	pieces bool
	bufs   func(p, rank, n int) [][]int32
	op     func(ctx context.Context, c comm.Comm, n int, b []*memspace.Buffer[int32]) error
}

// vals returns n distinct values of rank r, seeded by k.
func vals(k, r, n int) []int32 {
	s := make([]int32, n)
	for j := range s {
		s[j] = int32(k*100000 + r*1000 + j - 7)
	}
	return s
}

// slot returns part i of b, n elements long.
func slot(b *memspace.Buffer[int32], i, n int) *memspace.Buffer[int32] {
	s, err := b.Slice(i*n, (i+1)*n)
	if err != nil {
		panic(err)
	}
	return s
}

// withSlot is p×n zeros with rank's own n values in slot rank.
func withSlot(p, rank, n int) []int32 {
	s := make([]int32, p*n)
	copy(s[rank*n:], vals(1, rank, n))
	return s
}

func stageCases(p int) []stageCase {
	root := p - 1
	onRoot := func(rank int, s []int32) []int32 {
		if rank == root {
			return s
		}
		return nil
	}
	cases := []stageCase{
		{
			name: "allreduce", pieces: true,
			bufs: func(p, rank, n int) [][]int32 { return [][]int32{vals(1, rank, n), make([]int32, n)} },
			op: func(ctx context.Context, c comm.Comm, n int, b []*memspace.Buffer[int32]) error {
				return comm.Allreduce(ctx, c, b[0], b[1], comm.Sum)
			},
		},
		{
			name: "allreduce-in-place", pieces: true,
			bufs: func(p, rank, n int) [][]int32 { return [][]int32{vals(1, rank, n)} },
			op: func(ctx context.Context, c comm.Comm, n int, b []*memspace.Buffer[int32]) error {
				return comm.Allreduce(ctx, c, b[0], b[0], comm.Max)
			},
		},
		{
			name: "reduce", pieces: true,
			bufs: func(p, rank, n int) [][]int32 { return [][]int32{vals(1, rank, n), onRoot(rank, make([]int32, n))} },
			op: func(ctx context.Context, c comm.Comm, n int, b []*memspace.Buffer[int32]) error {
				return comm.Reduce(ctx, c, b[0], b[1], comm.Sum, root)
			},
		},
		{
			name: "reduce-in-place", pieces: true,
			bufs: func(p, rank, n int) [][]int32 { return [][]int32{vals(1, rank, n)} },
			op: func(ctx context.Context, c comm.Comm, n int, b []*memspace.Buffer[int32]) error {
				var recv *memspace.Buffer[int32]
				if c.Rank() == root {
					recv = b[0]
				}
				return comm.Reduce(ctx, c, b[0], recv, comm.Min, root)
			},
		},
		{
			name: "bcast", pieces: true,
			bufs: func(p, rank, n int) [][]int32 {
				if rank == root {
					return [][]int32{vals(1, rank, n)}
				}
				return [][]int32{make([]int32, n)}
			},
			op: func(ctx context.Context, c comm.Comm, n int, b []*memspace.Buffer[int32]) error {
				return comm.Bcast(ctx, c, b[0], root)
			},
		},
		{
			name: "gather",
			bufs: func(p, rank, n int) [][]int32 { return [][]int32{vals(1, rank, n), onRoot(rank, make([]int32, p*n))} },
			op: func(ctx context.Context, c comm.Comm, n int, b []*memspace.Buffer[int32]) error {
				return comm.Gather(ctx, c, b[0], b[1], root)
			},
		},
		{
			name: "gather-in-place",
			bufs: func(p, rank, n int) [][]int32 {
				if rank == root {
					return [][]int32{withSlot(p, rank, n)}
				}
				return [][]int32{vals(1, rank, n)}
			},
			op: func(ctx context.Context, c comm.Comm, n int, b []*memspace.Buffer[int32]) error {
				if c.Rank() == root {
					return comm.Gather(ctx, c, slot(b[0], root, n), b[0], root)
				}
				return comm.Gather(ctx, c, b[0], nil, root)
			},
		},
		{
			name: "scatter",
			bufs: func(p, rank, n int) [][]int32 { return [][]int32{onRoot(rank, vals(1, rank, p*n)), make([]int32, n)} },
			op: func(ctx context.Context, c comm.Comm, n int, b []*memspace.Buffer[int32]) error {
				return comm.Scatter(ctx, c, b[0], b[1], root)
			},
		},
		{
			name: "scatter-in-place",
			bufs: func(p, rank, n int) [][]int32 {
				if rank == root {
					return [][]int32{vals(1, rank, p*n)}
				}
				return [][]int32{nil, make([]int32, n)}
			},
			op: func(ctx context.Context, c comm.Comm, n int, b []*memspace.Buffer[int32]) error {
				if c.Rank() == root {
					return comm.Scatter(ctx, c, b[0], slot(b[0], root, n), root)
				}
				return comm.Scatter(ctx, c, nil, b[1], root)
			},
		},
		{
			name: "allgather",
			bufs: func(p, rank, n int) [][]int32 { return [][]int32{vals(1, rank, n), make([]int32, p*n)} },
			op: func(ctx context.Context, c comm.Comm, n int, b []*memspace.Buffer[int32]) error {
				return comm.Allgather(ctx, c, b[0], b[1])
			},
		},
		{
			name: "allgather-in-place",
			bufs: func(p, rank, n int) [][]int32 { return [][]int32{withSlot(p, rank, n)} },
			op: func(ctx context.Context, c comm.Comm, n int, b []*memspace.Buffer[int32]) error {
				return comm.Allgather(ctx, c, slot(b[0], c.Rank(), n), b[0])
			},
		},
		{
			name: "alltoall",
			bufs: func(p, rank, n int) [][]int32 { return [][]int32{vals(1, rank, p*n), make([]int32, p*n)} },
			op: func(ctx context.Context, c comm.Comm, n int, b []*memspace.Buffer[int32]) error {
				return comm.Alltoall(ctx, c, b[0], b[1])
			},
		},
		{
			name: "reduce-scatter",
			bufs: func(p, rank, n int) [][]int32 { return [][]int32{vals(1, rank, p*n), make([]int32, n)} },
			op: func(ctx context.Context, c comm.Comm, n int, b []*memspace.Buffer[int32]) error {
				return comm.ReduceScatter(ctx, c, b[0], b[1], comm.Sum)
			},
		},
		{
			name: "sendrecv",
			bufs: func(p, rank, n int) [][]int32 { return [][]int32{vals(1, rank, n), make([]int32, n)} },
			op: func(ctx context.Context, c comm.Comm, n int, b []*memspace.Buffer[int32]) error {
				r, p := c.Rank(), c.Size()
				st, err := comm.Sendrecv(ctx, c, b[0].Block(), (r+1)%p, 5, b[1].Block(), (r+p-1)%p, 5)
				if err == nil && st.Count != 4*n {
					err = fmt.Errorf("sendrecv received %d bytes, want %d", st.Count, 4*n)
				}
				return err
			},
		},
		{
			// A ring of Send and Recv: 0 → 1 → … → p-1 → 0.
			name: "send-recv",
			bufs: func(p, rank, n int) [][]int32 { return [][]int32{vals(1, rank, n), make([]int32, n)} },
			op: func(ctx context.Context, c comm.Comm, n int, b []*memspace.Buffer[int32]) error {
				r, p := c.Rank(), c.Size()
				send := func() error { return comm.Send(ctx, c, b[0].Block(), (r+1)%p, 3) }
				recv := func() error {
					st, err := comm.Recv(ctx, c, b[1].Block(), comm.AnySource, comm.AnyTag)
					if err == nil && (st.Count != 4*n || st.Source != (r+p-1)%p) {
						err = fmt.Errorf("recv status %+v", st)
					}
					return err
				}
				if r == 0 {
					if err := send(); err != nil {
						return err
					}
					return recv()
				}
				if err := recv(); err != nil {
					return err
				}
				return send()
			},
		},
		{
			// Rank 0 sends n+3 elements to rank 1, which receives n, and
			// rank 1 sends n elements into rank 0's n+3.
			name: "truncated-recv",
			bufs: func(p, rank, n int) [][]int32 {
				if rank > 1 {
					return nil
				}
				return [][]int32{vals(1, rank, n+3), make([]int32, n), make([]int32, n+3)}
			},
			op: func(ctx context.Context, c comm.Comm, n int, b []*memspace.Buffer[int32]) error {
				switch c.Rank() {
				case 0:
					if err := comm.Send(ctx, c, b[0].Block(), 1, 9); err != nil {
						return err
					}
					st, err := comm.Recv(ctx, c, b[2].Block(), 1, 9)
					if err != nil || st.Count != 4*n {
						return fmt.Errorf("recv of a short message: status %+v, error %w", st, err)
					}
				case 1:
					st, err := comm.Recv(ctx, c, b[1].Block(), 0, 9)
					if !errors.Is(err, comm.ErrTruncated) || st.Count != 4*n {
						return fmt.Errorf("truncated recv: status %+v, error %w", st, err)
					}
					s, _ := b[0].Slice(0, n)
					return comm.Send(ctx, c, s.Block(), 0, 9)
				}
				return nil
			},
		},
	}
	return cases
}

// stageLayout says which buffers of which rank are device memory.
type stageLayout struct {
	name string
	dev  func(rank, i int) bool
}

var stageLayouts = []stageLayout{
	{"device", func(rank, i int) bool { return true }},
	// Send on the device and receive on the host on even ranks, the
	// other way round on odd ones.
	{"mixed-in-rank", func(rank, i int) bool { return (rank+i)%2 == 0 }},
	// Everything on the device on even ranks, on the host on odd ones.
	{"mixed-across-ranks", func(rank, i int) bool { return rank%2 == 0 }},
}

// runStageCase runs sc on a fresh group of p ranks with n elements a rank,
// each buffer of rank r on r's device where dev says so (host memory
// everywhere for a nil dev), on communicators that stage in pieces of
// chunk bytes (whole buffers for 0), and returns every buffer's final
// contents.
func runStageCase(t *testing.T, sc stageCase, p, n, chunk int, rs []*stageRank, dev func(rank, i int) bool) [][][]int32 {
	t.Helper()
	type rankBufs struct {
		bufs  []*memspace.Buffer[int32]
		reads []func() []int32
	}
	all := make([]rankBufs, p)
	for r := range p {
		for i, v := range sc.bufs(p, r, n) {
			var b *memspace.Buffer[int32]
			var read func() []int32
			switch {
			case v == nil:
			case dev != nil && dev(r, i):
				b, read = devBuf(t, rs[r], v)
			default:
				b = buf(t, v)
				read = func() []int32 { return v }
			}
			all[r].bufs = append(all[r].bufs, b)
			all[r].reads = append(all[r].reads, read)
		}
	}
	cs := newGroup(t, p, local.Options{})
	errs := onRanks(t, context.Background(), cs, func(ctx context.Context, c comm.Comm) error {
		c, err := inPieces(ctx, c, chunk)
		if err != nil || all[c.Rank()].bufs == nil {
			return err
		}
		return sc.op(ctx, c, n, all[c.Rank()].bufs)
	})
	for r, err := range errs {
		require.NoError(t, err, "rank %d", r)
	}
	out := make([][][]int32, p)
	for r := range p {
		for _, read := range all[r].reads {
			var v []int32
			if read != nil {
				v = read()
			}
			out[r] = append(out[r], v)
		}
	}
	return out
}

// inPieces returns c made to stage in pieces of chunk bytes
// (StageInPieces, a collective), or c itself for chunk 0.
func inPieces(ctx context.Context, c comm.Comm, chunk int) (comm.Comm, error) {
	if chunk == 0 {
		return c, nil
	}
	return comm.StageInPieces(ctx, c, chunk)
}

// anyOnDevice reports whether a buffer of sc is on the device under dev.
func anyOnDevice(sc stageCase, p, n int, dev func(rank, i int) bool) bool {
	for r := range p {
		for i, v := range sc.bufs(p, r, n) {
			if v != nil && dev(r, i) {
				return true
			}
		}
	}
	return false
}

// TestStagedCallsMatchHost runs every blocking call on device buffers,
// on some ranks or all, staged whole and, for the element-wise
// collectives, in pieces (StageInPieces): the results are those of the
// call on host buffers.
func TestStagedCallsMatchHost(t *testing.T) {
	registerStagePaths(t)
	for _, p := range []int{2, 3, 4} {
		for _, sc := range stageCases(p) {
			// Sizes of one element, one piece exactly, uneven pieces (23
			// elements: 10+10+3) and many pieces.
			for _, n := range []int{1, 10, 23, 64} {
				want := runStageCase(t, sc, p, n, 0, nil, nil)
				for _, l := range stageLayouts {
					for _, chunk := range []int{0, stageTestChunk} {
						for _, stager := range []bool{true, false} {
							if chunk > 0 && (!sc.pieces || !stager) {
								continue // the others are not cut in pieces
							}
							name := fmt.Sprintf("p=%d/%s/n=%d/%s/chunk=%d/stager=%v", p, sc.name, n, l.name, chunk, stager)
							t.Run(name, func(t *testing.T) {
								rs := newStageRanks(p, stager)
								got := runStageCase(t, sc, p, n, chunk, rs, l.dev)
								assert.Equal(t, want, got)
								checkLedgers(t, rs)
								if stager && anyOnDevice(sc, p, n, l.dev) {
									staged := int64(0)
									for _, r := range rs {
										staged += r.pinned.Stats().Allocs
									}
									assert.NotZero(t, staged, "nothing was staged in the stager's space")
								}
							})
						}
					}
				}
			}
		}
	}
}

// TestStagedEmptyMessages sends and receives empty device buffers.
func TestStagedEmptyMessages(t *testing.T) {
	registerStagePaths(t)
	rs := newStageRanks(2, true)
	b0, done0 := devBuf(t, rs[0], nil)
	b1, done1 := devBuf(t, rs[1], nil)
	cs := newGroup(t, 2, local.Options{})
	for r, err := range onRanks(t, context.Background(), cs, func(ctx context.Context, c comm.Comm) error {
		if c.Rank() == 0 {
			return comm.Send(ctx, c, b0.Block(), 1, 0)
		}
		st, err := comm.Recv(ctx, c, b1.Block(), 0, 0)
		if err == nil && st.Count != 0 {
			err = fmt.Errorf("status %+v", st)
		}
		return err
	}) {
		require.NoError(t, err, "rank %d", r)
	}
	done0()
	done1()
	checkLedgers(t, rs)
}

// TestHostBuffersAreNotStaged: host buffers make no copies and allocate
// no staging memory, also in pieces.
func TestHostBuffersAreNotStaged(t *testing.T) {
	registerStagePaths(t)
	for _, chunk := range []int{0, stageTestChunk} {
		rs := newStageRanks(2, true)
		sc := stageCases(2)[0] // allreduce
		runStageCase(t, sc, 2, 64, chunk, rs, func(rank, i int) bool { return false })
		for _, r := range rs {
			assert.Zero(t, r.pinned.Stats().Allocs, "chunk %d", chunk)
			assert.Zero(t, r.dev.copies.Load(), "chunk %d", chunk)
		}
	}
}

// stageBufs makes every buffer of sc on the ranks' devices and returns
// them, with a function that frees them all.
func stageBufs(t *testing.T, sc stageCase, rs []*stageRank, n int) ([][]*memspace.Buffer[int32], func()) {
	t.Helper()
	p := len(rs)
	all := make([][]*memspace.Buffer[int32], p)
	var frees []func() []int32
	for r := range p {
		for _, v := range sc.bufs(p, r, n) {
			var b *memspace.Buffer[int32]
			if v != nil {
				var free func() []int32
				b, free = devBuf(t, rs[r], v)
				frees = append(frees, free)
			}
			all[r] = append(all[r], b)
		}
	}
	return all, func() {
		for _, free := range frees {
			free()
		}
	}
}

// TestStagingFaults fails the copies to or from the device at various
// points on every rank. The ranks whose copies fail return the fault, in
// the project's shape; a rank left waiting for them in a collective ends
// with its context (as after any failure of one rank). Nothing is left
// allocated.
func TestStagingFaults(t *testing.T) {
	registerStagePaths(t)
	const p, n = 3, 23 // three pieces for the element-wise collectives
	faults := []struct {
		name string
		up   bool // fail copies to the device (out), else from it (in)
		from int  // at device offsets from this one
	}{
		{"in-first", false, 0},
		{"in-later-piece", false, stageTestChunk},
		{"out-first", true, 0},
		{"out-last-piece", true, 2 * stageTestChunk},
	}
	for _, sc := range stageCases(p) {
		for _, f := range faults {
			if f.from > 0 && !sc.pieces {
				continue // staged whole: the copies start at offset 0
			}
			t.Run(sc.name+"/"+f.name, func(t *testing.T) {
				rs := newStageRanks(p, true)
				fault := func(up bool, off int) error {
					if up == f.up && off >= f.from {
						return errFakeFault
					}
					return nil
				}
				all, free := stageBufs(t, sc, rs, n)
				for _, r := range rs {
					r.dev.fault.Store(&fault)
				}
				ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
				defer cancel()
				cs := newGroup(t, p, local.Options{})
				errs := onRanks(t, ctx, cs, func(ctx context.Context, c comm.Comm) error {
					c, err := inPieces(ctx, c, stageTestChunk)
					if err != nil || all[c.Rank()] == nil {
						return err
					}
					return sc.op(ctx, c, n, all[c.Rank()])
				})
				failed := 0
				for r, err := range errs {
					switch {
					case err == nil:
					case errors.Is(err, errFakeFault):
						failed++
						assert.ErrorIs(t, err, memspace.ErrDeviceLost, "rank %d", r)
						var xe *xerr.Error
						if assert.ErrorAs(t, err, &xe, "rank %d", r) {
							assert.Equal(t, "comm", xe.Backend, "rank %d", r)
						}
					default:
						assert.ErrorIs(t, err, context.DeadlineExceeded, "rank %d", r)
					}
				}
				assert.NotZero(t, failed, "no rank failed")
				for _, r := range rs {
					r.dev.fault.Store(nil)
				}
				free()
				checkLedgers(t, rs)
			})
		}
	}
}

// TestStagingErrorShape: a staging error is an *xerr.Error of component
// "comm" naming the call, and matches the cause's sentinel.
func TestStagingErrorShape(t *testing.T) {
	registerStagePaths(t)
	rs := newStageRanks(1, true)
	b, done := devBuf(t, rs[0], vals(1, 0, 8))
	rs[0].pinned.budget(0)
	cs := newGroup(t, 1, local.Options{})
	err := comm.Allreduce(testwait.Ctx(t), cs[0], b, b, comm.Sum)
	require.ErrorIs(t, err, memspace.ErrOutOfMemory)
	var xe *xerr.Error
	require.ErrorAs(t, err, &xe)
	assert.Equal(t, "comm", xe.Backend)
	assert.Equal(t, "allreduce", xe.Op)
	assert.Contains(t, err.Error(), "comm allreduce: ")
	rs[0].pinned.budget(-1)
	require.NoError(t, comm.Allreduce(testwait.Ctx(t), cs[0], b, b, comm.Sum))
	done()
	checkLedgers(t, rs)
}

// TestStagingOutOfMemory: the staging memory runs out on every rank:
// every rank fails with ErrOutOfMemory before sending anything, and
// nothing is left allocated. For the element-wise collectives it runs out
// at the second piece's stand-in too.
func TestStagingOutOfMemory(t *testing.T) {
	registerStagePaths(t)
	const p, n = 2, 23
	for _, sc := range stageCases(p) {
		budgets := []int{0}
		if sc.pieces {
			budgets = append(budgets, 1)
		}
		for _, budget := range budgets {
			t.Run(fmt.Sprintf("%s/after-%d", sc.name, budget), func(t *testing.T) {
				rs := newStageRanks(p, true)
				all, free := stageBufs(t, sc, rs, n)
				for _, r := range rs {
					r.pinned.budget(budget)
				}
				cs := newGroup(t, p, local.Options{})
				for r, err := range onRanks(t, context.Background(), cs, func(ctx context.Context, c comm.Comm) error {
					c, err := inPieces(ctx, c, stageTestChunk)
					if err != nil {
						return err
					}
					if all[c.Rank()] == nil {
						return memspace.ErrOutOfMemory // no buffers: nothing to stage
					}
					return sc.op(ctx, c, n, all[c.Rank()])
				}) {
					require.ErrorIs(t, err, memspace.ErrOutOfMemory, "rank %d", r)
				}
				for _, r := range rs {
					r.pinned.budget(-1)
				}
				free()
				checkLedgers(t, rs)
			})
		}
	}
}

// TestStagedPointToPointFaults: a failed copy in fails the send before
// anything is sent; a failed copy out fails the receive after the message
// was taken. Nothing is left allocated.
func TestStagedPointToPointFaults(t *testing.T) {
	registerStagePaths(t)
	rs := newStageRanks(2, true)
	s, sdone := devBuf(t, rs[0], vals(1, 0, 16))
	r, rdone := devBuf(t, rs[1], make([]int32, 16))
	fault := func(up bool, off int) error { return errFakeFault }
	rs[0].dev.fault.Store(&fault)
	rs[1].dev.fault.Store(&fault)
	cs := newGroup(t, 2, local.Options{})
	ctx := testwait.Ctx(t)

	err := comm.Send(ctx, cs[0], s.Block(), 1, 0)
	require.ErrorIs(t, err, errFakeFault)
	assert.Contains(t, err.Error(), "comm send: ")
	// Nothing was sent: a host receive finds no message.
	ok, err := probeNone(t, cs[1])
	require.NoError(t, err)
	assert.True(t, ok, "the failed send delivered a message")

	// The receive takes the message, then fails to copy it out.
	require.NoError(t, comm.Send(ctx, cs[0], buf(t, vals(2, 0, 16)).Block(), 1, 0))
	st, err := comm.Recv(ctx, cs[1], r.Block(), 0, 0)
	require.ErrorIs(t, err, errFakeFault)
	assert.Contains(t, err.Error(), "comm recv: ")
	assert.Zero(t, st.Count)

	_, err = comm.Sendrecv(ctx, cs[0], s.Block(), 0, 1, buf(t, make([]int32, 16)).Block(), 0, 1)
	require.ErrorIs(t, err, errFakeFault)
	assert.Contains(t, err.Error(), "comm sendrecv: ")
	ok, err = probeNone(t, cs[0])
	require.NoError(t, err)
	assert.True(t, ok, "the failed sendrecv delivered a message")

	rs[0].dev.fault.Store(nil)
	rs[1].dev.fault.Store(nil)
	sdone()
	rdone()
	checkLedgers(t, rs)
}

// probeNone reports whether no user message waits for c: a receive posted
// and canceled at once matches none.
func probeNone(t testing.TB, c comm.Comm) (bool, error) {
	r, err := c.Irecv(memspace.Block{}, comm.AnySource, comm.AnyTag)
	if err != nil {
		return false, err
	}
	if _, done, _ := r.Test(); done {
		return false, nil
	}
	_ = r.Cancel()
	_, err = r.Wait(testwait.Ctx(t))
	return errors.Is(err, comm.ErrCanceled), nil
}

// TestStagedCallsHonourCancellation cancels the context while a piece is
// copied in: every rank stops between pieces with the context's error and
// nothing is left allocated.
func TestStagedCallsHonourCancellation(t *testing.T) {
	registerStagePaths(t)
	const p, n = 3, 64
	for _, sc := range stageCases(p)[:5] { // the element-wise collectives
		t.Run(sc.name, func(t *testing.T) {
			rs := newStageRanks(p, true)
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			// Cancel when any rank copies in its third piece, or copies out
			// its second.
			fault := func(up bool, off int) error {
				if (!up && off >= 2*stageTestChunk) || (up && off >= stageTestChunk) {
					cancel()
				}
				return nil
			}
			all, free := stageBufs(t, sc, rs, n)
			for _, r := range rs {
				r.dev.fault.Store(&fault)
			}
			cs := newGroup(t, p, local.Options{})
			for r, err := range onRanks(t, ctx, cs, func(ctx context.Context, c comm.Comm) error {
				c, err := inPieces(ctx, c, stageTestChunk)
				if err != nil {
					return err
				}
				return sc.op(ctx, c, n, all[c.Rank()])
			}) {
				require.ErrorIs(t, err, context.Canceled, "rank %d", r)
			}
			for _, r := range rs {
				r.dev.fault.Store(nil)
			}
			free()
			checkLedgers(t, rs)
		})
	}
}

// TestNoPathIsNotSupported: a device without a path to the host fails
// every staged call with ErrNotSupported before anything is sent.
func TestNoPathIsNotSupported(t *testing.T) {
	rs := newStageRanks(2, true) // no paths registered
	d, err := memspace.Alloc[int32](rs[0].space, 8)
	require.NoError(t, err)
	defer func() { require.NoError(t, d.Free()) }()
	cs := newGroup(t, 2, local.Options{})
	ctx := testwait.Ctx(t)
	require.ErrorIs(t, comm.Send(ctx, cs[0], d.Block(), 1, 0), comm.ErrNotSupported)
	_, err = comm.Recv(ctx, cs[0], d.Block(), 1, 0)
	require.ErrorIs(t, err, comm.ErrNotSupported)
	_, err = comm.Sendrecv(ctx, cs[0], d.Block(), 1, 0, d.Block(), 1, 0)
	require.ErrorIs(t, err, comm.ErrNotSupported)
	h := buf(t, make([]int32, 16))
	require.ErrorIs(t, comm.Scatter(ctx, cs[0], h, d, 0), comm.ErrNotSupported)
	require.ErrorIs(t, comm.Bcast(ctx, cs[1], d, 0), comm.ErrNotSupported)
	ok, err := probeNone(t, cs[1])
	require.NoError(t, err)
	assert.True(t, ok)
	assert.Zero(t, rs[0].pinned.Stats().Live)
}

// TestStagingOverlapsCopies: in a pipelined collective the copy out of
// piece i-1 and the copy in of piece i+1 run at once (beside the
// collective on piece i): the copy out of piece 0 waits, on every rank,
// until the copy in of piece 2 has started, which only an overlapping
// pipeline lets happen.
func TestStagingOverlapsCopies(t *testing.T) {
	registerStagePaths(t)
	const p, n = 2, 64
	rs := newStageRanks(p, true)
	sc := stageCases(p)[0] // allreduce
	all, free := stageBufs(t, sc, rs, n)
	for _, r := range rs {
		started := make(chan struct{})
		var once sync.Once
		fault := func(up bool, off int) error {
			switch {
			case !up && off == 2*stageTestChunk:
				once.Do(func() { close(started) })
			case up && off == 0:
				select {
				case <-started:
				case <-time.After(5 * time.Second):
					return errors.New("the copy in of piece 2 did not start while piece 0 was copied out")
				}
			}
			return nil
		}
		r.dev.fault.Store(&fault)
	}
	cs := newGroup(t, p, local.Options{})
	for r, err := range onRanks(t, context.Background(), cs, func(ctx context.Context, c comm.Comm) error {
		c, err := inPieces(ctx, c, stageTestChunk)
		if err != nil {
			return err
		}
		return sc.op(ctx, c, n, all[c.Rank()])
	}) {
		require.NoError(t, err, "rank %d", r)
	}
	for _, r := range rs {
		r.dev.fault.Store(nil)
	}
	free()
	checkLedgers(t, rs)
}
