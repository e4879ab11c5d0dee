//go:build linux

package shm

import (
	"bytes"
	"errors"
	"os"
	"testing"
	"unsafe"

	"golang.org/x/sys/unix"
)

func addrOf(b []byte) uint64 { return uint64(uintptr(unsafe.Pointer(unsafe.SliceData(b)))) }

// TestSingleCopyOwnMemory copies this process's memory through the system
// calls, in lengths that cross pages, and checks the bytes.
func TestSingleCopyOwnMemory(t *testing.T) {
	if ok, why := SingleCopy(); !ok {
		t.Skipf("no single copy here: %s", why)
	}
	pid := os.Getpid()
	src := make([]byte, 3<<20+123)
	for i := range src {
		src[i] = byte(i*31 + 7)
	}
	for _, n := range []int{1, 4095, 4097, 1 << 20, len(src) - 5} {
		dst := make([]byte, n)
		if err := ReadFrom(pid, dst, addrOf(src[5:])); err != nil {
			t.Fatalf("read %d bytes: %v", n, err)
		}
		if !bytes.Equal(dst, src[5:5+n]) {
			t.Fatalf("read %d bytes: wrong bytes", n)
		}
		out := make([]byte, n+10)
		if err := WriteTo(pid, addrOf(out[3:]), src[:n]); err != nil {
			t.Fatalf("write %d bytes: %v", n, err)
		}
		if !bytes.Equal(out[3:3+n], src[:n]) || out[2] != 0 || out[3+n] != 0 {
			t.Fatalf("write %d bytes: wrong bytes", n)
		}
	}
	if err := ReadFrom(pid, nil, 0); err != nil {
		t.Fatalf("empty read: %v", err)
	}
}

// TestSingleCopyBadAddress: addresses that are not mapped in the other
// process are errors matching ErrFault, never a fault of this one — nil,
// low, kernel, past user space, wrapping — and a range that runs off the
// end of a mapping fails too; a process that does not exist is
// ErrNoProcess.
func TestSingleCopyBadAddress(t *testing.T) {
	if ok, why := SingleCopy(); !ok {
		t.Skipf("no single copy here: %s", why)
	}
	pid := os.Getpid()
	dst := make([]byte, 64)
	for _, addr := range []uint64{0, 8, 4096, 0xffff_8000_0000_0000, 1 << 57, ^uint64(0) - 10} {
		if err := ReadFrom(pid, dst, addr); !errors.Is(err, ErrFault) {
			t.Errorf("read at %#x: %v, want ErrFault", addr, err)
		}
		if err := WriteTo(pid, addr, dst); !errors.Is(err, ErrFault) {
			t.Errorf("write at %#x: %v, want ErrFault", addr, err)
		}
	}
	// A mapping of two pages, the second made inaccessible: a read that
	// runs into it delivers what precedes and reports the fault.
	page := os.Getpagesize()
	mem, err := unix.Mmap(-1, 0, 2*page, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANON)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Munmap(mem)
	for i := range page {
		mem[i] = 0xab
	}
	if err := unix.Mprotect(mem[page:], unix.PROT_NONE); err != nil {
		t.Fatal(err)
	}
	dst = make([]byte, 2*page)
	if err := ReadFrom(pid, dst, addrOf(mem)); !errors.Is(err, ErrFault) {
		t.Errorf("read across a protected page: %v, want ErrFault", err)
	}
	if err := WriteTo(pid, addrOf(mem), dst); !errors.Is(err, ErrFault) {
		t.Errorf("write across a protected page: %v, want ErrFault", err)
	}
	// A process that cannot exist (above pid_max's limit).
	if err := ReadFrom(1<<30, dst[:8], addrOf(dst)); !errors.Is(err, ErrNoProcess) {
		t.Errorf("read from no process: %v, want ErrNoProcess", err)
	}
}

