package bench

import (
	"context"
	"fmt"
	"io"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/xpu-go/xpu/backends/procs"
	"github.com/xpu-go/xpu/comm"
	"github.com/xpu-go/xpu/memspace"
)

// TCP holds the cases of the TCP communicator (backends/procs). Every rank
// is a goroutine of this process with its own loopback TCP connections to
// the others (procs.NewLoopbackGroup with Links: LinkTCP): the same wire
// protocol, rendezvous and handshake as separate processes, in one
// process. The shm.* cases link the same ranks through shared memory
// instead (their goroutines poll, so they need a core each). The separate-
// process figures come from internal/tooling/tcpbench (see
// docs/results/tcp.md). Refs name lines of internal/tooling/bench/ref/tcp_mpi_ref.c
// run with -np 2 ("mpi.np2.*") and -np 4 ("mpi.np4.*").
var TCP = []Case{
	{Name: "tcp.pingpong.8B", Run: TCPPingPong(8), Unit: NsPerOp, Baseline: "rawtcp.pingpong.8B", BaselineGoal: 1.1,
		Ref: "mpi.np2.pingpong.8B", Doc: "half round trip of an 8-byte message between 2 ranks over loopback TCP"},
	{Name: "tcp.pingpong.8B.spin50us", Run: TCPPingPongConfig(8, procs.Config{Spin: 50 * time.Microsecond}), Unit: NsPerOp,
		Baseline: "rawtcp.pingpong.8B", Ref: "mpi.np2.pingpong.8B",
		Doc: "tcp.pingpong.8B with waiters that poll the socket for up to 50 µs before blocking (Config.Spin), as MPI libraries poll"},
	{Name: "shm.pingpong.8B", Run: TCPPingPongConfig(8, procs.Config{Links: procs.LinkShm}), Unit: NsPerOp,
		Baseline: "rawtcp.pingpong.8B", Ref: "vader.np2.pingpong.8B",
		Doc: "half round trip of an 8-byte message between 2 ranks of this process over a shared-memory link"},
	{Name: "rawtcp.pingpong.8B", Run: RawTCPPingPong(8), Unit: NsPerOp,
		Doc: "half round trip of 8 bytes over one Go loopback TCP connection (net.Conn Write/Read)"},
	{Name: "tcp.stream.4MiB", Run: TCPStream(4 << 20), Unit: GBPerSec, Baseline: "rawtcp.stream.4MiB",
		Ref: "mpi.np2.bw.4MiB", RefGoal: 1.0, Doc: "one-way stream of 4 MiB messages, 8 in flight, between 2 ranks"},
	{Name: "rawtcp.stream.4MiB", Run: RawTCPStream(4 << 20), Unit: GBPerSec,
		Doc: "one-way stream of 4 MiB writes over one Go loopback TCP connection"},
	{Name: "tcp.allreduce.2r.8B", Run: TCPAllreduce(2, 1), Unit: NsPerOp, Ref: "mpi.np2.allreduce.8B", RefGoal: 1.0,
		Baseline: "rawtcp.exchange.8B", Doc: "allreduce of one float64 over 2 ranks"},
	{Name: "tcp.allreduce.2r.8B.spin50us", Run: TCPAllreduceConfig(2, 1, procs.Config{Spin: 50 * time.Microsecond}), Unit: NsPerOp,
		Ref: "mpi.np2.allreduce.8B", Baseline: "rawtcp.exchange.8B",
		Doc: "tcp.allreduce.2r.8B with waiters that poll the socket for up to 50 µs before blocking (Config.Spin), as MPI libraries poll"},
	{Name: "rawtcp.exchange.8B", Run: RawTCPExchange(8), Unit: NsPerOp,
		Doc: "both ends of one Go loopback TCP connection Write 8 bytes, then read the peer's 8: the floor of a 2-rank allreduce"},
	{Name: "shm.allreduce.2r.8B", Run: TCPAllreduceConfig(2, 1, procs.Config{Links: procs.LinkShm}), Unit: NsPerOp,
		Ref: "vader.np2.allreduce.8B", Doc: "allreduce of one float64 over 2 ranks of this process in the node's shared region"},
	{Name: "shm.allreduce.2r.64MiB", Run: TCPAllreduceConfig(2, 8<<20, procs.Config{Links: procs.LinkShm}), Unit: NsPerOp,
		Ref: "vader.np2.allreduce.64MiB", Doc: "allreduce of 64 MiB of float64 over 2 ranks of this process in the node's shared region"},
	{Name: "tcp.allreduce.2r.64KiB", Run: TCPAllreduce(2, 8<<10), Unit: NsPerOp, Ref: "mpi.np2.allreduce.64KiB", RefGoal: 1.0,
		Doc: "allreduce of 64 KiB of float64 over 2 ranks"},
	{Name: "tcp.allreduce.2r.64MiB", Run: TCPAllreduce(2, 8<<20), Unit: NsPerOp, Ref: "mpi.np2.allreduce.64MiB", RefGoal: 1 / 1.5,
		Doc: "allreduce of 64 MiB of float64 over 2 ranks (native pipelined ring)"},
	{Name: "tcp.allreduce.4r.8B", Run: TCPAllreduce(4, 1), Unit: NsPerOp, Ref: "mpi.np4.allreduce.8B", RefGoal: 1.0,
		Doc: "allreduce of one float64 over 4 ranks"},
	{Name: "tcp.allreduce.4r.64KiB", Run: TCPAllreduce(4, 8<<10), Unit: NsPerOp, Ref: "mpi.np4.allreduce.64KiB", RefGoal: 1.0,
		Doc: "allreduce of 64 KiB of float64 over 4 ranks"},
	{Name: "tcp.allreduce.4r.64MiB", Run: TCPAllreduce(4, 8<<20), Unit: NsPerOp, Ref: "mpi.np4.allreduce.64MiB", RefGoal: 1 / 1.5,
		Doc: "allreduce of 64 MiB of float64 over 4 ranks (native pipelined ring)"},
	{Name: "tcp.bcast.4r.1MiB", Run: TCPBcast(4, 1<<20), Unit: NsPerOp, Ref: "mpi.np4.bcast.1MiB",
		Doc: "broadcast of 1 MiB from rank 0 over 4 ranks (shared algorithm)"},
	{Name: "tcp.alltoall.4r.1MiB", Run: TCPAlltoall(4, 1<<20), Unit: NsPerOp, Ref: "mpi.np4.alltoall.1MiB",
		Doc: "all-to-all of 1 MiB per rank (256 KiB per pair) over 4 ranks (shared algorithm)"},
}

