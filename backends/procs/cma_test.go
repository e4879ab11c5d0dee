package procs

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/xpu-go/xpu/comm"
	"github.com/xpu-go/xpu/internal/shm"
	"github.com/xpu-go/xpu/internal/tooling/testwait"
	"github.com/xpu-go/xpu/memspace"
)

// needSingleCopy skips a test where this machine makes no single copies.
func needSingleCopy(t *testing.T) {
	t.Helper()
	if ok, why := shm.SingleCopy(); !ok {
		t.Skipf("no single copy here: %s", why)
	}
}

// cmaGroup returns a loopback group of n ranks linked through shared
// memory, closed when the test ends.
func cmaGroup(t *testing.T, n int, tmpl Config) []*Comm {
	t.Helper()
	tmpl.Links = LinkShm
	if tmpl.singleCopyMin == 0 {
		tmpl.singleCopyMin = 1 // every rendezvous message
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	cs, err := NewLoopbackGroupConfig(ctx, n, tmpl)
	require.NoError(t, err)
	t.Cleanup(func() { closeEach(t, cs) })
	return cs
}

// pulls returns how many messages c received from peer by single copy.
func pulls(c *Comm, peer int) uint64 { return c.links[peer].cma.pulls.Load() }

// heldRTS returns how many announcements of peer wait on c's unexpected
// queue.
func heldRTS(c *Comm, peer int) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.links[peer].credit.rtsHeld
}

// waitHeld waits until c holds n announcements of peer.
func waitHeld(t *testing.T, c *Comm, peer, n int) {
	t.Helper()
	require.Eventually(t, func() bool { return heldRTS(c, peer) == n }, 10*time.Second, time.Millisecond)
}

func pattern(n, seed int) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(i*7 + i>>11 + seed)
	}
	return b
}

func testCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// TestSingleCopyUsed: over a shared-memory link, rendezvous messages —
// their receive posted first or last, one goroutine's copy or two, by
// Send and Recv or Isend and Irecv — are copied by the receiver from the
// sender's memory: they arrive whole, the sends complete, and every one
// is counted as a single copy.
func TestSingleCopyUsed(t *testing.T) {
	needSingleCopy(t)
	cs := cmaGroup(t, 2, Config{})
	ctx := testCtx(t)
	before := pulls(cs[1], 0)
	sizes := []int{64<<10 + 1, 300 << 10, cmaSplit, 1 << 20, 4<<20 + 3}
	for i, n := range sizes {
		msg := pattern(n, i)
		// Receive first.
		in := make([]byte, n)
		r, err := cs[1].Irecv(blk(in), 0, i)
		require.NoError(t, err)
		require.NoError(t, comm.Send(ctx, cs[0], blk(msg), 1, i))
		st, err := r.Wait(ctx)
		require.NoError(t, err)
		require.Equal(t, comm.Status{Source: 0, Tag: i, Count: n}, st)
		require.True(t, bytes.Equal(msg, in), "%d bytes, receive first", n)
		// Announcement first.
		s, err := cs[0].Isend(blk(msg), 1, 100+i)
		require.NoError(t, err)
		waitHeld(t, cs[1], 0, 1)
		clear(in)
		st, err = comm.Recv(ctx, cs[1], blk(in), 0, 100+i)
		require.NoError(t, err)
		require.Equal(t, n, st.Count)
		require.True(t, bytes.Equal(msg, in), "%d bytes, announcement first", n)
		st, err = s.Wait(ctx)
		require.NoError(t, err)
		require.Equal(t, comm.Status{Source: 1, Tag: 100 + i, Count: n}, st)
	}
	require.Equal(t, before+uint64(2*len(sizes)), pulls(cs[1], 0))
	require.Zero(t, pulls(cs[0], 1))
}

