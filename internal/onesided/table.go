package onesided

import (
	"context"
	"crypto/rand"
	"encoding/binary"
	"fmt"
	"sync"
	"time"
	"unsafe"

	"github.com/xpu-go/xpu/comm"
	"github.com/xpu-go/xpu/memspace"
	"github.com/xpu-go/xpu/transfer"
)

// stagedBit marks, in the region number a key carries, a region the host
// cannot touch (see Staged). Region numbers stay below it.
const stagedBit = 1 << 31

// Staged reports whether key names a region of memory the host cannot
// touch (device memory): the transports copy into and out of such a
// region in pieces through host memory (Region.Store and Region.Load),
// never by a copy of the host's own — a single copy between processes, a
// registration for a network card.
func Staged(key comm.RemoteKey) bool { return key.Key&stagedBit != 0 }

// Table is one rank's exposed regions. Its zero value is ready to use;
// it is safe for concurrent use.
type Table struct {
	mu      sync.Mutex
	epoch   uint32 // drawn at the first Expose; every key of the table carries it
	seq     uint32 // the last region number given
	closed  bool
	regions map[uint32]*Region
}

// Region is an exposed block: a comm.Region.
type Region struct {
	t    *Table
	blk  memspace.Block
	data []byte
	key  comm.RemoteKey
	busy sync.WaitGroup // copies under way; added to under t.mu while open
	once sync.Once
}

var _ comm.Region = (*Region)(nil)

// Block is the exposed block.
func (g *Region) Block() memspace.Block { return g.blk }

// Key names the region to the other ranks.
func (g *Region) Key() comm.RemoteKey { return g.key }

// Data is the region's memory, nil for a region the host cannot touch
// (Staged): such a region is reached through Store and Load.
func (g *Region) Data() []byte { return g.data }

// Len is the region's length in bytes.
func (g *Region) Len() int { return g.blk.Len() }

// Store copies src into the region, off bytes into it: a copy of the
// host's for host memory, else a copy of the region's space (a device's
// driver) from src, which returns once the bytes are in place. The caller
// holds the region (Find) and has checked the range.
func (g *Region) Store(ctx context.Context, off int, src []byte) error {
	if g.data != nil {
		copy(g.data[off:], src)
		return nil
	}
	return g.deviceCopy(ctx, off, src, true)
}

// Load copies the region, from off bytes into it, into dst, as Store
// copies into it.
func (g *Region) Load(ctx context.Context, off int, dst []byte) error {
	if g.data != nil {
		copy(dst, g.data[off:])
		return nil
	}
	return g.deviceCopy(ctx, off, dst, false)
}

// deviceCopy copies between host bytes h and len(h) bytes of the region
// at off, into the region when in is set.
func (g *Region) deviceCopy(ctx context.Context, off int, h []byte, in bool) error {
	if len(h) == 0 {
		return nil
	}
	part, err := g.blk.Slice(off, len(h))
	if err != nil {
		return err
	}
	hb, err := memspace.FromSlice(h)
	if err != nil {
		return err
	}
	if in {
		return transfer.CopyBlock(ctx, part, hb.Block())
	}
	return transfer.CopyBlock(ctx, hb.Block(), part)
}

// Done ends a copy that Find let start.
func (g *Region) Done() { g.busy.Done() }

// Close withdraws the region: Find no longer finds it, and Close returns
// once the copies under way are done. It is idempotent and returns nil.
func (g *Region) Close() error { return g.CloseWithin(0, nil) }

// CloseWithin closes the region as Close does, and when the copies under
// way are not done after late (a positive duration), calls onLate once,
// which must make them end (a transport cuts the link of a peer that holds
// a range and does not give it back), then waits for them still.
func (g *Region) CloseWithin(late time.Duration, onLate func()) error {
	g.once.Do(func() {
		g.t.mu.Lock()
		delete(g.t.regions, uint32(g.key.Key))
		g.t.mu.Unlock()
		if late <= 0 || onLate == nil {
			g.busy.Wait()
			return
		}
		done := make(chan struct{})
		go func() {
			g.busy.Wait()
			close(done)
		}()
		timer := time.NewTimer(late)
		defer timer.Stop()
		select {
		case <-done:
		case <-timer.C:
			onLate()
			<-done
		}
	})
	return nil
}

// Expose adds blk, not empty, as a region of rank: data is its host
// memory, or nil when the host cannot touch it (its key is then Staged).
// It returns nil once the table is closed.
func (t *Table) Expose(rank int, blk memspace.Block, data []byte) *Region {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.closed {
		return nil
	}
	if t.regions == nil {
		t.regions = map[uint32]*Region{}
		var b [4]byte
		_, _ = rand.Read(b[:])
		t.epoch = binary.LittleEndian.Uint32(b[:]) | 1
	}
	t.seq = (t.seq + 1) % stagedBit
	// A host region's address is where its bytes are in this process
	// (the single copies of another process reach them there), a staged
	// region's its block's own.
	num, addr := t.seq, uint64(blk.Addr())
	if data == nil {
		num |= stagedBit
	} else {
		addr = uint64(uintptr(unsafe.Pointer(&data[0])))
	}
	g := &Region{t: t, blk: blk, data: data, key: comm.RemoteKey{Rank: rank,
		Addr: addr, Len: blk.Len(), Key: uint64(t.epoch)<<32 | uint64(num)}}
	t.regions[num] = g
	return g
}

// Find returns the open region key names, for a copy of n bytes at off
// into or out of it: the caller copies, then calls Done. It returns nil
// when the key names no open region, does not match it in every field, or
// the range falls outside it; closed reports that the table is closed.
func (t *Table) Find(key comm.RemoteKey, off, n int) (g *Region, closed bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.closed {
		return nil, true
	}
	if t.regions == nil || key.Key>>32 != uint64(t.epoch) {
		return nil, false
	}
	g = t.regions[uint32(key.Key)]
	if g == nil || g.key != key || off < 0 || n < 0 || off > g.key.Len || n > g.key.Len-off {
		return nil, false
	}
	g.busy.Add(1)
	return g, false
}

// Close closes every region and the table: Expose and Find find nothing
// after, and Close returns once the copies under way are done.
func (t *Table) Close() {
	t.mu.Lock()
	t.closed = true
	all := make([]*Region, 0, len(t.regions))
	for _, g := range t.regions {
		all = append(all, g)
	}
	t.mu.Unlock()
	for _, g := range all {
		_ = g.Close()
	}
}

// HostView returns what Table.Expose takes of blk: its host memory, or
// nil for memory the host cannot touch that a path of package transfer
// copies to and from host memory (device memory, which the region then
// reaches through Store and Load). Memory of neither sort is refused with
// an error matching memspace.ErrNotSupported.
func HostView(blk memspace.Block) ([]byte, error) {
	if blk.Len() == 0 || blk.HostAccessible() {
		return blk.Bytes()
	}
	for _, dst := range []memspace.Space{blk.Space(), memspace.GoHeap} {
		src := memspace.GoHeap
		if dst == memspace.GoHeap {
			src = blk.Space()
		}
		if _, err := transfer.Lookup(dst, src); err != nil {
			return nil, fmt.Errorf("block %v: neither host memory nor memory a transfer path reaches: %w", blk, err)
		}
	}
	return nil, nil
}
