//go:build cgo

package fakecuda

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
	"unsafe"

	"github.com/xpu-go/xpu/internal/tooling/testwait"
)

// CUresult values the tests expect.
const (
	rSuccess             = 0
	rInvalidValue        = 1
	rOutOfMemory         = 2
	rNotInitialized      = 3
	rDeviceUnavailable   = 46
	rNoDevice            = 100
	rInvalidDevice       = 101
	rInvalidImage        = 200
	rInvalidContext      = 201
	rPeerUnsupported     = 217
	rInvalidPTX          = 218
	rInvalidHandle       = 400
	rNotFound            = 500
	rNotReady            = 600
	rIllegalAddress      = 700
	rPeerAlreadyEnabled  = 704
	rContextIsDestroyed  = 709
	rLaunchFailed        = 719
	rNotSupported        = 801
	eventDisableTiming   = 2
	memAttachGlobal      = 1
	testMemory           = 64 << 20
	attrMaxThreads       = 1
	attrMultiprocessors  = 16
	attrPCIBus           = 33
	attrUnifiedAddresses = 41
	attrCCMajor          = 75
)

// testPTX declares the kernels the tests launch, plus one the fake does
// not implement and one whose parameter list disagrees with the built-in
// signature.
const testPTX = `//
// Generated for the fake's tests.
//
.version 8.0
.target sm_90
.address_size 64

/* the test kernels */
.visible .entry xpu_test_empty()
{
	ret;
}
.visible .entry xpu_test_sleep(.param .u64 ns) { ret; }
.visible .entry xpu_test_store(.param .u64 p, .param .u64 v) { ret; }
.visible .entry xpu_test_iota_u32 (.param .u64 p, .param .u64 n) { ret; }
.visible .entry xpu_fill_u32(.param .u64 p, .param .u32 v, .param .u64 n) { ret; }
.visible .entry xpu_axpy_f64(.param .u64 y, .param .u64 x, .param .f64 a, .param .u64 n) { ret; }
.visible .entry xpu_sum_i32(.param .u64 out, .param .u64 in, .param .u64 n) { ret; }
.visible .entry xpu_min_f32(.param .u64 out, .param .u64 in, .param .u64 n) { ret; }
.visible .entry xpu_scale_i32(.param .u64 p, .param .u64 n) { ret; }
.visible .entry not_in_the_fake(.param .u64 p) { ret; }
`

type fake struct {
	*drv
	t    *testing.T
	ctl  *Control
	path string
}