// TestSingleCopyProbe: the probe says something either way, and agrees
// with a copy of this process's memory.
func TestSingleCopyProbe(t *testing.T) {
	ok, why := SingleCopy()
	if why == "" {
		t.Fatal("the probe gives no description")
	}
	t.Logf("single copy: %v (%s)", ok, why)
	if ok {
		b := []byte("abc")
		if err := ReadFrom(os.Getpid(), make([]byte, 3), addrOf(b)); err != nil {
			t.Fatalf("the probe says yes, a copy fails: %v", err)
		}
	}
}

// BenchmarkSingleCopy reads 4 MiB of this process's memory per iteration.
func BenchmarkSingleCopy(b *testing.B) {
	src, dst := make([]byte, 4<<20), make([]byte, 4<<20)
	pid, addr := os.Getpid(), addrOf(src)
	b.SetBytes(int64(len(src)))
	for b.Loop() {
		if err := ReadFrom(pid, dst, addr); err != nil {
			b.Fatal(err)
		}
	}
}

// TestReadVec copies a scattered list of ranges of this process's memory
// in one call — in an order other than the source's, empty ones among
// them — and refuses a range that is not mapped, and a list too long.
func TestReadVec(t *testing.T) {
	if ok, why := SingleCopy(); !ok {
		t.Skipf("no single copy here: %s", why)
	}
	pid := os.Getpid()
	src := make([]byte, 1<<20)
	for i := range src {
		src[i] = byte(i*13 + 1)
	}
	var dst [][]byte
	var addrs []uint64
	var want [][]byte
	for i := range 300 {
		n := (i * 977) % 5000 // 0 now and then
		at := (len(src) - 5000) - (i*3331)%(len(src)-5000)
		dst = append(dst, make([]byte, n))
		addrs = append(addrs, addrOf(src[at:]))
		want = append(want, src[at:at+n])
	}
	if err := ReadVec(pid, dst, addrs); err != nil {
		t.Fatalf("ReadVec of %d ranges: %v", len(dst), err)
	}
	for i := range dst {
		if !bytes.Equal(dst[i], want[i]) {
			t.Fatalf("range %d of %d bytes: wrong bytes", i, len(dst[i]))
		}
	}
	addrs[7] = 4096
	if err := ReadVec(pid, dst, addrs); !errors.Is(err, ErrFault) {
		t.Fatalf("ReadVec with range 7 at 0x1000: %v, want ErrFault", err)
	}
	long := make([][]byte, MaxVec+1)
	if err := ReadVec(pid, long, make([]uint64, MaxVec+1)); err == nil {
		t.Fatalf("ReadVec of %d ranges: no error", MaxVec+1)
	}
}

// TestWriteVec writes a scattered list of buffers into this process's
// memory in one call, and refuses a range that is not mapped.
func TestWriteVec(t *testing.T) {
	if ok, why := SingleCopy(); !ok {
		t.Skipf("no single copy here: %s", why)
	}
	pid := os.Getpid()
	dst := make([]byte, 64<<10)
	var src [][]byte
	var addrs []uint64
	want := make([]byte, len(dst))
	for i := range 40 {
		n := (i * 977) % 1500 // 0 now and then
		at := i * 1600
		b := make([]byte, n)
		for k := range b {
			b[k] = byte(i + k*5 + 1)
		}
		src = append(src, b)
		addrs = append(addrs, addrOf(dst[at:]))
		copy(want[at:], b)
	}
	if err := WriteVec(pid, src, addrs); err != nil {
		t.Fatalf("WriteVec of %d ranges: %v", len(src), err)
	}
	if !bytes.Equal(dst, want) {
		t.Fatal("WriteVec wrote the wrong bytes, or outside its ranges")
	}
	addrs[7] = 4096
	if err := WriteVec(pid, src, addrs); !errors.Is(err, ErrFault) {
		t.Fatalf("WriteVec with range 7 at 0x1000: %v, want ErrFault", err)
	}
}
