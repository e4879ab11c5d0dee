package order_test

import (
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"

	"github.com/xpu-go/xpu/internal/order"
	"github.com/xpu-go/xpu/internal/tooling/testwait"
)

func TestReleaseStores(t *testing.T) {
	var w uint64
	for _, v := range []uint64{1, 0, 1 << 63, ^uint64(0), 42} {
		order.Release(&w, v)
		if got := atomic.LoadUint64(&w); got != v {
			t.Fatalf("Release(%#x): the word reads %#x", v, got)
		}
	}
}

// Message passing: what a goroutine writes before it releases a flag is
// what another reads after it sees the flag (run with and without -race;
// a Release that let the data store pass the flag's would fail here on a
// processor or compiler that reorders them, and under -race if it did not
// synchronize).
func TestReleasePublishes(t *testing.T) {
	const rounds = 20000
	var data [4]uint64
	var flag uint64
	deadline := time.Now().Add(testwait.Bound)
	// await spins until the flag reads v, or the bound passes.
	await := func(v uint64) bool {
		for n := 0; atomic.LoadUint64(&flag) != v; n++ {
			if n%4096 == 0 && time.Now().After(deadline) {
				return false
			}
		}
		return true
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		for i := uint64(1); i <= rounds; i++ {
			if !await(2*i - 2) {
				return
			}
			for k := range data {
				data[k] = i*10 + uint64(k)
			}
			order.Release(&flag, 2*i-1)
		}
	}()
	for i := uint64(1); i <= rounds; i++ {
		if !await(2*i - 1) {
			t.Fatalf("round %d: the flag did not come within %v", i, testwait.Bound)
		}
		for k := range data {
			if data[k] != i*10+uint64(k) {
				t.Errorf("round %d: word %d reads %d after the flag", i, k, data[k])
			}
		}
		order.Release(&flag, 2*i)
	}
	testwait.Closed(t, done, "the writer")
}

func BenchmarkRelease(b *testing.B) {
	var w uint64
	for i := 0; b.Loop(); i++ {
		order.Release(&w, uint64(i))
	}
}

func BenchmarkAtomicStore(b *testing.B) {
	var w uint64
	for i := 0; b.Loop(); i++ {
		atomic.StoreUint64(&w, uint64(i))
	}
}

func TestReleaseRecordWrites(t *testing.T) {
	var w [5]uint64
	order.ReleaseRecord(&w, 3, 10, 20, 30, 40, 2)
	assert.Equal(t, [5]uint64{2, 10, 20, 30, 40}, w)
}

// A reader that loads the sequence word before and after the others, and
// sees it marked done and unchanged, reads the words of that record and
// no other's (run with and without -race): ReleaseRecord stores the mark
// before the words and the done value after them.
func TestReleaseRecordGuards(t *testing.T) {
	const rounds = 200000
	var w [5]uint64
	var stop atomic.Bool
	done := make(chan struct{})
	go func() {
		defer close(done)
		for i := uint64(1); i <= rounds && !stop.Load(); i++ {
			order.ReleaseRecord(&w, i<<1|1, i, i, i, i, i<<1)
		}
	}()
	deadline := time.Now().Add(testwait.Bound)
	whole := 0
	for n := 0; ; n++ {
		seq := atomic.LoadUint64(&w[0])
		a, b := atomic.LoadUint64(&w[1]), atomic.LoadUint64(&w[2])
		c, d := atomic.LoadUint64(&w[3]), atomic.LoadUint64(&w[4])
		if seq&1 == 0 && seq != 0 && atomic.LoadUint64(&w[0]) == seq {
			if k := seq >> 1; a != k || b != k || c != k || d != k {
				stop.Store(true)
				t.Fatalf("record %d read whole as %d %d %d %d", k, a, b, c, d)
			}
			whole++
		}
		if seq == rounds<<1 {
			break
		}
		if n%4096 == 0 && time.Now().After(deadline) {
			stop.Store(true)
			t.Fatalf("the writer did not finish within %v", testwait.Bound)
		}
	}
	testwait.Closed(t, done, "the writer")
	if whole == 0 {
		t.Fatal("no record was read whole")
	}
}

func BenchmarkReleaseRecord(b *testing.B) {
	var w [5]uint64
	for i := 0; b.Loop(); i++ {
		v := uint64(i)
		order.ReleaseRecord(&w, v<<1|1, v, v, v, v, v<<1)
	}
}

// ReleasePair stores its first word before its second: a reader that sees
// the second's value sees the first's (run with and without -race).
func TestReleasePairInOrder(t *testing.T) {
	const rounds = 200000
	var a, b uint64
	var stop atomic.Bool
	done := make(chan struct{})
	go func() {
		defer close(done)
		for i := uint64(1); i <= rounds && !stop.Load(); i++ {
			order.ReleasePair(&a, i, &b, i)
		}
	}()
	deadline := time.Now().Add(testwait.Bound)
	for n := 0; ; n++ {
		vb := atomic.LoadUint64(&b)
		va := atomic.LoadUint64(&a)
		if va < vb {
			stop.Store(true)
			t.Fatalf("the second word read %d, then the first %d: stored out of order", vb, va)
		}
		if vb == rounds {
			break
		}
		if n%4096 == 0 && time.Now().After(deadline) {
			stop.Store(true)
			t.Fatalf("the writer did not finish within %v", testwait.Bound)
		}
	}
	testwait.Closed(t, done, "the writer")
}
