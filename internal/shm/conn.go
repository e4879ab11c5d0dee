package shm

import (
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"os"
	"runtime"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"
)

// DefaultSpin is how long a reader or a writer polls its ring before it
// sleeps, unless Options.Spin says otherwise: longer than a round trip
// between two processes that each have a core (a few microseconds), far
// shorter than a scheduler's time slice, so that processes sharing a core
// lose little to a peer that polls (ADR 25).
const DefaultSpin = 50 * time.Microsecond

// Doorbell bytes.
const (
	bellData  = 'D' // bytes were published: for a sleeping reader
	bellSpace = 'S' // room was freed: for a writer waiting for it
)

var (
	ringData  = []byte{bellData}
	ringSpace = []byte{bellSpace}
)

// Options configure a Conn.
type Options struct {
	// Bell is a connection to the peer process, used as the doorbell: a
	// byte on it wakes the peer, and its end says that the peer has gone.
	// The Conn owns it and closes it. Required.
	Bell net.Conn
	// Spin is how long a read or a write polls its ring before it sleeps.
	// Zero means DefaultSpin; negative sleeps at once.
	Spin time.Duration
	// PeerPID is the peer's process ID, for the caller's single-copy
	// transfers (PeerPID returns it); zero when unknown.
	PeerPID int
}

// Conn is a byte stream over a segment's two rings; see the package
// documentation. Its methods follow net.Conn's contract: Read returns what
// is there (at least one byte, blocking until there is), Write returns
// once every byte is in the ring, deadlines interrupt both with an error
// matching os.ErrDeadlineExceeded, and Close unblocks everything.
type Conn struct {
	seg   *Segment
	out   producer
	in    consumer
	bell  net.Conn
	pid   int          // Options.PeerPID
	spin  atomic.Int64 // the spin budget in nanoseconds; 0: none
	yield atomic.Bool  // polls give the processor to other processes

	data, space chan struct{} // doorbell wake-ups; one pending at most
	dead        chan struct{} // closed when the doorbell stream has ended
	gone        atomic.Bool   // set just before dead closes: for polls
	deadErr     error         // why; set before dead closes
	bellDone    chan struct{} // closed when the doorbell goroutine returns

	closed    atomic.Bool
	closeCh   chan struct{}
	closeOnce sync.Once
	mapping   *mapping // the segment's memory: Unmap, or the collector, releases it

	rdl, wdl deadline
}

var _ net.Conn = (*Conn)(nil)

// NewConn returns a stream over seg, which it owns (Unmap releases it), with
// the doorbell and the spin budget of opts. The creator's side writes ring
// 0 and reads ring 1; the attacher's side the other way round.
func NewConn(seg *Segment, opts Options) (*Conn, error) {
	if seg == nil || seg.mem == nil {
		return nil, errors.New("shm: no segment")
	}
	if opts.Bell == nil {
		return nil, errors.New("shm: no doorbell connection")
	}
	spin := opts.Spin
	if spin == 0 {
		spin = DefaultSpin
	}
	c := &Conn{
		seg: seg, bell: opts.Bell, pid: opts.PeerPID,
		data: make(chan struct{}, 1), space: make(chan struct{}, 1),
		dead: make(chan struct{}), bellDone: make(chan struct{}), closeCh: make(chan struct{}),
	}
	c.spin.Store(int64(max(spin, 0)))
	c.mapping = &mapping{seg: seg}
	// A Conn its owner never unmaps lets go of the memory once nothing
	// can reach it: no read or write can be under way then.
	runtime.AddCleanup(c, (*mapping).release, c.mapping)
	c.out, c.in = seg.rings()
	c.rdl.init()
	c.wdl.init()
	go c.listen()
	return c, nil
}

// enter begins a read or a write; false once the Conn is closed. It
// counts nothing: the memory stays mapped while the Conn is reachable,
// until its owner, who knows that no read or write is under way any more,
// calls Unmap. A count of the calls under way, which let Close unmap
// under them, cost two locked instructions a call on both sides of every
// message (ADR 28).
func (c *Conn) enter() bool { return !c.closed.Load() }

