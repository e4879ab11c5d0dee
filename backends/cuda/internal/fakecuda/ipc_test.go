//go:build cgo

package fakecuda

import (
	"bufio"
	"bytes"
	"encoding/hex"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"
	"unsafe"

	"github.com/xpu-go/xpu/internal/tooling/testwait"
)

const (
	rPeerNotEnabled = 705
	ipcLazyPeer     = 1
)

// TestIPCExportChild runs only in the child process of TestIPC: it
// allocates two blocks on device 0 and one on device 1, fills them,
// prints their handles (H0, H1, H2, in hex), and then serves "free I"
// and "exit" read from stdin.
func TestIPCExportChild(t *testing.T) {
	if os.Getenv("FAKECUDA_TEST_IPC") != "1" {
		t.Skip("runs as a child process of TestIPC")
	}
	f := load(t)
	c0 := f.ctx(0)
	var ps []dptr
	for i := range 3 {
		if i == 2 {
			f.ctx(1)
		}
		p := f.alloc(8192)
		f.write(p, bytes.Repeat([]byte{byte(i + 1)}, 8192))
		h, r := f.cuIpcGetMemHandle(p)
		f.ok(r, "cuIpcGetMemHandle")
		again, r := f.cuIpcGetMemHandle(p)
		f.ok(r, "cuIpcGetMemHandle again")
		if again != h {
			t.Fatal("two handles of one allocation differ")
		}
		_, r = f.cuIpcGetMemHandle(p + 256)
		f.want(r, rInvalidValue, "cuIpcGetMemHandle of an interior pointer")
		ps = append(ps, p)
		fmt.Printf("H%d %s\n", i, hex.EncodeToString(h[:]))
	}
	f.ok(f.cuCtxSetCurrent(c0), "cuCtxSetCurrent")
	if s := f.ctl.Stats(); s.IPCExports != 3 {
		t.Fatalf("exports %d, want 3", s.IPCExports)
	}
	in := bufio.NewScanner(os.Stdin)
	for in.Scan() {
		w := strings.Fields(in.Text())
		switch {
		case len(w) == 2 && w[0] == "free":
			i, _ := strconv.Atoi(w[1])
			if i == 2 {
				f.ctx(1)
			}
			f.ok(f.cuMemFree(ps[i]), "cuMemFree_v2")
			f.ok(f.cuCtxSetCurrent(c0), "cuCtxSetCurrent")
			fmt.Println("FREED")
		case len(w) == 1 && w[0] == "exit":
			return
		}
	}
}

