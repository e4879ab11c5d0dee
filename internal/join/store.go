package join

import (
	"bufio"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"time"

	"github.com/xpu-go/xpu/xerr"
)

// The rendezvous store: a small key-value store that rank 0 serves during
// Dial, where the other ranks publish the address they listen on and read
// each other's. A GET waits until the key is set. Each client says DONE
// when it no longer needs the store; rank 0 stops serving once all have.
// When rank 0's join timeout passes first, a GET still waiting is answered
// storeGaveUp, with what rank 0 waited for in vain.
const (
	storeSet  uint8 = 1
	storeGet  uint8 = 2
	storeDone uint8 = 3

	storeOK     uint8 = 0
	storeErr    uint8 = 1
	storeGaveUp uint8 = 2

	maxStoreKey   = 128
	maxStoreValue = 1024
)

// errStore reports a request the store refused. The store's answer says
// why; the client adds errStore.
var errStore = errors.New("store request refused")

// closed is a closed channel.
var closed = func() chan struct{} {
	ch := make(chan struct{})
	close(ch)
	return ch
}()

type storeServer struct {
	size int
	// arrived holds the ranks that have reached the store (rank 0 and the
	// clients that authenticated), finished those that said DONE.
	arrived, finished *Roster

	mu      sync.Mutex
	kv      map[string]string
	changed chan struct{} // closed and replaced on every set
	done    map[int]bool
	doneCh  chan struct{} // closed once every client has said DONE
	getting int           // GETs not yet answered
}

func newStoreServer(size int) *storeServer {
	return &storeServer{size: size, arrived: NewRoster(size, 0), finished: NewRoster(size, 0),
		kv: map[string]string{}, changed: make(chan struct{}), done: map[int]bool{}, doneCh: make(chan struct{})}
}

// allDone returns a channel closed once every client is done; for a rank
// that serves no store it is closed already.
func (s *storeServer) allDone() <-chan struct{} {
	if s == nil {
		return closed
	}
	return s.doneCh
}

// serve answers the requests of the client rank on conn until it is done,
// hangs up or stop closes. ctx is the join's: when the join timeout ends
// it, a GET still waiting is answered storeGaveUp with gaveUp's text.
func (s *storeServer) serve(ctx context.Context, conn net.Conn, rank int, stop <-chan struct{}, gaveUp func() string) {
	s.arrived.Arrive(rank)
	br := bufio.NewReader(conn)
	for {
		op, key, val, err := readStoreMsg(br)
		if err != nil {
			return
		}
		var reply string
		switch op {
		case storeSet:
			err = s.set(key, val)
		case storeGet:
			s.mu.Lock()
			s.getting++
			s.mu.Unlock()
			reply, err = s.get(ctx, key, stop)
		case storeDone:
			// Answer first: rank 0 may hang up on every client once all
			// are done.
			if writeStoreMsg(conn, storeOK, "", "") == nil {
				s.markDone(rank)
			}
			return
		default:
			err = xerr.Detail(ErrProtocol, "unknown store operation %d", op)
		}
		status := storeOK
		switch {
		case errors.Is(err, ErrTimeout):
			status, reply = storeGaveUp, gaveUp()
		case err != nil:
			status, reply = storeErr, err.Error()
		}
		werr := writeStoreMsg(conn, status, "", reply)
		if op == storeGet {
			s.answered()
		}
		if werr != nil || op < storeSet || op > storeDone {
			return // an unknown operation ends the session
		}
	}
}

// answered counts a GET answered (or abandoned).
func (s *storeServer) answered() {
	s.mu.Lock()
	s.getting--
	s.mu.Unlock()
}

// drain waits, at most d, until every GET has been answered: rank 0 calls
// it when its join timeout has ended the GETs waiting, before it hangs up.
func (s *storeServer) drain(d time.Duration) {
	for end := time.Now().Add(d); time.Now().Before(end); time.Sleep(5 * time.Millisecond) {
		s.mu.Lock()
		n := s.getting
		s.mu.Unlock()
		if n <= 0 {
			return
		}
	}
}