// open copies the fake and configures its environment (name, value
// pairs) without initializing it. Tests using it must not be parallel.
func open(t *testing.T, env ...string) *fake {
	t.Helper()
	vars := map[string]string{
		"FAKECUDA_DEVICES": "", "FAKECUDA_MEMORY": strconv.Itoa(testMemory),
		"FAKECUDA_DRIVER_VERSION": "", "FAKECUDA_NO_DEVICE": "", "FAKECUDA_NO_PEER": "",
	}
	for i := 0; i+1 < len(env); i += 2 {
		vars[env[i]] = env[i+1]
	}
	for k, v := range vars {
		t.Setenv(k, v)
	}
	path, err := Copy(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	d, err := openDrv(path)
	if err != nil {
		t.Fatal(err)
	}
	ctl, err := Attach(path)
	if err != nil {
		t.Fatal(err)
	}
	return &fake{drv: d, t: t, ctl: ctl, path: path}
}

// load is open plus cuInit; it locks the test's goroutine to its OS
// thread, as contexts are current per thread.
func load(t *testing.T, env ...string) *fake {
	t.Helper()
	f := open(t, env...)
	f.ok(f.cuInit(0), "cuInit")
	runtime.LockOSThread()
	t.Cleanup(runtime.UnlockOSThread)
	return f
}

// loadCtx0 is load with device 0's primary context current.
func loadCtx0(t *testing.T) *fake {
	t.Helper()
	f := load(t)
	f.ctx(0)
	return f
}

func (f *fake) ok(r int, what string) {
	f.t.Helper()
	if r != rSuccess {
		f.t.Fatalf("%s: %s (%d)", what, f.cuErrorName(r), r)
	}
}

func (f *fake) want(r, want int, what string) {
	f.t.Helper()
	if r != want {
		f.t.Fatalf("%s: got %s (%d), want %s (%d)", what, f.cuErrorName(r), r, f.cuErrorName(want), want)
	}
}

// ctx retains dev's primary context and makes it current.
func (f *fake) ctx(dev int) unsafe.Pointer {
	f.t.Helper()
	c, r := f.cuPrimaryCtxRetain(dev)
	f.ok(r, "cuDevicePrimaryCtxRetain")
	f.ok(f.cuCtxSetCurrent(c), "cuCtxSetCurrent")
	return c
}

func (f *fake) alloc(n uint64) dptr {
	f.t.Helper()
	p, r := f.cuMemAlloc(n)
	f.ok(r, "cuMemAlloc_v2")
	return p
}

func (f *fake) stream() unsafe.Pointer {
	f.t.Helper()
	s, r := f.cuStreamCreate()
	f.ok(r, "cuStreamCreate")
	return s
}

func (f *fake) event(flags uint32) unsafe.Pointer {
	f.t.Helper()
	e, r := f.cuEventCreate(flags)
	f.ok(r, "cuEventCreate")
	return e
}

func (f *fake) module() unsafe.Pointer {
	f.t.Helper()
	m, log, r := f.cuModuleLoad(testPTX)
	if r != rSuccess {
		f.t.Fatalf("cuModuleLoadDataEx: %d: %s", r, log)
	}
	return m
}

func (f *fake) fn(m unsafe.Pointer, name string) unsafe.Pointer {
	f.t.Helper()
	fn, r := f.cuModuleGetFunction(m, name)
	f.ok(r, "cuModuleGetFunction "+name)
	return fn
}

func (f *fake) read(p dptr, n int) []byte {
	f.t.Helper()
	b := make([]byte, n)
	f.ok(f.cuMemcpyDtoH(unsafe.Pointer(&b[0]), p, uint64(n)), "cuMemcpyDtoH_v2")
	return b
}

func (f *fake) write(p dptr, b []byte) {
	f.t.Helper()
	f.ok(f.cuMemcpyHtoD(p, unsafe.Pointer(&b[0]), uint64(len(b))), "cuMemcpyHtoD_v2")
}

// releaseClean releases device 0's primary context and fails unless nothing is left live or leaked.
func (f *fake) releaseClean() {
	f.t.Helper()
	f.ok(f.cuPrimaryCtxRelease(0), "release")
	f.noneLive(0, "")
}

// noneLive fails unless the driver holds nothing live and has counted exactly leaked objects as leaked; why says what leaked.
func (f *fake) noneLive(leaked int64, why string) {
	f.t.Helper()
	if st := f.ctl.Stats(); st.Live() != 0 || st.Leaked != leaked {
		f.t.Fatalf("stats %+v, want none live and %d leaked %s", st, leaked, why)
	}
}

// sink keeps heapBytes' slices on the heap, where they do not move.
var sink [][]byte

// heapBytes returns a slice that is surely heap-allocated, for tests that
// hand its address to the fake as an integer.
func heapBytes(n int) []byte {
	b := make([]byte, n)
	sink = append(sink, b)
	return b
}

func u32s(b []byte) []uint32 {
	v := make([]uint32, len(b)/4)
	for i := range v {
		v[i] = binary.LittleEndian.Uint32(b[4*i:])
	}
	return v
}

func allEqual(v []uint32, x uint32) bool {
	for _, y := range v {
		if y != x {
			return false
		}
	}
	return true
}

func TestBuildIsCachedAndCopiesAreNew(t *testing.T) {
	p1, err := Build()
	if err != nil {
		t.Fatal(err)
	}
	p2, err := Build()
	if err != nil || p1 != p2 {
		t.Fatalf("second Build: %q, %v; want %q", p2, err, p1)
	}
	if filepath.Base(p1) != LibName || !strings.HasPrefix(filepath.Base(filepath.Dir(p1)), "xpu-fakecuda-") {
		t.Fatalf("Build path %q", p1)
	}
	dir := t.TempDir()
	c1, err := Copy(dir)
	if err != nil {
		t.Fatal(err)
	}
	c2, err := Copy(dir)
	if err != nil {
		t.Fatal(err)
	}
	if c1 != filepath.Join(dir, LibName) || c2 == c1 || filepath.Dir(c2) != dir {
		t.Fatalf("copies %q, %q", c1, c2)
	}
	a, _ := os.ReadFile(p1)
	b, _ := os.ReadFile(c2)
	if !bytes.Equal(a, b) {
		t.Fatal("the copy differs from the library")
	}
}

func TestCompilesWithoutWarnings(t *testing.T) {
	cc := compiler()
	if _, err := exec.LookPath(cc[0]); err != nil {
		t.Skip(err)
	}
	names, data, err := files()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	args := append(append([]string{}, cc[1:]...), cflags...)
	args = append(args, "-Werror", "-o", filepath.Join(dir, "lib.so"))
	for _, n := range names {
		p := filepath.Join(dir, n)
		if err := os.WriteFile(p, data[n], 0o644); err != nil {
			t.Fatal(err)
		}
		if strings.HasSuffix(n, ".c") {
			args = append(args, p)
		}
	}
	out, err := exec.Command(cc[0], append(args, "-lm")...).CombinedOutput()
	if err != nil || len(out) > 0 {
		t.Fatalf("%v\n%s", err, out)
	}
}

func TestInitConfigurationAndDevices(t *testing.T) {
	f := open(t, "FAKECUDA_DEVICES", "3", "FAKECUDA_DRIVER_VERSION", "12080")
	_, r := f.cuDeviceGetCount()
	f.want(r, rNotInitialized, "cuDeviceGetCount before cuInit")
	_, r = f.cuMemAlloc(16)
	f.want(r, rNotInitialized, "cuMemAlloc_v2 before cuInit")
	v, r := f.cuDriverGetVersion()
	f.ok(r, "cuDriverGetVersion before cuInit")
	if v != 12080 {
		t.Fatalf("driver version %d", v)
	}
	t.Setenv("FAKECUDA_NO_DEVICE", "1")
	f.want(f.cuInit(0), rNoDevice, "cuInit with FAKECUDA_NO_DEVICE")
	t.Setenv("FAKECUDA_NO_DEVICE", "")
	f.want(f.cuInit(1), rInvalidValue, "cuInit(1)")
	f.ok(f.cuInit(0), "cuInit")
	f.ok(f.cuInit(0), "second cuInit")

	n, r := f.cuDeviceGetCount()
	f.ok(r, "cuDeviceGetCount")
	if n != 3 {
		t.Fatalf("%d devices, want 3", n)
	}
	buses := map[string]bool{}
	uuids := map[[16]byte]bool{}
	for i := 0; i < n; i++ {
		d, r := f.cuDeviceGet(i)
		f.ok(r, "cuDeviceGet")
		name, r := f.cuDeviceGetName(d)
		f.ok(r, "cuDeviceGetName")
		if name != "Fake CUDA Device "+strconv.Itoa(i) {
			t.Fatalf("name %q", name)
		}
		bus, r := f.cuDeviceGetPCIBusID(d)
		f.ok(r, "cuDeviceGetPCIBusId")
		if len(bus) != len("0000:18:00.0") || !strings.HasPrefix(bus, "0000:") || buses[bus] {
			t.Fatalf("bus id %q (seen: %v)", bus, buses)
		}
		buses[bus] = true
		busNum, r := f.cuDeviceGetAttribute(attrPCIBus, d)
		f.ok(r, "PCI_BUS_ID")
		if fmt.Sprintf("%02x", busNum) != bus[5:7] {
			t.Fatalf("PCI_BUS_ID %x, bus id %q", busNum, bus)
		}
		u, r := f.cuDeviceGetUUID(d)
		f.ok(r, "cuDeviceGetUuid_v2")
		if uuids[u] {
			t.Fatalf("uuid %x repeated", u)
		}
		uuids[u] = true
		mem, r := f.cuDeviceTotalMem(d)
		f.ok(r, "cuDeviceTotalMem_v2")
		if mem != testMemory {
			t.Fatalf("total memory %d", mem)
		}
		for attr, want := range map[int]int{attrMaxThreads: 1024, attrMultiprocessors: 132,
			attrUnifiedAddresses: 1, attrCCMajor: 9, 76: 0, 2: 1024, 4: 64, 5: 2147483647, 6: 65535,
			8: 49152, 83: 1, 89: 1} {
			got, r := f.cuDeviceGetAttribute(attr, d)
			f.ok(r, "cuDeviceGetAttribute")
			if got != want {
				t.Fatalf("attribute %d = %d, want %d", attr, got, want)
			}
		}
	}
	_, r = f.cuDeviceGet(3)
	f.want(r, rInvalidDevice, "cuDeviceGet(3)")
	_, r = f.cuDeviceGetAttribute(99999, 0)
	f.want(r, rInvalidValue, "unknown attribute")
	can, r := f.cuDeviceCanAccessPeer(0, 1)
	f.ok(r, "cuDeviceCanAccessPeer")
	same, _ := f.cuDeviceCanAccessPeer(2, 2)
	if can != 1 || same != 0 {
		t.Fatalf("can access peer: 0->1 %d, 2->2 %d", can, same)
	}
	if f.cuErrorName(rIllegalAddress) != "CUDA_ERROR_ILLEGAL_ADDRESS" || f.cuErrorName(12345) != "CUresult(12345)" {
		t.Fatal("cuGetErrorName")
	}
}

func TestNoPeerConfiguration(t *testing.T) {
	f := load(t, "FAKECUDA_NO_PEER", "1")
	can, r := f.cuDeviceCanAccessPeer(0, 1)
	f.ok(r, "cuDeviceCanAccessPeer")
	if can != 0 {
		t.Fatal("peer access with FAKECUDA_NO_PEER")
	}
	c1, r := f.cuPrimaryCtxRetain(1)
	f.ok(r, "retain 1")
	f.ctx(0)
	f.want(f.cuCtxEnablePeerAccess(c1, 0), rPeerUnsupported, "cuCtxEnablePeerAccess")
}

func TestContextsArePerThread(t *testing.T) {
	f := load(t)
	_, r := f.cuMemAlloc(16)
	f.want(r, rInvalidContext, "cuMemAlloc_v2 without a context")
	_, r = f.cuStreamCreate()
	f.want(r, rInvalidContext, "cuStreamCreate without a context")
	f.want(f.cuCtxSynchronize(), rInvalidContext, "cuCtxSynchronize without a context")
	c := f.ctx(0)
	if cur, _ := f.cuCtxGetCurrent(); cur != c {
		t.Fatal("cuCtxGetCurrent")
	}
	p := f.alloc(64)
	var other int
	done := make(chan struct{})
	go func() {
		defer close(done)
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		_, other = f.cuMemAlloc(16)
	}()
	testwait.Closed(t, done, "the allocation on another thread")
	f.want(other, rInvalidContext, "cuMemAlloc_v2 on another thread")
	if s := f.ctl.Stats(); s.ContextRefs != 1 || s.DeviceAllocs != 1 {
		t.Fatalf("stats %+v", s)
	}
	f.ok(f.cuMemFree(p), "cuMemFree_v2")
	f.ok(f.cuPrimaryCtxRelease(0), "release")
	f.want(f.cuPrimaryCtxRelease(0), rInvalidContext, "release of an inactive context")
	_, r = f.cuMemAlloc(16)
	f.want(r, rContextIsDestroyed, "cuMemAlloc_v2 in a released context")
	f.ok(f.cuCtxSetCurrent(nil), "cuCtxSetCurrent(NULL)")
	if s := f.ctl.Stats(); s.Live() != 0 || s.Leaked != 0 {
		t.Fatalf("stats %+v", s)
	}
}

// TestPeekChild runs only in the child process of
// TestDeviceMemoryIsNotHostMemory: it reads device memory from the host,
// which must crash.
func TestPeekChild(t *testing.T) {
	if os.Getenv("FAKECUDA_TEST_PEEK") != "1" {
		t.Skip("runs as a child process of TestDeviceMemoryIsNotHostMemory")
	}
	f := loadCtx0(t)
	p := f.alloc(4096)
	f.write(p, []byte{1, 2, 3, 4})
	// The crash below ends the process before t.TempDir's cleanup runs:
	// the test's temporary folder (the library, loaded already) goes now.
	_ = os.RemoveAll(filepath.Dir(t.TempDir()))
	v := peek(p)
	t.Fatalf("the host read device memory: %d", v)
}

func TestDeviceMemoryIsNotHostMemory(t *testing.T) {
	f := loadCtx0(t)
	p := f.alloc(1 << 16)
	checkProtNone(t, p, "device memory")

	cmd := exec.Command(os.Args[0], "-test.run=^TestPeekChild$", "-test.count=1")
	cmd.Env = append(os.Environ(), "FAKECUDA_TEST_PEEK=1")
	out, err := cmd.CombinedOutput()
	if err == nil || !strings.Contains(string(out), "SIGSEGV") {
		t.Fatalf("reading device memory from the host did not crash: %v\n%s", err, out)
	}
}

func TestAllocFreeAndOOM(t *testing.T) {
	f := loadCtx0(t)
	_, r := f.cuMemAlloc(0)
	f.want(r, rInvalidValue, "cuMemAlloc_v2(0)")
	a := f.alloc(1000)
	if a%256 != 0 {
		t.Fatalf("address %#x not 256-aligned", a)
	}
	free, total, r := f.cuMemGetInfo()
	f.ok(r, "cuMemGetInfo_v2")
	if total != testMemory || free != testMemory-1024 {
		t.Fatalf("free %d total %d", free, total)
	}
	if got := f.read(a, 16); !bytes.Equal(got, bytes.Repeat([]byte{0xA5}, 16)) {
		t.Fatalf("fresh allocation reads %x, want the poison pattern", got)
	}
	b := f.alloc(300)
	c := f.alloc(256)
	if s := f.ctl.Stats(); s.DeviceAllocs != 3 || s.DeviceBytes != 1556 {
		t.Fatalf("stats %+v", s)
	}
	f.want(f.cuMemFree(b+256), rInvalidValue, "free of an interior pointer")
	f.want(f.cuMemFree(12345), rInvalidValue, "free of an unknown pointer")
	f.ok(f.cuMemFree(b), "free")
	f.want(f.cuMemFree(b), rInvalidValue, "double free")
	if b2 := f.alloc(200); b2 != b {
		t.Fatalf("first fit: got %#x, want the freed %#x", b2, b)
	} else {
		f.ok(f.cuMemFree(b2), "free")
	}
	f.ok(f.cuMemFree(a), "free")
	f.ok(f.cuMemFree(c), "free")

	_, r = f.cuMemAlloc(testMemory + 1)
	f.want(r, rOutOfMemory, "allocation above the device's memory")
	all := f.alloc(testMemory)
	_, r = f.cuMemAlloc(1)
	f.want(r, rOutOfMemory, "allocation on a full device")
	f.ok(f.cuMemFree(all), "free")

	f.ctl.Inject(FaultOOM, 1, 1) // another device: no effect here
	f.ctl.Inject(FaultOOM, 0, 2)
	_, r = f.cuMemAlloc(16)
	f.want(r, rOutOfMemory, "injected OOM 1")
	_, r = f.cuMemHostAlloc(16, 0)
	f.want(r, rOutOfMemory, "injected OOM 2")
	f.ok(f.cuMemFree(f.alloc(16)), "alloc after the injected faults")
	f.ctl.Reset()

	// pinned memory: host-accessible, its own device pointer
	h, r := f.cuMemHostAlloc(4096, 2)
	f.ok(r, "cuMemHostAlloc")
	hb := unsafe.Slice((*byte)(h), 4096)
	hb[0], hb[4095] = 7, 9
	dp, r := f.cuMemHostGetDevicePointer(h)
	f.ok(r, "cuMemHostGetDevicePointer_v2")
	if dp != dptr(uintptr(h)) {
		t.Fatal("the device pointer of pinned memory differs from the host pointer")
	}
	goMem := make([]byte, 16)
	_, r = f.cuMemHostGetDevicePointer(unsafe.Pointer(&goMem[0]))
	f.want(r, rInvalidValue, "cuMemHostGetDevicePointer_v2 of pageable memory")
	d := f.alloc(4096)
	f.ok(f.cuMemcpyDtoD(d, dp, 4096), "cuMemcpyDtoD_v2 from pinned memory")
	if got := f.read(d, 4096); got[0] != 7 || got[4095] != 9 {
		t.Fatal("copy from pinned memory")
	}
	f.want(f.cuMemcpyDtoD(d, dp, 4097), rInvalidValue, "copy past the end of pinned memory")

	// managed memory
	m, r := f.cuMemAllocManaged(64, memAttachGlobal)
	f.ok(r, "cuMemAllocManaged")
	f.ok(f.cuMemcpy(m, d, 64), "cuMemcpy to managed memory")
	f.ok(f.cuMemcpy(d+64, m, 64), "cuMemcpy from managed memory")
	if got := f.read(d+64, 1); got[0] != 7 {
		t.Fatal("managed round trip")
	}
	if s := f.ctl.Stats(); s.PinnedAllocs != 1 || s.ManagedAllocs != 1 {
		t.Fatalf("stats %+v", s)
	}
	f.want(f.cuMemFreeHost(unsafe.Pointer(&goMem[0])), rInvalidValue, "cuMemFreeHost of pageable memory")
	f.ok(f.cuMemFreeHost(h), "cuMemFreeHost")
	f.want(f.cuMemFreeHost(h), rInvalidValue, "second cuMemFreeHost")
	f.ok(f.cuMemFree(m), "cuMemFree_v2 of managed memory")
	f.ok(f.cuMemFree(d), "free")
	f.ok(f.cuPrimaryCtxRelease(0), "release")
	if s := f.ctl.Stats(); s.Live() != 0 || s.Leaked != 0 || s.DeviceBytes != 0 {
		t.Fatalf("stats %+v", s)
	}
}

func TestSyncCopiesAndRanges(t *testing.T) {
	f := load(t)
	c0 := f.ctx(0)
	a := f.alloc(256)
	b := f.alloc(256)
	src := make([]byte, 256)
	for i := range src {
		src[i] = byte(i)
	}
	f.write(a, src)
	f.ok(f.cuMemcpyDtoD(b, a, 256), "cuMemcpyDtoD_v2")
	if !bytes.Equal(f.read(b, 256), src) {
		t.Fatal("DtoD")
	}
	host := heapBytes(256)
	hp := dptr(uintptr(unsafe.Pointer(&host[0])))
	f.ok(f.cuMemcpy(hp, b, 256), "cuMemcpy device to pageable host")
	if !bytes.Equal(host, src) {
		t.Fatal("cuMemcpy to the host")
	}
	f.ok(f.cuMemsetD8(a, 0x11, 256), "cuMemsetD8_v2")
	f.ok(f.cuMemcpy(a, hp, 128), "cuMemcpy host to device")
	if got := f.read(a, 256); !bytes.Equal(got[:128], src[:128]) || got[128] != 0x11 {
		t.Fatal("cuMemcpy from the host")
	}
	f.want(f.cuMemcpyHtoD(a, unsafe.Pointer(&src[0]), 257), rInvalidValue, "HtoD past the end")
	f.want(f.cuMemcpyDtoH(unsafe.Pointer(&host[0]), a+128, 129), rInvalidValue, "DtoH past the end")
	f.want(f.cuMemsetD8(a+1, 0, 256), rInvalidValue, "memset past the end")
	f.want(f.cuMemcpyDtoD(b, hp, 16), rInvalidValue, "DtoD from pageable memory")
	f.ok(f.cuMemcpyDtoD(b, a, 0), "empty copy")

	// another device: plain copies and peer copies work without peer access
	c1 := f.ctx(1)
	q := f.alloc(256)
	f.ok(f.cuMemcpyDtoD(q, a, 256), "DtoD between devices")
	f.ok(f.cuMemcpyPeer(q, c1, b, c0, 64), "cuMemcpyPeer")
	f.want(f.cuMemcpyPeer(q, c0, b, c0, 64), rInvalidValue, "cuMemcpyPeer with the wrong context")
	if got := f.read(q, 256); !bytes.Equal(got[:64], src[:64]) || got[200] != 0x11 {
		t.Fatal("copies between devices")
	}
	f.ok(f.cuMemFree(q), "free")
	f.ok(f.cuCtxSetCurrent(c0), "set")
	f.ok(f.cuMemFree(a), "free")
	f.ok(f.cuMemFree(b), "free")
	f.ok(f.cuPrimaryCtxRelease(0), "release")
	f.ok(f.cuPrimaryCtxRelease(1), "release")
	f.ok(f.cuCtxSetCurrent(nil), "unset")
}

func TestStreamOrderAndPageableCopies(t *testing.T) {
	f := loadCtx0(t)
	s := f.stream()
	m := f.module()
	sleep := f.fn(m, "xpu_test_sleep")
	const n = 1024
	buf := f.alloc(4 * n)
	f.ok(f.cuMemsetD8(buf, 0, 4*n), "memset")

	// a sleep kernel then a memset: the memset waits its turn
	f.ok(f.cuLaunch(sleep, 1, 1, 0, s, uint64(200*time.Millisecond)), "launch sleep")
	f.ok(f.cuMemsetD32Async(buf, 7, n, s), "cuMemsetD32Async")
	f.want(f.cuStreamQuery(s), rNotReady, "cuStreamQuery while sleeping")
	if !allEqual(u32s(f.read(buf, 4*n)), 0) {
		t.Fatal("the memset ran before the sleep kernel ended")
	}
	f.ok(f.cuStreamSynchronize(s), "cuStreamSynchronize")
	f.ok(f.cuStreamQuery(s), "cuStreamQuery after synchronizing")
	if !allEqual(u32s(f.read(buf, 4*n)), 7) {
		t.Fatal("the memset did not run")
	}

	// pageable source: snapshot at the call
	host := bytes.Repeat([]byte{1}, 4*n)
	f.ok(f.cuLaunch(sleep, 1, 1, 0, s, uint64(30*time.Millisecond)), "launch sleep")
	f.ok(f.cuMemcpyHtoDAsync(buf, unsafe.Pointer(&host[0]), 4*n, s), "cuMemcpyHtoDAsync_v2")
	for i := range host {
		host[i] = 2
	}
	f.ok(f.cuStreamSynchronize(s), "sync")
	if got := f.read(buf, 4*n); !bytes.Equal(got, bytes.Repeat([]byte{1}, 4*n)) {
		t.Fatal("pageable HtoDAsync did not snapshot its source")
	}

	// pageable destination: the call returns when the data is there
	f.ok(f.cuLaunch(sleep, 1, 1, 0, s, uint64(30*time.Millisecond)), "launch sleep")
	f.ok(f.cuMemsetD32Async(buf, 9, n, s), "memset")
	f.ok(f.cuMemcpyDtoHAsync(unsafe.Pointer(&host[0]), buf, 4*n, s), "cuMemcpyDtoHAsync_v2")
	if !allEqual(u32s(host), 9) {
		t.Fatal("pageable DtoHAsync returned before the copy")
	}

	// pinned destination: fully asynchronous
	h, r := f.cuMemHostAlloc(4*n, 0)
	f.ok(r, "cuMemHostAlloc")
	pinned := unsafe.Slice((*byte)(h), 4*n)
	f.ok(f.cuLaunch(sleep, 1, 1, 0, s, uint64(100*time.Millisecond)), "launch sleep")
	f.ok(f.cuMemsetD32Async(buf, 5, n, s), "memset")
	f.ok(f.cuMemcpyDtoHAsync(h, buf, 4*n, s), "DtoHAsync to pinned memory")
	f.want(f.cuStreamQuery(s), rNotReady, "query")
	f.ok(f.cuStreamSynchronize(s), "sync")
	if !allEqual(u32s(pinned), 5) {
		t.Fatal("DtoHAsync to pinned memory")
	}
	f.ok(f.cuMemcpyAsync(buf, dptr(uintptr(h)), 8, s), "cuMemcpyAsync from pinned memory")
	f.want(f.cuMemcpyAsync(buf, dptr(uintptr(h)), 4*n+1, s), rInvalidValue, "cuMemcpyAsync past pinned memory")
	f.want(f.cuMemcpyDtoDAsync(buf, buf+8, 4*n, s), rInvalidValue, "DtoDAsync past the end")
	f.ok(f.cuStreamSynchronize(s), "sync")
	if st := f.ctl.Stats(); st.AsyncCopies < 4 || st.KernelLaunches != 4 {
		t.Fatalf("stats %+v", st)
	}

	// destroying a stream waits for its queued work
	f.ok(f.cuLaunch(sleep, 1, 1, 0, s, uint64(20*time.Millisecond)), "launch sleep")
	f.ok(f.cuMemsetD32Async(buf, 3, n, s), "memset")
	f.ok(f.cuStreamDestroy(s), "cuStreamDestroy_v2")
	if !allEqual(u32s(f.read(buf, 4*n)), 3) {
		t.Fatal("work queued before cuStreamDestroy was lost")
	}
	f.want(f.cuStreamSynchronize(s), rInvalidHandle, "sync of a destroyed stream")
	f.want(f.cuMemsetD32Async(buf, 3, n, s), rInvalidHandle, "memset on a destroyed stream")
	f.ok(f.cuMemFreeHost(h), "free host")
	f.ok(f.cuMemFree(buf), "free")
	f.ok(f.cuModuleUnload(m), "unload")
	f.releaseClean()
}

func TestEvents(t *testing.T) {
	f := loadCtx0(t)
	s1, s2 := f.stream(), f.stream()
	m := f.module()
	sleep := f.fn(m, "xpu_test_sleep")
	start, end := f.event(0), f.event(0)
	never := f.event(0)
	notime := f.event(eventDisableTiming)

	f.ok(f.cuEventQuery(never), "a never-recorded event is complete")
	f.ok(f.cuEventRecord(start, s1), "record")
	f.ok(f.cuLaunch(sleep, 1, 1, 0, s1, uint64(150*time.Millisecond)), "sleep")
	f.ok(f.cuEventRecord(end, s1), "record")
	f.ok(f.cuEventRecord(notime, s1), "record")
	f.want(f.cuEventQuery(end), rNotReady, "cuEventQuery")
	_, r := f.cuEventElapsedTime(start, end)
	f.want(r, rNotReady, "elapsed time of a pending event")
	f.ok(f.cuEventSynchronize(end), "cuEventSynchronize")
	f.ok(f.cuEventQuery(end), "query after synchronizing")
	ms, r := f.cuEventElapsedTime(start, end)
	f.ok(r, "cuEventElapsedTime")
	if ms < 145 || ms > 10000 {
		t.Fatalf("elapsed %v ms, want about 150", ms)
	}
	f.ok(f.cuEventSynchronize(notime), "sync")
	_, r = f.cuEventElapsedTime(start, notime)
	f.want(r, rInvalidHandle, "elapsed time with DISABLE_TIMING")
	_, r = f.cuEventElapsedTime(never, end)
	f.want(r, rInvalidHandle, "elapsed time of a never-recorded event")

	// one stream waits for an event of another
	const n = 256
	a, b := f.alloc(4*n), f.alloc(4*n)
	f.ok(f.cuMemsetD8(b, 0, 4*n), "memset")
	e := f.event(eventDisableTiming)
	f.ok(f.cuLaunch(sleep, 1, 1, 0, s1, uint64(50*time.Millisecond)), "sleep")
	f.ok(f.cuMemsetD32Async(a, 3, n, s1), "memset")
	f.ok(f.cuEventRecord(e, s1), "record")
	f.ok(f.cuStreamWaitEvent(s2, e), "cuStreamWaitEvent")
	f.ok(f.cuMemcpyDtoDAsync(b, a, 4*n, s2), "DtoDAsync")
	f.ok(f.cuStreamSynchronize(s2), "sync s2")
	if !allEqual(u32s(f.read(b, 4*n)), 3) {
		t.Fatal("the waiting stream ran before the event")
	}

	// destroying an event its stream still has to record is safe
	f.ok(f.cuLaunch(sleep, 1, 1, 0, s1, uint64(20*time.Millisecond)), "sleep")
	f.ok(f.cuEventRecord(e, s1), "record")
	f.ok(f.cuStreamWaitEvent(s2, e), "wait")
	f.ok(f.cuEventDestroy(e), "cuEventDestroy_v2 while recorded")
	f.want(f.cuEventQuery(e), rInvalidHandle, "query of a destroyed event")
	f.ok(f.cuStreamSynchronize(s2), "sync s2")
	f.ok(f.cuCtxSynchronize(), "cuCtxSynchronize")

	for _, ev := range []unsafe.Pointer{start, end, never, notime} {
		f.ok(f.cuEventDestroy(ev), "destroy")
	}
	f.ok(f.cuStreamDestroy(s1), "destroy")
	f.ok(f.cuStreamDestroy(s2), "destroy")
	f.ok(f.cuMemFree(a), "free")
	f.ok(f.cuMemFree(b), "free")
	f.ok(f.cuModuleUnload(m), "unload")
	f.releaseClean()
}

func TestStickyIllegalAddress(t *testing.T) {
	f := loadCtx0(t)
	s := f.stream()
	m := f.module()
	store, sleep := f.fn(m, "xpu_test_store"), f.fn(m, "xpu_test_sleep")
	p := f.alloc(64)
	e := f.event(0)
	freed := f.alloc(64)
	f.ok(f.cuMemFree(freed), "free")

	f.ok(f.cuLaunch(store, 1, 1, 0, s, uint64(p), 42), "a good store")
	f.ok(f.cuLaunch(sleep, 1, 1, 0, s, uint64(20*time.Millisecond)), "sleep")
	f.ok(f.cuLaunch(store, 1, 1, 0, s, uint64(freed), 1), "a store to freed memory is launched")
	f.ok(f.cuMemsetD32Async(p, 0, 16, s), "queued after the fault")
	f.ok(f.cuEventRecord(e, s), "record after the fault")
	f.want(f.cuEventSynchronize(e), rIllegalAddress, "cuEventSynchronize")
	f.want(f.cuStreamSynchronize(s), rIllegalAddress, "cuStreamSynchronize")
	f.want(f.cuStreamQuery(s), rIllegalAddress, "cuStreamQuery")
	f.want(f.cuEventQuery(e), rIllegalAddress, "cuEventQuery")
	f.want(f.cuCtxSynchronize(), rIllegalAddress, "cuCtxSynchronize")
	_, r := f.cuMemAlloc(16)
	f.want(r, rIllegalAddress, "cuMemAlloc_v2")
	f.want(f.cuLaunch(store, 1, 1, 0, s, uint64(p), 1), rIllegalAddress, "cuLaunchKernel")
	_, r = f.cuStreamCreate()
	f.want(r, rIllegalAddress, "cuStreamCreate")
	b := make([]byte, 8)
	f.want(f.cuMemcpyDtoH(unsafe.Pointer(&b[0]), p, 8), rIllegalAddress, "cuMemcpyDtoH_v2")

	// the device's other context is unaffected; this one recovers only
	// by a reset, which reclaims (and counts) what was left
	f.ok(f.cuPrimaryCtxRelease(0), "release")
	f.noneLive(4, "after the reset (allocation, stream, event, module)")
	f.ctx(0)
	q := f.alloc(64)
	f.ok(f.cuMemsetD8(q, 0, 64), "memset after the reset")
	f.ok(f.cuMemFree(q), "free")

	// a bad store on the legacy stream: still asynchronous
	m = f.module()
	store = f.fn(m, "xpu_test_store")
	f.ok(f.cuLaunch(store, 1, 1, 0, nil, 0x10, 1), "store to a null-ish address")
	f.want(f.cuCtxSynchronize(), rIllegalAddress, "sticky after a legacy-stream fault")
	f.want(f.cuModuleUnload(m), rIllegalAddress, "unload on a failed context still unloads")
	f.ok(f.cuPrimaryCtxRelease(0), "release")
	f.noneLive(4, "")
}

func TestInjectedFaults(t *testing.T) {
	f := loadCtx0(t)
	m := f.module()
	empty := f.fn(m, "xpu_test_empty")
	f.ctl.Inject(FaultLaunch, 0, 1)
	f.ok(f.cuLaunch(empty, 1, 1, 0, nil), "launch")
	f.want(f.cuCtxSynchronize(), rLaunchFailed, "injected launch failure")
	f.ok(f.cuPrimaryCtxRelease(0), "release")

	f.ctx(0)
	m = f.module()
	empty = f.fn(m, "xpu_test_empty")
	f.ctl.Inject(FaultIllegalAddress, 0, 1)
	f.ok(f.cuLaunch(empty, 1, 1, 0, nil), "launch")
	f.want(f.cuCtxSynchronize(), rIllegalAddress, "injected illegal address")
	f.ok(f.cuPrimaryCtxRelease(0), "release")

	// a lost device: waits end, calls fail, until Reset and a context reset
	f.ctx(1)
	m = f.module()
	sleep := f.fn(m, "xpu_test_sleep")
	s := f.stream()
	f.ok(f.cuLaunch(sleep, 1, 1, 0, s, uint64(time.Minute)), "a long sleep")
	done := make(chan int)
	go func() {
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		done <- f.cuStreamSynchronize(s)
	}()
	time.Sleep(20 * time.Millisecond)
	t0 := time.Now()
	f.ctl.Inject(FaultDeviceLost, 1, 0)
	select {
	case r := <-done:
		f.want(r, rDeviceUnavailable, "cuStreamSynchronize on a lost device")
	case <-time.After(5 * time.Second):
		t.Fatal("cuStreamSynchronize hangs on a lost device")
	}
	if time.Since(t0) > 2*time.Second {
		t.Fatal("the sleep kernel was not interrupted")
	}
	_, r := f.cuDeviceGetName(1)
	f.want(r, rDeviceUnavailable, "cuDeviceGetName of a lost device")
	_, r = f.cuDeviceGetName(0)
	f.ok(r, "cuDeviceGetName of another device")
	_, r = f.cuPrimaryCtxRetain(1)
	f.want(r, rDeviceUnavailable, "retain on a lost device")
	_, r = f.cuMemAlloc(16)
	f.want(r, rDeviceUnavailable, "alloc on a lost device")
	f.ctl.Reset()
	_, r = f.cuDeviceGetName(1)
	f.ok(r, "cuDeviceGetName after Reset")
	_, r = f.cuMemAlloc(16)
	f.want(r, rDeviceUnavailable, "the lost device's context stays failed")
	f.want(f.cuStreamDestroy(s), rDeviceUnavailable, "destroy on a failed context")
	f.ok(f.cuPrimaryCtxRelease(1), "release")
	f.ctx(1)
	f.ok(f.cuMemFree(f.alloc(16)), "alloc after the context reset")
	f.ok(f.cuPrimaryCtxRelease(1), "release")
	if st := f.ctl.Stats(); st.Live() != 0 {
		t.Fatalf("stats %+v", st)
	}
}

// An injected copy fault fails the next copy executed in the device's
// context, synchronous or in stream order, sticky on the context; a copy
// of another device does not take it.
func TestInjectedCopyFault(t *testing.T) {
	f := loadCtx0(t)
	p := f.alloc(64)
	b := make([]byte, 64)
	f.ctl.Inject(FaultCopy, 1, 1)
	f.ok(f.cuMemcpyDtoH(unsafe.Pointer(&b[0]), p, 64), "a copy on device 0 with a fault injected on device 1")
	f.ctl.Inject(FaultCopy, 0, 1)
	f.want(f.cuMemcpyDtoH(unsafe.Pointer(&b[0]), p, 64), rIllegalAddress, "the copy with the fault")
	f.want(f.cuMemcpyHtoD(p, unsafe.Pointer(&b[0]), 64), rIllegalAddress, "a copy after it: the context has failed")
	f.want(f.cuMemFree(p), rIllegalAddress, "free on the failed context")
	f.ok(f.cuPrimaryCtxRelease(0), "release")

	// in stream order: the copy is accepted; the fault surfaces at the wait
	f.ctx(0)
	s := f.stream()
	p = f.alloc(64)
	h, r := f.cuMemHostAlloc(64, 0)
	f.ok(r, "cuMemHostAlloc")
	f.ctl.Inject(FaultCopy, 0, 1)
	f.ok(f.cuMemcpyDtoHAsync(h, p, 64, s), "the copy with the fault is queued")
	f.want(f.cuStreamSynchronize(s), rIllegalAddress, "cuStreamSynchronize after the faulting copy")
	f.want(f.cuStreamDestroy(s), rIllegalAddress, "destroy on the failed context")
	f.want(f.cuMemFreeHost(h), rIllegalAddress, "free on the failed context")
	f.want(f.cuMemFree(p), rIllegalAddress, "free on the failed context")
	f.ok(f.cuPrimaryCtxRelease(0), "release")
	f.ctl.Reset()
	f.noneLive(0, "")
}

// DeviceStats counts each device's allocations, context references and
// kernels apart.
func TestDeviceStats(t *testing.T) {
	f := load(t)
	f.ctx(1)
	p := f.alloc(1000)
	m := f.module()
	f.ok(f.cuLaunch(f.fn(m, "xpu_test_empty"), 1, 1, 0, nil), "launch")
	f.ok(f.cuCtxSynchronize(), "sync")
	if d0, d1 := f.ctl.DeviceStats(0), f.ctl.DeviceStats(1); d0 != (DeviceStats{}) ||
		d1 != (DeviceStats{DeviceAllocs: 1, DeviceBytes: 1000, ContextRefs: 1, KernelLaunches: 1}) {
		t.Fatalf("device 0 %+v, device 1 %+v", d0, d1)
	}
	if d := f.ctl.DeviceStats(2); d != (DeviceStats{}) {
		t.Fatalf("a device the fake does not have: %+v", d)
	}
	f.ok(f.cuMemFree(p), "free")
	f.ok(f.cuModuleUnload(m), "unload")
	f.ok(f.cuPrimaryCtxRelease(1), "release")
	if d := f.ctl.DeviceStats(1); d != (DeviceStats{KernelLaunches: 1}) {
		t.Fatalf("device 1 after the release: %+v", d)
	}
}

func TestPTXValidationAndLaunchChecks(t *testing.T) {
	f := loadCtx0(t)
	for _, tc := range []struct{ name, ptx, want string }{
		{"no version", ".target sm_90\n.entry k() { ret; }\n", "Missing .version directive at line 1"},
		{"no target", ".version 8.0\n\n.entry k() { ret; }\n", ".target directive before .entry at line 3"},
		{"bad target", ".version 8.0\n.target compute\n.entry k() { ret; }\n", "at line 2"},
		{"no entry", ".version 8.0\n.target sm_90\n.func f() { ret; }\n", "no .entry"},
		{"unbalanced", ".version 8.0\n.target sm_90\n.entry k()\n{\n{ ret; }\n", "Unclosed '{' opened at line 4"},
		{"extra brace", "// c\n.version 8.0\n.target sm_90\n.entry k() { ret; }\n}\n", "Unexpected '}' at line 5"},
		{"comment", ".version 8.0 /* never closed\n.target sm_90\n", "Unterminated comment at line 1"},
		{"empty", "", "Missing .version"},
	} {
		_, log, r := f.cuModuleLoad(tc.ptx)
		if r != rInvalidPTX || !strings.HasPrefix(log, "ptxas fatal   : ") || !strings.Contains(log, tc.want) {
			t.Errorf("%s: %d %q, want INVALID_PTX and a log with %q", tc.name, r, log, tc.want)
		}
	}
	m := f.module()
	_, r := f.cuModuleGetFunction(m, "xpu_fill_f32")
	f.want(r, rNotFound, "a function not in the module")
	empty := f.fn(m, "xpu_test_empty")
	f.want(f.cuLaunch(f.fn(m, "not_in_the_fake"), 1, 1, 0, nil, 0), rNotSupported, "a kernel the fake lacks")
	f.want(f.cuLaunch(f.fn(m, "xpu_scale_i32"), 1, 1, 0, nil, 0, 0), rInvalidImage, "a PTX signature that disagrees")
	for _, tc := range []struct {
		g, b [3]uint32
		shm  uint32
	}{
		{[3]uint32{0, 1, 1}, [3]uint32{1, 1, 1}, 0},
		{[3]uint32{1, 1, 1}, [3]uint32{1025, 1, 1}, 0},
		{[3]uint32{1, 1, 1}, [3]uint32{32, 32, 2}, 0},
		{[3]uint32{1, 1, 1}, [3]uint32{1, 1, 65}, 0},
		{[3]uint32{1, 65536, 1}, [3]uint32{1, 1, 1}, 0},
		{[3]uint32{1 << 31, 1, 1}, [3]uint32{1, 1, 1}, 0},
		{[3]uint32{1, 1, 1}, [3]uint32{1, 1, 1}, 49153},
	} {
		f.want(f.cuLaunch3(empty, tc.g, tc.b, tc.shm), rInvalidValue, "launch configuration")
	}
	f.ok(f.cuLaunch3(empty, [3]uint32{2147483647, 65535, 65535}, [3]uint32{32, 32, 1}, 49152), "largest launch")
	f.ok(f.cuModuleUnload(m), "unload")
	f.want(f.cuLaunch(empty, 1, 1, 0, nil), rInvalidHandle, "launch of an unloaded module's function")
	_, r = f.cuModuleGetFunction(m, "xpu_test_empty")
	f.want(r, rInvalidHandle, "cuModuleGetFunction of an unloaded module")
	f.want(f.cuModuleUnload(m), rInvalidHandle, "second unload")
	f.ok(f.cuCtxSetCurrent(nil), "unset")
	_, _, r = f.cuModuleLoad(testPTX)
	f.want(r, rInvalidContext, "module load without a context")
}

func TestKernels(t *testing.T) {
	f := loadCtx0(t)
	m := f.module()
	s := f.stream()
	const n = 1000
	in, out := f.alloc(4*n), f.alloc(4*64)
	f.ok(f.cuLaunch(f.fn(m, "xpu_test_iota_u32"), 3, 128, 0, s, uint64(in), n), "iota")
	// block partials: G=4, B=64
	const G, B = 4, 64
	sum := f.fn(m, "xpu_sum_i32")
	f.ok(f.cuLaunch(sum, G, B, 4*B, s, uint64(out), uint64(in), n), "sum pass 1")
	f.ok(f.cuStreamSynchronize(s), "sync")
	parts := u32s(f.read(out, 4*G))
	for b := 0; b < G; b++ {
		var want uint32
		for t := 0; t < B; t++ {
			for i := b*B + t; i < n; i += G * B {
				want += uint32(i)
			}
		}
		if parts[b] != want {
			t.Fatalf("partial %d = %d, want %d", b, parts[b], want)
		}
	}
	f.ok(f.cuLaunch(sum, 1, 32, 4*32, s, uint64(out), uint64(out), G), "sum pass 2")
	f.ok(f.cuStreamSynchronize(s), "sync")
	if got := u32s(f.read(out, 4))[0]; got != n*(n-1)/2 {
		t.Fatalf("sum %d", got)
	}
	// a block with no element writes the identity
	f.ok(f.cuLaunch(sum, 64, 32, 4*32, s, uint64(out), uint64(in), 10), "sum, few elements")
	f.ok(f.cuStreamSynchronize(s), "sync")
	if p := u32s(f.read(out, 4*64)); p[0] != 45 || p[1] != 0 || p[63] != 0 {
		t.Fatalf("partials %v", p[:4])
	}

	// fill (a 4-byte value argument), and min ignoring NaN
	fill := f.fn(m, "xpu_fill_u32")
	f.ok(f.cuLaunch(fill, 1, 32, 0, s, uint64(in), 0xdeadbeef, n), "fill")
	f.ok(f.cuStreamSynchronize(s), "sync")
	if !allEqual(u32s(f.read(in, 4*n)), 0xdeadbeef) {
		t.Fatal("fill")
	}
	vals := []float32{float32(math.NaN()), 3, -2, float32(math.NaN()), 7}
	vb := make([]byte, 4*len(vals))
	for i, v := range vals {
		binary.LittleEndian.PutUint32(vb[4*i:], math.Float32bits(v))
	}
	f.write(in, vb)
	f.ok(f.cuLaunch(f.fn(m, "xpu_min_f32"), 1, 32, 128, s, uint64(out), uint64(in), uint64(len(vals))), "min")
	f.ok(f.cuStreamSynchronize(s), "sync")
	if got := math.Float32frombits(u32s(f.read(out, 4))[0]); got != -2 {
		t.Fatalf("min %v", got)
	}

	// axpy on f64: y = a*x + y
	x, y := f.alloc(8*4), f.alloc(8*4)
	xb, yb := make([]byte, 32), make([]byte, 32)
	for i := 0; i < 4; i++ {
		binary.LittleEndian.PutUint64(xb[8*i:], math.Float64bits(float64(i)))
		binary.LittleEndian.PutUint64(yb[8*i:], math.Float64bits(0.5))
	}
	f.write(x, xb)
	f.write(y, yb)
	f.ok(f.cuLaunch(f.fn(m, "xpu_axpy_f64"), 1, 32, 0, s, uint64(y), uint64(x), math.Float64bits(2), 4), "axpy")
	f.ok(f.cuStreamSynchronize(s), "sync")
	got := f.read(y, 32)
	for i := 0; i < 4; i++ {
		if v := math.Float64frombits(binary.LittleEndian.Uint64(got[8*i:])); v != 2*float64(i)+0.5 {
			t.Fatalf("axpy[%d] = %v", i, v)
		}
	}

	// a reduction with too little shared memory reads past it
	f.ok(f.cuLaunch(sum, 1, 64, 4*32, s, uint64(out), uint64(in), 4), "sum with short shared memory")
	f.want(f.cuStreamSynchronize(s), rIllegalAddress, "reduction past its shared memory")
	f.ok(f.cuPrimaryCtxRelease(0), "release")
	f.ctx(0)
	m = f.module()
	out = f.alloc(64)
	f.ok(f.cuLaunch(f.fn(m, "xpu_sum_i32"), 1, 48, 4*48, nil, uint64(out), uint64(out), 1), "B not a power of two")
	f.want(f.cuCtxSynchronize(), rIllegalAddress, "reduction with B=48")
	f.ok(f.cuPrimaryCtxRelease(0), "release")
}

func TestPeerAccess(t *testing.T) {
	f := load(t)
	c1 := f.ctx(1)
	q := f.alloc(64)
	c0 := f.ctx(0)
	m := f.module()
	store := f.fn(m, "xpu_test_store")
	f.ok(f.cuLaunch(store, 1, 1, 0, nil, uint64(q), 5), "store to a peer without access")
	f.want(f.cuCtxSynchronize(), rIllegalAddress, "kernel access to a peer without peer access")
	f.ok(f.cuPrimaryCtxRelease(0), "release")
	f.ok(f.cuCtxSetCurrent(c0), "set")
	f.want(f.cuCtxEnablePeerAccess(c1, 0), rContextIsDestroyed, "peer access from a released context")

	f.ctx(0)
	m = f.module()
	store = f.fn(m, "xpu_test_store")
	f.want(f.cuCtxEnablePeerAccess(c1, 1), rInvalidValue, "flags")
	f.want(f.cuCtxEnablePeerAccess(c0, 0), rPeerUnsupported, "peer access to itself")
	f.ok(f.cuCtxEnablePeerAccess(c1, 0), "cuCtxEnablePeerAccess")
	f.want(f.cuCtxEnablePeerAccess(c1, 0), rPeerAlreadyEnabled, "twice")
	s := f.stream()
	f.ok(f.cuLaunch(store, 1, 1, 0, s, uint64(q), 77), "store to a peer")
	f.ok(f.cuStreamSynchronize(s), "sync")
	p := f.alloc(64)
	f.ok(f.cuMemcpyPeerAsync(p, c0, q, c1, 8, s), "cuMemcpyPeerAsync")
	f.ok(f.cuStreamSynchronize(s), "sync")
	if v := binary.LittleEndian.Uint64(f.read(p, 8)); v != 77 {
		t.Fatalf("peer store: %d", v)
	}
	f.ok(f.cuStreamDestroy(s), "destroy")
	f.ok(f.cuMemFree(p), "free")
	f.ok(f.cuMemFree(q), "free of another device's memory")
	f.ok(f.cuModuleUnload(m), "unload")
	f.ok(f.cuPrimaryCtxRelease(0), "release")
	f.ok(f.cuPrimaryCtxRelease(1), "release")
	f.noneLive(1, "the first module was leaked by a reset")
}

func TestConcurrentStreams(t *testing.T) {
	f := loadCtx0(t)
	m := f.module()
	f.ok(f.cuPrimaryCtxRelease(0), "release") // leaks m: counted
	var wg sync.WaitGroup
	errs := make(chan string, 16)
	for g := 0; g < 8; g++ {
		wg.Add(1)
		go func(g int) {
			defer wg.Done()
			runtime.LockOSThread()
			defer runtime.UnlockOSThread()
			dev := g % 2
			c, r := f.cuPrimaryCtxRetain(dev)
			if r != 0 || f.cuCtxSetCurrent(c) != 0 {
				errs <- "retain"
				return
			}
			defer f.cuPrimaryCtxRelease(dev)
			mod, _, r := f.cuModuleLoad(testPTX)
			if r != 0 {
				errs <- "load"
				return
			}
			fill, _ := f.cuModuleGetFunction(mod, "xpu_fill_u32")
			s, _ := f.cuStreamCreate()
			const n = 4096
			buf, r := f.cuMemAlloc(4 * n)
			if r != 0 {
				errs <- "alloc"
				return
			}
			h, _ := f.cuMemHostAlloc(4*n, 0)
			host := unsafe.Slice((*byte)(h), 4*n)
			for i := 0; i < 100; i++ {
				v := uint64(g*1000 + i)
				if f.cuLaunch(fill, 4, 256, 0, s, uint64(buf), v, n) != 0 ||
					f.cuMemcpyDtoHAsync(h, buf, 4*n, s) != 0 || f.cuStreamSynchronize(s) != 0 {
					errs <- "launch/copy/sync"
					return
				}
				if !allEqual(u32s(host), uint32(v)) {
					errs <- "data"
					return
				}
			}
			f.cuStreamDestroy(s)
			f.cuMemFreeHost(h)
			f.cuMemFree(buf)
			f.cuModuleUnload(mod)
		}(g)
	}
	testwait.Group(t, &wg, "the goroutines using the driver")
	close(errs)
	for e := range errs {
		t.Error(e)
	}
	if st := f.ctl.Stats(); st.Live() != 0 || st.Leaked != 1 || st.KernelLaunches != 800 {
		t.Fatalf("stats %+v", st)
	}
	_ = m
}
