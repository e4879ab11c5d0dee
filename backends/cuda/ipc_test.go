//go:build cgo

package cuda_test

import (
	"bufio"
	"context"
	"crypto/rand"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/xpu-go/xpu"
	"github.com/xpu-go/xpu/backends/cuda"
	"github.com/xpu-go/xpu/backends/cuda/internal/fakecuda"
	"github.com/xpu-go/xpu/internal/tooling/testwait"
	"github.com/xpu-go/xpu/memspace"
	"github.com/xpu-go/xpu/transfer"
	"github.com/xpu-go/xpu/xerr"
)

// Variables of TestIPCExporter, the process the IPC tests start.
const (
	envIPCRole   = "XPU_CUDA_TEST_IPC_ROLE"
	envIPCDevice = "XPU_CUDA_TEST_IPC_DEVICE"
)

// pattern is the content the exporter writes into an allocation: byte i
// is a function of i and seed.
func pattern(n, seed int) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(i*7 + seed + i>>8)
	}
	return b
}

// TestIPCExporter is the exporting process of the IPC tests, not a test
// of its own: it opens the device $XPU_CUDA_TEST_IPC_DEVICE and serves
// commands read line by line from stdin, answering on stdout:
//
//	alloc SIZE ALIGN OFF LEN SEED  allocate, fill with pattern(SIZE, SEED), share [OFF, OFF+LEN)
//	                               -> SHARED <json of memspace.Shared>
//	free I                         free the I-th allocation -> FREED
//	exit                           close the backend -> BYE
//
// Every allocation is preceded by one of 256 bytes kept until exit, so
// that a block aligned above Alignment starts past the driver's base.
func TestIPCExporter(t *testing.T) {
	if os.Getenv(envIPCRole) != "exporter" {
		t.Skip("the exporting process of the IPC tests, which start it")
	}
	b, err := xpu.Open(context.Background(), cuda.Name, xpu.Options{cuda.OptDevice: os.Getenv(envIPCDevice)})
	require.NoError(t, err)
	sp := b.Spaces[0].(*cuda.Space)
	say := func(format string, args ...any) { fmt.Printf(format+"\n", args...) }
	fail := func(err error) {
		say("ERROR %v", err)
		t.Fatal(err)
	}
	var blocks, pads []memspace.Block
	in := bufio.NewScanner(os.Stdin)
	for in.Scan() {
		f := strings.Fields(in.Text())
		if len(f) == 0 {
			continue
		}
		arg := func(i int) int {
			v, err := strconv.Atoi(f[i])
			if err != nil {
				fail(err)
			}
			return v
		}
		switch f[0] {
		case "alloc":
			size, align, off, n, seed := arg(1), arg(2), arg(3), arg(4), arg(5)
			pad, err := sp.Allocate(256, 0)
			if err != nil {
				fail(err)
			}
			pads = append(pads, pad)
			blk, err := sp.Allocate(size, align)
			if err != nil {
				fail(err)
			}
			blocks = append(blocks, blk)
			src, err := memspace.FromSlice(pattern(size, seed))
			if err != nil {
				fail(err)
			}
			if err := transfer.CopyBlock(testwait.Ctx(t), blk, src.Block()); err != nil {
				fail(err)
			}
			sub, err := blk.Slice(off, n)
			if err != nil {
				fail(err)
			}
			sh, err := sp.Share(sub)
			if err != nil {
				fail(err)
			}
			again, err := sp.Share(blk)
			if err != nil {
				fail(err)
			}
			if string(again.Handle) != string(sh.Handle) {
				fail(fmt.Errorf("two shares of one allocation gave two handles"))
			}
			j, err := json.Marshal(sh)
			if err != nil {
				fail(err)
			}
			say("SHARED %s", j)
		case "free":
			if err := sp.Free(blocks[arg(1)]); err != nil {
				fail(err)
			}
			say("FREED")
		case "exit":
			for _, p := range pads {
				require.NoError(t, sp.Free(p))
			}
			require.NoError(t, b.Close())
			say("BYE")
			return
		}
	}
	require.NoError(t, b.Close(), "closing after stdin ended")
}

