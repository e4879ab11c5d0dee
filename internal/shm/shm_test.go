//go:build linux

package shm

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"os"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/xpu-go/xpu/internal/tooling/testwait"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// stallAfter is how long a test's read or write may wait without moving a
// byte: far longer than a ring of these tests takes to drain, even under
// the race detector on a loaded machine, far shorter than go test's
// timeout. A wake-up lost then fails the test in seconds.
const stallAfter = 5 * time.Second

// bound gives the conns read and write deadlines stallAfter away, so that
// a read or write waiting for a wake-up that never comes fails with
// os.ErrDeadlineExceeded instead of hanging.
func bound(conns ...*Conn) {
	for _, c := range conns {
		_ = c.SetDeadline(time.Now().Add(stallAfter))
	}
}

// pair returns the two ends of a stream over a fresh segment whose rings
// hold ringSize bytes, the creator's first.
func pair(t testing.TB, ringSize int, spin time.Duration) (*Conn, *Conn) {
	t.Helper()
	seg, err := Create(ringSize)
	if err != nil {
		t.Fatal(err)
	}
	o, err := DecodeOffer(seg.Offer().Encode())
	if err != nil {
		t.Fatal(err)
	}
	peer, err := Attach(o)
	if err != nil {
		seg.Close()
		t.Fatal(err)
	}
	seg.Attached()
	b1, b2 := net.Pipe()
	a, err := NewConn(seg, Options{Bell: b1, Spin: spin})
	if err != nil {
		t.Fatal(err)
	}
	b, err := NewConn(peer, Options{Bell: b2, Spin: spin})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = a.Close()
		_ = b.Close()
	})
	return a, b
}

// TestStream sends random bytes both ways at once, in writes and reads of
// random sizes through rings much smaller than the stream, so that both
// wrap around and wait for room and for data many times, polling and
// sleeping. A read or write that moves nothing for stallAfter (a wake-up
// lost) fails, naming its side and direction and the bytes moved. Each
// reader takes its own side's next line for writing after each read
// (PrepareWrite), while the other direction's writer writes that side:
// the hint changes no byte of either stream.
func TestStream(t *testing.T) {
	for _, spin := range []time.Duration{0, -1} {
		t.Run(map[bool]string{true: "poll", false: "sleep"}[spin == 0], func(t *testing.T) {
			a, b := pair(t, MinRing, spin)
			const total = 3 << 20
			dirs := [2]string{"creator to attacher", "attacher to creator"}
			// By direction: bytes of the writes returned, of the write under
			// way, and read.
			var written, writing, read [2]atomic.Int64
			var wg sync.WaitGroup
			errs := make(chan error, 4)
			// The first failure closes both ends, which stops the others:
			// their failures follow from it.
			var failed atomic.Bool
			fail := func(what, waitingFor string, err error) {
				if failed.Swap(true) {
					return
				}
				if errors.Is(err, os.ErrDeadlineExceeded) {
					err = fmt.Errorf("waited %v for %s", stallAfter, waitingFor)
				}
				moved := ""
				for i, dir := range dirs {
					moved += fmt.Sprintf("; %s: %d bytes written, a write of %d under way, %d read",
						dir, written[i].Load(), writing[i].Load(), read[i].Load())
				}
				errs <- fmt.Errorf("%s: %w (of %d bytes each way%s)", what, err, total, moved)
				_ = a.Close()
				_ = b.Close()
			}
			for i, ends := range [][2]*Conn{{a, b}, {b, a}} {
				src := make([]byte, total)
				rng := rand.New(rand.NewPCG(uint64(i), 1))
				for j := range src {
					src[j] = byte(rng.Uint32())
				}
				wg.Add(2)
				go func() {
					defer wg.Done()
					for p := src; len(p) > 0; {
						k := min(len(p), 1+rng.IntN(3*MinRing))
						_ = ends[0].SetWriteDeadline(time.Now().Add(stallAfter))
						writing[i].Store(int64(k))
						n, err := ends[0].Write(p[:k])
						if err == nil && n != k {
							err = fmt.Errorf("short write of %d bytes", n)
						}
						if err != nil {
							fail("the writer "+dirs[i], "room", err)
							return
						}
						writing[i].Store(0)
						written[i].Add(int64(n))
						p = p[k:]
					}
				}()
				go func() {
					defer wg.Done()
					got := make([]byte, 0, total)
					buf := make([]byte, 5000)
					for len(got) < total {
						_ = ends[1].SetReadDeadline(time.Now().Add(stallAfter))
						n, err := ends[1].Read(buf[:1+len(got)%len(buf)])
						read[i].Add(int64(n))
						if err != nil {
							fail("the reader "+dirs[i], "data", err)
							return
						}
						got = append(got, buf[:n]...)
						ends[1].PrepareWrite()
					}
					if !bytes.Equal(got, src) {
						errs <- fmt.Errorf("stream %s corrupted", dirs[i])
					}
				}()
			}
			testwait.Group(t, &wg, "the streams' readers and writers")
			close(errs)
			for err := range errs {
				t.Error(err)
			}
		})
	}
}

