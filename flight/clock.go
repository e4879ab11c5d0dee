package flight

import (
	"sync"
	"sync/atomic"
	"time"
)

// DefaultTick is the resolution of the recorders' clock: what an entry's
// times are accurate to. A wait worth diagnosing lasts seconds.
const DefaultTick = 10 * time.Millisecond

// clock is the process's coarse clock, shared by the open recorders: one
// goroutine stores the time every tick while a recorder is open, and an
// entry reads it from memory. Reading time.Now costs 30 to 100 ns on a
// virtual machine, a third of an 8-byte message over shared memory.
type clock struct {
	t    atomic.Int64 // time.Now().UnixNano() at the last tick
	quit chan struct{}
	done chan struct{}
}

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
		c.t.Store(time.Now().UnixNano())
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
			c.t.Store(now.UnixNano())
		}
	}
}

// now is the time at the last tick.
func (c *clock) now() int64 { return c.t.Load() }