// exporter is a running TestIPCExporter.
type exporter struct {
	cmd    *exec.Cmd
	in     io.WriteCloser
	lines  chan string
	exited chan struct{}
}

// startExporter starts an exporting process on device (with env added to
// its environment); it is told to exit, or killed, when t ends.
func startExporter(t testing.TB, device string, env ...string) *exporter {
	t.Helper()
	exe, err := os.Executable()
	require.NoError(t, err)
	cmd := exec.Command(exe, "-test.run=^TestIPCExporter$", "-test.count=1")
	cmd.Env = append(append(os.Environ(), envIPCRole+"=exporter", envIPCDevice+"="+device), env...)
	cmd.Stderr = os.Stderr
	in, err := cmd.StdinPipe()
	require.NoError(t, err)
	out, err := cmd.StdoutPipe()
	require.NoError(t, err)
	require.NoError(t, cmd.Start())
	e := &exporter{cmd: cmd, in: in, lines: make(chan string, 64), exited: make(chan struct{})}
	stop := make(chan struct{})
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			select {
			case e.lines <- sc.Text():
			case <-stop:
			}
		}
		_ = cmd.Wait()
		close(e.exited)
	}()
	t.Cleanup(func() {
		_, _ = io.WriteString(in, "exit\n")
		_ = in.Close()
		select {
		case <-e.exited:
		case <-time.After(testwait.Bound):
			_ = cmd.Process.Kill()
		}
		close(stop)
		testwait.Closed(t, e.exited, "the exporting process's exit")
	})
	return e
}

// do sends a command and returns the exporter's answer without its first
// word, which must be want.
func (e *exporter) do(t testing.TB, cmd, want string) string {
	t.Helper()
	_, err := io.WriteString(e.in, cmd+"\n")
	require.NoError(t, err, "telling the exporter %q", cmd)
	for {
		var l string
		var ok bool
		select {
		case l, ok = <-e.lines:
		case <-time.After(testwait.Bound):
			t.Fatalf("waiting for the exporter's answer to %q: nothing came in %v", cmd, testwait.Bound)
		}
		require.True(t, ok, "the exporter ended before answering %q", cmd)
		w, rest, _ := strings.Cut(l, " ")
		switch w {
		case want:
			return rest
		case "ERROR":
			t.Fatalf("the exporter, told %q: %s", cmd, rest)
		}
	}
}

// share has the exporter allocate size bytes aligned to align, fill them
// and share [off, off+n).
func (e *exporter) share(t testing.TB, size, align, off, n, seed int) memspace.Shared {
	t.Helper()
	j := e.do(t, fmt.Sprintf("alloc %d %d %d %d %d", size, align, off, n, seed), "SHARED")
	var sh memspace.Shared
	require.NoError(t, json.Unmarshal([]byte(j), &sh))
	return sh
}

// kill ends the exporter at once and waits for its end.
func (e *exporter) kill(t *testing.T) {
	t.Helper()
	require.NoError(t, e.cmd.Process.Kill())
	testwait.Closed(t, e.exited, "the exporting process's end after its kill")
}

// read copies an imported (or any device) block to host memory.
func read(t *testing.T, b memspace.Block) []byte {
	t.Helper()
	out := make([]byte, b.Len())
	dst, err := memspace.FromSlice(out)
	require.NoError(t, err)
	require.NoError(t, transfer.CopyBlock(testwait.Ctx(t), dst.Block(), b), "copying %v to the host", b)
	return out
}

// ipcLedger checks, at the end of t, that the fake maps no other
// process's memory and that nothing was left in /dev/shm.
func ipcLedger(t *testing.T) {
	t.Helper()
	noDriverLeaks(t)
	shm := shmEntries()
	t.Cleanup(func() {
		if fake != nil {
			assert.Zero(t, fake.Stats().IPCMappings, "IPC mappings left open")
		}
		for name := range shmEntries() {
			if !shm[name] {
				t.Errorf("/dev/shm/%s left behind", name)
			}
		}
	})
}

