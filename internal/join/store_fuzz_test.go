package join

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net"
	"strings"
	"testing"
	"time"
)

// storeMsg encodes a store message for the seeds.
func storeMsg(op uint8, key, val string) []byte {
	var b bytes.Buffer
	if err := writeStoreMsg(&b, op, key, val); err != nil {
		panic(err)
	}
	return b.Bytes()
}

func storeSeeds() [][]byte {
	cat := func(ms ...[]byte) []byte { return bytes.Join(ms, nil) }
	return [][]byte{
		cat(storeMsg(storeSet, "addr/1", "127.0.0.1:4000"), storeMsg(storeGet, "addr/1", ""), storeMsg(storeDone, "", "")),
		cat(storeMsg(storeGet, "addr/2", ""), storeMsg(storeSet, "k", "a"), storeMsg(storeSet, "k", "b")),
		storeMsg(storeSet, strings.Repeat("k", maxStoreKey), strings.Repeat("v", maxStoreValue)),
		storeMsg(9, "x", "y"),
		{storeSet, maxStoreKey + 1, 0, 0},
		{storeGet, 0, 0xff, 0xff},
		{storeSet, 3, 1, 0, 'a'},
		nil,
	}
}

// FuzzStoreMsg decodes a stream of store messages as a store's reader
// does: each message decoded re-encodes to the bytes it came from, keys and
// values stay within their bounds (so a message never makes the reader
// allocate more than maxStoreKey+maxStoreValue bytes), and the stream ends
// with io.EOF at a message boundary, io.ErrUnexpectedEOF inside one, or a
// protocol error.
func FuzzStoreMsg(f *testing.F) {
	for _, s := range storeSeeds() {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, in []byte) {
		in = in[:min(len(in), maxStoreProg)]
		r := bytes.NewReader(in)
		for {
			at := len(in) - r.Len()
			op, key, val, err := readStoreMsg(r)
			if err != nil {
				if !errors.Is(err, io.EOF) && !errors.Is(err, io.ErrUnexpectedEOF) && !errors.Is(err, ErrProtocol) {
					t.Fatalf("store message at %d: %v", at, err)
				}
				if errors.Is(err, io.EOF) && at != len(in) {
					t.Fatalf("io.EOF at %d of %d bytes", at, len(in))
				}
				return
			}
			if len(key) > maxStoreKey || len(val) > maxStoreValue {
				t.Fatalf("store message with a key of %d and a value of %d bytes accepted", len(key), len(val))
			}
			var b bytes.Buffer
			if err := writeStoreMsg(&b, op, key, val); err != nil {
				t.Fatalf("decoded message (%d, %q, %q) does not encode: %v", op, key, val, err)
			}
			if got := in[at : len(in)-r.Len()]; !bytes.Equal(b.Bytes(), got) {
				t.Fatalf("%x decodes to (%d, %q, %q), which encodes to %x", got, op, key, val, b.Bytes())
			}
		}
	})
}

// maxStoreProg is the longest stream the store targets decode (the rest is
// ignored): room for a message of the largest size and many small ones.
// Their loops run once per message, so a longer input reaches iteration
// counts that the fuzzer counts as new coverage no shorter input keeps;
// its minimization of such an input is quadratic in the input's length,
// with an execution per candidate, and one of many kilobytes holds the
// fuzzer at no executions per second for the whole -fuzzminimizetime (as
// FuzzDecodeFrame's inputs of any length did).
const maxStoreProg = 2048

// FuzzStoreServer plays an arbitrary client to the rendezvous store that
// rank 0 serves, over an in-memory connection and in the fuzzing goroutine
// (the store is stopped, so that a GET of a key never set is answered at
// once rather than waiting). The store must answer each request as a
// model of it does — a SET of a new key is taken while the store has room,
// a second SET of a key only with the same value, a GET returns what was
// set — stop at DONE, at an unknown operation and at a message it cannot
// read, never hold more keys than its bound, and write only well-formed
// answers.
func FuzzStoreServer(f *testing.F) {
	for _, s := range storeSeeds() {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, in []byte) {
		in = in[:min(len(in), maxStoreProg)]
		const size = 3
		s := newStoreServer(size)
		stop := make(chan struct{})
		close(stop)
		conn := &storeConn{in: in}
		s.serve(context.Background(), conn, 1, stop, func() string { return "gave up" })

		// What the store must have answered, from a model: a status and
		// a reply for each request read, up to DONE or an unknown
		// operation (the text of a refusal is the store's own).
		type answer struct {
			status uint8
			reply  string
		}
		var want []answer
		kv := map[string]string{}
		done := false
		r := bytes.NewReader(in)
		for !done {
			op, key, val, err := readStoreMsg(r)
			if err != nil {
				break
			}
			a := answer{status: storeOK}
			switch op {
			case storeSet:
				if old, ok := kv[key]; ok && old != val {
					a.status = storeErr
				} else if !ok && len(kv) >= 4*size+16 {
					a.status = storeErr
				} else {
					kv[key] = val
				}
			case storeGet:
				v, ok := kv[key]
				if !ok {
					a.status = storeErr
				}
				a.reply = v
			case storeDone:
				done = true
			default:
				a.status = storeErr
				done = true
			}
			want = append(want, a)
		}
		if len(s.kv) > 4*size+16 {
			t.Fatalf("the store holds %d keys", len(s.kv))
		}
		got := bytes.NewReader(conn.out.Bytes())
		for i, w := range want {
			status, key, reply, err := readStoreMsg(got)
			if err != nil {
				t.Fatalf("answer %d of %d: %v", i, len(want), err)
			}
			if key != "" || status != w.status || (w.status == storeOK && reply != w.reply) {
				t.Fatalf("answer %d is (%d, %q, %q), want (%d, %q)", i, status, key, reply, w.status, w.reply)
			}
		}
		if got.Len() != 0 {
			t.Fatalf("%d bytes written after the %d answers expected", got.Len(), len(want))
		}
		s.mu.Lock()
		saidDone := s.done[1]
		s.mu.Unlock()
		if wantDone := len(want) > 0 && done && want[len(want)-1].status == storeOK; saidDone != wantDone {
			t.Fatalf("client marked done: %v, want %v", saidDone, wantDone)
		}
	})
}

// storeConn is a client connection that sends in and records what the
// store writes.
type storeConn struct {
	in  []byte
	out bytes.Buffer
}

func (c *storeConn) Read(p []byte) (int, error) {
	if len(c.in) == 0 {
		return 0, io.EOF
	}
	n := copy(p, c.in)
	c.in = c.in[n:]
	return n, nil
}

func (c *storeConn) Write(p []byte) (int, error)      { return c.out.Write(p) }
func (c *storeConn) Close() error                     { return nil }
func (c *storeConn) LocalAddr() net.Addr              { return &net.TCPAddr{} }
func (c *storeConn) RemoteAddr() net.Addr             { return &net.TCPAddr{} }
func (c *storeConn) SetDeadline(time.Time) error      { return nil }
func (c *storeConn) SetReadDeadline(time.Time) error  { return nil }
func (c *storeConn) SetWriteDeadline(time.Time) error { return nil }
