package procs

import (
	"time"

	"github.com/xpu-go/xpu/internal/nodecoll"
)

// SetRing sets the native ring's threshold and chunk for a test and
// returns a function that restores them.
func SetRing(min, chunk int) (restore func()) {
	m, c := ringMin, ringChunk
	ringMin, ringChunk = min, chunk
	return func() { ringMin, ringChunk = m, c }
}

// SetWindow sets the ring's window for a test.
func SetWindow(w int) (restore func()) {
	old := ringWindow
	ringWindow = w
	return func() { ringWindow = old }
}

// DirectReads returns how many times a goroutine waiting for a receive
// from peer took the read role of c's link to peer.
func DirectReads(c *Comm, peer int) int64 { return c.links[peer].role.directReads() }

// LaneReads returns how many messages from peer a blocking Recv of c took
// through the small-message lane (lane.go). The count belongs to whoever
// holds the link's read role: call it from the goroutine that did the
// Recv (or one ordered after it), when no Recv from peer is under way.
func LaneReads(c *Comm, peer int) int64 { return c.links[peer].rd.lanes }

// KickRead interrupts the read of whoever holds the read role of c's link
// to peer, as a late completer of a former waiter's request does.
func KickRead(c *Comm, peer int) {
	ro := &c.links[peer].role
	ro.mu.Lock()
	ro.kickLocked()
	ro.mu.Unlock()
}

// KeptWatch returns the Done channel of the context whose registration
// c's link to peer keeps from wait to wait (watchLocked), nil if none.
func KeptWatch(c *Comm, peer int) <-chan struct{} {
	ro := &c.links[peer].role
	ro.mu.Lock()
	defer ro.mu.Unlock()
	return ro.watchDone
}

// WithNodes returns tmpl with a Node per rank for loopback groups:
// node(rank) names the node of each rank.
func WithNodes(tmpl Config, node func(rank int) string) Config {
	tmpl.nodeOf = node
	return tmpl
}

// CorruptShm writes an impossible record header where c reads next from
// peer's ring; false when that link is
// not through shared memory.
func CorruptShm(c *Comm, peer int) bool {
	l := c.links[peer]
	if l == nil || l.shm == nil {
		return false
	}
	l.shm.CorruptInbound()
	return true
}

// NodeCollectives reports whether c runs Barrier, Bcast, Reduce and Allreduce in
// the node's shared region.
func NodeCollectives(c *Comm) bool { return c.nodeColl != nil }

// WithoutIdleCheck returns tmpl with the reader goroutines' idle check
// put off by an hour: progress that waits for it hangs.
func WithoutIdleCheck(tmpl Config) Config {
	tmpl.idleCheck = time.Hour
	return tmpl
}

// NodeRing and NodeTiny are the entries of a rank's ring of small node
// steps and the largest step through it.
const (
	NodeRing = nodecoll.Ring
	NodeTiny = nodecoll.Tiny
)

// IPCAnswered returns how many device messages from peer c copied from
// its mapping and answered.
func IPCAnswered(c *Comm, peer int) uint64 { return c.links[peer].ipc.answered.Load() }