func shmEntries() map[string]bool {
	ents, _ := os.ReadDir("/dev/shm")
	m := map[string]bool{}
	for _, e := range ents {
		if strings.Contains(e.Name(), "cuda") || strings.Contains(e.Name(), "xpu") {
			m[e.Name()] = true
		}
	}
	return m
}

// Another process's device block, imported: its bytes copy to the host
// and to this process's device memory, a write through it reads back, in
// stream order too; the mapping is kept once unused and closed by Forget.
func TestIPCImportCopy(t *testing.T) {
	ipcLedger(t)
	e := startExporter(t, "0")
	const size, align, off, n = 1<<20 + 100, 4096, 300, 5000
	sh := e.share(t, size, align, off, n, 3)
	assert.Equal(t, cuda.ShareKind, sh.Kind)
	assert.Len(t, sh.Handle, 64)
	assert.Equal(t, int64(n), sh.Len)
	assert.GreaterOrEqual(t, sh.Size, int64(size))
	assert.Greater(t, sh.Offset, int64(off), "the block is aligned above the driver's base")
	require.NoError(t, sh.Check())

	g := openGPU(t, "0")
	imp, ok := memspace.ImporterFor(sh, memspace.Block{})
	require.True(t, ok, "an open backend registers its device space as an importer")
	assert.Same(t, g.dev, imp)
	blk, done, err := g.dev.Import(sh)
	require.NoError(t, err)
	assert.Equal(t, cuda.KindDevice, blk.Space().Properties().Kind)
	assert.Equal(t, 0, blk.Space().Properties().Device)
	require.Equal(t, n, blk.Len())
	want := pattern(size, 3)[off : off+n]
	assert.True(t, equalValues(t, want, read(t, blk), "the imported block"))

	// Device to device, into this process's memory.
	local, err := g.dev.Allocate(n, 0)
	require.NoError(t, err)
	defer func() { assert.NoError(t, g.dev.Free(local)) }()
	require.NoError(t, transfer.CopyBlock(testwait.Ctx(t), local, blk))
	assert.True(t, equalValues(t, want, read(t, local), "a device copy of the imported block"))

	// Host to the imported block, in stream order, and back.
	w := pattern(n, 99)
	src, err := memspace.FromSlice(w)
	require.NoError(t, err)
	ev, err := transfer.CopyBlockAsync(g.s, blk, src.Block())
	require.NoError(t, err)
	wait(t, "a copy into the imported block", ev.Wait)
	assert.True(t, equalValues(t, w, read(t, blk), "the imported block after a write"))

	done()
	done() // a second call does nothing
	st := g.dev.ImportStats()
	assert.Equal(t, cuda.ImportStats{Mapped: 1, InUse: 0, Opens: 1}, st, "the mapping is kept for the next import")
	if fake != nil {
		assert.Equal(t, int64(1), fake.Stats().IPCMappings)
	}
	err = transfer.CopyBlock(testwait.Ctx(t), local, blk)
	assert.ErrorIs(t, err, xerr.ErrInvalidArgument, "a copy from a released import")
	assert.ErrorIs(t, blk.Space().Free(blk), xerr.ErrInvalidArgument, "Free of an imported block")

	g.dev.Forget(sh.Handle)
	g.dev.Forget([]byte("never imported"))
	assert.Equal(t, cuda.ImportStats{Opens: 1}, g.dev.ImportStats())
	if fake != nil {
		assert.Zero(t, fake.Stats().IPCMappings, "Forget closes an unused mapping")
	}
}

