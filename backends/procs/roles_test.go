package procs_test

import (
	"bufio"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"os/signal"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/xpu-go/xpu/backends/procs"
	"github.com/xpu-go/xpu/comm"
	"github.com/xpu-go/xpu/memspace"
)

// The multi-process tests start this test binary again as rank processes:
// envRole selects what a rank does (runRole), the launcher's variables
// (XPU_RANK, …) place it in the job. A rank reports on its standard
// output, one line per event: "READY" once warmed up, "LOST <error>" when
// an operation failed with ErrPeerLost, "OK" when its work is done and
// correct, "FAIL <error>" otherwise.
const (
	envRole  = "XPU_TCP_TEST_ROLE"
	envIters = "XPU_TCP_TEST_ITERS"
	envCount = "XPU_TCP_TEST_COUNT"
)

// Roles.
const (
	// roleUntilLost runs allreduces until one fails, which must be with
	// ErrPeerLost (a peer is killed or cut off meanwhile).
	roleUntilLost = "until-lost"
	// roleChecked runs envIters checked allreduces, sends and receives,
	// then a barrier, and reports OK.
	roleChecked = "checked"
	// roleTorn: rank 1 sends rank 0 one eager message larger than the
	// ring of their shared-memory link once it gets SIGUSR1, and reports
	// "SENDING" while the send is still pending (the ring holds part of
	// the frame); rank 0 waits for that message with a posted receive and
	// must see ErrPeerLost ("LOST") once rank 1 is killed, never the
	// message ("FAIL").
	roleTorn = "torn"
	// roleDevice: rank 1 sends device blocks of the test device space
	// to rank 0, frees one and exits at once; rank 0 checks what came,
	// the paths and its mappings (TestMultiProcessDevice).
	roleDevice = "device"
)

// tornTag and tornSize are the tag and size of roleTorn's message.
const (
	tornTag  = 7
	tornSize = 60 << 10
)

func runRole(role string) int {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	c, err := procs.FromEnv(ctx)
	if err != nil {
		fmt.Println("FAIL join:", err)
		return 3
	}
	defer c.Close()
	count := envInt(envCount, 1<<19)
	switch role {
	case roleUntilLost:
		for i := 0; ; i++ {
			if err := checkedAllreduce(ctx, c, count, i); err != nil {
				if errors.Is(err, comm.ErrPeerLost) {
					fmt.Println("LOST", err)
					return 0
				}
				fmt.Println("FAIL", err)
				return 1
			}
			if i == 2 {
				fmt.Println("READY")
			}
		}
	case roleChecked:
		for i := range envInt(envIters, 10) {
			if err := checkedAllreduce(ctx, c, count, i); err != nil {
				fmt.Println("FAIL", err)
				return 1
			}
			if err := checkedRing(ctx, c, 100000+i); err != nil {
				fmt.Println("FAIL", err)
				return 1
			}
		}
		if err := comm.Barrier(ctx, c); err != nil {
			fmt.Println("FAIL barrier:", err)
			return 1
		}
		fmt.Println("OK")
		return 0
	case roleTorn:
		return runTorn(ctx, c)
	case roleDevice:
		return runDevice(ctx, c)
	}
	fmt.Println("FAIL unknown role", role)
	return 2
}

func runTorn(ctx context.Context, c *procs.Comm) int {
	if c.Transport(1-c.Rank()) != procs.TransportShm {
		fmt.Println("FAIL the link is", c.Transport(1-c.Rank()))
		return 1
	}
	buf := make([]byte, tornSize)
	b, _ := memspace.FromSlice(buf)
	if c.Rank() == 1 {
		usr1 := make(chan os.Signal, 1)
		signal.Notify(usr1, syscall.SIGUSR1)
		fmt.Println("READY")
		<-usr1 // unbounded: a rank process's role: it waits for the test's signal, and the test kills it past its bound
		r, err := c.Isend(b.Block(), 0, tornTag)
		if err != nil {
			fmt.Println("FAIL send:", err)
			return 1
		}
		time.Sleep(100 * time.Millisecond)
		if _, done, err := r.Test(); done || err != nil {
			fmt.Println("FAIL the send completed while its receiver was stopped:", err)
			return 1
		}
		fmt.Println("SENDING")
		<-ctx.Done() // unbounded: a rank process's role: ctx has a deadline, and the test kills it before
		return 1
	}
	fmt.Println("READY")
	_, err := comm.Recv(ctx, c, b.Block(), 1, tornTag)
	if errors.Is(err, comm.ErrPeerLost) {
		fmt.Println("LOST", err)
		return 0
	}
	fmt.Println("FAIL the receive of a half-written message returned", err)
	return 1
}

func envInt(name string, def int) int {
	if n, err := strconv.Atoi(os.Getenv(name)); err == nil {
		return n
	}
	return def
}

// checkedAllreduce sums count float64 over every rank, in place, and
// checks the result: element j of rank r is r+1+j+iter, so the sum is
// p(p+1)/2 + p(j+iter).
func checkedAllreduce(ctx context.Context, c comm.Comm, count, iter int) error {
	p, r := c.Size(), c.Rank()
	v := make([]float64, count)
	for j := range v {
		v[j] = float64(r + 1 + j%1000 + iter)
	}
	b, err := memspace.FromSlice(v)
	if err != nil {
		return err
	}
	if err := comm.Allreduce(ctx, c, b, b, comm.Sum); err != nil {
		return fmt.Errorf("allreduce #%d: %w", iter, err)
	}
	for j, x := range v {
		if want := float64(p*(p+1)/2 + p*(j%1000+iter)); x != want {
			return fmt.Errorf("allreduce #%d: element %d is %v, want %v", iter, j, x, want)
		}
	}
	return nil
}

