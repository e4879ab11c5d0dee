package conformance_test

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"unsafe"

	"github.com/xpu-go/xpu/backends/cpu"
	"github.com/xpu-go/xpu/comm"
	"github.com/xpu-go/xpu/executor"
	"github.com/xpu-go/xpu/impl"
	"github.com/xpu-go/xpu/internal/hostcopy"
	"github.com/xpu-go/xpu/memspace"
	"github.com/xpu-go/xpu/transfer"
)

// This file holds the broken implementations of the self-tests in
// broken_resources_test.go: spaces that serve large blocks on a second,
// careless path or claim properties their memory does not have, transfer
// paths that go wrong only past a split point, an executor whose grain
// follows its load, and components that each leak one goroutine.

// classSpace is host memory on the Go heap that serves blocks of more than
// largeMin bytes on a path of their own, as the cpu space and
// memspace.Pool serve sizes by class. The small path is correct. The large
// one is what its options make it: careless (Free finds a large block by
// its address alone, so a second Free, a prefix of it or a block of another
// space at its address "frees" it), without a host view (though the space
// claims HostAccessible), or starting a goroutine that never ends (onLarge).
type classSpace struct {
	props    memspace.Properties
	careless bool   // the large path's Free checks nothing but the address
	noView   bool   // large blocks have no host view
	onLarge  func() // called on every large allocation

	mu    sync.Mutex
	live  map[memspace.Addr][]byte
	freed map[memspace.Addr]bool // large blocks freed, for the careless Free
}

// largeMin is where classSpace's large path starts.
const largeMin = 1 << 20

var hostProps = memspace.Properties{Kind: "host", Device: -1, HostAccessible: true, Pageable: true, Alignment: 16}

func newClassSpace() *classSpace {
	return &classSpace{props: hostProps, live: map[memspace.Addr][]byte{}, freed: map[memspace.Addr]bool{}}
}

func (s *classSpace) Name() string                    { return "class" }
func (s *classSpace) Properties() memspace.Properties { return s.props }

func (s *classSpace) Allocate(size, align int) (memspace.Block, error) {
	align, err := impl.CheckAlloc(size, align, s.props.Alignment)
	if err != nil {
		return memspace.Block{}, err
	}
	if size > 1<<32 {
		return memspace.Block{}, fmt.Errorf("class: %d bytes: %w", size, memspace.ErrOutOfMemory)
	}
	mem := make([]byte, size+align)
	base := uintptr(unsafe.Pointer(unsafe.SliceData(mem)))
	off := int((uintptr(align) - base%uintptr(align)) % uintptr(align))
	mem = mem[off : off+size : off+size]
	p := unsafe.Pointer(unsafe.SliceData(mem))
	addr := memspace.Addr(uintptr(p))
	large := size > largeMin
	if large && s.onLarge != nil {
		s.onLarge()
	}
	s.mu.Lock()
	s.live[addr] = mem
	delete(s.freed, addr)
	s.mu.Unlock()
	if large && s.noView {
		p = nil // the memory stays alive in s.live
	}
	return memspace.NewBlock(s, addr, size, p), nil
}

func (s *classSpace) Free(b memspace.Block) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.careless {
		// The large path looks at the address and nothing else.
		if mem, ok := s.live[b.Addr()]; ok && len(mem) > largeMin {
			delete(s.live, b.Addr())
			s.freed[b.Addr()] = true
			return nil
		}
		if s.freed[b.Addr()] {
			return nil // freed already: nothing to do
		}
	}
	if b.Space() != memspace.Space(s) {
		return fmt.Errorf("class: free of %v: %w", b, memspace.ErrForeignBlock)
	}
	mem, ok := s.live[b.Addr()]
	if !ok || len(mem) != b.Len() {
		return fmt.Errorf("class: free of %v: %w", b, memspace.ErrDoubleFree)
	}
	delete(s.live, b.Addr())
	if len(mem) > largeMin {
		s.freed[b.Addr()] = true
	}
	return nil
}

