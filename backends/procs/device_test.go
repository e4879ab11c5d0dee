package procs_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/xpu-go/xpu/backends/procs"
	"github.com/xpu-go/xpu/comm"
	"github.com/xpu-go/xpu/internal/tooling/testwait"
	"github.com/xpu-go/xpu/memspace"
)

// Device blocks on procs links: the test double of a device space
// (devspace_test.go) between ranks of loopback groups, linked through
// shared memory (mapped: "ipc") or TCP (staged), and between rank
// processes (TestMultiProcessDevice).

// Sizes of device messages: one that goes eagerly when staged, and one
// that is announced, by address too (single copy) when staged over a
// shared-memory link.
const (
	devEager = 1000
	devLarge = 4<<20 + 3
)

func devPattern(seed int) func(i int) byte {
	return func(i int) byte { return byte(i*7 + seed*31 + i>>9) }
}

func devWant(n, seed int) []byte {
	p := make([]byte, n)
	f := devPattern(seed)
	for i := range p {
		p[i] = f(i)
	}
	return p
}

// hostBuf returns n host bytes as a block.
func hostBuf(t testing.TB, n int) ([]byte, memspace.Block) {
	t.Helper()
	p := make([]byte, n)
	b, err := memspace.FromSlice(p)
	require.NoError(t, err)
	return p, b.Block()
}

// endpoint is a block of a test: in the device space or on the host.
type endpoint struct {
	dev bool
	n   int
}

func (e endpoint) String() string {
	if e.dev {
		return fmt.Sprintf("device[%d]", e.n)
	}
	return fmt.Sprintf("host[%d]", e.n)
}

// make allocates the block, filled with devPattern(seed), and returns a
// function reading its bytes.
func (e endpoint) make(t testing.TB, sp *devSpace, seed int) (memspace.Block, func() []byte) {
	t.Helper()
	if e.dev {
		b := sp.alloc(t, e.n, devPattern(seed))
		return b, func() []byte { return sp.read(t, b) }
	}
	p, b := hostBuf(t, e.n)
	copy(p, devWant(e.n, seed))
	return b, func() []byte { return append([]byte(nil), p...) }
}

// transferOne sends src from rank from to dst on rank to with tag, the
// receive posted first or, with late, once the announcement has surely
// arrived (a marker sent after it has been received), and returns the
// receive's status and error; the send must succeed.
func transferOne(t *testing.T, cs []*procs.Comm, from, to int, src, dst memspace.Block, tag int, late bool) (comm.Status, error) {
	t.Helper()
	ctx := testwait.Ctx(t)
	var rr comm.Request
	var err error
	if !late {
		rr, err = cs[to].Irecv(dst, from, tag)
		require.NoError(t, err)
	}
	sr, err := cs[from].Isend(src, to, tag)
	require.NoError(t, err)
	if late {
		if from != to {
			_, mb := hostBuf(t, 1)
			require.NoError(t, comm.Send(ctx, cs[from], mb, to, tag+1))
			_, err := comm.Recv(ctx, cs[to], mb, from, tag+1)
			require.NoError(t, err)
		}
		rr, err = cs[to].Irecv(dst, from, tag)
		require.NoError(t, err)
	}
	st, rerr := rr.Wait(ctx)
	_, serr := sr.Wait(ctx)
	require.NoError(t, serr, "send")
	return st, rerr
}