// TestSingleCopyStream: many messages in flight both ways at once, as the
// bandwidth benchmark and an exchange have them.
func TestSingleCopyStream(t *testing.T) {
	needSingleCopy(t)
	cs := cmaGroup(t, 2, Config{})
	ctx := testCtx(t)
	const window, n = 8, 1<<20 + 17
	var wg sync.WaitGroup
	for me := range 2 {
		wg.Go(func() {
			other := 1 - me
			var reqs []comm.Request
			ins := make([][]byte, window)
			for i := range window {
				ins[i] = make([]byte, n)
				r, err := cs[me].Irecv(blk(ins[i]), other, i)
				require.NoError(t, err)
				s, err := cs[me].Isend(blk(pattern(n, 10*me+i)), other, i)
				require.NoError(t, err)
				reqs = append(reqs, r, s)
			}
			require.NoError(t, comm.WaitAll(ctx, reqs...))
			for i := range window {
				require.True(t, bytes.Equal(pattern(n, 10*other+i), ins[i]), "message %d to rank %d", i, me)
			}
		})
	}
	testwait.Group(t, &wg, "both ranks' windows of messages")
	require.Equal(t, uint64(window), pulls(cs[0], 1))
	require.Equal(t, uint64(window), pulls(cs[1], 0))
}

// TestSingleCopyTruncated: a message longer than its receive buffer
// delivers what fits and fails the receive with ErrTruncated, by single
// copy, receive posted first or last; the send completes normally; an
// empty buffer takes nothing.
func TestSingleCopyTruncated(t *testing.T) {
	needSingleCopy(t)
	cs := cmaGroup(t, 2, Config{})
	ctx := testCtx(t)
	msg := pattern(1<<20, 3)
	for _, k := range []int{100 << 10, 1<<20 - 1, 0} {
		for _, first := range []string{"receive", "announcement"} {
			in := make([]byte, k+8)
			var s comm.Request
			var err error
			if first == "announcement" {
				s, err = cs[0].Isend(blk(msg), 1, 5)
				require.NoError(t, err)
				waitHeld(t, cs[1], 0, 1)
			}
			r, err := cs[1].Irecv(blk(in[:k]), 0, 5)
			require.NoError(t, err)
			if s == nil {
				s, err = cs[0].Isend(blk(msg), 1, 5)
				require.NoError(t, err)
			}
			st, err := r.Wait(ctx)
			require.ErrorIs(t, err, comm.ErrTruncated, "%d bytes, %s first", k, first)
			require.Equal(t, k, st.Count)
			require.Equal(t, msg[:k], in[:k])
			require.Equal(t, make([]byte, 8), in[k:], "written past the buffer")
			st, err = s.Wait(ctx)
			require.NoError(t, err)
			require.Equal(t, len(msg), st.Count)
		}
	}
}

// TestSingleCopyOff: with single copies off, and with a kernel that
// refuses them (the link then stops trying), messages cross the ring and
// arrive whole.
func TestSingleCopyOff(t *testing.T) {
	ctx := testCtx(t)
	check := func(t *testing.T, cs []*Comm, n int) {
		msg := pattern(n, 1)
		in := make([]byte, n)
		r, err := cs[1].Irecv(blk(in), 0, 1)
		require.NoError(t, err)
		require.NoError(t, comm.Send(ctx, cs[0], blk(msg), 1, 1))
		_, err = r.Wait(ctx)
		require.NoError(t, err)
		require.True(t, bytes.Equal(msg, in))
		s, err := cs[0].Isend(blk(msg), 1, 2)
		require.NoError(t, err)
		waitHeld(t, cs[1], 0, 1)
		clear(in)
		_, err = comm.Recv(ctx, cs[1], blk(in), 0, 2)
		require.NoError(t, err)
		require.True(t, bytes.Equal(msg, in))
		_, err = s.Wait(ctx)
		require.NoError(t, err)
	}
	t.Run("off", func(t *testing.T) {
		cmaOff.Store(true)
		t.Cleanup(func() { cmaOff.Store(false) })
		cs := cmaGroup(t, 2, Config{})
		for _, n := range []int{100 << 10, 3 << 20} {
			check(t, cs, n)
		}
		require.Zero(t, pulls(cs[1], 0))
	})
	t.Run("refused", func(t *testing.T) {
		needSingleCopy(t)
		var tries atomic.Int64
		old := cmaRead
		cmaRead = func(pid int, dst []byte, addr uint64) error {
			tries.Add(1)
			return fmt.Errorf("%w: refused by the test", shm.ErrNotPermitted)
		}
		t.Cleanup(func() { cmaRead = old })
		sink := &logSink{}
		cs := cmaGroup(t, 2, Config{Logf: sink.logf})
		for _, n := range []int{100 << 10, 3 << 20} {
			check(t, cs, n)
		}
		require.Equal(t, int64(1), tries.Load(), "copies tried once refused")
		require.True(t, cs[1].links[0].cma.refused.Load())
		require.Zero(t, pulls(cs[1], 0))
		require.Equal(t, 1, sink.count("single copy from rank 0 refused"))
	})
}