func (s *storeServer) set(key, val string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if old, ok := s.kv[key]; ok && old != val {
		return fmt.Errorf("key %q set twice (two processes with one rank?)", key)
	}
	if len(s.kv) >= 4*s.size+16 {
		return errors.New("store full")
	}
	s.kv[key] = val
	close(s.changed)
	s.changed = make(chan struct{})
	return nil
}

func (s *storeServer) get(ctx context.Context, key string, stop <-chan struct{}) (string, error) {
	for {
		s.mu.Lock()
		v, ok := s.kv[key]
		ch := s.changed
		s.mu.Unlock()
		if ok {
			return v, nil
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return "", context.Cause(ctx)
		case <-stop:
			return "", errors.New("store closed")
		}
	}
}

func (s *storeServer) markDone(rank int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.done[rank] {
		return
	}
	s.done[rank] = true
	s.finished.Arrive(rank)
	if len(s.done) == s.size-1 {
		close(s.doneCh)
	}
}

// storeClient talks to the store over an authenticated connection.
type storeClient struct {
	conn net.Conn
	br   *bufio.Reader
}

// call sends one request and returns the reply's value.
func (sc *storeClient) call(ctx context.Context, op uint8, key, val string) error {
	_, err := sc.roundTrip(ctx, op, key, val)
	return err
}

func (sc *storeClient) get(ctx context.Context, key string) (string, error) {
	return sc.roundTrip(ctx, storeGet, key, "")
}

func (sc *storeClient) roundTrip(ctx context.Context, op uint8, key, val string) (string, error) {
	if sc.br == nil {
		sc.br = bufio.NewReader(sc.conn)
	}
	stop := context.AfterFunc(ctx, func() { _ = sc.conn.SetDeadline(time.Unix(1, 0)) })
	defer stop()
	if err := writeStoreMsg(sc.conn, op, key, val); err != nil {
		return "", sc.connErr(ctx, err)
	}
	status, _, reply, err := readStoreMsg(sc.br)
	if err != nil {
		return "", sc.connErr(ctx, err)
	}
	switch status {
	case storeOK:
		return reply, nil
	case storeGaveUp:
		return "", xerr.Detail(ErrTimeout, "rank 0 gave up: %s", reply)
	}
	return "", xerr.Detail(errStore, "%s", reply)
}

// connErr describes a failure of the store connection: ctx's error when
// ctx ended, else rank 0 went away before the job formed.
func (sc *storeClient) connErr(ctx context.Context, err error) error {
	if ctx.Err() != nil {
		return fmt.Errorf("%w (%w)", ctx.Err(), err)
	}
	if errors.Is(err, ErrProtocol) {
		return err
	}
	return fmt.Errorf("rank 0 hung up before the job formed (it exited or gave up): %w", err)
}

// A store message is op (or status) u8, key length u8, value length u16,
// key, value.
func writeStoreMsg(w io.Writer, op uint8, key, val string) error {
	if len(key) > maxStoreKey || len(val) > maxStoreValue {
		return xerr.Detail(errStore, "key or value too long")
	}
	b := make([]byte, 4, 4+len(key)+len(val))
	b[0], b[1] = op, uint8(len(key))
	binary.LittleEndian.PutUint16(b[2:], uint16(len(val)))
	b = append(append(b, key...), val...)
	_, err := w.Write(b)
	return err
}

func readStoreMsg(r io.Reader) (op uint8, key, val string, err error) {
	var h [4]byte
	if _, err = io.ReadFull(r, h[:]); err != nil {
		return
	}
	kl, vl := int(h[1]), int(binary.LittleEndian.Uint16(h[2:]))
	if kl > maxStoreKey || vl > maxStoreValue {
		return 0, "", "", xerr.Detail(ErrProtocol, "store message of key %d and value %d bytes", kl, vl)
	}
	b := make([]byte, kl+vl)
	if _, err = io.ReadFull(r, b); err != nil {
		if err == io.EOF {
			err = io.ErrUnexpectedEOF // a message cut after its header is no clean end
		}
		return
	}
	return h[0], string(b[:kl]), string(b[kl:]), nil
}