// TestIPC opens handles of another process: the same address for a
// handle opened twice (counted twice, mapped once), PROT_NONE for the
// host, copies and memsets through the mapping, the close count, peer
// access for another device's memory, a freed allocation, the exporter's
// own process, and a mapping whose allocation the exporter frees.
func TestIPC(t *testing.T) {
	f := loadCtx0(t)
	cmd := exec.Command(os.Args[0], "-test.run=^TestIPCExportChild$", "-test.count=1")
	cmd.Env = append(os.Environ(), "FAKECUDA_TEST_IPC=1")
	cmd.Stderr = os.Stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	lines := make(chan string, 16)
	exited := make(chan struct{})
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			lines <- sc.Text() // the child says a few lines only: the buffer holds them
		}
		_ = cmd.Wait()
		close(exited)
	}()
	t.Cleanup(func() {
		_, _ = io.WriteString(stdin, "exit\n")
		_ = stdin.Close()
		select {
		case <-exited:
		case <-time.After(testwait.Bound):
			_ = cmd.Process.Kill()
		}
		testwait.Closed(t, exited, "the exporting child's exit")
	})
	var h [3][64]byte
	for i := range h {
		l := testwait.Recv(t, lines, "the child's handle "+strconv.Itoa(i))
		name, x, _ := strings.Cut(l, " ")
		b, err := hex.DecodeString(x)
		if name != "H"+strconv.Itoa(i) || err != nil || len(b) != 64 {
			t.Fatalf("the child said %q", l)
		}
		copy(h[i][:], b)
	}
	tell := func(cmd string) {
		t.Helper()
		if _, err := io.WriteString(stdin, cmd+"\n"); err != nil {
			t.Fatal(err)
		}
		if l := testwait.Recv(t, lines, "the child's answer to "+cmd); l != "FREED" {
			t.Fatalf("the child said %q", l)
		}
	}

	// Opened twice: one mapping, two opens, one address.
	p, r := f.cuIpcOpenMemHandle(h[0], 0, false)
	f.ok(r, "cuIpcOpenMemHandle_v2")
	p2, r := f.cuIpcOpenMemHandle(h[0], 0, true)
	f.ok(r, "cuIpcOpenMemHandle (the old name)")
	if p2 != p {
		t.Fatalf("the second open returned %#x, the first %#x", p2, p)
	}
	if s := f.ctl.Stats(); s.IPCMappings != 1 || s.IPCOpens != 2 {
		t.Fatalf("stats after two opens: %+v", s)
	}
	if got := f.read(p, 8192); !bytes.Equal(got, bytes.Repeat([]byte{1}, 8192)) {
		t.Fatalf("the imported allocation reads %x...", got[:16])
	}
	checkProtNone(t, p, "the imported allocation")
	f.ok(f.cuMemsetD8(p+100, 9, 50), "cuMemsetD8 through the mapping")
	f.write(p+4096, []byte{7, 7, 7})
	got := f.read(p, 8192)
	if got[99] != 1 || got[100] != 9 || got[149] != 9 || got[150] != 1 || got[4096] != 7 {
		t.Fatal("a memset or a write through the mapping went wrong")
	}
	// A kernel through the mapping, in stream order.
	m := f.module()
	st := f.stream()
	f.ok(f.cuLaunch(f.fn(m, "xpu_fill_u32"), 1, 32, 0, st, uint64(p+4096+1024), 0x05050505, 16), "fill through the mapping")
	f.ok(f.cuStreamSynchronize(st), "sync")
	if got := f.read(p+4096+1024, 65); !bytes.Equal(got[:64], bytes.Repeat([]byte{5}, 64)) || got[64] != 1 {
		t.Fatalf("a kernel through the mapping wrote %x", got)
	}
	f.ok(f.cuStreamDestroy(st), "cuStreamDestroy_v2")
	f.ok(f.cuModuleUnload(m), "cuModuleUnload")
	dst := f.alloc(8192)
	f.ok(f.cuMemcpyDtoD(dst, p, 8192), "cuMemcpyDtoD_v2 from the mapping")
	f.want(f.cuMemcpyDtoD(dst, p+1, 8192), rInvalidValue, "a copy past the mapped allocation")
	f.want(f.cuMemFree(p), rInvalidValue, "cuMemFree_v2 of a mapping")
	f.ok(f.cuMemFree(dst), "cuMemFree_v2")
	f.ok(f.cuIpcCloseMemHandle(p), "close")
	if s := f.ctl.Stats(); s.IPCMappings != 1 {
		t.Fatalf("unmapped with an open left: %+v", s)
	}
	f.ok(f.cuIpcCloseMemHandle(p), "second close")
	f.want(f.cuIpcCloseMemHandle(p), rInvalidValue, "a close more than opened")
	if s := f.ctl.Stats(); s.IPCMappings != 0 {
		t.Fatalf("mapped after the last close: %+v", s)
	}

	// Another device's memory: with the flag, or peer access.
	_, r = f.cuIpcOpenMemHandle(h[2], 0, false)
	f.want(r, rPeerNotEnabled, "device 1's memory in device 0's context, without the flag")
	p, r = f.cuIpcOpenMemHandle(h[2], ipcLazyPeer, false)
	f.ok(r, "device 1's memory with CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS")
	if got := f.read(p, 16); !bytes.Equal(got, bytes.Repeat([]byte{3}, 16)) {
		t.Fatalf("device 1's allocation reads %x", got)
	}
	f.ok(f.cuIpcCloseMemHandle(p), "close")

	// The exporter's own process cannot open its handle.
	own := f.alloc(4096)
	oh, r := f.cuIpcGetMemHandle(own)
	f.ok(r, "cuIpcGetMemHandle")
	_, r = f.cuIpcOpenMemHandle(oh, 0, false)
	f.want(r, rInvalidContext, "an open in the exporting process")
	f.ok(f.cuMemFree(own), "cuMemFree_v2")
	if s := f.ctl.Stats(); s.IPCExports != 0 {
		t.Fatalf("a freed allocation still exported: %+v", s)
	}

	// A freed allocation's handle.
	tell("free 1")
	_, r = f.cuIpcOpenMemHandle(h[1], 0, false)
	f.want(r, rInvalidHandle, "the handle of a freed allocation")

	// The exporter frees what is mapped here: copies fault, sticky; the
	// close still unmaps.
	p, r = f.cuIpcOpenMemHandle(h[0], 0, false)
	f.ok(r, "cuIpcOpenMemHandle_v2")
	tell("free 0")
	b := make([]byte, 16)
	f.want(f.cuMemcpyDtoH(unsafe.Pointer(&b[0]), p, 16), rIllegalAddress, "a copy from a stale mapping")
	f.want(f.cuCtxSynchronize(), rIllegalAddress, "the context after the fault")
	f.want(f.cuIpcCloseMemHandle(p), rIllegalAddress, "a close on the failed context")
	if s := f.ctl.Stats(); s.IPCMappings != 0 {
		t.Fatalf("mapped after the close: %+v", s)
	}
}

// checkProtNone fails t unless p, which holds what (device memory, an
// imported allocation), lies in a mapping the host cannot touch.
func checkProtNone(t *testing.T, p dptr, what string) {
	t.Helper()
	maps, err := os.ReadFile("/proc/self/maps")
	if err != nil {
		t.Skipf("cannot read /proc/self/maps to check that %s is closed to the host: %v", what, err)
	}
	for _, line := range strings.Split(string(maps), "\n") {
		fields := strings.Fields(line)
		if len(fields) < 2 {
			continue
		}
		lo, hi, _ := strings.Cut(fields[0], "-")
		a, err1 := strconv.ParseUint(lo, 16, 64)
		b, err2 := strconv.ParseUint(hi, 16, 64)
		if err1 != nil || err2 != nil || p < a || p >= b {
			continue
		}
		if !strings.HasPrefix(fields[1], "---") {
			t.Fatalf("%s at %#x is mapped %s: %s", what, p, fields[1], line)
		}
		return
	}
	t.Fatalf("%s at %#x is not mapped", what, p)
}