// TestPeerGone: the bytes a peer published before it closed are read,
// then the end of the stream; a writer facing a full ring and a gone peer
// fails.
func TestPeerGone(t *testing.T) {
	a, b := pair(t, MinRing, -1)
	bound(a, b)
	if _, err := a.Write([]byte("last words")); err != nil {
		t.Fatal(err)
	}
	if err := a.Close(); err != nil {
		t.Fatal(err)
	}
	got, err := io.ReadAll(b)
	if err != nil || string(got) != "last words" {
		t.Fatalf("read %q, %v; want the last words, then EOF within %v", got, err, stallAfter)
	}
	// The ring toward a has room for one record of MinRing bytes, header
	// included, then b must wait.
	n, err := b.Write(make([]byte, 2*MinRing))
	if errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("write to a gone peer: %d bytes, then still waiting for room after %v; want an error once the ring is full", n, stallAfter)
	}
	if err == nil || n != MinRing-recHeader {
		t.Fatalf("write to a gone peer: %d bytes, %v; want %d, an error", n, err, MinRing-recHeader)
	}
	if b.Peer() == nil {
		t.Fatal("Peer reports a closed peer as up")
	}
}

// TestDeadline: a deadline in the past interrupts a sleeping read (as the
// procs backend's read role kicks its holder), and clearing it lets the next
// read wait and take the data.
func TestDeadline(t *testing.T) {
	a, b := pair(t, MinRing, 0)
	errc := make(chan error, 1)
	go func() {
		_, err := b.Read(make([]byte, 8))
		errc <- err
	}()
	time.Sleep(10 * time.Millisecond)
	_ = b.SetReadDeadline(time.Unix(1, 0))
	select {
	case err := <-errc:
		if !errors.Is(err, os.ErrDeadlineExceeded) {
			t.Fatalf("kicked read: %v, want a deadline error", err)
		}
	case <-time.After(stallAfter):
		t.Fatalf("kicked read: still waiting %v after its deadline was set in the past", stallAfter)
	}
	_ = b.SetReadDeadline(time.Now().Add(20 * time.Millisecond))
	start := time.Now()
	if _, err := b.Read(make([]byte, 8)); !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("read past a deadline: %v", err)
	}
	if d := time.Since(start); d < 15*time.Millisecond {
		t.Fatalf("deadline 20ms away fired after %v", d)
	}
	_ = b.SetReadDeadline(time.Time{})
	go func() {
		time.Sleep(5 * time.Millisecond)
		_, _ = a.Write([]byte("x"))
	}()
	// A watchdog, not a deadline, so that the read waits with none.
	watchdog := time.AfterFunc(stallAfter, func() { _ = b.SetReadDeadline(time.Unix(1, 0)) })
	defer watchdog.Stop()
	buf := make([]byte, 8)
	n, err := b.Read(buf)
	if errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("read after the deadline cleared: no data %v after a write of one byte", stallAfter)
	}
	if err != nil || string(buf[:n]) != "x" {
		t.Fatalf("read after the deadline cleared: %q, %v", buf[:n], err)
	}
}