// tcpGroup makes a loopback group and a float64 buffer of n per rank.
func tcpGroup(b *testing.B, ranks, n int) ([]*procs.Comm, [][]float64, func()) {
	return tcpGroupConfig(b, ranks, n, procs.Config{})
}

// tcpGroupConfig is tcpGroup with the ranks' configuration. Ranks of one
// process share a node, so they would link through shared memory: unless
// cfg asks for shared memory (the shm.* cases), they link through TCP.
func tcpGroupConfig(b *testing.B, ranks, n int, cfg procs.Config) ([]*procs.Comm, [][]float64, func()) {
	b.Helper()
	if cfg.Links == procs.LinkAuto {
		cfg.Links = procs.LinkTCP
	}
	g, err := procs.NewLoopbackGroupConfig(context.Background(), ranks, cfg)
	if err != nil {
		b.Fatal(err)
	}
	bufs := make([][]float64, ranks)
	for i := range bufs {
		bufs[i] = make([]float64, n)
		for j := range bufs[i] {
			bufs[i][j] = float64(i + j%3)
		}
	}
	return g, bufs, func() {
		var wg sync.WaitGroup
		for _, c := range g {
			wg.Add(1)
			go func() {
				defer wg.Done()
				_ = c.Close()
			}()
		}
		wg.Wait()
	}
}

// onRanks runs body on every rank and fails b on any error.
func onRanks(b *testing.B, g []*procs.Comm, body func(r int, c *procs.Comm) error) {
	b.Helper()
	errs := make([]error, len(g))
	var wg sync.WaitGroup
	for r, c := range g {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[r] = body(r, c)
		}()
	}
	wg.Wait()
	for r, err := range errs {
		if err != nil {
			b.Fatalf("rank %d: %v", r, err)
		}
	}
}

// Block returns a block over s, for the programs that measure with
// slices; it panics on a type memspace refuses, a programming error.
func Block[T any](s []T) memspace.Block {
	v, err := memspace.FromSlice(s)
	if err != nil {
		panic(err)
	}
	return v.Block()
}

// TCPPingPong measures a half round trip of size bytes between 2 ranks.
func TCPPingPong(size int) func(b *testing.B) {
	return TCPPingPongConfig(size, procs.Config{})
}