// TestDeviceMessages moves blocks of the test device space between two
// ranks and to a rank itself: device to device, device to host and host
// to device, eager-sized and large, the receive posted before and after
// the message came, over shared memory (mapped where the sender's block
// is on the device) and TCP (staged), and checks the bytes, the status
// and the path each rank reports.
func TestDeviceMessages(t *testing.T) {
	sp := newDevSpace(t)
	for _, links := range []procs.LinkMode{procs.LinkAuto, procs.LinkTCP} {
		cs := group(t, 2, procs.Config{Links: links})
		for _, n := range []int{devEager, devLarge} {
			for _, ends := range [][2]bool{{true, true}, {true, false}, {false, true}} {
				for _, late := range []bool{false, true} {
					for _, to := range []int{1, 0} {
						src, dst := endpoint{ends[0], n}, endpoint{ends[1], n}
						name := fmt.Sprintf("%v/%v-%v/late=%v/to=%d", links, src, dst, late, to)
						t.Run(name, func(t *testing.T) {
							sb, _ := src.make(t, sp, n)
							db, got := dst.make(t, sp, 0)
							st, err := transferOne(t, cs, 0, to, sb, db, 5, late)
							require.NoError(t, err)
							require.Equal(t, comm.Status{Source: 0, Tag: 5, Count: n}, st)
							require.True(t, bytes.Equal(devWant(n, n), got()), "the bytes received")
							if !src.dev {
								return
							}
							path := procs.DevicePathStaged
							if links == procs.LinkAuto && to != 0 {
								path = procs.DevicePathIPC
							}
							require.Equal(t, path, cs[0].DevicePath(to), "the path rank 0 reports")
							if to != 0 {
								// A receiver notes the messages it mapped;
								// a staged one is an ordinary message to it.
								recvPath := ""
								if path == procs.DevicePathIPC {
									recvPath = path
								}
								require.Equal(t, recvPath, cs[1].DevicePath(0), "the path rank 1 reports")
							}
						})
					}
				}
			}
		}
	}
	cs := group(t, 1, procs.Config{})
	require.Empty(t, cs[0].DevicePath(0)+cs[0].DevicePath(1)+cs[0].DevicePath(-1), "paths before any message, and out of range")
}

// TestDeviceRefused: a receiver whose importer refuses (ErrNotShareable)
// answers with a clear-to-send; the sender stages its block, the message
// arrives whole, and both ranks report the path as staged.
func TestDeviceRefused(t *testing.T) {
	sp := newDevSpace(t)
	cs := group(t, 2, procs.Config{})
	sp.refuse.Store(true)
	for _, n := range []int{devEager, devLarge} {
		for _, dstDev := range []bool{true, false} {
			sb, _ := endpoint{true, n}.make(t, sp, 3)
			db, got := endpoint{dstDev, n}.make(t, sp, 0)
			st, err := transferOne(t, cs, 0, 1, sb, db, 9, false)
			require.NoError(t, err)
			require.Equal(t, n, st.Count)
			require.True(t, bytes.Equal(devWant(n, 3), got()), "the bytes received (%d, device %v)", n, dstDev)
			require.Equal(t, procs.DevicePathStaged, cs[0].DevicePath(1))
			require.Equal(t, procs.DevicePathStaged, cs[1].DevicePath(0))
		}
	}
	require.Zero(t, sp.imports.Load(), "imports made by a refusing importer")
	require.Zero(t, procs.IPCAnswered(cs[1], 0))
	// Refusing no more, the next message is mapped.
	sp.refuse.Store(false)
	sb, _ := endpoint{true, devEager}.make(t, sp, 4)
	db, got := endpoint{true, devEager}.make(t, sp, 0)
	_, err := transferOne(t, cs, 0, 1, sb, db, 9, false)
	require.NoError(t, err)
	require.True(t, bytes.Equal(devWant(devEager, 4), got()))
	require.Equal(t, procs.DevicePathIPC, cs[0].DevicePath(1))
}

// TestDeviceNotShared: a block its space will not share goes staged over
// a shared-memory link too — eagerly, or announced with the address of
// its stand-in and copied by the receiver (single copy) — and arrives.
func TestDeviceNotShared(t *testing.T) {
	sp := newDevSpace(t)
	cs := group(t, 2, procs.Config{})
	sp.noShare.Store(true)
	defer sp.noShare.Store(false)
	for _, n := range []int{devEager, devLarge} {
		for _, dstDev := range []bool{true, false} {
			sb, _ := endpoint{true, n}.make(t, sp, 7)
			db, got := endpoint{dstDev, n}.make(t, sp, 0)
			st, err := transferOne(t, cs, 0, 1, sb, db, 9, false)
			require.NoError(t, err)
			require.Equal(t, n, st.Count)
			require.True(t, bytes.Equal(devWant(n, 7), got()), "the bytes received (%d, device %v)", n, dstDev)
			require.Equal(t, procs.DevicePathStaged, cs[0].DevicePath(1))
			require.Empty(t, cs[1].DevicePath(0))
		}
	}
	require.Zero(t, sp.imports.Load())
}