// Imports of one handle share one mapping: the driver opens it once, and
// Forget of a handle in use closes it at the last release. Unused
// mappings beyond KeepUnused are closed, the least recently used first.
func TestIPCImportCache(t *testing.T) {
	ipcLedger(t)
	e := startExporter(t, "0")
	const size = 64 << 10
	sh := e.share(t, size, 0, 0, size, 5)
	g := openGPU(t, "0")
	var opens int64
	if fake != nil {
		opens = fake.Stats().IPCOpens
	}
	a, doneA, err := g.dev.Import(sh)
	require.NoError(t, err)
	part := sh
	part.Offset, part.Len = 1000, 2000
	b, doneB, err := g.dev.Import(part)
	require.NoError(t, err)
	assert.Equal(t, cuda.ImportStats{Mapped: 1, InUse: 1, Opens: 1}, g.dev.ImportStats())
	if fake != nil {
		assert.Equal(t, opens+1, fake.Stats().IPCOpens, "the driver opened the handle once")
		assert.Equal(t, int64(1), fake.Stats().IPCMappings)
	}
	want := pattern(size, 5)
	assert.True(t, equalValues(t, want, read(t, a), "the whole allocation"))
	assert.True(t, equalValues(t, want[1000:3000], read(t, b), "a part of it"))

	g.dev.Forget(sh.Handle)
	assert.True(t, equalValues(t, want[1000:3000], read(t, b), "a forgotten mapping in use"))
	doneA()
	assert.Equal(t, 1, g.dev.ImportStats().Mapped, "in use by the second import")
	doneB()
	assert.Equal(t, 0, g.dev.ImportStats().Mapped, "forgotten, closed at the last release")
	if fake != nil {
		assert.Zero(t, fake.Stats().IPCMappings)
	}

	// The bound on unused mappings.
	for i := range cuda.KeepUnused + 2 {
		s := e.share(t, 4096, 0, 0, 4096, i)
		blk, done, err := g.dev.Import(s)
		require.NoError(t, err)
		assert.True(t, equalValues(t, pattern(4096, i), read(t, blk), "allocation "+strconv.Itoa(i)))
		done()
	}
	assert.Equal(t, cuda.KeepUnused, g.dev.ImportStats().Mapped)
	if fake != nil {
		assert.Equal(t, int64(cuda.KeepUnused), fake.Stats().IPCMappings)
	}
	// The backend's Close unmaps the rest (ipcLedger checks).
}

