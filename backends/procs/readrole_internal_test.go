package procs

import (
	"context"
	"net"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/xpu-go/xpu/internal/p2p"
	"github.com/xpu-go/xpu/internal/tooling/testwait"
)

// TestAwaitHolder checks what Close relies on before it lets go of a
// link: awaitHolder returns only once the waiter holding the read role
// has given it back, and then at once.
func TestAwaitHolder(t *testing.T) {
	a, b := net.Pipe()
	defer a.Close()
	defer b.Close()
	var parked atomic.Int32
	ro := &readRole{conn: a, parked: &parked, grant: make(chan struct{}, 1), wake: make(chan struct{}, 1), idle: time.Hour}
	ro.released.L = &ro.mu

	held, _, stop := ro.takeForWaiter(context.Background(), new(p2p.Done))
	require.True(t, held, "a free role goes to the first waiter")
	require.Nil(t, stop, "a context that never ends needs no watch")
	require.EqualValues(t, 1, ro.directReads())

	ro.close()
	waitsFor(t, "awaitHolder", ro.awaitHolder, "the holder's release", ro.release)
	held, _, _ = ro.takeForWaiter(context.Background(), new(p2p.Done))
	require.False(t, held, "a closed role goes to no waiter")
	ro.awaitHolder() // nobody holds it: returns at once
}

// waitsFor checks that wait, run in a goroutine, is still waiting 50 ms
// on, and returns within 10 s once event has run.
func waitsFor(t *testing.T, name string, wait func(), what string, event func()) {
	t.Helper()
	returned := make(chan struct{})
	go func() {
		wait()
		close(returned)
	}()
	select {
	case <-returned:
		t.Fatalf("%s returned before %s", name, what)
	case <-time.After(50 * time.Millisecond):
	}
	event()
	select {
	case <-returned:
	case <-time.After(10 * time.Second):
		t.Fatalf("%s did not return within 10s of %s", name, what)
	}
}

// TestRoleHasOneHolder races every way of taking the read role — the
// lane's tryTake without the lock, a waiter's takeForWaiter, the reader
// goroutine's takeForReader — and checks that the role never has two
// holders, and that once Close has seen it free (awaitHolder) no waiter
// takes it again.
func TestRoleHasOneHolder(t *testing.T) {
	a, b := net.Pipe()
	defer a.Close()
	defer b.Close()
	var parked atomic.Int32
	var ending atomic.Bool
	ro := &readRole{conn: a, parked: &parked, ending: &ending, grant: make(chan struct{}, 1), wake: make(chan struct{}, 1), idle: time.Millisecond}
	ro.released.L = &ro.mu

	var holders, twice, afterClose, lane, waiter, reader atomic.Int64
	var letGo atomic.Bool // Close has seen the role free: no waiter may hold it
	hold := func(n *atomic.Int64, byWaiter bool) {
		if holders.Add(1) != 1 {
			twice.Add(1)
		}
		if byWaiter && letGo.Load() {
			afterClose.Add(1)
		}
		n.Add(1)
		for range 20 { // a while, for a second taker to come
			if holders.Load() != 1 {
				twice.Add(1)
			}
		}
		holders.Add(-1)
	}
	var stop atomic.Bool
	var wg sync.WaitGroup
	for range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for !stop.Load() {
				if ro.tryTake() {
					hold(&lane, true)
					ro.releaseLane()
				}
				// Leave the role free a while, for the others.
				time.Sleep(time.Microsecond)
			}
		}()
	}
	wg.Add(1)
	go func() {
		defer wg.Done()
		for !stop.Load() {
			held, _, stop := ro.takeForWaiter(context.Background(), new(p2p.Done))
			if held {
				hold(&waiter, true)
				if stop != nil {
					stop()
				}
				ro.release()
			}
			runtime.Gosched()
		}
	}()
	readerDone := make(chan struct{})
	go func() {
		defer close(readerDone)
		idle := time.NewTimer(time.Hour)
		idle.Stop()
		for ro.takeForReader(idle) {
			for i := 0; i < 4 && !ro.wantFlag.Load(); i++ {
				hold(&reader, false)
			}
			ro.handOver()
		}
	}()
	// Until each way has taken the role often, within the tests' bound.
	for deadline := time.Now().Add(testwait.Bound); lane.Load() < 100000 || waiter.Load() < 2000 || reader.Load() < 20000; {
		if time.Now().After(deadline) {
			stop.Store(true)
			t.Fatalf("in %v: held by the lanes %d times, the waiter %d, the reader goroutine %d",
				testwait.Bound, lane.Load(), waiter.Load(), reader.Load())
		}
		time.Sleep(time.Millisecond)
	}
	stop.Store(true)
	testwait.Group(t, &wg, "the lanes and the waiter")
	ro.close()
	ro.awaitHolder()
	letGo.Store(true)
	// The lanes come back after Close: none may take the role.
	for range 100 {
		if ro.tryTake() {
			hold(&lane, true)
			ro.releaseLane()
		}
	}
	ro.end()
	ro.wakeUp()
	testwait.Closed(t, readerDone, "the reader goroutine's end")
	t.Logf("held by the lanes %d times, the waiter %d, the reader goroutine %d", lane.Load(), waiter.Load(), reader.Load())
	require.Zero(t, twice.Load(), "times the role had two holders")
	require.Zero(t, afterClose.Load(), "times a waiter held the role after Close saw it free")
	require.Positive(t, lane.Load(), "the lane never took the role")
	require.Positive(t, waiter.Load(), "the waiter never took the role")
	require.Positive(t, reader.Load(), "the reader goroutine never took the role")
}