// TestDeviceAnySource: device receives from any source take a mapped
// device message and a host one, each whole.
func TestDeviceAnySource(t *testing.T) {
	sp := newDevSpace(t)
	cs := group(t, 3, procs.Config{})
	ctx := testwait.Ctx(t)
	sb, _ := endpoint{true, devLarge}.make(t, sp, 1)
	hb, _ := endpoint{false, devLarge}.make(t, sp, 2)
	var reqs []comm.Request
	var gets []func() []byte
	for range 2 {
		db, got := endpoint{true, devLarge}.make(t, sp, 0)
		r, err := cs[0].Irecv(db, comm.AnySource, 3)
		require.NoError(t, err)
		reqs, gets = append(reqs, r), append(gets, got)
	}
	s1, err := cs[1].Isend(sb, 0, 3)
	require.NoError(t, err)
	s2, err := cs[2].Isend(hb, 0, 3)
	require.NoError(t, err)
	from := map[int]bool{}
	for i, r := range reqs {
		st, err := r.Wait(ctx)
		require.NoError(t, err)
		require.Equal(t, devLarge, st.Count)
		require.True(t, bytes.Equal(devWant(devLarge, st.Source), gets[i]()), "from rank %d", st.Source)
		from[st.Source] = true
	}
	require.Equal(t, map[int]bool{1: true, 2: true}, from)
	for _, s := range []comm.Request{s1, s2} {
		_, err := s.Wait(ctx)
		require.NoError(t, err)
	}
	require.Equal(t, procs.DevicePathIPC, cs[0].DevicePath(1))
}

// TestDeviceTruncated: a message longer than its device (or host)
// receive fails it with ErrTruncated after delivering what fits, by
// every path; the bytes past it are untouched.
func TestDeviceTruncated(t *testing.T) {
	sp := newDevSpace(t)
	for _, links := range []procs.LinkMode{procs.LinkAuto, procs.LinkTCP} {
		cs := group(t, 2, procs.Config{Links: links})
		for _, n := range []int{devEager, devLarge} {
			for _, ends := range [][2]bool{{true, true}, {true, false}, {false, true}} {
				t.Run(fmt.Sprintf("%v/%d/%v", links, n, ends), func(t *testing.T) {
					k := n / 3
					sb, _ := endpoint{ends[0], n}.make(t, sp, 5)
					whole, got := endpoint{ends[1], k + 10}.make(t, sp, 6)
					db, err := whole.Slice(0, k)
					require.NoError(t, err)
					st, err := transferOne(t, cs, 0, 1, sb, db, 4, false)
					require.ErrorIs(t, err, comm.ErrTruncated)
					require.Equal(t, k, st.Count)
					b := got()
					require.True(t, bytes.Equal(devWant(n, 5)[:k], b[:k]), "the prefix delivered")
					require.True(t, bytes.Equal(devWant(k+10, 6)[k:], b[k:]), "the bytes past the receive")
				})
			}
		}
	}
}

// TestDeviceCancel: a posted device receive canceled fails with
// ErrCanceled and takes no message; the next receive takes it.
func TestDeviceCancel(t *testing.T) {
	sp := newDevSpace(t)
	cs := group(t, 2, procs.Config{})
	ctx := testwait.Ctx(t)
	db, got := endpoint{true, devLarge}.make(t, sp, 0)
	rr, err := cs[1].Irecv(db, 0, 3)
	require.NoError(t, err)
	require.NoError(t, rr.Cancel())
	_, err = rr.Wait(ctx)
	require.ErrorIs(t, err, comm.ErrCanceled)
	sb, _ := endpoint{true, devLarge}.make(t, sp, 8)
	st, err := transferOne(t, cs, 0, 1, sb, db, 3, false)
	require.NoError(t, err)
	require.Equal(t, devLarge, st.Count)
	require.True(t, bytes.Equal(devWant(devLarge, 8), got()))
}

