package order_test

import (
	"sync/atomic"
	"testing"
	"time"

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
