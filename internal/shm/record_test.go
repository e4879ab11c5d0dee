//go:build linux

package shm

import (
	"bytes"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/xpu-go/xpu/internal/tooling/testwait"
)

// tryWrite publishes a then b as one record when c's ring has room for
// both now, as TryWriteFrame does a frame: for tests of records cut
// anywhere, of any length.
func tryWrite(c *Conn, a, b []byte) (bool, error) {
	if !c.enter() {
		return false, net.ErrClosed
	}
	defer c.exit()
	ok, err := c.out.writeAll(a, b)
	if ok {
		c.wakeReader()
	}
	return ok, err
}

// writeAll publishes a then b as one record when the ring has room for
// both now, and reports whether it did; it never blocks, and writes
// nothing when the room is not there. It returns ErrCorrupt when the
// consumer's index is impossible.
func (w *producer) writeAll(a, b []byte) (bool, error) {
	p, q, ok, err := w.reserve(len(a) + len(b))
	if !ok {
		return false, err
	}
	Fill(p, q, 0, a)
	Fill(p, q, len(a), b)
	w.commit()
	return true, nil
}

// joined returns p and q as one slice.
func joined(p, q []byte) []byte { return append(append([]byte(nil), p...), q...) }

// TestRecordsInPlace: a record written in two parts (tryWrite) is one
// record, which Next returns in place, whole, wrapped or not; Next
// consumes nothing (a Read after it starts from the record's first byte,
// and a Next after a Read returns the rest); TryWriteFrame does the same
// for a frame header and a payload, which Take copies out and frees; a
// write that finds no room writes nothing; the room a reader frees
// reaches the writer a quarter ring at a time while records keep coming,
// and all of it once the reader finds none.
func TestRecordsInPlace(t *testing.T) {
	a, b := pair(t, MinRing, 0)
	bound(a, b)
	hdr := bytes.Repeat([]byte{'h'}, 32)
	payload := bytes.Repeat([]byte{'p'}, 100)
	if ok, err := tryWrite(a, hdr, payload); !ok || err != nil {
		t.Fatalf("tryWrite of 132 bytes into an empty ring = %v, %v", ok, err)
	}
	p, q, err := b.Next()
	if err != nil {
		t.Fatal(err)
	}
	if got := joined(p, q); !bytes.Equal(got, joined(hdr, payload)) {
		t.Fatalf("Next = %d bytes %q, want the record of 132", len(got), got)
	}
	first := make([]byte, 5)
	if n, err := b.Read(first); n != 5 || err != nil || string(first) != "hhhhh" {
		t.Fatalf("Read after Next = %d, %v, %q; want the record's first 5 bytes", n, err, first)
	}
	p, q, err = b.Next()
	if err != nil || len(p)+len(q) != 127 {
		t.Fatalf("Next after a Read of 5 = %d bytes, %v; want the 127 left", len(p)+len(q), err)
	}
	b.Consume()
	if _, _, ok, err := b.Peek(1); ok || err != nil {
		t.Fatalf("Peek(1) on an empty ring = %v, %v", ok, err)
	}

	// Fill the ring with records of 64-byte slots, then one more.
	small := bytes.Repeat([]byte{'s'}, 40)
	fit := 0
	for {
		ok, err := tryWrite(a, hdr[:8], small)
		if err != nil {
			t.Fatal(err)
		}
		if !ok {
			break
		}
		fit++
	}
	if fit != MinRing/recAlign {
		t.Fatalf("%d records of 48 bytes fit a ring of %d, want %d", fit, MinRing, MinRing/recAlign)
	}
	// Freed room reaches the writer a quarter ring at a time while the
	// reader keeps finding records, and all of it once it finds none.
	quarter := MinRing / 4 / recAlign
	for i := range fit {
		p, q, ok, err := b.Peek(1)
		if !ok || err != nil || len(p)+len(q) != 48 {
			t.Fatalf("record %d of %d: Peek(1) = %d bytes, %v, %v", i, fit, len(p)+len(q), ok, err)
		}
		b.Consume()
		switch i + 1 {
		case 1, quarter - 1:
			if ok, _ := tryWrite(a, hdr[:8], small); ok {
				t.Fatalf("tryWrite found room after %d records of %d freed: published before a quarter ring", i+1, quarter)
			}
		case quarter:
			if ok, err := tryWrite(a, hdr[:8], small); !ok || err != nil {
				t.Fatalf("tryWrite once a quarter ring is freed = %v, %v", ok, err)
			}
		}
	}
	// The record written at the quarter, then nothing: the look that
	// finds nothing publishes the rest.
	if _, _, ok, err := b.Peek(1); !ok || err != nil {
		t.Fatalf("the record written once room was published: %v, %v", ok, err)
	}
	b.Consume()
	if _, _, ok, _ := b.Peek(1); ok {
		t.Fatal("a record is left after the refused tryWrite: it wrote something")
	}
	for i := range fit {
		if ok, err := tryWrite(a, hdr[:8], small); !ok || err != nil {
			t.Fatalf("record %d of %d into a ring the reader emptied: tryWrite = %v, %v", i, fit, ok, err)
		}
	}
	for range fit {
		if _, _, ok, _ := b.Peek(1); !ok {
			t.Fatal("a record written is missing")
		}
		b.Consume()
	}
	// A record that wraps past the ring's end: the position is now
	// (2*fit+1)*64 mod MinRing = 64; a record of 3,000 bytes takes it to
	// 3,136, and the next, of 2,000, wraps.
	big := make([]byte, 3000)
	if ok, err := tryWrite(a, big[:16], big[16:]); !ok || err != nil {
		t.Fatalf("tryWrite of 3000 bytes = %v, %v", ok, err)
	}
	if _, _, err := b.Next(); err != nil {
		t.Fatal(err)
	}
	b.Consume()
	wrap := make([]byte, 2000)
	for i := range wrap {
		wrap[i] = byte(i * 7)
	}
	if ok, err := tryWrite(a, wrap[:32], wrap[32:]); !ok || err != nil {
		t.Fatalf("tryWrite of 2000 bytes = %v, %v", ok, err)
	}
	p, q, err = b.Next()
	if err != nil {
		t.Fatal(err)
	}
	if len(q) == 0 {
		t.Fatalf("the record of 2000 bytes did not wrap (%d + %d): the test's positions are off", len(p), len(q))
	}
	if !bytes.Equal(joined(p, q), wrap) {
		t.Fatal("the wrapped record differs from what tryWrite wrote")
	}
	b.Consume()

	// TryWriteFrame: a frame header and a payload that wraps, taken out
	// with Take from past the header. The position is now 64 + 3,072 +
	// 2,048 = 5,184, 1,088 in the ring; a record of 1,500 bytes takes it
	// to 2,624, where one of 2,032 wraps.
	if ok, err := a.TryWriteFrame(new([FrameHeader]byte), big[:1500-FrameHeader]); !ok || err != nil {
		t.Fatalf("TryWriteFrame of 1500 bytes = %v, %v", ok, err)
	}
	if _, _, err := b.Next(); err != nil {
		t.Fatal(err)
	}
	b.Consume()
	var fh [FrameHeader]byte
	for i := range fh {
		fh[i] = byte(100 + i)
	}
	if ok, err := a.TryWriteFrame(&fh, wrap); !ok || err != nil {
		t.Fatalf("TryWriteFrame of a header and 2000 bytes = %v, %v", ok, err)
	}
	p, q, err = b.Next()
	if err != nil {
		t.Fatal(err)
	}
	if len(q) == 0 || len(p) < FrameHeader {
		t.Fatalf("the frame's record is %d + %d bytes: the test's positions are off", len(p), len(q))
	}
	if !bytes.Equal(joined(p, q), joined(fh[:], wrap)) {
		t.Fatal("the frame's record differs from what TryWriteFrame wrote")
	}
	dst := make([]byte, len(wrap)+10)
	if n := b.Take(dst, FrameHeader); n != len(wrap) || !bytes.Equal(dst[:n], wrap) {
		t.Fatalf("Take from past the header = %d bytes, equal %v; want the 2000 of the payload", n, bytes.Equal(dst[:n], wrap))
	}
	if _, _, ok, _ := b.Peek(1); ok {
		t.Fatal("a record is left after Take: it did not free the frame's")
	}

	if ok, err := a.TryWriteFrame(new([FrameHeader]byte), make([]byte, MinRing)); ok || err != nil {
		t.Fatalf("TryWriteFrame of more than the ring = %v, %v; want false, nil", ok, err)
	}
	if ok, err := tryWrite(a, make([]byte, MinRing), nil); ok || err != nil {
		t.Fatalf("tryWrite of more than the ring = %v, %v; want false, nil", ok, err)
	}
	if ok, err := tryWrite(a, nil, nil); ok || err != nil {
		t.Fatalf("tryWrite of nothing = %v, %v; want false, nil", ok, err)
	}
}