// TestDeviceForgetOnFree: the receiver keeps the mapping of an
// allocation after the copy, and drops it when the sender frees the
// allocation (its space tells, the sender says so); a link that closes
// drops the rest.
func TestDeviceForgetOnFree(t *testing.T) {
	sp := newDevSpace(t)
	cs := group(t, 2, procs.Config{})
	ctx := testwait.Ctx(t)
	blocks := make([]memspace.Block, 2)
	for i := range blocks {
		b, err := sp.Allocate(devLarge, 0)
		require.NoError(t, err)
		blocks[i] = b
		sp.fill(t, b, devPattern(i))
		db, got := endpoint{true, devLarge}.make(t, sp, 0)
		_, err = transferOne(t, cs, 0, 1, b, db, 2, false)
		require.NoError(t, err)
		require.True(t, bytes.Equal(devWant(devLarge, i), got()))
	}
	// Again from the first: mapped once.
	db, _ := endpoint{true, devLarge}.make(t, sp, 0)
	_, err := transferOne(t, cs, 0, 1, blocks[0], db, 2, false)
	require.NoError(t, err)
	require.EqualValues(t, 2, sp.mapped.Load(), "allocations mapped")
	require.EqualValues(t, 3, sp.imports.Load(), "imports")
	require.NoError(t, sp.Free(blocks[0]))
	// The forget goes before the marker on the link.
	_, mb := hostBuf(t, 1)
	require.NoError(t, comm.Send(ctx, cs[0], mb, 1, 1))
	_, err = comm.Recv(ctx, cs[1], mb, 0, 1)
	require.NoError(t, err)
	require.EqualValues(t, 1, sp.mapped.Load(), "allocations mapped after the first is freed")
	// The peer goes; the receiver forgets what it mapped of it.
	require.NoError(t, cs[0].Close())
	_, err = comm.Recv(ctx, cs[1], mb, 0, 1)
	require.ErrorIs(t, err, comm.ErrPeerLost)
	require.Zero(t, sp.mapped.Load(), "allocations mapped once the peer is gone")
	require.NoError(t, sp.Free(blocks[1]))
}

// TestDeviceCompletesAfterCopy: a mapped send completes only once the
// receiver has copied from its block: no answer has gone when the copy
// runs, and the sender may overwrite its block the moment Wait returns.
func TestDeviceCompletesAfterCopy(t *testing.T) {
	sp := newDevSpace(t)
	cs := group(t, 2, procs.Config{})
	var mu sync.Mutex
	var seen []uint64
	hook := func(dst, src memspace.Block) error {
		if dst.Space() == memspace.Space(sp) && src.Space() == memspace.Space(sp) {
			mu.Lock()
			seen = append(seen, procs.IPCAnswered(cs[1], 0))
			mu.Unlock()
		}
		return nil
	}
	sp.beforeCopy.Store(&hook)
	defer sp.beforeCopy.Store(nil)
	for i, n := range []int{devEager, devLarge} {
		sb, _ := endpoint{true, n}.make(t, sp, 11)
		db, got := endpoint{true, n}.make(t, sp, 0)
		_, err := transferOne(t, cs, 0, 1, sb, db, 6, false)
		require.NoError(t, err)
		sp.fill(t, sb, devPattern(12)) // reused at once
		require.True(t, bytes.Equal(devWant(n, 11), got()))
		require.Equal(t, uint64(i+1), procs.IPCAnswered(cs[1], 0))
	}
	mu.Lock()
	defer mu.Unlock()
	require.Equal(t, []uint64{0, 1}, seen, "messages answered when each copy began")
}

// errInjected is the error of a device copy a test fails.
var errInjected = fmt.Errorf("injected copy fault: %w", memspace.ErrDeviceLost)

// failCopies makes the copies of sp from device memory into device
// memory (into) or host memory (!into) fail until the test ends.
func failCopies(t *testing.T, sp *devSpace, into bool) {
	hook := func(dst, src memspace.Block) error {
		if !src.HostAccessible() && dst.HostAccessible() != into {
			return errInjected
		}
		return nil
	}
	sp.beforeCopy.Store(&hook)
	t.Cleanup(func() { sp.beforeCopy.Store(nil) })
}