// exit ends what enter began: it keeps c, and with it the mapping,
// reachable until the read or write has returned.
func (c *Conn) exit() { runtime.KeepAlive(c) }

// mapping is a segment's memory, released once: by Unmap, or by the
// collector's cleanup of a Conn its owner never unmapped.
type mapping struct {
	once sync.Once
	seg  *Segment
	gone atomic.Bool // released (tests)
}

func (m *mapping) release() {
	m.once.Do(func() {
		m.seg.Close()
		m.gone.Store(true)
	})
}

// Read reads published bytes into p, waiting for some when there are
// none. Once the peer has gone and every byte it published is read, it
// returns why the doorbell ended: io.EOF when the peer closed it (or died).
func (c *Conn) Read(p []byte) (int, error) {
	if !c.enter() {
		return 0, net.ErrClosed
	}
	defer c.exit()
	if len(p) == 0 {
		return 0, nil
	}
	if err := c.await(); err != nil {
		return 0, err
	}
	pub := c.in.pub
	n, err := c.in.read(p)
	if n > 0 {
		RaceAcquire()
	}
	if c.in.pub != pub {
		c.wakeWriter()
	}
	return n, err
}

// Next waits, as Read does, for published bytes, and returns the unread
// rest of the record that holds them in place instead of copying them: in
// a, and in b the part that wraps past the ring's end (else empty). The
// writer wrote the record with one Write or TryWriteFrame,
// unless the bytes did not fit in one (Write) or a Read has already taken
// part of it. The
// bytes stay the reader's until it calls Consume, which frees the record,
// or Read, which goes on from its first byte; the reader must not keep
// them past either. Only the reader may call it.
func (c *Conn) Next() (a, b []byte, err error) {
	if !c.enter() {
		return nil, nil, net.ErrClosed
	}
	defer c.exit()
	if err := c.await(); err != nil {
		return nil, nil, err
	}
	RaceAcquire()
	a, b = c.in.view()
	return a, b, nil
}

// Peek looks for a record up to polls times in a tight loop and, when one
// is there, returns it as Next does; ok is false, and nothing returned,
// when none came: for a reader that polls the Conn itself and looks at
// other things between bursts.
func (c *Conn) Peek(polls int) (a, b []byte, ok bool, err error) {
	if !c.enter() {
		return nil, nil, false, net.ErrClosed
	}
	for range polls {
		if ok, err = c.in.ready(); ok || err != nil {
			break
		}
	}
	if !ok {
		if err == nil {
			c.flush()
		}
		c.exit()
		return nil, nil, false, err
	}
	RaceAcquire()
	a, b = c.in.view()
	c.exit()
	return a, b, true, nil
}

// flush publishes the room of the records read and not yet published
// (consumer.done), and wakes the peer's writer if it waits for it: for a
// reader that found nothing to read.
func (c *Conn) flush() {
	if c.in.flush() {
		c.wakeWriter()
	}
}

// Take copies the bytes of the record Next (or Peek) returned,
// from its byte off, into dst, frees the record as Consume does, and
// returns how many bytes it copied: for a reader that wants them out of
// the ring and the record gone in one call.
func (c *Conn) Take(dst []byte, off int) int {
	if !c.enter() {
		return 0
	}
	a, b := c.in.view()
	n := Gather(dst, a, b, off)
	c.skip()
	c.exit()
	return n
}

// Consume frees the record Next (or Peek) returned; the
// peer's writer learns of the room as Read's does (consumer.done). Only
// the reader may call it, after a Next that returned a record and before
// any other read.
func (c *Conn) Consume() {
	if !c.enter() {
		return
	}
	defer c.exit()
	c.skip()
}

// skip frees the record Next returned, and wakes the peer's writer if it
// learns of room by it (consumer.done).
func (c *Conn) skip() {
	pub := c.in.pub
	c.in.skip()
	if c.in.pub != pub {
		c.wakeWriter()
	}
}

