package flight

import (
	"sync"
	"sync/atomic"
	"time"
)

// DefaultTick is the resolution of the recorders' clock: what an entry's
// times are accurate to. A wait worth diagnosing lasts seconds. Each tick
// wakes a thread of the process, which on a node whose processors all
// run ranks takes one of them from a rank: at 10 ms, the 8-byte allreduce
// of four ranks on two processors paid ~4 % for the clock (ADR 50).
const DefaultTick = 100 * time.Millisecond

// clock is the process's coarse clock, shared by the open recorders: one
// goroutine stores the time every tick while a recorder is open, and an
// entry reads it from memory. Reading time.Now costs 30 to 100 ns on a
// virtual machine, a third of an 8-byte message over shared memory.
type clock struct {
	t    int64 // time.Now().UnixNano() at the last tick, stored and loaded atomically
	quit chan struct{}
	done chan struct{}
}

// noClock is the clock of a recorder that keeps none (NewUnclocked): it
// never runs, and reads 0.
var noClock clock

var clocks struct {
	mu    sync.Mutex
	c     *clock
	users int
}

// startClock returns the running clock, started for its first user.
func startClock() *clock {
	clocks.mu.Lock()
	defer clocks.mu.Unlock()
	if clocks.c == nil {
		c := &clock{quit: make(chan struct{}), done: make(chan struct{})}
		atomic.StoreInt64(&c.t, time.Now().UnixNano())
		go c.run()
		clocks.c = c
	}
	clocks.users++
	return clocks.c
}

// stop ends one user's share; the last user stops the goroutine and waits
// for it to end, so that nothing of the recorders outlives them.
func (c *clock) stop() {
	clocks.mu.Lock()
	clocks.users--
	last := clocks.users == 0 && clocks.c == c
	if last {
		clocks.c = nil
	}
	clocks.mu.Unlock()
	if last {
		close(c.quit)
		<-c.done
		// Its recorders read time.Now from now on (Recorder.now).
		atomic.StoreInt64(&c.t, 0)
	}
}

func (c *clock) run() {
	defer close(c.done)
	tick := time.NewTicker(DefaultTick)
	defer tick.Stop()
	for {
		select {
		case <-c.quit:
			return
		case now := <-tick.C:
			atomic.StoreInt64(&c.t, now.UnixNano())
		}
	}
}