// TestDeviceCopyFails: a device copy that fails fails the operations it
// serves, and nothing hangs: the receiver's copy from its mapping (both
// ends fail, the link goes on), the sender's copy into its stand-in at
// Isend (Isend fails, nothing is sent), and the sender's copy after the
// receiver refused to map (the link is cut: the receiver waits for bytes
// no frame can take back).
func TestDeviceCopyFails(t *testing.T) {
	sp := newDevSpace(t)
	t.Run("mapped", func(t *testing.T) {
		cs := group(t, 2, procs.Config{})
		sb, _ := endpoint{true, devLarge}.make(t, sp, 1)
		db, got := endpoint{true, devLarge}.make(t, sp, 0)
		failCopies(t, sp, true)
		ctx := testwait.Ctx(t)
		rr, err := cs[1].Irecv(db, 0, 1)
		require.NoError(t, err)
		sr, err := cs[0].Isend(sb, 1, 1)
		require.NoError(t, err)
		_, err = rr.Wait(ctx)
		require.ErrorIs(t, err, errInjected)
		_, err = sr.Wait(ctx)
		require.ErrorIs(t, err, memspace.ErrDeviceLost)
		sp.beforeCopy.Store(nil)
		_, err = transferOne(t, cs, 0, 1, sb, db, 2, false)
		require.NoError(t, err, "the next message")
		require.True(t, bytes.Equal(devWant(devLarge, 1), got()))
	})
	t.Run("staged", func(t *testing.T) {
		cs := group(t, 2, procs.Config{Links: procs.LinkTCP})
		sb, _ := endpoint{true, devEager}.make(t, sp, 1)
		failCopies(t, sp, false)
		_, err := cs[0].Isend(sb, 1, 1)
		require.ErrorIs(t, err, errInjected)
		sp.beforeCopy.Store(nil)
		db, got := endpoint{true, devEager}.make(t, sp, 0)
		_, err = transferOne(t, cs, 0, 1, sb, db, 1, false)
		require.NoError(t, err, "the next message")
		require.True(t, bytes.Equal(devWant(devEager, 1), got()))
	})
	t.Run("refused", func(t *testing.T) {
		cs := group(t, 2, procs.Config{})
		sp.refuse.Store(true)
		t.Cleanup(func() { sp.refuse.Store(false) })
		sb, _ := endpoint{true, devEager}.make(t, sp, 1)
		db, _ := endpoint{true, devEager}.make(t, sp, 0)
		failCopies(t, sp, false)
		ctx := testwait.Ctx(t)
		rr, err := cs[1].Irecv(db, 0, 1)
		require.NoError(t, err)
		sr, err := cs[0].Isend(sb, 1, 1)
		require.NoError(t, err)
		_, err = sr.Wait(ctx)
		require.ErrorIs(t, err, errInjected)
		_, err = rr.Wait(ctx)
		require.ErrorIs(t, err, comm.ErrPeerLost)
	})
}

// TestDeviceCommNative: comm.Send, comm.Recv and comm.Sendrecv hand
// device blocks to procs as they are (comm.DeviceNative), which maps
// them: had comm staged them, procs would have seen host blocks and
// reported no device path.
func TestDeviceCommNative(t *testing.T) {
	sp := newDevSpace(t)
	cs := group(t, 2, procs.Config{})
	ctx := testwait.Ctx(t)
	for _, c := range cs {
		d, ok := comm.As[comm.DeviceNative](c)
		require.True(t, ok)
		b := sp.alloc(t, 8, devPattern(0))
		require.True(t, d.TakesDevice(b))
	}
	sb, _ := endpoint{true, devLarge}.make(t, sp, 21)
	db, got := endpoint{true, devLarge}.make(t, sp, 0)
	var wg sync.WaitGroup
	var serr error
	wg.Go(func() { serr = comm.Send(ctx, cs[0], sb, 1, 7) })
	st, err := comm.Recv(ctx, cs[1], db, 0, 7)
	testwait.Group(t, &wg, "comm.Send")
	require.NoError(t, serr)
	require.NoError(t, err)
	require.Equal(t, devLarge, st.Count)
	require.True(t, bytes.Equal(devWant(devLarge, 21), got()))
	require.Equal(t, procs.DevicePathIPC, cs[0].DevicePath(1))
	require.Equal(t, procs.DevicePathIPC, cs[1].DevicePath(0))
	// Sendrecv of device blocks both ways.
	out := [2]memspace.Block{}
	in := [2]func() []byte{}
	ins := [2]memspace.Block{}
	for r := range 2 {
		out[r], _ = endpoint{true, devEager}.make(t, sp, 30+r)
		ins[r], in[r] = endpoint{true, devEager}.make(t, sp, 0)
	}
	errs := onEach(t, cs, func(c *procs.Comm) error {
		r := c.Rank()
		_, err := comm.Sendrecv(ctx, c, out[r], 1-r, 8, ins[r], 1-r, 8)
		return err
	})
	require.NoError(t, errors.Join(errs...))
	for r := range 2 {
		require.True(t, bytes.Equal(devWant(devEager, 30+1-r), in[r]()), "rank %d", r)
	}
}