// await waits until a record is there to read: polling within the spin
// budget, then asleep until the doorbell rings. It returns the error
// Read returns instead: the Conn closed, the deadline passed, or the peer
// gone with nothing left to read.
func (c *Conn) await() error {
	var until time.Time
	for polls := 0; ; polls++ {
		if ok, err := c.in.ready(); ok || err != nil {
			return err
		}
		if polls == 0 {
			c.flush()
		}
		if err := c.blocked(&c.rdl); err != nil {
			if errors.Is(err, errDead) {
				// The peer published its last bytes before its doorbell
				// ended: look once more.
				if ok, err := c.in.ready(); ok || err != nil {
					return err
				}
				return c.deadErr
			}
			return err
		}
		if c.polling(&until, polls) {
			continue
		}
		c.in.r.sleeping.Swap(1) // then the record is looked at again (fence)
		if ok, err := c.in.ready(); ok || err != nil {
			c.in.r.sleeping.Store(0)
			continue
		}
		select {
		case <-c.data:
		case <-c.dead:
		case <-c.closeCh:
		case <-c.rdl.done():
		}
		c.in.r.sleeping.Store(0)
		until = time.Time{}
		polls = -1
	}
}

// Write copies p into the ring, waiting for room as the peer reads. It
// fails once the peer has gone, when the ring is full.
func (c *Conn) Write(p []byte) (int, error) {
	if !c.enter() {
		return 0, net.ErrClosed
	}
	defer c.exit()
	var until time.Time
	total := 0
	for polls := 0; len(p) > 0; polls++ {
		n, err := c.out.write(p)
		if err != nil {
			return total, err
		}
		if n > 0 {
			total += n
			p = p[n:]
			c.wakeReader()
			continue
		}
		if err := c.blocked(&c.wdl); err != nil {
			if errors.Is(err, errDead) {
				err = fmt.Errorf("shm: the peer has gone (%w) with the ring full", c.deadErr)
			}
			return total, err
		}
		if c.polling(&until, polls) {
			continue
		}
		c.out.r.waiting.Swap(1) // then the reader's index is looked at again (fence)
		if !c.out.full() {
			c.out.r.waiting.Store(0)
			continue
		}
		select {
		case <-c.space:
		case <-c.dead:
		case <-c.closeCh:
		case <-c.wdl.done():
		}
		c.out.r.waiting.Store(0)
		until = time.Time{}
		polls = -1
	}
	return total, nil
}

// TryWriteFrame writes hdr then payload as one record when the ring has
// room for both now, and reports whether it did; it never waits, and
// writes nothing when it returns false with no error. The header goes in
// with one assignment, not a copy; a reader's Next sees the two as one
// record. It fails as Write does on a closed Conn or a corrupt ring. Only
// the writer may call it.
func (c *Conn) TryWriteFrame(hdr *[FrameHeader]byte, payload []byte) (bool, error) {
	if !c.enter() {
		return false, net.ErrClosed
	}
	ok, err := c.out.writeFrame(hdr, payload)
	if ok {
		c.wakeReader()
	}
	c.exit()
	return ok, err
}

// PrepareWrite takes the cache line of the next record this side will
// write for writing (PrefetchWrite), and writes nothing: for a reader
// that has just seen a message it will likely answer. The line is the
// one the peer polls for that answer, and the peer does not poll it
// while it finishes its own send. The peer's first polls take it back
// before the answer is written, so the answer's write still waits for
// it, but less: a few nanoseconds of a small ping-pong's turn (ADR 47).
// The reader calls it, as it calls Peek (not after Unmap), while the
// writer may be writing.
func (c *Conn) PrepareWrite() {
	if c.enter() {
		PrefetchWrite(&c.out.r.data[atomic.LoadUint64(&c.out.next)&c.out.r.mask])
	}
	c.exit()
}

// fence: the reader and the writer each store a word and then load the
// other's — a record, then the sleeping flag; the sleeping flag, then the
// record; the head, then the waiting flag; the waiting flag, then the head —
// so that one of the two always sees the other's store and nobody sleeps
// through a wake-up. That needs the store to be a full fence: Swap, an
// exchange in every build, not Store, which is one in a normal build
// (XCHG) but a plain release store under the race detector, where such
// wake-ups were lost (TestStream hung within thirty runs of -race).