// TestCorrupt: a peer index that claims more bytes than the ring holds, or
// moves backwards, is ErrCorrupt; nothing is read or written out of
// bounds.
func TestCorrupt(t *testing.T) {
	a, b := pair(t, MinRing, -1)
	bound(a, b)
	b.CorruptInbound()
	if n, err := b.Read(make([]byte, 8)); n != 0 || !errors.Is(err, ErrCorrupt) {
		t.Fatalf("read of a corrupt ring: %d, %v", n, err)
	}
	// a's consumer index moved past what a published.
	if _, err := a.Write(make([]byte, MinRing-recHeader)); err != nil {
		t.Fatal(err)
	}
	a.out.r.head.Store(3 * MinRing)
	if _, err := a.Write([]byte("x")); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("write with a corrupt consumer index: %v", err)
	}
}

// TestAttachRefused: what is not the offered segment is never mapped.
func TestAttachRefused(t *testing.T) {
	seg, err := Create(MinRing)
	if err != nil {
		t.Fatal(err)
	}
	defer seg.Close()
	o := seg.Offer()
	wrong := o
	wrong.Nonce[0] ^= 1
	f, err := os.CreateTemp(t.TempDir(), "plain")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	_ = f.Truncate(int64(segmentSize(MinRing)))
	for name, o := range map[string]Offer{
		"nonce":      wrong,
		"size":       {PID: o.PID, FD: o.FD, RingSize: 2 * MinRing, Nonce: o.Nonce},
		"odd size":   {PID: o.PID, FD: o.FD, RingSize: MinRing + 1, Nonce: o.Nonce},
		"no fd":      {PID: o.PID, FD: 999_999, RingSize: MinRing, Nonce: o.Nonce},
		"no pid":     {PID: 1 << 30, FD: o.FD, RingSize: MinRing, Nonce: o.Nonce},
		"plain file": {PID: o.PID, FD: int(f.Fd()), RingSize: MinRing, Nonce: o.Nonce},
	} {
		if s, err := Attach(o); err == nil {
			s.Close()
			t.Errorf("%s: attached", name)
		}
	}
	if _, err := DecodeOffer(make([]byte, 5)); !errors.Is(err, ErrCorrupt) {
		t.Errorf("short offer: %v", err)
	}
}

// TestNothingLeft: segments leave no descriptor open and nothing in
// /dev/shm.
func TestNothingLeft(t *testing.T) {
	fds := func() int {
		d, err := os.ReadDir("/proc/self/fd")
		if err != nil {
			t.Fatal(err)
		}
		return len(d)
	}
	shm := func() int { // this project's entries: other programs' come and go
		d, _ := os.ReadDir("/dev/shm")
		n := 0
		for _, e := range d {
			if strings.Contains(strings.ToLower(e.Name()), "xpu") {
				n++
			}
		}
		return n
	}
	before, shmBefore := fds(), shm()
	for range 10 {
		a, b := pair(t, MinRing, -1)
		if _, err := a.Write([]byte("x")); err != nil {
			t.Fatal(err)
		}
		_ = a.Close()
		_ = b.Close()
	}
	if after := fds(); after != before {
		t.Errorf("%d descriptors open, %d before", after, before)
	}
	if after := shm(); after != shmBefore {
		t.Errorf("%d entries in /dev/shm, %d before", after, shmBefore)
	}
}