// TestTakesDevice: a block of a space with no transfer path to the host
// is not taken; Isend and Irecv fail on it as before, with
// ErrNotHostAccessible, and send nothing.
func TestTakesDevice(t *testing.T) {
	cs := group(t, 2, procs.Config{})
	lost := memspace.NewBlock(pathless{}, 4096, 64, nil)
	require.False(t, cs[0].TakesDevice(lost))
	_, hb := hostBuf(t, 8)
	require.True(t, cs[0].TakesDevice(hb))
	require.True(t, cs[0].TakesDevice(memspace.Block{}))
	_, err := cs[0].Isend(lost, 1, 1)
	require.ErrorIs(t, err, memspace.ErrNotHostAccessible)
	_, err = cs[1].Irecv(lost, 0, 1)
	require.ErrorIs(t, err, memspace.ErrNotHostAccessible)
	require.ErrorIs(t, cs[0].Send(testwait.Ctx(t), lost, 1, 1), memspace.ErrNotHostAccessible)
}

// pathless is a space of device memory with no transfer path.
type pathless struct{}

func (pathless) Name() string { return "pathless" }
func (pathless) Properties() memspace.Properties {
	return memspace.Properties{Kind: "procs-test-pathless", Device: 0}
}
func (pathless) Allocate(int, int) (memspace.Block, error) {
	return memspace.Block{}, memspace.ErrNotSupported
}
func (pathless) Free(memspace.Block) error { return memspace.ErrForeignBlock }

// TestMultiProcessDevice runs roleDevice in a job of 2 rank processes
// linked through shared memory (mapped) and through TCP (staged): rank 1
// sends device blocks to rank 0, frees one, and exits while rank 0 has
// another mapped; rank 0 checks the bytes, the paths and its mappings.
// Nothing is left in /dev/shm.
func TestMultiProcessDevice(t *testing.T) {
	if testing.Short() {
		t.Skip("starts 2 processes; skipped in -short mode")
	}
	for _, links := range []string{"shm", "tcp"} {
		t.Run(links, func(t *testing.T) {
			shmBefore := devShm(t)
			j := job{size: 2, master: "127.0.0.1", port: freePort(t), secret: newSecret(t),
				env: []string{"XPU_TCP_TIMEOUT=" + detectTimeout.String(), procs.EnvLinks + "=" + links}}
			ps := j.start(t, roleDevice)
			for _, p := range ps {
				p.expect(t, "OK", time.Minute)
				require.NoError(t, p.wait(), "rank %d exit", p.rank)
			}
			require.Equal(t, shmBefore, devShm(t), "entries in /dev/shm")
		})
	}
}

// runDevice is roleDevice (see TestMultiProcessDevice).
func runDevice(ctx context.Context, c *procs.Comm) int {
	sp, unregister := openDevSpace()
	defer unregister()
	t := &roleT{}
	if err := deviceRole(ctx, c, sp, t); err != nil {
		fmt.Println("FAIL", err)
		return 1
	}
	if c.Rank() == 1 {
		// Gone at once, without a goodbye, its allocation still mapped
		// by rank 0.
		fmt.Println("OK")
		os.Exit(0)
	}
	fmt.Println("OK")
	return 0
}