// TCPPingPongConfig is TCPPingPong between ranks configured by cfg (its
// Spin, for instance).
func TCPPingPongConfig(size int, cfg procs.Config) func(b *testing.B) {
	return func(b *testing.B) {
		g, _, done := tcpGroupConfig(b, 2, 0, cfg)
		defer done()
		ctx := context.Background()
		bufs := [2][]byte{make([]byte, size), make([]byte, size)}
		b.SetBytes(int64(size))
		b.ResetTimer()
		onRanks(b, g, func(r int, c *procs.Comm) error {
			buf := Block(bufs[r])
			// (b.N+1)/2 round trips: b.N half round trips, rounded up.
			for range (b.N + 1) / 2 {
				if r == 1 {
					if _, err := comm.Recv(ctx, c, buf, 0, 1); err != nil {
						return err
					}
				}
				if err := comm.Send(ctx, c, buf, 1-r, 1); err != nil {
					return err
				}
				if r == 0 {
					if _, err := comm.Recv(ctx, c, buf, 1, 1); err != nil {
						return err
					}
				}
			}
			return nil
		})
	}
}

// loopbackPair returns both ends of a loopback TCP connection.
func loopbackPair(b *testing.B) (net.Conn, net.Conn) {
	b.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	defer ln.Close()
	ch := make(chan net.Conn, 1)
	go func() {
		c, _ := ln.Accept()
		ch <- c
	}()
	a, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		b.Fatal(err)
	}
	s := <-ch
	if s == nil {
		b.Fatal("accept failed")
	}
	return a, s
}

// rawPair runs end on both ends of a loopback connection at once (side 0
// and 1), timed, with size bytes per operation, and fails b on an error of
// either.
func rawPair(b *testing.B, size int, end func(conn net.Conn, side int) error) {
	a, s := loopbackPair(b)
	defer a.Close()
	defer s.Close()
	b.SetBytes(int64(size))
	b.ResetTimer()
	var errs [2]error
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { defer wg.Done(); errs[1] = end(s, 1) }()
	errs[0] = end(a, 0)
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			b.Fatal(err)
		}
	}
}

// RawPingPongRound is one round trip of the plain Go ping-pong on one end
// of conn: side 0 writes buf and reads the answer into it, side 1 reads
// into buf and writes it back. RawTCPPingPong and the process-per-rank
// baseline of tcpbench both run it, so they time the same thing.
func RawPingPongRound(conn net.Conn, buf []byte, side int) error {
	if side == 1 {
		if _, err := io.ReadFull(conn, buf); err != nil {
			return err
		}
	}
	if _, err := conn.Write(buf); err != nil {
		return err
	}
	if side == 0 {
		_, err := io.ReadFull(conn, buf)
		return err
	}
	return nil
}

// RawExchangeStep is one step of the plain Go exchange in which both ends
// write, then read: it writes out to conn, then reads len(in) bytes. It is
// the floor of a 2-rank allreduce (RawTCPExchange, tcpbench).
func RawExchangeStep(conn net.Conn, out, in []byte) error {
	if _, err := conn.Write(out); err != nil {
		return err
	}
	_, err := io.ReadFull(conn, in)
	return err
}

// RawTCPPingPong is TCPPingPong's baseline: Write and ReadFull of size
// bytes over one Go loopback connection, the floor of any Go transport.
func RawTCPPingPong(size int) func(b *testing.B) {
	return func(b *testing.B) {
		rawPair(b, size, func(conn net.Conn, side int) error {
			buf := make([]byte, size)
			for range (b.N + 1) / 2 {
				if err := RawPingPongRound(conn, buf, side); err != nil {
					return err
				}
			}
			return nil
		})
	}
}

// RawTCPExchange is the floor of a 2-rank allreduce of size bytes: both
// ends of one Go loopback connection Write size bytes, then ReadFull the
// peer's, b.N times.
func RawTCPExchange(size int) func(b *testing.B) {
	return func(b *testing.B) {
		rawPair(b, size, func(conn net.Conn, _ int) error {
			out, in := make([]byte, size), make([]byte, size)
			for range b.N {
				if err := RawExchangeStep(conn, out, in); err != nil {
					return err
				}
			}
			return nil
		})
	}
}

// streamWindow is how many messages the stream cases keep in flight.
const streamWindow = 8