// FuzzConsumer reads a ring whose shared words and bytes are arbitrary: a
// record header at the reader's place with any position and length, and
// any bytes. It never panics, reads a record only when its position is the
// reader's, never more than the ring holds, and reports ErrCorrupt for an
// impossible length.
func FuzzConsumer(f *testing.F) {
	f.Add(uint64(0), uint64(1), uint64(3), []byte("abc"))
	f.Add(uint64(64), uint64(65), uint64(8), []byte("abcdefgh"))
	f.Add(uint64(1<<63), uint64(7), uint64(5), []byte{})
	f.Add(uint64(128), uint64(129), uint64(MinRing), []byte{1, 2})
	f.Add(uint64(4032), uint64(4033), uint64(100), []byte{1, 2})
	f.Fuzz(func(t *testing.T, head, pos, n uint64, data []byte) {
		head &^= recAlign - 1
		mem := make([]byte, segmentSize(MinRing))
		copy(mem[headerSize:], data)
		rd := consumer{r: ringAt(mem, 0, MinRing), head: head}
		at := head & rd.r.mask
		binary.LittleEndian.PutUint64(rd.r.data[at:], pos)
		binary.LittleEndian.PutUint64(rd.r.data[at+8:], n)
		buf := make([]byte, 2*MinRing)
		got, err := rd.read(buf)
		switch {
		case pos != head+1:
			if got != 0 || err != nil {
				t.Fatalf("read %d, %v from a header of another place", got, err)
			}
		case n == 0 || n > MinRing-recHeader:
			if !errors.Is(err, ErrCorrupt) {
				t.Fatalf("record of %d bytes: %v", n, err)
			}
		case uint64(got) != n || err != nil:
			t.Fatalf("read %d bytes, %v of a %d-byte record", got, err, n)
		}
	})
}

// TestUnmap: Close leaves the segment mapped (a read or write under way
// still touches it), Unmap releases it, and calls after either fail with
// net.ErrClosed without touching the memory.
func TestUnmap(t *testing.T) {
	a, b := pair(t, MinRing, 0)
	bound(a, b)
	if _, err := a.Write([]byte("hello")); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 5)
	if _, err := io.ReadFull(b, buf); err != nil || string(buf) != "hello" {
		t.Fatalf("read %q, %v", buf, err)
	}
	if err := a.Close(); err != nil {
		t.Fatal(err)
	}
	if a.mapping.gone.Load() {
		t.Fatal("Close unmapped the segment")
	}
	if err := a.Unmap(); err != nil {
		t.Fatal(err)
	}
	if !a.mapping.gone.Load() {
		t.Fatal("Unmap left the segment mapped")
	}
	if _, err := a.Write(buf); !errors.Is(err, net.ErrClosed) {
		t.Fatalf("Write after Unmap: %v, want net.ErrClosed", err)
	}
	if _, err := a.Read(buf); !errors.Is(err, net.ErrClosed) {
		t.Fatalf("Read after Unmap: %v, want net.ErrClosed", err)
	}
	if !a.Room(1) {
		t.Fatal("Room after Unmap: false, want true (the write fails at once)")
	}
	if err := a.Unmap(); err != nil {
		t.Fatalf("second Unmap: %v", err)
	}
}

// TestUnmappedByCollector: the segment of a closed Conn nobody unmaps is
// released once the Conn is unreachable.
func TestUnmappedByCollector(t *testing.T) {
	m := func() *mapping {
		seg, err := Create(MinRing)
		if err != nil {
			t.Fatal(err)
		}
		b1, b2 := net.Pipe()
		defer b2.Close()
		a, err := NewConn(seg, Options{Bell: b1})
		if err != nil {
			t.Fatal(err)
		}
		if err := a.Close(); err != nil {
			t.Fatal(err)
		}
		return a.mapping
	}()
	deadline := time.Now().Add(10 * time.Second)
	for !m.gone.Load() {
		if time.Now().After(deadline) {
			t.Fatal("the segment of an unreachable Conn was not released within 10s")
		}
		runtime.GC()
		time.Sleep(time.Millisecond)
	}
}