// Handles this process cannot map fail with errors matching
// memspace.ErrNotShareable that give the driver's code: the fake's, as
// documented in package fakecuda. On a GPU the codes are the driver's and
// are logged; the cases whose outcome the driver leaves undefined (a
// freed allocation, an ended exporter) are only logged there.
func TestIPCImportErrors(t *testing.T) {
	ipcLedger(t)
	e := startExporter(t, "0")
	g := openGPU(t, "0")
	const size = 8192
	try := func(t *testing.T, sh memspace.Shared, code string) {
		t.Helper()
		_, done, err := g.dev.Import(sh)
		done()
		if fake == nil && (code == "CUDA_ERROR_INVALID_HANDLE" || code == "CUDA_ERROR_NOT_FOUND") {
			t.Logf("the driver's answer: %v", err)
			g.dev.Forget(sh.Handle)
			return
		}
		require.ErrorIs(t, err, memspace.ErrNotShareable)
		if fake != nil {
			assert.Contains(t, err.Error(), code)
		}
		assert.NotContains(t, err.Error(), "\n")
		t.Log(err)
	}
	t.Run("freed allocation", func(t *testing.T) {
		sh := e.share(t, size, 0, 0, size, 1)
		e.do(t, "free 0", "FREED")
		try(t, sh, "CUDA_ERROR_INVALID_HANDLE")
	})
	t.Run("random bytes", func(t *testing.T) {
		sh := e.share(t, size, 0, 0, size, 2)
		_, _ = rand.Read(sh.Handle)
		try(t, sh, "CUDA_ERROR_INVALID_VALUE")
	})
	t.Run("flipped byte", func(t *testing.T) {
		sh := e.share(t, size, 0, 0, size, 3)
		sh.Handle[42] ^= 0x10
		try(t, sh, "CUDA_ERROR_INVALID_VALUE")
	})
	t.Run("another machine", func(t *testing.T) {
		needFake(t) // the boot id's place is the fake's
		sh := e.share(t, size, 0, 0, size, 4)
		sh.Handle[fakecuda.IPCHandleBootID+3] ^= 0xff
		try(t, sh, "CUDA_ERROR_INVALID_DEVICE")
	})
	t.Run("own process", func(t *testing.T) {
		b, err := g.dev.Allocate(size, 0)
		require.NoError(t, err)
		defer func() { assert.NoError(t, g.dev.Free(b)) }()
		sh, err := g.dev.Share(b)
		require.NoError(t, err)
		try(t, sh, "CUDA_ERROR_INVALID_CONTEXT")
	})
	t.Run("exporter ended", func(t *testing.T) {
		dead := startExporter(t, "0")
		sh := dead.share(t, size, 0, 0, size, 5)
		dead.kill(t)
		try(t, sh, "CUDA_ERROR_NOT_FOUND")
	})
	t.Run("not a handle", func(t *testing.T) {
		_, done, err := g.dev.Import(memspace.Shared{Kind: "other", Handle: []byte{1}, Size: 1, Len: 1})
		done()
		assert.ErrorIs(t, err, xerr.ErrInvalidArgument)
		sh := e.share(t, size, 0, 0, size, 6)
		sh.Len = size + 1
		_, done, err = g.dev.Import(sh)
		done()
		assert.ErrorIs(t, err, xerr.ErrInvalidArgument)
	})
	assert.Equal(t, 0, g.dev.ImportStats().Mapped, "failed imports keep nothing")
}

// Memory of another device maps with peer access enabled on demand, and
// fails as unreachable where the devices have none.
func TestIPCImportOtherDevice(t *testing.T) {
	needFake(t)
	ipcLedger(t)
	e := startExporter(t, "1")
	const size = 8192
	sh := e.share(t, size, 0, 0, size, 7)

	g := openGPU(t, "0")
	blk, done, err := g.dev.Import(sh)
	require.NoError(t, err, "device 1's memory in device 0's context")
	assert.True(t, equalValues(t, pattern(size, 7), read(t, blk), "device 1's block read through device 0"))
	done()

	// A fake of its own, whose devices have no peer access.
	t.Setenv("FAKECUDA_NO_PEER", "1")
	lib, err := fakecuda.Copy(t.TempDir())
	require.NoError(t, err)
	b, err := xpu.Open(context.Background(), cuda.Name, xpu.Options{cuda.OptDevice: "0", cuda.OptLibrary: lib})
	require.NoError(t, err)
	defer func() { assert.NoError(t, b.Close()) }()
	_, done, err = b.Spaces[0].(*cuda.Space).Import(sh)
	done()
	require.ErrorIs(t, err, memspace.ErrNotShareable)
	assert.Contains(t, err.Error(), "CUDA_ERROR_PEER_ACCESS_UNSUPPORTED")
	t.Log(err)
}

// The exporter frees an allocation that is still mapped here: the next
// copy through the mapping faults (sticky, as the driver's faults are),
// and a reopened backend works.
func TestIPCExporterFreesWhileMapped(t *testing.T) {
	f := needFake(t)
	ipcLedger(t)
	defer f.Reset()
	e := startExporter(t, "0")
	const size = 8192
	sh := e.share(t, size, 0, 0, size, 8)
	b, err := xpu.Open(context.Background(), cuda.Name, xpu.Options{cuda.OptDevice: "0"})
	require.NoError(t, err)
	dev := b.Spaces[0].(*cuda.Space)
	blk, done, err := dev.Import(sh)
	require.NoError(t, err)
	assert.True(t, equalValues(t, pattern(size, 8), read(t, blk), "before the free"))
	e.do(t, "free 0", "FREED")
	out, err := memspace.FromSlice(make([]byte, size))
	require.NoError(t, err)
	err = transfer.CopyBlock(testwait.Ctx(t), out.Block(), blk)
	require.ErrorIs(t, err, xerr.ErrDeviceLost)
	assert.Contains(t, err.Error(), "CUDA_ERROR_ILLEGAL_ADDRESS")
	t.Log(err)
	done()
	require.NoError(t, b.Close(), "closing a backend whose device failed")
	assert.Zero(t, f.Stats().IPCMappings)

	g := openGPU(t, "0")
	sh = e.share(t, size, 0, 0, size, 9)
	blk, done, err = g.dev.Import(sh)
	require.NoError(t, err)
	defer done()
	assert.True(t, equalValues(t, pattern(size, 9), read(t, blk), "after reopening"))
}

