package procs

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/xpu-go/xpu/comm"
	"github.com/xpu-go/xpu/internal/join"
	"github.com/xpu-go/xpu/internal/tooling/testwait"
	"github.com/xpu-go/xpu/memspace"
)

// logSink collects a rank's diagnostics.
type logSink struct {
	mu   sync.Mutex
	msgs []string
}

func (s *logSink) logf(format string, args ...any) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.msgs = append(s.msgs, fmt.Sprintf(format, args...))
}

func (s *logSink) all() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.msgs...)
}

func (s *logSink) count(sub string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for _, m := range s.msgs {
		if strings.Contains(m, sub) {
			n++
		}
	}
	return n
}

// startJob dials ranks [0, real) of a job of size on a fresh listener and
// returns them once every rank of the job (the others played by the test)
// is connected; rank 0 logs into sink.
func startJob(t *testing.T, size, real int, secret []byte, sink *logSink, joinOthers func(master string)) []*Comm {
	return startJobTimeout(t, size, real, secret, sink, 5*time.Second, joinOthers)
}

func startJobTimeout(t *testing.T, size, real int, secret []byte, sink *logSink, timeout time.Duration, joinOthers func(master string)) []*Comm {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	out := make([]*Comm, real)
	errs := make([]error, real)
	var wg sync.WaitGroup
	for i := range real {
		cfg := Config{Rank: i, Size: size, MasterAddr: ln.Addr().String(), Secret: secret, Timeout: timeout}
		if i == 0 {
			cfg.Listener = ln
			cfg.Logf = sink.logf
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			out[i], errs[i] = Dial(ctx, cfg)
		}()
	}
	// Registered first, so that it runs after the cleanups of joinOthers
	// (which hang up the test's own connections).
	t.Cleanup(func() { closeEach(t, out) })
	if joinOthers != nil {
		joinOthers(ln.Addr().String())
	}
	testwait.Group(t, &wg, "the ranks' Dials")
	require.NoError(t, errors.Join(errs...))
	return out
}

// closeEach closes, all at once, every rank of cs that formed.
func closeEach(t testing.TB, cs []*Comm) {
	var wg sync.WaitGroup
	for _, c := range cs {
		if c != nil {
			wg.Go(func() { _ = c.Close() })
		}
	}
	testwait.Group(t, &wg, "the ranks' Close")
}

func blk(b []byte) memspace.Block {
	buf, err := memspace.FromSlice(b)
	if err != nil {
		panic(err)
	}
	return buf.Block()
}

// exchange checks that ranks a and b of cs still talk.
func exchange(t *testing.T, cs []*Comm, a, b int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	msg := []byte("still talking")
	in := make([]byte, len(msg))
	var wg sync.WaitGroup
	wg.Add(1)
	var serr error
	go func() {
		defer wg.Done()
		serr = comm.Send(ctx, cs[a], blk(msg), b, 1)
	}()
	_, err := comm.Recv(ctx, cs[b], blk(in), a, 1)
	testwait.Group(t, &wg, "the Send")
	require.NoError(t, serr)
	require.NoError(t, err)
	require.Equal(t, msg, in)
}

// TestStrangersRefused connects strangers to rank 0 before the job has
// formed: one with the wrong secret (through Dial, claiming rank 1), one
// that sends an HTTP request, one that says nothing. Each is refused
// without learning anything, the real job then forms and works, and once
// it has formed nobody can connect at all.
func TestStrangersRefused(t *testing.T) {
	sink := &logSink{}
	secret := []byte("the job's secret")
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	master := ln.Addr().String()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	const size = 3
	cs := make([]*Comm, size)
	errs := make([]error, size)
	var wg sync.WaitGroup
	dial := func(i int) {
		cfg := Config{Rank: i, Size: size, MasterAddr: master, Secret: secret, Timeout: 5 * time.Second}
		if i == 0 {
			cfg.Listener, cfg.Logf = ln, sink.logf
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			cs[i], errs[i] = Dial(ctx, cfg)
		}()
	}
	dial(0)
	t.Cleanup(func() {
		testwait.Group(t, &wg, "the ranks' Dials")
		closeEach(t, cs)
	})

	sctx, scancel := context.WithTimeout(ctx, 5*time.Second)
	_, err = Dial(sctx, Config{Rank: 1, Size: size, MasterAddr: master, Secret: []byte("a guess"), Timeout: 2 * time.Second})
	scancel()
	require.ErrorIs(t, err, ErrAuth, "the stranger with a wrong secret")

	http, err := net.Dial("tcp", master)
	require.NoError(t, err)
	_, _ = http.Write([]byte("GET / HTTP/1.1\r\nHost: x\r\n\r\n" + strings.Repeat("x", 100)))
	_ = http.SetReadDeadline(time.Now().Add(5 * time.Second))
	got, err := io.ReadAll(http)
	require.False(t, isTimeout(err), "the HTTP stranger's connection stayed open")
	require.Empty(t, got, "rank 0 answered an HTTP request")
	_ = http.Close()

	silent, err := net.Dial("tcp", master)
	require.NoError(t, err)
	defer silent.Close()
	require.Eventually(t, func() bool { return sink.count("refused") >= 2 }, 5*time.Second, 10*time.Millisecond,
		"refusals logged by rank 0: %v", sink.all())

	dial(1)
	dial(2)
	testwait.Group(t, &wg, "the ranks' Dials")
	require.NoError(t, errors.Join(errs...))
	exchange(t, cs, 0, 1)
	exchange(t, cs, 2, 0)
	berrs := make([]error, size)
	var bwg sync.WaitGroup
	for i, c := range cs {
		bwg.Go(func() { berrs[i] = comm.Barrier(ctx, c) })
	}
	testwait.Group(t, &bwg, "the ranks' Barrier")
	require.NoError(t, errors.Join(berrs...))
	// The silent stranger was cut when the job formed.
	_ = silent.SetReadDeadline(time.Now().Add(5 * time.Second))
	_, err = silent.Read(make([]byte, 1))
	require.Error(t, err)
	require.False(t, isTimeout(err), "the silent stranger's connection stayed open")
	// Nobody listens any more.
	_, err = net.DialTimeout("tcp", master, time.Second)
	require.Error(t, err, "rank 0 still accepts connections after the job formed")
}

func isTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

// rogue plays rank `rank` of a job with the secret: it joins through the
// store and links to every lower rank, and returns the raw connections,
// on which the test then writes what a broken or hostile peer would.
func rogue(t *testing.T, master string, secret []byte, rank, size int) map[int]net.Conn {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	cfg, err := Config{Rank: rank, Size: size, MasterAddr: master, Secret: secret}.normalize()
	require.NoError(t, err)
	c := newComm(cfg)
	job, err := join.Dial(ctx, join.Config{Backend: Name, Rank: rank, Size: size, MasterAddr: master, Secret: cfg.Secret,
		StepTimeout: cfg.Timeout, Tune: c.tune, Upgrade: c.linkConn,
		Terms: join.Terms{Limit: uint32(c.lim.eager), Budget: uint64(c.lim.budget)}})
	require.NoError(t, err)
	conns := map[int]net.Conn{}
	for j, p := range job.Peers {
		if p.Conn != nil {
			conns[j] = p.Conn
		}
	}
	t.Cleanup(func() {
		for _, cn := range conns {
			_ = cn.Close()
		}
	})
	return conns
}

// TestHostilePeer has an authenticated peer (rank 2 of 3) send frames that
// break the protocol. Rank 0 must cut it — its receive from rank 2 fails
// with ErrPeerLost, caused by ErrProtocol — without allocating what the
// frame announces, and ranks 0 and 1 go on talking.
func TestHostilePeer(t *testing.T) {
	f := func(fr frame) []byte { return encoded(fr) }
	many := func(n int, b []byte) []byte { return []byte(strings.Repeat(string(b), n)) }
	for name, bytes := range map[string][]byte{
		"absurd eager length":          f(frame{typ: frameEager, tag: 1, a: 1 << 40}),
		"unknown frame type":           f(frame{typ: 77}),
		"garbage":                      []byte(strings.Repeat("\xde\xad\xbe\xef", 16)),
		"data for no receive":          append(f(frame{typ: frameData, a: 8, b: 1234}), make([]byte, 8)...),
		"clear-to-send for no message": f(frame{typ: frameCTS, a: 8, b: 55, c: 1}),
		"credit never owed":            f(frame{typ: frameCredit, a: 100}),
		// 65 eager messages of 64 KiB: one past the 4 MiB budget.
		"eager budget overrun": many(65, append(f(frame{typ: frameEager, tag: 3, a: 64 << 10}), make([]byte, 64<<10)...)),
	} {
		t.Run(strings.ReplaceAll(name, " ", "-"), func(t *testing.T) {
			secret := []byte("s3cret")
			var conns map[int]net.Conn
			cs := startJob(t, 3, 2, secret, &logSink{}, func(master string) {
				// Rank 1 must have published its address first.
				conns = rogue(t, master, secret, 2, 3)
			})
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			r, err := cs[0].Irecv(blk(make([]byte, 8)), 2, 99)
			require.NoError(t, err)
			_, _ = conns[0].Write(bytes)
			_, err = r.Wait(ctx)
			require.ErrorIs(t, err, comm.ErrPeerLost)
			require.ErrorIs(t, err, ErrProtocol)
			exchange(t, cs, 0, 1)
			exchange(t, cs, 1, 0)
		})
	}
}

// TestSilentPeer has an authenticated peer fall silent — connected, but no
// data and no heartbeat, as behind a cut link or a frozen process. Pending
// operations with it fail with ErrPeerLost once the timeout has passed —
// a receive from it, a rendezvous send to it — and the others go on.
func TestSilentPeer(t *testing.T) {
	const timeout = 500 * time.Millisecond
	secret := []byte("s3cret")
	cs := startJobTimeout(t, 3, 2, secret, &logSink{}, timeout, func(master string) {
		rogue(t, master, secret, 2, 3)
	})
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	start := time.Now()
	r, err := cs[0].Irecv(blk(make([]byte, 8)), 2, 5)
	require.NoError(t, err)
	s, err := cs[0].Isend(blk(make([]byte, 1<<20)), 2, 5)
	require.NoError(t, err)
	_, err = r.Wait(ctx)
	require.ErrorIs(t, err, comm.ErrPeerLost)
	require.Contains(t, err.Error(), "nothing heard")
	_, err = s.Wait(ctx)
	require.ErrorIs(t, err, comm.ErrPeerLost)
	took := time.Since(start)
	t.Logf("lost after %v (timeout %v)", took.Round(time.Millisecond), timeout)
	require.GreaterOrEqual(t, took, timeout, "declared lost before the timeout")
	exchange(t, cs, 0, 1)
}
