//go:build rdma

package verbs_test

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"
	"unsafe"

	"go.uber.org/goleak"

	"github.com/xpu-go/xpu/backends/rdma/internal/fabric"
	"github.com/xpu-go/xpu/backends/rdma/internal/verbs"
	"github.com/xpu-go/xpu/internal/tooling/testwait"
	"github.com/xpu-go/xpu/xerr"
)

// The tests need an RDMA device with an active port and an IPv4 address
// (soft-RoCE will do: rdma link add rxe0 type rxe netdev eth0) and skip
// without one. VERBS_TEST_DEVICE and VERBS_TEST_IP choose the device and
// address; by default the first device with an active port and its first
// IPv4 address.

// childEnv makes the test binary a child that dials the address it names,
// reports, and is killed (TestPeerProcessDies).
const childEnv = "VERBS_TEST_CHILD_DIAL"

func TestMain(m *testing.M) {
	if addr := os.Getenv(childEnv); addr != "" {
		os.Exit(child(addr))
	}
	goleak.VerifyTestMain(m)
}

// timeout bounds every wait of the tests: generous, for soft-RoCE under
// emulation.
const timeout = 20 * time.Second

// device finds the device and address the tests use, or skips.
func device(t testing.TB) (name, ip string) {
	t.Helper()
	devs, err := verbs.Provider().Devices()
	if err != nil {
		t.Skipf("no RDMA device: %v", err)
	}
	want := os.Getenv("VERBS_TEST_DEVICE")
	for _, d := range devs {
		if want != "" && d.Name != want {
			continue
		}
		for _, p := range d.Ports {
			if p.State == "ACTIVE" && p.IPv4 != "" {
				if ip := os.Getenv("VERBS_TEST_IP"); ip != "" {
					return d.Name, ip
				}
				return d.Name, p.IPv4
			}
		}
	}
	t.Skipf("no RDMA device: none of %d devices has an active port with an IPv4 address", len(devs))
	return "", ""
}