// What does not share: pinned and managed memory, a block freed or of
// another space, a closed space.
func TestIPCShareErrors(t *testing.T) {
	noDriverLeaks(t)
	g := openGPU(t, "0")
	for _, sp := range g.b.Spaces[1:] {
		b, err := sp.Allocate(4096, 0)
		require.NoError(t, err)
		_, err = sp.(*cuda.Space).Share(b)
		assert.ErrorIs(t, err, memspace.ErrNotShareable, sp.Name())
		require.NoError(t, sp.Free(b))
	}
	b, err := g.dev.Allocate(4096, 0)
	require.NoError(t, err)
	require.NoError(t, g.dev.Free(b))
	_, err = g.dev.Share(b)
	assert.ErrorIs(t, err, xerr.ErrInvalidArgument, "a freed block")
	_, err = g.dev.Share(memspace.Block{})
	assert.ErrorIs(t, err, xerr.ErrInvalidArgument, "the zero block")
	host, err := memspace.FromSlice(make([]byte, 16))
	require.NoError(t, err)
	_, err = g.dev.Share(host.Block())
	assert.ErrorIs(t, err, memspace.ErrForeignBlock, "a host block")
}

// BenchmarkIPCCopy copies 64 MiB device to device from another process's
// allocation, imported, and between two allocations of this process, and
// reports the ratio of their times (ipc/local).
func BenchmarkIPCCopy(b *testing.B) {
	const size = 64 << 20
	sh := startExporter(b, "0").share(b, size, 0, 0, size, 1)
	bk, err := xpu.Open(context.Background(), cuda.Name, xpu.Options{cuda.OptDevice: "0"})
	require.NoError(b, err)
	defer func() { require.NoError(b, bk.Close()) }()
	dev := bk.Spaces[0].(*cuda.Space)
	imp, done, err := dev.Import(sh)
	require.NoError(b, err)
	defer done()
	src, err := dev.Allocate(size, 0)
	require.NoError(b, err)
	defer func() { require.NoError(b, dev.Free(src)) }()
	dst, err := dev.Allocate(size, 0)
	require.NoError(b, err)
	defer func() { require.NoError(b, dev.Free(dst)) }()
	ctx := context.Background()
	var tIPC, tLocal time.Duration
	b.SetBytes(2 * size)
	b.ResetTimer()
	for range b.N {
		t0 := time.Now()
		if err := transfer.CopyBlock(ctx, dst, imp); err != nil { // unbounded: a synchronous copy of the driver
			b.Fatal(err)
		}
		t1 := time.Now()
		if err := transfer.CopyBlock(ctx, dst, src); err != nil { // unbounded: a synchronous copy of the driver
			b.Fatal(err)
		}
		tIPC += t1.Sub(t0)
		tLocal += time.Since(t1)
	}
	b.ReportMetric(float64(tIPC)/float64(tLocal), "ipc/local")
	b.ReportMetric(float64(size)/tIPC.Seconds()*float64(b.N)/1e9, "ipc-GB/s")
	b.ReportMetric(float64(size)/tLocal.Seconds()*float64(b.N)/1e9, "local-GB/s")
}