// TestSingleCopyCancel: an announced send that no receive has matched is
// canceled (ErrCanceled) and leaves nothing behind; one already copied
// completes normally; and a cancel racing the receive that copies it
// ends one way or the other, consistently on both sides.
func TestSingleCopyCancel(t *testing.T) {
	needSingleCopy(t)
	cs := cmaGroup(t, 2, Config{})
	ctx := testCtx(t)
	msg := pattern(1<<20, 5)

	s, err := cs[0].Isend(blk(msg), 1, 1)
	require.NoError(t, err)
	waitHeld(t, cs[1], 0, 1)
	require.NoError(t, s.Cancel())
	_, err = s.Wait(ctx)
	require.ErrorIs(t, err, comm.ErrCanceled)
	waitHeld(t, cs[1], 0, 0)
	cs[1].links[0].cma.mu.Lock()
	require.Empty(t, cs[1].links[0].cma.held, "the canceled announcement's address is kept")
	cs[1].links[0].cma.mu.Unlock()
	// The next message with that tag is the one received.
	msg2 := pattern(1<<20, 6)
	in := make([]byte, len(msg2))
	s, err = cs[0].Isend(blk(msg2), 1, 1)
	require.NoError(t, err)
	_, err = comm.Recv(ctx, cs[1], blk(in), 0, 1)
	require.NoError(t, err)
	require.True(t, bytes.Equal(msg2, in))
	require.NoError(t, s.Cancel()) // copied: too late
	_, err = s.Wait(ctx)
	require.NoError(t, err)

	for i := range 50 {
		clear(in)
		s, err := cs[0].Isend(blk(msg), 1, 2)
		require.NoError(t, err)
		var r comm.Request
		var wg sync.WaitGroup
		wg.Go(func() { _ = s.Cancel() })
		if i%2 == 0 {
			time.Sleep(time.Duration(i) * time.Microsecond)
		}
		r, err = cs[1].Irecv(blk(in), 0, 2)
		require.NoError(t, err)
		testwait.Group(t, &wg, "the send's Cancel")
		_, serr := s.Wait(ctx)
		if serr == nil {
			_, err := r.Wait(ctx)
			require.NoError(t, err, "round %d: the send completed, the receive did not", i)
			require.True(t, bytes.Equal(msg, in), "round %d", i)
			continue
		}
		require.ErrorIs(t, serr, comm.ErrCanceled, "round %d", i)
		// The receive matched nothing: cancel it.
		require.NoError(t, r.Cancel())
		_, err = r.Wait(ctx)
		require.ErrorIs(t, err, comm.ErrCanceled, "round %d: the send was canceled, the receive took something", i)
	}
}