func open(t testing.TB, name string) fabric.Context {
	t.Helper()
	c, err := verbs.Provider().Open(name, 1024)
	if err != nil {
		t.Fatalf("Open(%q): %v", name, err)
	}
	t.Cleanup(func() {
		if err := c.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	return c
}

// region is registered memory off the Go heap.
type region struct {
	b  []byte
	mr *fabric.MR
}

// listen listens through c on port 0 of ip, failing the test on an error.
func listen(t testing.TB, c fabric.Context, ip string) fabric.Listener {
	t.Helper()
	ln, err := c.Listen(ip + ":0")
	if err != nil {
		t.Fatal(err)
	}
	return ln
}

func register(t testing.TB, c fabric.Context, n int) *region {
	t.Helper()
	b, err := syscall.Mmap(-1, 0, n, syscall.PROT_READ|syscall.PROT_WRITE, syscall.MAP_ANON|syscall.MAP_PRIVATE)
	if err != nil {
		t.Fatal(err)
	}
	mr, err := c.Register(unsafe.Pointer(&b[0]), n)
	if err != nil {
		syscall.Munmap(b)
		t.Fatalf("Register(%d): %v", n, err)
	}
	t.Cleanup(func() {
		if err := c.Deregister(mr); err != nil && !errors.Is(err, xerr.ErrClosed) {
			t.Errorf("Deregister: %v", err)
		}
		syscall.Munmap(b)
	})
	return &region{b: b, mr: mr}
}

func (r *region) sge(off, n int) fabric.SGE {
	return fabric.SGE{Addr: r.mr.Addr + uintptr(off), Len: uint32(n), LKey: r.mr.LKey}
}

// pair is two contexts on the device and an endpoint of each, connected.
type pair struct {
	a, b     fabric.Context
	ea, eb   fabric.Endpoint
	ra, rb   *region
	private  []byte // what b's request carried
	reply    []byte // what a's dial returned
	listener fabric.Listener
}

var cfg = fabric.EndpointConfig{SendDepth: 64, RecvDepth: 64, MaxInline: 64}

func connect(t testing.TB) *pair {
	t.Helper()
	name, ip := device(t)
	p := &pair{a: open(t, name), b: open(t, name)}
	p.ra, p.rb = register(t, p.a, 2<<20), register(t, p.b, 2<<20)
	ln, err := p.b.Listen(ip + ":0")
	if err != nil {
		t.Fatalf("Listen: %v", err)
	}
	p.listener = ln
	t.Cleanup(func() { ln.Close() })
	type accepted struct {
		ep      fabric.Endpoint
		private []byte
		err     error
	}
	ch := make(chan accepted, 1)
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	go func() {
		r, err := ln.Accept(ctx)
		if err != nil {
			ch <- accepted{err: err}
			return
		}
		ep, err := r.Accept(cfg, []byte("welcome"))
		ch <- accepted{ep, r.Private(), err}
	}()
	ea, reply, err := p.a.Dial(ctx, ln.Addr(), cfg, []byte("hello"))
	if err != nil {
		t.Fatalf("Dial(%s): %v", ln.Addr(), err)
	}
	acc := testwait.Recv(t, ch, "the accept")
	if acc.err != nil {
		ea.Close()
		t.Fatalf("Accept: %v", acc.err)
	}
	p.ea, p.eb, p.private, p.reply = ea, acc.ep, acc.private, reply
	t.Cleanup(func() { p.ea.Close(); p.eb.Close() })
	return p
}

// collect polls c (waiting in between) until it has n completions.
func collect(t testing.TB, c fabric.Context, n int) []fabric.Completion {
	t.Helper()
	deadline := time.Now().Add(timeout)
	var out []fabric.Completion
	buf := make([]fabric.Completion, 16)
	for len(out) < n {
		k, err := c.Poll(buf[:min(len(buf), n-len(out))])
		if err != nil {
			t.Fatalf("Poll: %v", err)
		}
		out = append(out, buf[:k]...)
		if k > 0 {
			continue
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d of %d completions after %v: %+v", len(out), n, timeout, out)
		}
		// What completes between the Poll above and Arm raises no
		// event: Wait's bound covers it, the next Poll takes it.
		if err := c.Arm(); err != nil {
			t.Fatalf("Arm: %v", err)
		}
		if err := c.Wait(100 * time.Millisecond); err != nil {
			t.Fatalf("Wait: %v", err)
		}
	}
	return out
}

func lostWithin(t testing.TB, ep fabric.Endpoint, d time.Duration) error {
	t.Helper()
	select {
	case <-ep.Lost():
		return ep.Err()
	case <-time.After(d):
		t.Fatalf("endpoint not lost after %v", d)
		return nil
	}
}

func fillPattern(b []byte, seed byte) {
	for i := range b {
		b[i] = byte(i*7) + seed
	}
}

func TestDevices(t *testing.T) {
	devs, err := verbs.Provider().Devices()
	if err != nil {
		t.Skipf("no RDMA device: %v", err)
	}
	if len(devs) == 0 {
		t.Skip("no RDMA device: ibv_get_device_list found none")
	}
	for _, d := range devs {
		t.Logf("%+v", d)
		if d.Name == "" || d.MaxMRSize == 0 || d.MaxQP == 0 || d.MaxCQE == 0 || d.MaxSGE == 0 || len(d.Ports) == 0 {
			t.Errorf("%s: incomplete: %+v", d.Name, d)
		}
		for _, p := range d.Ports {
			for _, g := range p.GIDs {
				if _, err := netip.ParseAddr(g); err != nil {
					t.Errorf("%s port %d: GID %q: %v", d.Name, p.Num, g, err)
				}
			}
			if p.State == "ACTIVE" && (p.MTU == 0 || len(p.GIDs) == 0) {
				t.Errorf("%s port %d: active without MTU or GIDs: %+v", d.Name, p.Num, p)
			}
		}
		if !strings.HasPrefix(d.Name, "rxe") {
			continue
		}
		// Soft-RoCE: an Ethernet port whose IPv4 is in its GID table.
		p := d.Ports[0]
		if d.Transport != "RoCE" || p.LinkLayer != "Ethernet" || p.State != "ACTIVE" || p.Netdev == "" {
			t.Errorf("%s: want an active RoCE port with a netdev: %+v", d.Name, d)
		}
		if p.IPv4 != "" && !contains(p.GIDs, "::ffff:"+p.IPv4) {
			t.Errorf("%s: IPv4 %s not among the GIDs %v", d.Name, p.IPv4, p.GIDs)
		}
	}
	if ip := os.Getenv("VERBS_TEST_EXPECT_GID"); ip != "" {
		found := false
		for _, d := range devs {
			for _, p := range d.Ports {
				found = found || contains(p.GIDs, ip)
			}
		}
		if !found {
			t.Errorf("no device has the GID %s", ip)
		}
	}
}

func contains(s []string, v string) bool {
	for _, x := range s {
		if x == v {
			return true
		}
	}
	return false
}

func TestOpenUnknown(t *testing.T) {
	device(t)
	_, err := verbs.Provider().Open("no-such-device", 16)
	if !errors.Is(err, verbs.ErrNoDevice) {
		t.Errorf("Open(no-such-device): %v, want ErrNoDevice", err)
	}
}

func TestRegister(t *testing.T) {
	name, _ := device(t)
	c := open(t, name)
	r := register(t, c, 1<<20)
	if r.mr.Len != 1<<20 || r.mr.Addr != uintptr(unsafe.Pointer(&r.b[0])) {
		t.Errorf("MR %+v", r.mr)
	}
	if _, err := c.Register(nil, 10); !errors.Is(err, xerr.ErrInvalidArgument) {
		t.Errorf("Register(nil): %v", err)
	}
	mr, err := c.Register(unsafe.Pointer(&r.b[0]), 4096)
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Deregister(mr); err != nil {
		t.Fatal(err)
	}
	if err := c.Deregister(mr); !errors.Is(err, xerr.ErrInvalidArgument) {
		t.Errorf("second Deregister: %v, want ErrInvalidArgument", err)
	}
}

func TestSendRecv(t *testing.T) {
	p := connect(t)
	if string(p.private) != "hello" || string(p.reply) != "welcome" {
		t.Errorf("private %q, reply %q", p.private, p.reply)
	}
	const n = 4096
	fillPattern(p.ra.b[:n], 1)
	if err := p.eb.PostRecv(7, p.rb.sge(0, n)); err != nil {
		t.Fatal(err)
	}
	if err := p.eb.PostRecv(8, p.rb.sge(n, 64)); err != nil {
		t.Fatal(err)
	}
	if err := p.ea.PostSend(fabric.SendWR{ID: 1, Op: fabric.OpSend, Local: p.ra.sge(0, n), Signaled: true}); err != nil {
		t.Fatal(err)
	}
	copy(p.ra.b[n:], "inline!")
	if err := p.ea.PostSend(fabric.SendWR{ID: 2, Op: fabric.OpSend, Local: p.ra.sge(n, 7), Inline: true, Signaled: true,
		Imm: 0xdeadbeef, HasImm: true}); err != nil {
		t.Fatal(err)
	}
	p.ra.b[n] = 'X' // inline: the bytes were copied at post time
	sent := collect(t, p.a, 2)
	for i, c := range sent {
		if c.Err != nil || c.Op != fabric.OpSend || c.ID != uint64(i+1) {
			t.Errorf("send completion %d: %+v", i, c)
		}
	}
	got := collect(t, p.b, 2)
	if c := got[0]; c.Err != nil || c.ID != 7 || c.Op != fabric.OpRecv || c.Len != n || c.HasImm {
		t.Errorf("first receive: %+v", c)
	}
	if !bytes.Equal(p.rb.b[:n], p.ra.b[:n]) {
		t.Error("received bytes differ")
	}
	if c := got[1]; c.Err != nil || c.ID != 8 || c.Op != fabric.OpRecv || c.Len != 7 || !c.HasImm || c.Imm != 0xdeadbeef {
		t.Errorf("second receive: %+v", c)
	}
	if s := string(p.rb.b[n : n+7]); s != "inline!" {
		t.Errorf("inline bytes %q", s)
	}
}

func TestPostChecks(t *testing.T) {
	p := connect(t)
	bad := []fabric.SendWR{
		{Op: fabric.OpRecv, Local: p.ra.sge(0, 8)},
		{Op: fabric.OpWrite, Local: p.ra.sge(0, 8), HasImm: true},
		{Op: fabric.OpSend, Local: p.ra.sge(0, 65), Inline: true},
		{Op: fabric.OpRead, Local: p.ra.sge(0, 8), Inline: true},
	}
	for _, w := range bad {
		if err := p.ea.PostSend(w); !errors.Is(err, fabric.ErrLocal) {
			t.Errorf("PostSend(%+v): %v, want ErrLocal", w, err)
		}
	}
}

func TestWriteRead(t *testing.T) {
	p := connect(t)
	const n = 1 << 20
	fillPattern(p.ra.b[:n], 3)
	remote := uint64(p.rb.mr.Addr)
	// Unsignaled write, then a signaled one: the second completes both.
	err := p.ea.PostSend(
		fabric.SendWR{ID: 1, Op: fabric.OpWrite, Local: p.ra.sge(0, n/2), RemoteAddr: remote, RKey: p.rb.mr.RKey},
		fabric.SendWR{ID: 2, Op: fabric.OpWrite, Local: p.ra.sge(n/2, n/2), RemoteAddr: remote + n/2, RKey: p.rb.mr.RKey, Signaled: true},
	)
	if err != nil {
		t.Fatal(err)
	}
	if c := collect(t, p.a, 1)[0]; c.Err != nil || c.ID != 2 || c.Op != fabric.OpWrite {
		t.Fatalf("write completion %+v", c)
	}
	if !bytes.Equal(p.rb.b[:n], p.ra.b[:n]) {
		t.Fatal("written bytes differ")
	}
	fillPattern(p.rb.b[n:2*n], 5)
	err = p.ea.PostSend(fabric.SendWR{ID: 3, Op: fabric.OpRead, Local: p.ra.sge(n, n), RemoteAddr: remote + n, RKey: p.rb.mr.RKey, Signaled: true})
	if err != nil {
		t.Fatal(err)
	}
	if c := collect(t, p.a, 1)[0]; c.Err != nil || c.ID != 3 || c.Op != fabric.OpRead || c.Len != n {
		t.Fatalf("read completion %+v", c)
	}
	if !bytes.Equal(p.ra.b[n:2*n], p.rb.b[n:2*n]) {
		t.Fatal("read bytes differ")
	}
	// A bad remote key fails the request with a remote error and breaks
	// the endpoint on both sides.
	if err := p.ea.PostSend(fabric.SendWR{ID: 4, Op: fabric.OpWrite, Local: p.ra.sge(0, 8), RemoteAddr: remote, RKey: p.rb.mr.RKey + 1, Signaled: true}); err != nil {
		t.Fatal(err)
	}
	if c := collect(t, p.a, 1)[0]; c.ID != 4 || !errors.Is(c.Err, fabric.ErrRemote) {
		t.Fatalf("bad rkey: %+v, want ErrRemote", c)
	} else {
		t.Logf("bad rkey: %v", c.Err)
	}
	if err := lostWithin(t, p.ea, timeout); !errors.Is(err, fabric.ErrRemote) {
		t.Errorf("Err after a remote error: %v", err)
	}
	lostWithin(t, p.eb, timeout)
}

func TestSendWithoutReceive(t *testing.T) {
	p := connect(t)
	if err := p.ea.PostSend(fabric.SendWR{ID: 1, Op: fabric.OpSend, Local: p.ra.sge(0, 8), Signaled: true}); err != nil {
		t.Fatal(err)
	}
	c := collect(t, p.a, 1)[0]
	if !errors.Is(c.Err, fabric.ErrRemote) {
		t.Fatalf("send without a receive: %+v, want ErrRemote", c)
	}
	t.Logf("send without a receive: %v", c.Err)
	lostWithin(t, p.ea, timeout)
}

func TestPrivateData(t *testing.T) {
	name, ip := device(t)
	a, b := open(t, name), open(t, name)
	ln := listen(t, b, ip)
	defer ln.Close()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	for _, n := range []int{0, 1, fabric.MaxPrivate} {
		private, reply := bytes.Repeat([]byte{byte(n)}, n), bytes.Repeat([]byte{0xee}, fabric.MaxPrivate-n)
		done := make(chan error, 1)
		go func() {
			r, err := ln.Accept(ctx)
			if err != nil {
				done <- err
				return
			}
			if !bytes.Equal(r.Private(), private) {
				r.Reject()
				done <- fmt.Errorf("private %x, want %x", r.Private(), private)
				return
			}
			ep, err := r.Accept(cfg, reply)
			if err == nil {
				ep.Close()
			}
			done <- err
		}()
		ep, got, err := a.Dial(ctx, ln.Addr(), cfg, private)
		if err != nil {
			t.Fatalf("%d bytes: Dial: %v", n, err)
		}
		if err := testwait.Recv(t, done, "the accept"); err != nil {
			t.Fatalf("%d bytes: %v", n, err)
		}
		if !bytes.Equal(got, reply) {
			t.Errorf("%d bytes: reply %x, want %x", n, got, reply)
		}
		ep.Close()
	}
	if _, _, err := a.Dial(ctx, ln.Addr(), cfg, make([]byte, fabric.MaxPrivate+1)); !errors.Is(err, xerr.ErrInvalidArgument) {
		t.Errorf("Dial with %d bytes: %v", fabric.MaxPrivate+1, err)
	}
}

func TestRefused(t *testing.T) {
	name, ip := device(t)
	a, b := open(t, name), open(t, name)
	ln := listen(t, b, ip)
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	go func() {
		if r, err := ln.Accept(ctx); err == nil {
			r.Reject()
		}
	}()
	if _, _, err := a.Dial(ctx, ln.Addr(), cfg, nil); !errors.Is(err, fabric.ErrRefused) {
		t.Errorf("Dial rejected: %v, want ErrRefused", err)
	} else {
		t.Logf("rejected: %v", err)
	}
	addr := ln.Addr()
	ln.Close()
	if _, _, err := a.Dial(ctx, addr, cfg, nil); !errors.Is(err, fabric.ErrRefused) {
		t.Errorf("Dial without a listener: %v, want ErrRefused", err)
	} else {
		t.Logf("nobody listening: %v", err)
	}
}

func TestDialCanceled(t *testing.T) {
	name, ip := device(t)
	a := open(t, name)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, _, err := a.Dial(ctx, ip+":1", cfg, nil); !errors.Is(err, context.Canceled) {
		t.Errorf("Dial canceled: %v", err)
	}
}

func TestFail(t *testing.T) {
	p := connect(t)
	for i := range 4 {
		if err := p.ea.PostRecv(uint64(10+i), p.ra.sge(i*64, 64)); err != nil {
			t.Fatal(err)
		}
	}
	if err := p.ea.Fail(); err != nil {
		t.Fatal(err)
	}
	if err := lostWithin(t, p.ea, time.Second); !errors.Is(err, xerr.ErrPeerLost) {
		t.Errorf("Err after Fail: %v", err)
	}
	for _, c := range collect(t, p.a, 4) {
		if !errors.Is(c.Err, fabric.ErrFlushed) || c.ID < 10 || c.ID > 13 {
			t.Errorf("after Fail: %+v, want flushed receives", c)
		}
	}
	if err := lostWithin(t, p.eb, timeout); !errors.Is(err, xerr.ErrPeerLost) {
		t.Errorf("peer's Err after Fail: %v", err)
	}
}

func TestClosePeer(t *testing.T) {
	p := connect(t)
	if err := p.eb.PostRecv(1, p.rb.sge(0, 64)); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	if err := p.ea.Close(); err != nil {
		t.Fatal(err)
	}
	if err := p.ea.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
	if err := p.ea.PostSend(fabric.SendWR{Op: fabric.OpSend, Local: p.ra.sge(0, 8)}); !errors.Is(err, xerr.ErrClosed) {
		t.Errorf("PostSend after Close: %v", err)
	}
	if err := lostWithin(t, p.eb, timeout); !errors.Is(err, xerr.ErrPeerLost) {
		t.Errorf("peer's Err after Close: %v", err)
	}
	t.Logf("peer lost after %v", time.Since(start))
	if c := collect(t, p.b, 1)[0]; c.ID != 1 || !errors.Is(c.Err, fabric.ErrFlushed) {
		t.Errorf("peer's receive after Close: %+v, want flushed", c)
	}
}

func TestContextClose(t *testing.T) {
	name, ip := device(t)
	a, b := open(t, name), open(t, name)
	register(t, a, 4096)
	ln := listen(t, b, ip)
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	accepted := make(chan fabric.Endpoint, 1)
	go func() {
		if r, err := ln.Accept(ctx); err == nil {
			ep, _ := r.Accept(cfg, nil)
			accepted <- ep
		}
	}()
	ea, _, err := a.Dial(ctx, ln.Addr(), cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	eb := testwait.Recv(t, accepted, "the accept")
	if eb == nil {
		t.Fatal("accept failed")
	}
	waiting := make(chan error, 1)
	go func() { waiting <- a.Wait(time.Hour) }()
	time.Sleep(50 * time.Millisecond)
	start := time.Now()
	if err := a.Close(); err != nil {
		t.Fatal(err)
	}
	if err := testwait.Recv(t, waiting, "the wait, after Close"); err != nil && !errors.Is(err, xerr.ErrClosed) {
		t.Errorf("Wait during Close: %v", err)
	}
	t.Logf("Close took %v", time.Since(start))
	select {
	case <-ea.Lost():
	default:
		t.Error("endpoint not lost after its context closed")
	}
	if _, err := a.Poll(make([]fabric.Completion, 1)); !errors.Is(err, xerr.ErrClosed) {
		t.Errorf("Poll after Close: %v", err)
	}
	if _, err := a.Listen(ip + ":0"); !errors.Is(err, xerr.ErrClosed) {
		t.Errorf("Listen after Close: %v", err)
	}
	if err := lostWithin(t, eb, timeout); !errors.Is(err, xerr.ErrPeerLost) {
		t.Errorf("peer's Err: %v", err)
	}
	// Accept on a listener whose context closes returns.
	go func() { time.Sleep(50 * time.Millisecond); b.Close() }()
	if _, err := ln.Accept(ctx); !errors.Is(err, xerr.ErrClosed) {
		t.Errorf("Accept during Close: %v", err)
	}
}

func TestWake(t *testing.T) {
	name, _ := device(t)
	c := open(t, name)
	if err := c.Arm(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- c.Wait(time.Hour) }()
	time.Sleep(20 * time.Millisecond)
	c.Wake()
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(timeout):
		t.Fatal("Wake did not end Wait")
	}
	c.Wake()
	start := time.Now()
	if err := c.Wait(time.Hour); err != nil || time.Since(start) > time.Second {
		t.Errorf("Wait after Wake: %v after %v", err, time.Since(start))
	}
	start = time.Now()
	c.Wait(30 * time.Millisecond)
	if d := time.Since(start); d < 25*time.Millisecond {
		t.Errorf("Wait(30ms) returned after %v", d)
	}
}

func TestPeerProcessDies(t *testing.T) {
	name, ip := device(t)
	b := open(t, name)
	ln := listen(t, b, ip)
	defer ln.Close()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(exe)
	cmd.Env = append(os.Environ(), childEnv+"="+ln.Addr())
	cmd.Stderr = os.Stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Wait()
	defer cmd.Process.Kill()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	r, err := ln.Accept(ctx)
	if err != nil {
		t.Fatal(err)
	}
	ep, err := r.Accept(cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer ep.Close()
	line, err := bufio.NewReader(out).ReadString('\n')
	if err != nil || line != "connected\n" {
		t.Fatalf("child said %q, %v", line, err)
	}
	stdin.Close() // the child kills itself
	start := time.Now()
	err = lostWithin(t, ep, timeout)
	t.Logf("lost %v after the child's end: %v", time.Since(start), err)
	if !errors.Is(err, xerr.ErrPeerLost) {
		t.Errorf("Err: %v, want ErrPeerLost", err)
	}
}

// child dials addr, says so on stdout, and kills itself with SIGKILL when
// its stdin closes: nothing of it is closed in an orderly way.
func child(addr string) int {
	devs, err := verbs.Provider().Devices()
	if err != nil || len(devs) == 0 {
		fmt.Fprintln(os.Stderr, "child: no devices:", err)
		return 1
	}
	c, err := verbs.Provider().Open(os.Getenv("VERBS_TEST_DEVICE"), 64)
	if err != nil {
		fmt.Fprintln(os.Stderr, "child:", err)
		return 1
	}
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	if _, _, err := c.Dial(ctx, addr, cfg, nil); err != nil {
		fmt.Fprintln(os.Stderr, "child:", err)
		return 1
	}
	fmt.Println("connected")
	var b [1]byte
	os.Stdin.Read(b[:])
	syscall.Kill(os.Getpid(), syscall.SIGKILL)
	return 1
}

func TestBatch(t *testing.T) {
	p := connect(t)
	const n = 40 // more than one crossing's worth
	for i := range n {
		if err := p.eb.PostRecv(uint64(100+i), p.rb.sge(64*i, 64)); err != nil {
			t.Fatal(err)
		}
	}
	wrs := make([]fabric.SendWR, n/2)
	for i := range wrs {
		p.ra.b[64*i] = byte(i)
		wrs[i] = fabric.SendWR{ID: uint64(i), Op: fabric.OpSend, Local: p.ra.sge(64*i, 64), Signaled: i == len(wrs)-1}
	}
	if err := p.ea.PostSend(wrs...); err != nil {
		t.Fatal(err)
	}
	// The other half from goroutines at once.
	errs := make(chan error, n/2)
	for i := n / 2; i < n; i++ {
		go func() {
			p.ra.b[64*i] = byte(i)
			errs <- p.ea.PostSend(fabric.SendWR{ID: uint64(i), Op: fabric.OpSend, Local: p.ra.sge(64*i, 64), Signaled: true})
		}()
	}
	for range n / 2 {
		if err := testwait.Recv(t, errs, "a posting goroutine"); err != nil {
			t.Fatal(err)
		}
	}
	sent := collect(t, p.a, 1+n/2)
	if sent[0].ID != n/2-1 {
		t.Errorf("first send completion %+v, want the batch's last", sent[0])
	}
	got := collect(t, p.b, n)
	seen := map[byte]bool{}
	for i, c := range got {
		if c.Err != nil || c.ID != uint64(100+i) || c.Len != 64 {
			t.Fatalf("receive %d: %+v", i, c)
		}
		v := p.rb.b[64*i]
		if i < n/2 && v != byte(i) {
			t.Errorf("receive %d holds message %d: batch out of order", i, v)
		}
		seen[v] = true
	}
	if len(seen) != n {
		t.Errorf("%d distinct messages of %d", len(seen), n)
	}
}

func TestOneContext(t *testing.T) {
	name, ip := device(t)
	c := open(t, name)
	r := register(t, c, 1<<16)
	ln := listen(t, c, ip)
	defer ln.Close()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	accepted := make(chan fabric.Endpoint, 1)
	go func() {
		req, err := ln.Accept(ctx)
		if err != nil {
			accepted <- nil
			return
		}
		ep, _ := req.Accept(cfg, nil)
		accepted <- ep
	}()
	ea, _, err := c.Dial(ctx, ln.Addr(), cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer ea.Close()
	eb := testwait.Recv(t, accepted, "the accept")
	if eb == nil {
		t.Fatal("accept failed")
	}
	defer eb.Close()
	copy(r.b, "ping")
	if err := eb.PostRecv(2, r.sge(1024, 64)); err != nil {
		t.Fatal(err)
	}
	if err := ea.PostSend(fabric.SendWR{ID: 1, Op: fabric.OpSend, Local: r.sge(0, 4), Signaled: true}); err != nil {
		t.Fatal(err)
	}
	ids := map[uint64]fabric.Opcode{}
	for _, c := range collect(t, c, 2) {
		if c.Err != nil {
			t.Fatal(c.Err)
		}
		ids[c.ID] = c.Op
	}
	if ids[1] != fabric.OpSend || ids[2] != fabric.OpRecv || string(r.b[1024:1028]) != "ping" {
		t.Errorf("completions %v, received %q", ids, r.b[1024:1028])
	}
}

func TestListenerClose(t *testing.T) {
	name, ip := device(t)
	c := open(t, name)
	ln := listen(t, c, ip)
	go func() { time.Sleep(50 * time.Millisecond); ln.Close() }()
	if _, err := ln.Accept(testwait.Ctx(t)); !errors.Is(err, xerr.ErrClosed) {
		t.Errorf("Accept during Close: %v", err)
	}
	if err := ln.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
	// The port is free again.
	ln2, err := c.Listen(ln.Addr())
	if err != nil {
		t.Fatalf("Listen on the closed listener's address: %v", err)
	}
	ln2.Close()
}

func TestDialUnreachable(t *testing.T) {
	name, ip := device(t)
	a := open(t, name)
	// An address of the device's subnet that nobody has (the tests' guest
	// has a /24): address resolution fails or the context's deadline ends it.
	addr, err := netip.ParseAddr(ip)
	if err != nil || !addr.Is4() {
		t.Skipf("address %s", ip)
	}
	b := addr.As4()
	b[3] ^= 0x7f
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	start := time.Now()
	_, _, err = a.Dial(ctx, netip.AddrFrom4(b).String()+":4791", cfg, nil)
	t.Logf("Dial %v after %v: %v", netip.AddrFrom4(b), time.Since(start), err)
	if err == nil {
		t.Fatal("Dial to nobody succeeded")
	}
	if time.Since(start) > 6*time.Second {
		t.Errorf("Dial took %v with a 3s deadline", time.Since(start))
	}
	if _, _, err := a.Dial(ctx, "no-address", cfg, nil); !errors.Is(err, xerr.ErrInvalidArgument) {
		t.Errorf("Dial(no-address): %v", err)
	}
}

// BenchmarkPingPong measures a SEND answered by a SEND, each side busy
// polling its own context on its own goroutine, like ib_send_lat; its
// µs-p50 is half the median round trip, as ib_send_lat's t_typical.
func BenchmarkPingPong(b *testing.B) {
	p := connect(b)
	const slots = 32
	for _, e := range []struct {
		ep fabric.Endpoint
		r  *region
	}{{p.ea, p.ra}, {p.eb, p.rb}} {
		for i := range slots {
			if err := e.ep.PostRecv(uint64(i), e.r.sge(4096+64*i, 64)); err != nil {
				b.Fatal(err)
			}
		}
	}
	// The requests are slices made once: a variadic call through the
	// interface would allocate its slice on every post.
	ping := []fabric.SendWR{{ID: 1000, Op: fabric.OpSend, Local: p.ra.sge(0, 8), Inline: true, Signaled: true}}
	pong := []fabric.SendWR{{ID: 1000, Op: fabric.OpSend, Local: p.rb.sge(0, 8), Inline: true, Signaled: true}}
	// await polls c until a message arrives, posts its receive again and,
	// with answer, sends one back.
	await := func(c fabric.Context, ep fabric.Endpoint, r *region, buf []fabric.Completion, answer bool, stop <-chan struct{}) error {
		for {
			n, err := c.Poll(buf)
			if err != nil {
				return err
			}
			for _, cp := range buf[:n] {
				if cp.Err != nil {
					return cp.Err
				}
				if cp.Op != fabric.OpRecv {
					continue
				}
				if err := ep.PostRecv(cp.ID, r.sge(4096+64*int(cp.ID), 64)); err != nil {
					return err
				}
				if answer {
					if err := ep.PostSend(pong...); err != nil {
						return err
					}
				}
				return nil
			}
			select {
			case <-stop:
				return nil
			default:
			}
		}
	}
	stop, echoed := make(chan struct{}), make(chan error, 1)
	go func() {
		buf := make([]fabric.Completion, 8)
		for {
			select {
			case <-stop:
				echoed <- nil
				return
			default:
			}
			if err := await(p.b, p.eb, p.rb, buf, true, stop); err != nil {
				echoed <- err
				return
			}
		}
	}()
	buf := make([]fabric.Completion, 8)
	times := make([]time.Duration, b.N)
	b.ResetTimer()
	for i := range b.N {
		t0 := time.Now()
		if err := p.ea.PostSend(ping...); err != nil {
			b.Fatal(err)
		}
		if err := await(p.a, p.ea, p.ra, buf, false, nil); err != nil {
			b.Fatal(err)
		}
		times[i] = time.Since(t0)
	}
	b.StopTimer()
	reportMedian(b, times, 2)
	close(stop)
	if err := <-echoed; err != nil {
		b.Fatal(err)
	}
}

// BenchmarkWrite measures one signaled 8-byte RDMA WRITE: post, then poll
// until it completes (a round trip: the completion waits for the ack).
func BenchmarkWrite(b *testing.B) {
	p := connect(b)
	buf := make([]fabric.Completion, 4)
	wr := []fabric.SendWR{{ID: 1, Op: fabric.OpWrite, Local: p.ra.sge(0, 8), RemoteAddr: uint64(p.rb.mr.Addr), RKey: p.rb.mr.RKey, Signaled: true}}
	times := make([]time.Duration, b.N)
	b.ResetTimer()
	for i := range b.N {
		t0 := time.Now()
		if err := p.ea.PostSend(wr...); err != nil {
			b.Fatal(err)
		}
		for n := 0; n == 0; {
			var err error
			if n, err = p.a.Poll(buf); err != nil || (n > 0 && buf[0].Err != nil) {
				b.Fatal(err, buf[0].Err)
			}
		}
		times[i] = time.Since(t0)
	}
	b.StopTimer()
	reportMedian(b, times, 1)
}

// reportMedian reports the median and 99th percentile of times divided by
// div (2: a round trip's one-way share), as perftest's t_typical and 99%.
func reportMedian(b *testing.B, times []time.Duration, div int) {
	slices.Sort(times)
	us := func(q float64) float64 {
		return float64(times[int(q*float64(len(times)-1))].Nanoseconds()) / float64(div) / 1e3
	}
	b.ReportMetric(us(0.5), "µs-p50")
	b.ReportMetric(us(0.99), "µs-p99")
}

// BenchmarkPollEmpty measures the crossing of a Poll that finds nothing.
func BenchmarkPollEmpty(b *testing.B) {
	name, _ := device(b)
	c := open(b, name)
	buf := make([]fabric.Completion, 16)
	for b.Loop() {
		if _, err := c.Poll(buf); err != nil {
			b.Fatal(err)
		}
	}
}
