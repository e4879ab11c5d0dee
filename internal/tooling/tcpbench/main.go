package main

import (
	"context"
	"encoding/binary"
	"flag"
	"fmt"
	"io"
	"net"
	"os"
	"regexp"
	"strings"
	"time"

	"github.com/xpu-go/xpu/backends/procs"
	"github.com/xpu-go/xpu/comm"
	"github.com/xpu-go/xpu/internal/tooling/bench"
	"github.com/xpu-go/xpu/internal/tooling/bench/stats"
	"github.com/xpu-go/xpu/memspace"
)

const runs = 5

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "tcpbench:", err)
		os.Exit(1)
	}
}

func run() error {
	outPath := flag.String("o", "", "append the figures to this file instead of printing them")
	cpuProfile := flag.String("cpuprofile", "", "write a CPU profile of rank r to this file with \".r\" appended")
	label := flag.String("label", "", "name the figures' runs: \"shm-L.np2.…\", \"spin-L.np2.…\" (as \"bound\" for ranks bound to processors)")
	only := flag.String("only", "", "run only the cases whose names (pingpong.8B, bw.1MiB, allreduce.64MiB, bcast.8B, alltoall.1MiB, …) match this regular expression")
	flag.Parse()
	pick, err := regexp.Compile(*only)
	if err != nil {
		return fmt.Errorf("-only: %w", err)
	}
	want := pick.MatchString
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	cfg, err := procs.ConfigFromEnv() // MasterAddr: the raw references dial its host
	if err != nil {
		return err
	}
	c, err := procs.Dial(ctx, cfg)
	if err != nil {
		return err
	}
	defer c.Close()
	p, r := c.Size(), c.Rank()
	if *cpuProfile != "" {
		stop, err := bench.CPUProfile(fmt.Sprintf("%s.%d", *cpuProfile, r))
		if err != nil {
			return err
		}
		defer stop()
	}
	var out io.Writer = os.Stdout
	if *outPath != "" && r == 0 {
		f, err := os.OpenFile(*outPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
		if err != nil {
			return err
		}
		defer f.Close()
		out = f
	}
	reportAs := func(name string, v float64, unit string) {
		if r == 0 {
			if *label != "" {
				kind, rest, _ := strings.Cut(name, ".")
				name = kind + "-" + *label + "." + rest
			}
			fmt.Fprintf(out, "%s %.1f %s\n", name, v, unit)
		}
	}
	links := linkKind(c)
	prefix := links
	if c.FlightRecorder() == nil {
		// The flight recorder off (XPU_FLIGHT_SIZE=0): beside a run with
		// it, these figures give its share (ADR 49).
		prefix += "-norec"
	}
	report := func(name string, v float64, unit string) {
		reportAs(fmt.Sprintf("%s.np%d.%s", prefix, p, name), v, unit)
	}
	// timeRun runs body iters times after a barrier and returns the time
	// per iteration, in nanoseconds.
	timeRun := func(iters int, body func() error) (float64, error) {
		if err := comm.Barrier(ctx, c); err != nil {
			return 0, err
		}
		start := time.Now()
		for range iters {
			if err := body(); err != nil {
				return 0, err
			}
		}
		return float64(time.Since(start).Nanoseconds()) / float64(iters), nil
	}
	// warmUp runs body iters/10+1 times untimed, as the OSU benchmarks
	// skip their first iterations (the C reference does the same): the
	// first measurement after the job forms otherwise pays for what the
	// start left behind (a collection, goroutines settling).
	warmUp := func(iters int, body func() error) error {
		for range iters/10 + 1 {
			if err := body(); err != nil {
				return err
			}
		}
		return nil
	}
	// measure returns the median of runs timeRuns of body, after a warm-up.
	measure := func(iters int, body func() error) (float64, error) {
		if err := warmUp(iters, body); err != nil {
			return 0, err
		}
		var ts []float64
		for range runs {
			t, err := timeRun(iters, body)
			if err != nil {
				return 0, err
			}
			ts = append(ts, t)
		}
		return stats.Median(ts), nil
	}

	// With 2 ranks linked through TCP, a plain Go TCP connection between
	// the same two processes gives the floors: the ping-pong's, and the
	// allreduce's (an exchange in which both ends write, then read). Over
	// shared memory the references are Open MPI's and the C ring's, run
	// apart (make refs-shm): runs alternating with a socket's would measure
	// how fast polling ranks wake after one. Only the ping-pong's floor,
	// a spin ring that polls as the links do, alternates with ours there.
	var conn net.Conn
	if p == 2 && links != "shm" {
		host, _, err := net.SplitHostPort(cfg.MasterAddr)
		if err != nil {
			return err
		}
		if conn, err = rawConn(ctx, c, host); err != nil {
			return err
		}
		defer conn.Close()
	}
	// paired times ours and base in alternating runs, so both see the same
	// machine, and returns the median time per iteration of each.
	paired := func(iters int, ours, base func() error) (float64, float64, error) {
		if err := warmUp(iters, base); err != nil {
			return 0, 0, err
		}
		if err := warmUp(iters, ours); err != nil {
			return 0, 0, err
		}
		var to, tb []float64
		for range runs {
			t, err := timeRun(iters, base)
			if err != nil {
				return 0, 0, err
			}
			tb = append(tb, t)
			if t, err = timeRun(iters, ours); err != nil {
				return 0, 0, err
			}
			to = append(to, t)
		}
		return stats.Median(to), stats.Median(tb), nil
	}

	if p == 2 {
		buf, raw := bench.Block(make([]byte, 8)), make([]byte, 8)
		pingpong := func() error {
			if r == 0 {
				if err := comm.Send(ctx, c, buf, 1, 1); err != nil {
					return err
				}
				_, err := comm.Recv(ctx, c, buf, 1, 1)
				return err
			}
			if _, err := comm.Recv(ctx, c, buf, 0, 1); err != nil {
				return err
			}
			return comm.Send(ctx, c, buf, 0, 1)
		}
		switch {
		case !want("pingpong.8B"):
		case links == "shm":
			// The floor at the same moment: a spin ring between the same
			// two processes (bench.SpinRing), run for run alternately.
			ring, err := bench.ShareSpinRing(ctx, c)
			if err != nil {
				return err
			}
			defer ring.Close()
			ringPingpong := func() error { return ring.PingPong(r, raw) }
			ours, base, err := paired(20000, pingpong, ringPingpong)
			if err != nil {
				return err
			}
			report("pingpong.8B", ours/2, "ns/op")
			reportAs("spin.np2.pingpong.8B", base/2, "ns/op")
		case conn == nil:
			ours, err := measure(20000, pingpong)
			if err != nil {
				return err
			}
			report("pingpong.8B", ours/2, "ns/op")
		default:
			rawPingpong := func() error { return bench.RawPingPongRound(conn, raw, r) }
			ours, base, err := paired(10000, pingpong, rawPingpong)
			if err != nil {
				return err
			}
			report("pingpong.8B", ours/2, "ns/op")
			reportAs("rawtcp.np2.pingpong.8B", base/2, "ns/op")
		}

		for _, k := range []struct {
			name string
			size int
		}{{"1MiB", 1 << 20}, {"4MiB", 4 << 20}} {
			if !want("bw." + k.name) {
				continue
			}
			gbs, err := bandwidth(ctx, c, measure, k.size)
			if err != nil {
				return err
			}
			report("bw."+k.name, gbs, "GB/s")
		}
		if err := oneSidedCases(ctx, c, want, measure, report); err != nil {
			return err
		}
	}

	for _, k := range []struct {
		name  string
		n     int
		iters int
	}{{"8B", 1, 2000}, {"64KiB", 8 << 10, 300}, {"64MiB", 8 << 20, 3}} {
		if !want("allreduce." + k.name) {
			continue
		}
		v := make([]float64, k.n)
		b, _ := memspace.FromSlice(v)
		allreduce := func() error { return comm.Allreduce(ctx, c, b, b, comm.Sum) }
		if conn == nil || k.n > 8<<10 {
			iters := k.iters
			if k.n == 1 {
				iters = 20000 // a run of a few milliseconds
			}
			us, err := measure(iters, allreduce)
			if err != nil {
				return err
			}
			report("allreduce."+k.name, us, "ns/op")
			continue
		}
		out, in := make([]byte, 8*k.n), make([]byte, 8*k.n)
		// Both ends write, then read, as the communicator does: up to
		// 64 KiB the kernel's buffers take both writes. A deadline turns a
		// stall into an error, not a hang.
		exchange := func() error { return bench.RawExchangeStep(conn, out, in) }
		if err := conn.SetDeadline(time.Now().Add(time.Minute)); err != nil {
			return err
		}
		ours, base, err := paired(k.iters, allreduce, exchange)
		if err != nil {
			return err
		}
		report("allreduce."+k.name, ours, "ns/op")
		reportAs("rawtcp.np2.exchange."+k.name, base, "ns/op")
	}
	for _, k := range []struct {
		name  string
		size  int
		iters int
	}{{"8B", 8, 2000}, {"1MiB", 1 << 20, 50}} {
		if want("bcast." + k.name) {
			buf := bench.Block(make([]byte, k.size))
			us, err := measure(k.iters, func() error { return comm.BcastBlock(ctx, c, buf, 0) })
			if err != nil {
				return err
			}
			report("bcast."+k.name, us, "ns/op")
		}
		if want("alltoall." + k.name) {
			// Alltoall: k.size bytes to each rank.
			send, recv := bench.Block(make([]byte, k.size*p)), bench.Block(make([]byte, k.size*p))
			us, err := measure(k.iters, func() error { return comm.AlltoallBlock(ctx, c, send, recv) })
			if err != nil {
				return err
			}
			report("alltoall."+k.name, us, "ns/op")
		}
	}
	return comm.Barrier(ctx, c)
}

// linkKind names the links this rank uses, as the figures' names start:
// "shm" when every link to another rank is shared memory, "tcp" when every
// one is TCP, "mixed" otherwise.
func linkKind(c *procs.Comm) string {
	shm, other := 0, 0
	for j := range c.Size() {
		switch {
		case j == c.Rank():
		case c.Transport(j) == procs.TransportShm:
			shm++
		default:
			other++
		}
	}
	switch {
	case other == 0 && shm > 0:
		return "shm"
	case shm == 0:
		return "tcp"
	default:
		return "mixed"
	}
}

// bandwidth streams windows of 8 messages of size bytes from rank 0 to
// rank 1, each window followed by an ack back, 4 windows a run, and
// returns the median rate in GB/s (1e9 bytes/s).
func bandwidth(ctx context.Context, c *procs.Comm, measure func(int, func() error) (float64, error), size int) (float64, error) {
	const window = 8
	r := c.Rank()
	bufs := make([]memspace.Block, window)
	for i := range bufs {
		// Written first, as the Open MPI reference's: a page never
		// written reads as the kernel's zero page, faster than data.
		b := make([]byte, size)
		for k := range b {
			b[k] = byte(0x5a + i + r)
		}
		bufs[i] = bench.Block(b)
	}
	ack := bench.Block(make([]byte, 1))
	ns, err := measure(4, func() error {
		reqs := make([]comm.Request, window)
		for i := range window {
			var err error
			if r == 0 {
				reqs[i], err = c.Isend(bufs[i], 1, 2)
			} else {
				reqs[i], err = c.Irecv(bufs[i], 0, 2)
			}
			if err != nil {
				return err
			}
		}
		if err := comm.WaitAll(ctx, reqs...); err != nil {
			return err
		}
		if r == 1 {
			return comm.Send(ctx, c, ack, 0, 3)
		}
		_, err := comm.Recv(ctx, c, ack, 1, 3)
		return err
	})
	if err != nil {
		return 0, err
	}
	return float64(window*size) / ns, nil
}

// rawConn connects ranks 0 and 1 with a plain TCP connection: rank 0
// listens on host, the master's address, and passes the port to rank 1
// through c.
func rawConn(ctx context.Context, c *procs.Comm, host string) (net.Conn, error) {
	var port [8]byte
	if c.Rank() == 0 {
		ln, err := net.Listen("tcp", net.JoinHostPort(host, "0"))
		if err != nil {
			return nil, err
		}
		defer ln.Close()
		binary.LittleEndian.PutUint64(port[:], uint64(ln.Addr().(*net.TCPAddr).Port))
		if err := comm.Send(ctx, c, bench.Block(port[:]), 1, 9); err != nil {
			return nil, err
		}
		stop := context.AfterFunc(ctx, func() { _ = ln.Close() })
		defer stop()
		return ln.Accept()
	}
	if _, err := comm.Recv(ctx, c, bench.Block(port[:]), 0, 9); err != nil {
		return nil, err
	}
	var d net.Dialer
	return d.DialContext(ctx, "tcp", net.JoinHostPort(host, fmt.Sprint(binary.LittleEndian.Uint64(port[:]))))
}