// TestNextBlocks: Next waits for a record as Read does, and fails as it
// does: at the deadline, on Close.
func TestNextBlocks(t *testing.T) {
	a, b := pair(t, MinRing, -1)
	_ = b.SetReadDeadline(time.Now().Add(20 * time.Millisecond))
	if _, _, err := b.Next(); !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("Next past its deadline = %v, want os.ErrDeadlineExceeded", err)
	}
	bound(a, b)
	got := make(chan error, 1)
	go func() {
		p, q, err := b.Next()
		if err == nil && string(joined(p, q)) != "late" {
			err = fmt.Errorf("Next = %q, want \"late\"", joined(p, q))
		}
		got <- err
	}()
	time.Sleep(10 * time.Millisecond) // asleep, most likely: the doorbell must wake it
	if _, err := a.Write([]byte("late")); err != nil {
		t.Fatal(err)
	}
	if err := testwait.Recv(t, got, "Next woken by the doorbell"); err != nil {
		t.Fatal(err)
	}
	b.Consume()
	_ = b.Close()
	if _, _, err := b.Next(); !errors.Is(err, net.ErrClosed) {
		t.Fatalf("Next after Close = %v, want net.ErrClosed", err)
	}
	if _, _, _, err := b.Peek(1); !errors.Is(err, net.ErrClosed) {
		t.Fatalf("Peek(1) after Close = %v, want net.ErrClosed", err)
	}
	_ = a.Close()
	if _, err := a.TryWriteFrame(new([FrameHeader]byte), []byte("x")); !errors.Is(err, net.ErrClosed) {
		t.Fatalf("TryWriteFrame after Close = %v, want net.ErrClosed", err)
	}
}