// roleT is the testing.TB of a rank process's helpers: a failure panics
// with its message, which deviceRole turns into its error.
type roleT struct{ testing.TB }

func (roleT) Helper()                           {}
func (roleT) FailNow()                          { panic("failed") }
func (roleT) Errorf(format string, args ...any) { panic(fmt.Sprintf(format, args...)) }
func (roleT) Cleanup(func())                    {}
func (roleT) Fatal(args ...any)                 { panic(fmt.Sprint(args...)) }
func (roleT) Fatalf(format string, args ...any) { panic(fmt.Sprintf(format, args...)) }

func deviceRole(ctx context.Context, c *procs.Comm, sp *devSpace, t *roleT) (err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("%v", p)
		}
	}()
	mapped := c.Transport(1-c.Rank()) == procs.TransportShm
	wantPath := procs.DevicePathStaged
	if mapped {
		wantPath = procs.DevicePathIPC
	}
	check := func(cond bool, format string, args ...any) {
		if !cond {
			panic(fmt.Sprintf(format, args...))
		}
	}
	_, mb := hostBuf(t, 1)
	if c.Rank() == 1 {
		big, err := sp.Allocate(devLarge, 0)
		check(err == nil, "allocate: %v", err)
		sp.fill(t, big, devPattern(1))
		small, err := sp.Allocate(devEager, 0)
		check(err == nil, "allocate: %v", err)
		sp.fill(t, small, devPattern(2))
		hb, hbb := hostBuf(t, 100000)
		copy(hb, devWant(100000, 3))
		for _, b := range []memspace.Block{big, small, hbb} {
			if err := comm.Send(ctx, c, b, 0, 1); err != nil {
				return err
			}
		}
		check(c.DevicePath(0) == wantPath, "path %q, want %q", c.DevicePath(0), wantPath)
		// Once rank 0 has counted its mappings.
		if _, err := comm.Recv(ctx, c, mb, 0, 4); err != nil {
			return err
		}
		// Freed: rank 0 unmaps it (the marker goes after the forget).
		if err := sp.Free(big); err != nil {
			return err
		}
		return comm.Send(ctx, c, mb, 0, 2)
	}
	big, getBig := endpoint{true, devLarge}.make(t, sp, 0)
	smallHost, getSmall := endpoint{false, devEager}.make(t, sp, 0)
	hostDev, getHostDev := endpoint{true, 100000}.make(t, sp, 0)
	for _, b := range []memspace.Block{big, smallHost, hostDev} {
		if _, err := comm.Recv(ctx, c, b, 1, 1); err != nil {
			return err
		}
	}
	check(bytes.Equal(getBig(), devWant(devLarge, 1)), "device to device: bytes differ")
	check(bytes.Equal(getSmall(), devWant(devEager, 2)), "device to host: bytes differ")
	check(bytes.Equal(getHostDev(), devWant(100000, 3)), "host to device: bytes differ")
	check(c.DevicePath(1) == map[bool]string{true: procs.DevicePathIPC, false: ""}[mapped], "path %q", c.DevicePath(1))
	maps := sp.mapped.Load()
	check(maps == map[bool]int64{true: 2, false: 0}[mapped], "%d allocations mapped", maps)
	if err := comm.Send(ctx, c, mb, 1, 4); err != nil {
		return err
	}
	if _, err := comm.Recv(ctx, c, mb, 1, 2); err != nil {
		return err
	}
	maps = sp.mapped.Load()
	check(maps == map[bool]int64{true: 1, false: 0}[mapped], "%d allocations mapped after the free", maps)
	_, err = comm.Recv(ctx, c, mb, 1, 3)
	check(errors.Is(err, comm.ErrPeerLost), "receive from a rank gone: %v", err)
	check(sp.mapped.Load() == 0, "%d allocations mapped once the peer is gone", sp.mapped.Load())
	for _, b := range []memspace.Block{big, hostDev} {
		if err := sp.Free(b); err != nil {
			return err
		}
	}
	st := sp.Stats()
	check(st.Live == 0, "%d allocations left", st.Live)
	return nil
}