// checkedRing sends size bytes to the right neighbour and checks what
// comes from the left.
func checkedRing(ctx context.Context, c comm.Comm, size int) error {
	p, r := c.Size(), c.Rank()
	out := make([]byte, size)
	for i := range out {
		out[i] = byte(r*31 + i*7)
	}
	in := make([]byte, size)
	ob, _ := memspace.FromSlice(out)
	ib, _ := memspace.FromSlice(in)
	left := (r + p - 1) % p
	if _, err := comm.Sendrecv(ctx, c, ob.Block(), (r+1)%p, 9, ib.Block(), left, 9); err != nil {
		return fmt.Errorf("ring exchange: %w", err)
	}
	for i, x := range in {
		if x != byte(left*31+i*7) {
			return fmt.Errorf("ring exchange: byte %d is %d, want %d", i, x, byte(left*31+i*7))
		}
	}
	return nil
}

// rankProc is a rank process started by a test.
type rankProc struct {
	rank  int
	cmd   *exec.Cmd
	lines chan line // its output lines, closed at EOF
	// exited is closed once the process has exited and err holds what
	// Wait returned; read both through wait (any number of times).
	exited chan struct{}
	err    error
}

// wait waits for the process to exit and returns its exit error.
func (p *rankProc) wait() error {
	<-p.exited
	return p.err
}

type line struct {
	text string
	at   time.Time
}

// job describes the rank processes of a test.
type job struct {
	size    int
	master  string // host of rank 0
	port    int
	secret  string
	env     []string                // extra variables for every rank
	rankEnv func(rank int) []string // extra variables per rank
	wrapper func(rank int) []string
	args    []string // test flags of the rank processes; default -test.run=^$
}

func freePort(t *testing.T) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	port := ln.Addr().(*net.TCPAddr).Port
	require.NoError(t, ln.Close())
	return port
}

func newSecret(t *testing.T) string {
	t.Helper()
	var b [16]byte
	_, err := rand.Read(b[:])
	require.NoError(t, err)
	return hex.EncodeToString(b[:])
}

// start starts every rank of j with role; the test's cleanup kills those
// still running.
func (j job) start(t *testing.T, role string) []*rankProc {
	t.Helper()
	exe, err := os.Executable()
	require.NoError(t, err)
	ranks := make([]*rankProc, j.size)
	for r := range j.size {
		args := append([]string{exe}, j.args...)
		if len(j.args) == 0 {
			args = append(args, "-test.run=^$")
		}
		if j.wrapper != nil {
			args = append(j.wrapper(r), args...)
		}
		cmd := exec.Command(args[0], args[1:]...)
		cmd.Env = append(os.Environ(),
			envRole+"="+role,
			procs.EnvRank+"="+strconv.Itoa(r),
			procs.EnvWorldSize+"="+strconv.Itoa(j.size),
			procs.EnvMasterAddr+"="+j.master,
			procs.EnvMasterPort+"="+strconv.Itoa(j.port),
			procs.EnvJobSecret+"="+j.secret,
		)
		cmd.Env = append(cmd.Env, j.env...)
		if j.rankEnv != nil {
			cmd.Env = append(cmd.Env, j.rankEnv(r)...)
		}
		ranks[r] = spawnRank(t, cmd, r, fmt.Sprintf("rank %d", r))
	}
	t.Cleanup(func() {
		for _, p := range ranks {
			_ = p.cmd.Process.Kill()
		}
		for _, p := range ranks {
			for range p.lines {
			}
			_ = p.wait()
		}
	})
	return ranks
}

// spawnRank starts cmd as rank under name, its stderr logged and its stdout
// lines fed to the returned rankProc until it exits.
func spawnRank(t *testing.T, cmd *exec.Cmd, rank int, name string) *rankProc {
	t.Helper()
	cmd.Stderr = &prefixWriter{t: t, prefix: name + " stderr: "}
	out, err := cmd.StdoutPipe()
	require.NoError(t, err)
	require.NoError(t, cmd.Start(), "start %s", name)
	p := &rankProc{rank: rank, cmd: cmd, lines: make(chan line, 4096), exited: make(chan struct{})}
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			p.lines <- line{text: sc.Text(), at: time.Now()}
		}
		close(p.lines)
		p.err = cmd.Wait()
		close(p.exited)
	}()
	return p
}

// expect waits for a line of p starting with prefix, failing the test on
// another report, on exit or after d.
func (p *rankProc) expect(t *testing.T, prefix string, d time.Duration) line {
	t.Helper()
	timer := time.NewTimer(d)
	defer timer.Stop()
	for {
		select {
		case l, ok := <-p.lines:
			if !ok {
				t.Fatalf("rank %d ended without reporting %s", p.rank, prefix)
			}
			t.Logf("rank %d: %s", p.rank, l.text)
			if strings.HasPrefix(l.text, prefix) {
				return l
			}
			if strings.HasPrefix(l.text, "FAIL") || strings.HasPrefix(l.text, "LOST") {
				t.Fatalf("rank %d reported %q while %s was expected", p.rank, l.text, prefix)
			}
		case <-timer.C:
			t.Fatalf("rank %d did not report %s within %v", p.rank, prefix, d)
		}
	}
}

// prefixWriter logs a process's standard error.
type prefixWriter struct {
	mu     sync.Mutex
	t      *testing.T
	prefix string
}

func (w *prefixWriter) Write(b []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, l := range strings.Split(strings.TrimRight(string(b), "\n"), "\n") {
		w.t.Log(w.prefix + l)
	}
	return len(b), nil
}

var _ io.Writer = (*prefixWriter)(nil)