// TestRecordStream streams random bytes through a small ring with a
// writer that mixes tryWrite (its buffer cut in two at random) and Write,
// and a reader that mixes Next and Consume with Read, polling and
// sleeping: every byte arrives once, in order.
func TestRecordStream(t *testing.T) {
	for _, spin := range []time.Duration{0, -1} {
		t.Run(map[bool]string{true: "poll", false: "sleep"}[spin == 0], func(t *testing.T) {
			a, b := pair(t, MinRing, spin)
			const total = 2 << 20
			src := make([]byte, total)
			rng := rand.New(rand.NewPCG(7, 1))
			for i := range src {
				src[i] = byte(rng.Uint32())
			}
			errs := make(chan error, 2)
			var wg sync.WaitGroup
			wg.Add(2)
			go func() {
				defer wg.Done()
				wr := rand.New(rand.NewPCG(8, 1))
				for p := src; len(p) > 0; {
					k := min(len(p), 1+wr.IntN(MinRing))
					cut := wr.IntN(k + 1)
					_ = a.SetWriteDeadline(time.Now().Add(stallAfter))
					ok, err := tryWrite(a, p[:cut], p[cut:k])
					if err == nil && !ok {
						_, err = a.Write(p[:k])
					}
					if err != nil {
						errs <- fmt.Errorf("writer, %d bytes left: %w", len(p), err)
						_ = a.Close()
						return
					}
					p = p[k:]
				}
			}()
			go func() {
				defer wg.Done()
				rd := rand.New(rand.NewPCG(9, 1))
				got := make([]byte, 0, total)
				buf := make([]byte, 3000)
				for len(got) < total {
					_ = b.SetReadDeadline(time.Now().Add(stallAfter))
					if rd.IntN(2) == 0 {
						p, q, err := b.Next()
						if err != nil {
							errs <- fmt.Errorf("reader, at %d: Next: %w", len(got), err)
							return
						}
						got = append(append(got, p...), q...)
						b.Consume()
						continue
					}
					n, err := b.Read(buf[:1+rd.IntN(len(buf))])
					if err != nil {
						errs <- fmt.Errorf("reader, at %d: Read: %w", len(got), err)
						return
					}
					got = append(got, buf[:n]...)
				}
				if !bytes.Equal(got, src) {
					errs <- errors.New("the stream arrived corrupted")
				}
			}()
			testwait.Group(t, &wg, "the record stream's writer and reader")
			close(errs)
			for err := range errs {
				t.Error(err)
			}
		})
	}
}