// errDead is blocked's report that the doorbell has ended.
var errDead = errors.New("shm: doorbell ended")

// blocked says why a read or write that found nothing to do must not
// wait: the Conn closed, the deadline d passed, or the peer gone (errDead).
func (c *Conn) blocked(d *deadline) error {
	if c.closed.Load() {
		return net.ErrClosed
	}
	if d.expired.Load() {
		return os.ErrDeadlineExceeded
	}
	if c.gone.Load() {
		return errDead
	}
	return nil
}

// polling reports whether a read or write that has polled polls times
// should poll again (Polling, with this Conn's budget and yield).
func (c *Conn) polling(until *time.Time, polls int) bool {
	return Polling(time.Duration(c.spin.Load()), c.yield.Load(), polls, until)
}

// Polling reports whether a wait that has polled polls times (counted
// from 0) should poll again within the spin budget spin, which starts at
// the first poll. The clock is read only from the 64th poll on, every 32
// polls (a read of it costs more than a poll, and most waits end sooner):
// the budget runs from there, kept in until, a few hundred nanoseconds
// late. With yield (an oversubscribed node), every poll gives the
// processor to another process and every 32nd to another goroutine (the
// peer may be either); else every 256th to a goroutine.
func Polling(spin time.Duration, yield bool, polls int, until *time.Time) bool {
	if spin <= 0 {
		return false
	}
	if yield {
		Yield()
	}
	if polls > 0 && polls%32 == 0 && (yield || polls%256 == 0) {
		runtime.Gosched()
	}
	switch {
	case polls < 64 || polls%32 != 0:
		return true
	case polls == 64:
		*until = time.Now().Add(spin)
		return true
	}
	return time.Now().Before(*until)
}

// wakeReader rings the peer's doorbell if its reader sleeps.
func (c *Conn) wakeReader() {
	if s := c.out.r.sleeping; s.Load() != 0 && s.CompareAndSwap(1, 0) {
		_, _ = c.bell.Write(ringData)
	}
}

// wakeWriter rings the peer's doorbell if its writer waits for room.
func (c *Conn) wakeWriter() {
	if w := c.in.r.waiting; w.Load() != 0 && w.CompareAndSwap(1, 0) {
		_, _ = c.bell.Write(ringSpace)
	}
}

// listen is the doorbell goroutine: it turns the peer's bytes into
// wake-ups until the stream ends.
func (c *Conn) listen() {
	defer close(c.bellDone)
	var buf [64]byte
	for {
		n, err := c.bell.Read(buf[:])
		for _, b := range buf[:n] {
			switch b {
			case bellData:
				notify(c.data)
			case bellSpace:
				notify(c.space)
			default:
				if err == nil {
					err = fmt.Errorf("%w: doorbell byte %#x", ErrCorrupt, b)
				}
			}
		}
		if err != nil {
			if c.closed.Load() {
				err = net.ErrClosed
			}
			c.deadErr = err
			c.gone.Store(true)
			close(c.dead)
			return
		}
	}
}

func notify(ch chan struct{}) {
	select {
	case ch <- struct{}{}:
	default:
	}
}

// Close closes the doorbell and wakes every read and write, which then
// return net.ErrClosed. It is idempotent. The segment stays mapped: see
// Unmap.
func (c *Conn) Close() error {
	var err error
	c.closeOnce.Do(func() {
		c.closed.Store(true)
		close(c.closeCh)
		err = c.bell.Close()
		<-c.bellDone
		c.rdl.stop()
		c.wdl.stop()
	})
	return err
}

// Unmap closes the Conn and releases the segment's memory at once. The
// caller must know that no Read, Write or Room is under way and that none
// will start: each would touch memory no longer mapped. A Conn never
// unmapped releases it when the garbage collector finds it unreachable.
func (c *Conn) Unmap() error {
	err := c.Close()
	c.mapping.release()
	return err
}