// splitCopy returns a host path that cuts copies of hostcopy.SplitMin
// bytes and more into hostcopy.Piece pieces copied in ascending order,
// whether or not the blocks overlap: right for separate blocks, wrong for a
// large copy to a higher address within one block. With dropTail, it
// forgets the last, shorter piece besides.
func splitCopy(dropTail bool) transfer.PathFunc {
	return func(_ context.Context, dst, src memspace.Block) error {
		d, s, err := hostBytes(dst, src)
		if err != nil {
			return err
		}
		if len(d) < hostcopy.SplitMin {
			copy(d, s)
			return nil
		}
		for lo := 0; lo < len(d); lo += hostcopy.Piece {
			hi := min(lo+hostcopy.Piece, len(d))
			if dropTail && hi-lo < hostcopy.Piece {
				break
			}
			copy(d[lo:hi], s[lo:hi])
		}
		return nil
	}
}

// uploadIgnoringOffset copies host memory into the device fakeSpace, but
// writes at the start of the destination's allocation: it forgets where in
// the allocation the destination block starts.
func uploadIgnoringOffset(_ context.Context, dst, src memspace.Block) error {
	s, err := src.Bytes()
	if err != nil {
		return err
	}
	fs, ok := memspace.As[*fakeSpace](dst.Space())
	if !ok {
		return fmt.Errorf("upload to %v: %w", dst, memspace.ErrNotSupported)
	}
	fs.mu.Lock()
	defer fs.mu.Unlock()
	for base, mem := range fs.live {
		if dst.Addr() >= base && dst.Addr()+memspace.Addr(dst.Len()) <= base+memspace.Addr(len(mem)) {
			copy(mem[:dst.Len()], s) // should be mem[dst.Addr()-base:]
			return nil
		}
	}
	return fmt.Errorf("upload to %v: not live: %w", dst, memspace.ErrInvalidArgument)
}

// leakyCopy is a host path that starts a goroutine per copy to report its
// progress on a channel nobody reads: each one blocks for ever.
func leakyCopy(_ context.Context, dst, src memspace.Block) error {
	progress := make(chan int)
	go func() { progress <- dst.Len() }()
	d, s, err := hostBytes(dst, src)
	if err != nil {
		return err
	}
	copy(d, s)
	return nil
}

// adaptiveExec is the CPU executor with a grain that follows its load:
// SuggestedGrain halves for every loop in flight, so that a busy executor
// balances better. Reduce with no grain then sums in chunks that depend on
// what else runs: its floating-point results change from run to run.
type adaptiveExec struct {
	*cpu.Executor
	busy *atomic.Int32
}

func (e adaptiveExec) ParallelFor(ctx context.Context, n int, body func(int)) error {
	e.busy.Add(1)
	defer e.busy.Add(-1)
	return e.Executor.ParallelFor(ctx, n, body)
}

func (e adaptiveExec) ParallelRange(ctx context.Context, n, grain int, body func(lo, hi int)) error {
	e.busy.Add(1)
	defer e.busy.Add(-1)
	return e.Executor.ParallelRange(ctx, n, grain, body)
}

func (e adaptiveExec) SuggestedGrain(n int) int {
	return max(1, e.Executor.SuggestedGrain(n)>>min(e.busy.Load(), 4))
}

// leakyExec is the CPU executor, with a watcher goroutine started by its
// first Execute that nothing stops: one goroutine leaked per executor.
type leakyExec struct {
	*cpu.Executor
	once *sync.Once
}

func (e leakyExec) Execute(ctx context.Context, fn func(context.Context) error) error {
	e.once.Do(func() { go func() { <-never }() })
	return e.Executor.Execute(ctx, fn)
}

// leakyStream is a CPU stream whose Synchronize waits on a goroutine that
// sends its result on an unbuffered channel: when the caller's context ends
// first, nobody receives it, and the goroutine blocks for ever.
type leakyStream struct{ executor.Stream }

func (s leakyStream) Synchronize(ctx context.Context) error {
	done := make(chan error) // unbuffered: the bug
	go func() { done <- s.Stream.Synchronize(context.Background()) }()
	select {
	case err := <-done:
		return err
	case <-ctx.Done():
		return ctx.Err()
	}
}

// leakyRequest's Wait waits on a goroutine that sends the outcome on an
// unbuffered channel: a Wait whose context ends first leaves it blocked for
// ever.
type leakyRequest struct{ comm.Request }

func (r leakyRequest) Wait(ctx context.Context) (comm.Status, error) {
	type outcome struct {
		st  comm.Status
		err error
	}
	done := make(chan outcome) // unbuffered: the bug
	go func() {
		st, err := r.Request.Wait(context.Background())
		done <- outcome{st, err}
	}()
	select {
	case o := <-done:
		return o.st, o.err
	case <-ctx.Done():
		return comm.Status{}, ctx.Err()
	}
}