// TestSingleCopyReduce: a reducing receive (the ring allreduce's) folds
// what it copies from the peer into its result, in pieces, by one
// goroutine or two, posted before the announcement or after.
func TestSingleCopyReduce(t *testing.T) {
	needSingleCopy(t)
	for _, workers := range []int{1, 2} {
		t.Run(fmt.Sprint(workers), func(t *testing.T) {
			old := cmaWorkers
			cmaWorkers = workers
			t.Cleanup(func() { cmaWorkers = old })
			cs := cmaGroup(t, 2, Config{})
			ctx := testCtx(t)
			const n = 3<<20/8 + 5
			in := make([]float64, n)
			for i := range in {
				in[i] = float64(i % 1000)
			}
			inB, _ := memspace.FromSlice(in)
			for _, first := range []string{"receive", "announcement"} {
				dst, own := make([]float64, n), make([]float64, n)
				for i := range own {
					own[i] = float64(i%7) / 2
				}
				dstB, _ := memspace.FromSlice(dst)
				ownB, _ := memspace.FromSlice(own)
				buf, err := hostBytes(dstB.Block())
				require.NoError(t, err)
				q := &request{c: cs[1], kind: kindRecv, peer: 0, tag: 3, buf: buf,
					red: &reduction{dst: dstB.Block(), own: ownB.Block(), dt: comm.Float64, op: comm.Sum}}
				var s comm.Request
				if first == "announcement" {
					s, err = cs[0].Isend(inB.Block(), 1, 3)
					require.NoError(t, err)
					waitHeld(t, cs[1], 0, 1)
				}
				before := pulls(cs[1], 0)
				r, err := cs[1].irecv(q)
				require.NoError(t, err)
				if s == nil {
					s, err = cs[0].Isend(inB.Block(), 1, 3)
					require.NoError(t, err)
				}
				st, err := r.Wait(ctx)
				require.NoError(t, err)
				require.Equal(t, 8*n, st.Count)
				_, err = s.Wait(ctx)
				require.NoError(t, err)
				for i, x := range dst {
					if want := float64(i%1000) + float64(i%7)/2; x != want {
						t.Fatalf("%s first: element %d is %v, want %v", first, i, x, want)
					}
				}
				require.Equal(t, before+1, pulls(cs[1], 0))
			}
		})
	}
}

// TestCmaPieces: the pieces of a copy cover it exactly once, by one
// goroutine or several; an error stops them, a fault first.
func TestCmaPieces(t *testing.T) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(4))
	old := cmaWorkers
	defer func() { cmaWorkers = old }()
	for _, workers := range []int{1, 2, 4} {
		cmaWorkers = workers
		for _, n := range []int{1, cmaSplit - 1, cmaSplit, 5*cmaPiece + 3} {
			var mu sync.Mutex
			seen := make([]int, n)
			require.NoError(t, cmaPieces(n, func(off, k int) error {
				mu.Lock()
				defer mu.Unlock()
				for i := off; i < off+k; i++ {
					seen[i]++
				}
				return nil
			}))
			for i, v := range seen {
				if v != 1 {
					t.Fatalf("%d workers, %d bytes: byte %d copied %d times", workers, n, i, v)
				}
			}
		}
		// One piece fails late, another early with a fault: the fault
		// is the error.
		err := cmaPieces(4*cmaPiece, func(off, k int) error {
			switch off {
			case cmaPiece:
				time.Sleep(20 * time.Millisecond)
				return shm.ErrNoProcess
			case 2 * cmaPiece:
				return shm.ErrFault
			}
			return nil
		})
		if workers > 1 {
			require.ErrorIs(t, err, shm.ErrFault)
		} else {
			require.NoError(t, err) // one call: the whole range at 0
		}
	}
}

// TestSingleCopyHostile: a peer (rank 2 of 3, played by the test, linked
// through shared memory) announces messages at addresses it does not map,
// or that wrap, or confirms copies it was never asked for: rank 0 cuts it
// with a protocol error — its receive from it fails with ErrPeerLost,
// caused by ErrProtocol — without faulting, whether the receive was posted
// before the announcement or after; and ranks 0 and 1 go on talking.
func TestSingleCopyHostile(t *testing.T) {
	needSingleCopy(t)
	f := func(fr frame) []byte { return encoded(fr) }
	for name, tc := range map[string]struct {
		frame     []byte
		recvFirst bool
	}{
		"unmapped address, receive first":      {f(frame{typ: frameRTS, tag: 99, a: 1 << 20, b: 1, c: 0x1000}), true},
		"unmapped address, announcement first": {f(frame{typ: frameRTS, tag: 99, a: 1 << 20, b: 1, c: 0x1000}), false},
		"kernel address":                       {f(frame{typ: frameRTS, tag: 99, a: 8 << 10, b: 1, c: 0xffff_8880_0000_0000}), true},
		"wrapping address":                     {f(frame{typ: frameRTS, tag: 99, a: 1 << 20, b: 1, c: ^uint64(0) - 4096}), true},
		"pulled for no message":                {f(frame{typ: framePulled, a: 8, b: 55}), true},
	} {
		t.Run(name, func(t *testing.T) {
			secret := []byte("s3cret")
			var conns map[int]net.Conn
			cs := startJob(t, 3, 2, secret, &logSink{}, func(master string) {
				conns = rogue(t, master, secret, 2, 3)
			})
			require.Equal(t, TransportShm, cs[0].Transport(2))
			ctx := testCtx(t)
			in := make([]byte, 1<<20)
			var r comm.Request
			var err error
			if tc.recvFirst {
				r, err = cs[0].Irecv(blk(in), 2, 99)
				require.NoError(t, err)
			}
			_, _ = conns[0].Write(tc.frame)
			if !tc.recvFirst {
				waitHeld(t, cs[0], 2, 1)
				r, err = cs[0].Irecv(blk(in), 2, 99)
				require.NoError(t, err)
			}
			_, err = r.Wait(ctx)
			require.ErrorIs(t, err, comm.ErrPeerLost)
			require.ErrorIs(t, err, ErrProtocol)
			t.Log(err)
			require.Equal(t, make([]byte, len(in)), in)
			exchange(t, cs, 0, 1)
			exchange(t, cs, 1, 0)
		})
	}
}