// TCPStream measures one-way bandwidth: rank 0 sends b.N messages of size
// bytes to rank 1, streamWindow in flight.
func TCPStream(size int) func(b *testing.B) {
	return func(b *testing.B) {
		g, _, done := tcpGroup(b, 2, 0)
		defer done()
		ctx := context.Background()
		bufs := make([][]byte, streamWindow)
		for i := range bufs {
			bufs[i] = make([]byte, size)
		}
		rbufs := make([][]byte, streamWindow)
		for i := range rbufs {
			rbufs[i] = make([]byte, size)
		}
		b.SetBytes(int64(size))
		b.ResetTimer()
		onRanks(b, g, func(r int, c *procs.Comm) error {
			reqs := make([]comm.Request, streamWindow)
			for i := range b.N {
				k := i % streamWindow
				if reqs[k] != nil {
					if _, err := reqs[k].Wait(ctx); err != nil {
						return err
					}
				}
				var err error
				if r == 0 {
					reqs[k], err = c.Isend(Block(bufs[k]), 1, 2)
				} else {
					reqs[k], err = c.Irecv(Block(rbufs[k]), 0, 2)
				}
				if err != nil {
					return err
				}
			}
			return comm.WaitAll(ctx, reqs...)
		})
	}
}

// RawTCPStream is TCPStream's baseline: b.N writes of size bytes over one
// Go loopback connection, read on the other end.
func RawTCPStream(size int) func(b *testing.B) {
	return func(b *testing.B) {
		a, s := loopbackPair(b)
		defer a.Close()
		defer s.Close()
		buf, in := make([]byte, size), make([]byte, size)
		b.SetBytes(int64(size))
		b.ResetTimer()
		var rerr error
		var wg sync.WaitGroup
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range b.N {
				if _, err := io.ReadFull(s, in); err != nil {
					rerr = err
					return
				}
			}
		}()
		for range b.N {
			if _, err := a.Write(buf); err != nil {
				b.Fatal(err)
			}
		}
		wg.Wait()
		if rerr != nil {
			b.Fatal(rerr)
		}
	}
}

// TCPAllreduce measures comm.Allreduce of n float64 (in place) over ranks.
func TCPAllreduce(ranks, n int) func(b *testing.B) {
	return TCPAllreduceConfig(ranks, n, procs.Config{})
}

// TCPAllreduceConfig is TCPAllreduce with the ranks' configuration.
func TCPAllreduceConfig(ranks, n int, cfg procs.Config) func(b *testing.B) {
	return func(b *testing.B) {
		g, bufs, done := tcpGroupConfig(b, ranks, n, cfg)
		defer done()
		ctx := context.Background()
		// One untimed call first: first touches of fresh pages and
		// connection warm-up would otherwise be all a 1-iteration run measured.
		run := func(iters int) {
			onRanks(b, g, func(r int, c *procs.Comm) error {
				v, err := memspace.FromSlice(bufs[r])
				if err != nil {
					return err
				}
				for range iters {
					if err := comm.Allreduce(ctx, c, v, v, comm.Sum); err != nil {
						return err
					}
					if bufs[r][0] != bufs[r][0] {
						return fmt.Errorf("NaN")
					}
				}
				return nil
			})
		}
		run(1)
		b.ResetTimer()
		run(b.N)
	}
}

// TCPBcast measures comm.Bcast of size bytes from rank 0 over ranks.
func TCPBcast(ranks, size int) func(b *testing.B) {
	return func(b *testing.B) {
		g, bufs, done := tcpGroup(b, ranks, size/8)
		defer done()
		ctx := context.Background()
		// One untimed call first: first touches of fresh pages and
		// connection warm-up would otherwise be all a 1-iteration run measured.
		run := func(iters int) {
			onRanks(b, g, func(r int, c *procs.Comm) error {
				v, _ := memspace.FromSlice(bufs[r])
				for range iters {
					if err := comm.Bcast(ctx, c, v, 0); err != nil {
						return err
					}
				}
				return nil
			})
		}
		run(1)
		b.ResetTimer()
		run(b.N)
	}
}

// TCPAlltoall measures comm.Alltoall of size bytes per rank over ranks.
func TCPAlltoall(ranks, size int) func(b *testing.B) {
	return func(b *testing.B) {
		g, bufs, done := tcpGroup(b, ranks, size/8)
		defer done()
		ctx := context.Background()
		recv := make([][]float64, ranks)
		for i := range recv {
			recv[i] = make([]float64, size/8)
		}
		// One untimed call first: first touches of fresh pages and
		// connection warm-up would otherwise be all a 1-iteration run measured.
		run := func(iters int) {
			onRanks(b, g, func(r int, c *procs.Comm) error {
				s, _ := memspace.FromSlice(bufs[r])
				d, _ := memspace.FromSlice(recv[r])
				for range iters {
					if err := comm.Alltoall(ctx, c, s, d); err != nil {
						return err
					}
				}
				return nil
			})
		}
		run(1)
		b.ResetTimer()
		run(b.N)
	}
}
