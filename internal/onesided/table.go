package onesided

import (
	"crypto/rand"
	"encoding/binary"
	"sync"
	"time"
	"unsafe"

	"github.com/xpu-go/xpu/comm"
	"github.com/xpu-go/xpu/memspace"
)

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

// Data is the region's memory.
func (g *Region) Data() []byte { return g.data }

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

// Expose adds blk, whose host memory data is not empty, as a region of
// rank. It returns nil once the table is closed.
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
	t.seq++
	g := &Region{t: t, blk: blk, data: data, key: comm.RemoteKey{Rank: rank,
		Addr: uint64(uintptr(unsafe.Pointer(&data[0]))), Len: len(data), Key: uint64(t.epoch)<<32 | uint64(t.seq)}}
	t.regions[t.seq] = g
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
	if g == nil || g.key != key || off < 0 || n < 0 || off > len(g.data) || n > len(g.data)-off {
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