// TestAddressOnTCP: an announcement with an address on a TCP link is a
// protocol violation.
func TestAddressOnTCP(t *testing.T) {
	fl := newFuzzLink(t)
	require.Nil(t, fl.l.shm)
	var hdr [headerSize]byte
	frame{typ: frameRTS, tag: 1, a: 100, b: 1, c: 0x7f00_0000_0000}.encode(hdr[:])
	fl.conn.in = hdr[:]
	_, err := fl.l.step(nil)
	require.ErrorIs(t, err, ErrProtocol)
}

// TestPulledChecks: the sender takes a confirmation of a copy only for a
// message announced with an address, of at most its length.
func TestPulledChecks(t *testing.T) {
	fl := newFuzzLink(t)
	l := fl.l
	msg := make([]byte, 100<<10)
	mk := func(addr uint64) *request {
		r := &request{c: fl.c, kind: kindSend, peer: 1, buf: msg}
		l.w.mu.Lock()
		l.w.nextID++
		r.id, r.addr = l.w.nextID, addr
		l.w.announced[r.id] = r
		l.w.mu.Unlock()
		return r
	}
	r := mk(0)
	require.ErrorIs(t, l.onPulled(len(msg), r.id), ErrProtocol, "no address announced")
	r = mk(0x1000)
	require.ErrorIs(t, l.onPulled(len(msg)+1, r.id), ErrProtocol, "more than the message")
	require.ErrorIs(t, l.onPulled(1, r.id+1), ErrProtocol, "no such message")
	require.NoError(t, l.onPulled(len(msg)-1, r.id))
	require.True(t, r.IsDone())
	st, err := r.Result()
	require.NoError(t, err)
	require.Equal(t, len(msg), st.Count)
}

// Variables of TestSingleCopyRank, the rank process of
// TestSingleCopyPeerDies.
const (
	envCmaRole   = "XPU_TCP_TEST_CMA_ROLE"
	envCmaMaster = "XPU_TCP_TEST_CMA_MASTER"
	envCmaSecret = "XPU_TCP_TEST_CMA_SECRET"
	cmaDieSize   = 64 << 20
)