// Peer reports whether the doorbell is still up, and if not, why it ended.
func (c *Conn) Peer() error {
	select {
	case <-c.dead:
		return c.deadErr
	default:
		return nil
	}
}

// Room reports whether a write of n bytes would return without waiting
// for the peer: for a caller that must not block. Only the writer may ask.
func (c *Conn) Room(n int) bool {
	if !c.enter() {
		return true // the write fails at once
	}
	defer c.exit()
	return c.out.room(n)
}

// SetSpin changes the spin budget (Options.Spin; here zero and negative
// both mean none) of the reads and writes that start waiting afterwards.
// With yield, every poll gives the processor to any other process that
// wants it (sched_yield): for processes that share processors, whose
// peer may need the very processor the poller holds.
func (c *Conn) SetSpin(d time.Duration, yield bool) {
	c.spin.Store(int64(max(d, 0)))
	c.yield.Store(yield)
}

// PeerPID returns Options.PeerPID.
func (c *Conn) PeerPID() int { return c.pid }

// RingSize returns the size of each of the Conn's rings.
func (c *Conn) RingSize() int { return c.seg.size }

// LocalAddr returns the doorbell's local address.
func (c *Conn) LocalAddr() net.Addr { return c.bell.LocalAddr() }

// RemoteAddr returns the doorbell's remote address.
func (c *Conn) RemoteAddr() net.Addr { return c.bell.RemoteAddr() }

// SetDeadline sets the read and the write deadline.
func (c *Conn) SetDeadline(t time.Time) error {
	c.rdl.set(t)
	c.wdl.set(t)
	return nil
}

// SetReadDeadline sets the deadline of reads: a read waiting at t, or
// called after it, fails with os.ErrDeadlineExceeded. The zero time clears
// it.
func (c *Conn) SetReadDeadline(t time.Time) error {
	c.rdl.set(t)
	return nil
}

// SetWriteDeadline sets the deadline of writes waiting for room.
func (c *Conn) SetWriteDeadline(t time.Time) error {
	c.wdl.set(t)
	return nil
}

// CorruptInbound writes, at the place this side reads next, a record
// header claiming more bytes than the ring holds, as a faulty or hostile
// peer could, and wakes the reader: a test hook.
func (c *Conn) CorruptInbound() {
	at := c.in.head & c.in.r.mask
	binary.LittleEndian.PutUint64(c.in.r.data[at+8:], 1<<40)
	(*atomic.Uint64)(unsafe.Pointer(&c.in.r.data[at])).Store(c.in.head + 1)
	notify(c.data)
}

// deadline is a read or write deadline: expired is read on the fast
// path; done returns a channel closed when it passes.
type deadline struct {
	expired atomic.Bool

	mu    sync.Mutex
	at    time.Time
	ch    chan struct{} // closed once expired
	timer *time.Timer
}

func (d *deadline) init() { d.ch = make(chan struct{}) }

// set moves the deadline to t (zero: none).
func (d *deadline) set(t time.Time) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.timer != nil {
		d.timer.Stop()
		d.timer = nil
	}
	d.at = t
	if t.IsZero() || time.Until(t) > 0 {
		if d.expired.Load() {
			d.expired.Store(false)
			d.ch = make(chan struct{})
		}
		if !t.IsZero() {
			d.timer = time.AfterFunc(time.Until(t), func() { d.fire(t) })
		}
		return
	}
	d.expireLocked()
}

// fire expires the deadline if it is still at.
func (d *deadline) fire(at time.Time) {
	d.mu.Lock()
	if d.at.Equal(at) {
		d.expireLocked()
	}
	d.mu.Unlock()
}

func (d *deadline) expireLocked() {
	if !d.expired.Load() {
		d.expired.Store(true)
		close(d.ch)
	}
}

func (d *deadline) done() <-chan struct{} {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.ch
}

// stop stops the deadline's timer.
func (d *deadline) stop() {
	d.mu.Lock()
	if d.timer != nil {
		d.timer.Stop()
		d.timer = nil
	}
	d.mu.Unlock()
}