// TestSingleCopyPeerDies runs a job of two processes, this one rank 0 and
// a rank 1 it starts, and SIGKILLs rank 1 while a message between them is
// being copied from the sender's memory: when rank 1 sends, rank 0's
// receive fails with ErrPeerLost; when rank 1 receives (it copies from
// rank 0), rank 0's send does. Neither hangs nor completes.
func TestSingleCopyPeerDies(t *testing.T) {
	needSingleCopy(t)
	if testing.Short() {
		t.Skip("starts a process; skipped in -short mode")
	}
	for _, victim := range []string{"sender", "receiver"} {
		t.Run(victim, func(t *testing.T) {
			ln, err := net.Listen("tcp", "127.0.0.1:0")
			require.NoError(t, err)
			secret := fmt.Sprintf("cma-%d", time.Now().UnixNano())
			exe, err := os.Executable()
			require.NoError(t, err)
			cmd := exec.Command(exe, "-test.run=^TestSingleCopyRank$", "-test.v")
			cmd.Env = append(os.Environ(), envCmaRole+"="+victim, envCmaMaster+"="+ln.Addr().String(), envCmaSecret+"="+secret)
			out, err := cmd.StdoutPipe()
			require.NoError(t, err)
			cmd.Stderr = os.Stderr
			require.NoError(t, cmd.Start())
			exited := make(chan struct{})
			go func() {
				_ = cmd.Wait()
				close(exited)
			}()
			t.Cleanup(func() {
				_ = cmd.Process.Kill()
				testwait.Closed(t, exited, "the rank process's exit, after its kill")
			})
			lines := make(chan string, 16)
			go func() {
				sc := bufio.NewScanner(out)
				for sc.Scan() {
					select {
					case lines <- sc.Text():
					default: // nobody listens: never block the process's output
					}
				}
				close(lines)
			}()
			expect := func(want string) {
				t.Helper()
				deadline := time.After(30 * time.Second)
				for {
					select {
					case l, ok := <-lines:
						require.True(t, ok, "rank 1 ended before saying %s", want)
						if l == want {
							return
						}
					case <-deadline:
						t.Fatalf("rank 1 did not say %s", want)
					}
				}
			}

			// Rank 0 copies the message (rank 1 sends): its copy stops
			// after the first piece until rank 1 is dead.
			pulling, killed := make(chan struct{}), make(chan struct{})
			if victim == "sender" {
				var once sync.Once
				old := cmaRead
				cmaRead = func(pid int, dst []byte, addr uint64) error {
					once.Do(func() {
						close(pulling)
						<-killed
					})
					return old(pid, dst, addr)
				}
				t.Cleanup(func() { cmaRead = old })
			}
			ctx := testCtx(t)
			c, err := Dial(ctx, Config{Rank: 0, Size: 2, MasterAddr: ln.Addr().String(), Secret: []byte(secret),
				Listener: ln, Timeout: 5 * time.Second})
			require.NoError(t, err)
			t.Cleanup(func() { _ = c.Close() })
			require.Equal(t, TransportShm, c.Transport(1))
			buf := make([]byte, cmaDieSize)
			res := make(chan error, 1)
			start := time.Now()
			if victim == "sender" {
				go func() {
					_, err := comm.Recv(ctx, c, blk(buf), 1, 1)
					res <- err
				}()
				testwait.Closed(t, pulling, "the rank process to say PULLING")
			} else {
				s, err := c.Isend(blk(buf), 1, 1)
				require.NoError(t, err)
				go func() {
					_, err := s.Wait(ctx)
					res <- err
				}()
				expect("PULLING")
			}
			require.NoError(t, cmd.Process.Kill())
			testwait.Closed(t, exited, "the rank process's exit, after its kill")
			close(killed)
			err = testwait.Recv(t, res, "the survivor's wait, after its peer's kill")
			t.Logf("rank 0 after the %s died mid-copy (%v): %v", victim, time.Since(start).Round(time.Millisecond), err)
			require.ErrorIs(t, err, comm.ErrPeerLost)
		})
	}
}

// TestSingleCopyRank is rank 1 of TestSingleCopyPeerDies; on its own it
// skips. As the sender it sends rank 0 a large message and waits to be
// killed; as the receiver it receives one, saying PULLING and waiting to
// be killed once its copy has begun.
func TestSingleCopyRank(t *testing.T) {
	role := os.Getenv(envCmaRole)
	if role == "" {
		t.Skip("runs only as the rank process of TestSingleCopyPeerDies")
	}
	if role == "receiver" {
		cmaRead = func(pid int, dst []byte, addr uint64) error {
			fmt.Println("PULLING")
			time.Sleep(time.Hour)
			return nil
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	c, err := Dial(ctx, Config{Rank: 1, Size: 2, MasterAddr: os.Getenv(envCmaMaster), Secret: []byte(os.Getenv(envCmaSecret)),
		Timeout: 5 * time.Second})
	require.NoError(t, err)
	buf := make([]byte, cmaDieSize)
	if role == "sender" {
		_, err = c.Isend(blk(buf), 0, 1)
		require.NoError(t, err)
	} else {
		_, err = comm.Recv(ctx, c, blk(buf), 0, 1)
		t.Fatalf("the receive returned: %v", err)
	}
	<-ctx.Done() // unbounded: ctx ends within a minute; this rank process waits there for its kill
}
