package procs_test

import (
	"bytes"
	"fmt"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/xpu-go/xpu/backends/procs"
	"github.com/xpu-go/xpu/comm"
	"github.com/xpu-go/xpu/internal/tooling/testwait"
	"github.com/xpu-go/xpu/memspace"
)

// One-sided Put and Get whose origin block is one of the test device
// space (devspace_test.go): copied by the target through its mapping of
// the block over shared memory, staged through host memory over TCP, to
// the rank itself, and when the target cannot map it.

// Sizes of one-sided device transfers: within one chunk of the links,
// and over several.
const (
	osDevSmall = 1000
	osDevLarge = 300<<10 + 7
)

// exposeEnd exposes a block of e on c, filled with devPattern(seed), and
// returns the region and a function reading its bytes; the region is
// closed at the test's end, before its block is freed.
func exposeEnd(t *testing.T, c *procs.Comm, sp *devSpace, e endpoint, seed int) (comm.Region, func() []byte) {
	t.Helper()
	b, read := e.make(t, sp, seed)
	reg, err := c.Expose(b)
	require.NoError(t, err)
	t.Cleanup(func() { _ = reg.Close() })
	return reg, read
}

// spliced returns base with part written at off.
func spliced(base, part []byte, off int) []byte {
	out := append([]byte(nil), base...)
	copy(out[off:], part)
	return out
}

// TestOneSidedDevice: Put and Get of device origin blocks into and out
// of host and device regions, at offsets, within a chunk and over
// several, over shared memory (mapped: path "ipc" on both ranks) and TCP
// (staged), and to a rank's own region (staged); the bytes, the status
// and the paths.
func TestOneSidedDevice(t *testing.T) {
	sp := newDevSpace(t)
	for _, links := range []procs.LinkMode{procs.LinkAuto, procs.LinkTCP} {
		cs := group(t, 2, procs.Config{Links: links})
		for _, n := range []int{osDevSmall, osDevLarge} {
			for _, regDev := range []bool{false, true} {
				for _, to := range []int{1, 0} {
					span := n + 100
					name := fmt.Sprintf("%v/%v/to=%d/%d", links, endpoint{regDev, span}, to, n)
					t.Run(name, func(t *testing.T) {
						ctx := testwait.Ctx(t)
						reg, read := exposeEnd(t, cs[to], sp, endpoint{regDev, span}, 1)
						src, _ := endpoint{true, n}.make(t, sp, 2)
						off := 37
						r, err := cs[0].Put(src, reg.Key(), off)
						require.NoError(t, err)
						st, err := r.Wait(ctx)
						require.NoError(t, err)
						require.Equal(t, n, st.Count)
						require.Equal(t, to, st.Source)
						want := spliced(devWant(span, 1), devWant(n, 2), off)
						require.True(t, bytes.Equal(want, read()), "the region after the Put")

						dst, got := endpoint{true, n}.make(t, sp, 3)
						r, err = cs[0].Get(dst, reg.Key(), off+50)
						require.NoError(t, err)
						st, err = r.Wait(ctx)
						require.NoError(t, err)
						require.Equal(t, n, st.Count)
						require.True(t, bytes.Equal(want[off+50:off+50+n], got()), "the bytes of the Get")
						require.NoError(t, cs[0].Flush(ctx, comm.AnySource))
						if to == 0 {
							return
						}
						path := procs.DevicePathStaged
						if links == procs.LinkAuto {
							path = procs.DevicePathIPC
							require.Equal(t, path, cs[1].DevicePath(0), "the path the target reports")
						}
						require.Equal(t, path, cs[0].DevicePath(1), "the path the origin reports")
					})
				}
			}
		}
	}
}

// TestOneSidedDeviceAnswersAfterCopy: a mapped Put or Get completes only
// once the target has copied: no answer has gone when each copy begins.
func TestOneSidedDeviceAnswersAfterCopy(t *testing.T) {
	sp := newDevSpace(t)
	cs := group(t, 2, procs.Config{})
	var mu sync.Mutex
	var seen []uint64
	hook := func(dst, src memspace.Block) error {
		mu.Lock()
		seen = append(seen, procs.IPCAnswered(cs[1], 0))
		mu.Unlock()
		return nil
	}
	reg, read := exposeEnd(t, cs[1], sp, endpoint{true, osDevLarge}, 1)
	src, _ := endpoint{true, osDevLarge}.make(t, sp, 4)
	dst, got := endpoint{true, osDevLarge}.make(t, sp, 0)
	sp.beforeCopy.Store(&hook)
	defer sp.beforeCopy.Store(nil)
	ctx := testwait.Ctx(t)
	r, err := cs[0].Put(src, reg.Key(), 0)
	require.NoError(t, err)
	_, err = r.Wait(ctx)
	require.NoError(t, err)
	r, err = cs[0].Get(dst, reg.Key(), 0)
	require.NoError(t, err)
	_, err = r.Wait(ctx)
	require.NoError(t, err)
	sp.beforeCopy.Store(nil)
	require.True(t, bytes.Equal(devWant(osDevLarge, 4), read()))
	require.True(t, bytes.Equal(devWant(osDevLarge, 4), got()))
	mu.Lock()
	defer mu.Unlock()
	require.Equal(t, []uint64{0, 1}, seen, "transfers answered when each copy began")
}

// TestOneSidedDeviceRange: a range outside the region is refused by the
// origin; sent without the origin's check, the target refuses it
// (ErrInvalidArgument) and writes nothing, into its region or, for a
// Get, into the origin's block; the link goes on.
func TestOneSidedDeviceRange(t *testing.T) {
	sp := newDevSpace(t)
	cs := group(t, 2, procs.Config{})
	for _, regDev := range []bool{false, true} {
		t.Run(endpoint{regDev, osDevSmall}.String(), func(t *testing.T) {
			ctx := testwait.Ctx(t)
			reg, read := exposeEnd(t, cs[1], sp, endpoint{regDev, osDevSmall}, 1)
			blk, got := endpoint{true, 100}.make(t, sp, 2)
			_, err := cs[0].Put(blk, reg.Key(), osDevSmall-50)
			require.ErrorIs(t, err, comm.ErrInvalidArgument)
			for _, put := range []bool{true, false} {
				for _, off := range []int{osDevSmall - 50, osDevSmall + 1} {
					r, err := procs.PutMappedUnchecked(cs[0], put, blk, reg.Key(), off)
					require.NoError(t, err)
					_, err = r.Wait(ctx)
					require.ErrorIs(t, err, comm.ErrInvalidArgument, "put %v at %d", put, off)
				}
			}
			require.True(t, bytes.Equal(devWant(osDevSmall, 1), read()), "the region")
			require.True(t, bytes.Equal(devWant(100, 2), got()), "the origin's block")
			// A key that does not match is refused too.
			bad := reg.Key()
			bad.Len++
			r, err := procs.PutMappedUnchecked(cs[0], true, blk, bad, 0)
			require.NoError(t, err)
			_, err = r.Wait(ctx)
			require.ErrorIs(t, err, comm.ErrInvalidArgument)
			r, err = cs[0].Put(blk, reg.Key(), 10)
			require.NoError(t, err)
			_, err = r.Wait(ctx)
			require.NoError(t, err, "the next Put")
			require.True(t, bytes.Equal(spliced(devWant(osDevSmall, 1), devWant(100, 2), 10), read()))
		})
	}
}

// TestOneSidedDeviceFallback: a target whose importer refuses
// (ErrNotShareable) answers that it cannot map the block; the origin
// stages it and the transfer arrives all the same, reported staged.
func TestOneSidedDeviceFallback(t *testing.T) {
	sp := newDevSpace(t)
	cs := group(t, 2, procs.Config{})
	sp.refuse.Store(true)
	defer sp.refuse.Store(false)
	for _, n := range []int{osDevSmall, osDevLarge} {
		for _, regDev := range []bool{false, true} {
			ctx := testwait.Ctx(t)
			reg, read := exposeEnd(t, cs[1], sp, endpoint{regDev, n}, 1)
			src, _ := endpoint{true, n}.make(t, sp, 5)
			r, err := cs[0].Put(src, reg.Key(), 0)
			require.NoError(t, err)
			st, err := r.Wait(ctx)
			require.NoError(t, err)
			require.Equal(t, n, st.Count)
			require.True(t, bytes.Equal(devWant(n, 5), read()), "the region (%d, device %v)", n, regDev)
			dst, got := endpoint{true, n}.make(t, sp, 0)
			sp.fill(t, src, devPattern(6))
			require.NoError(t, putWait(t, cs[0], src, reg.Key(), 0))
			r, err = cs[0].Get(dst, reg.Key(), 0)
			require.NoError(t, err)
			_, err = r.Wait(ctx)
			require.NoError(t, err)
			require.True(t, bytes.Equal(devWant(n, 6), got()), "the bytes of the Get")
			require.Equal(t, procs.DevicePathStaged, cs[0].DevicePath(1))
			require.Equal(t, procs.DevicePathStaged, cs[1].DevicePath(0))
		}
	}
	require.Zero(t, sp.imports.Load(), "imports made by a refusing importer")
	sp.refuse.Store(false)
	reg, read := exposeEnd(t, cs[1], sp, endpoint{false, osDevSmall}, 1)
	src, _ := endpoint{true, osDevSmall}.make(t, sp, 7)
	require.NoError(t, putWait(t, cs[0], src, reg.Key(), 0))
	require.True(t, bytes.Equal(devWant(osDevSmall, 7), read()))
	require.Equal(t, procs.DevicePathIPC, cs[0].DevicePath(1))
}

// putWait Puts src at off of the region key names and waits for it.
func putWait(t *testing.T, c *procs.Comm, src memspace.Block, key comm.RemoteKey, off int) error {
	t.Helper()
	r, err := c.Put(src, key, off)
	if err != nil {
		return err
	}
	_, err = r.Wait(testwait.Ctx(t))
	return err
}

// blockCopies makes the copies of sp between device blocks (the target's
// copy through its mapping into a device region) wait, once each has
// begun and said so on entered, until release is closed.
func blockCopies(t *testing.T, sp *devSpace) (entered <-chan struct{}, release func()) {
	in := make(chan struct{}, 16)
	out := make(chan struct{})
	hook := func(dst, src memspace.Block) error {
		if dst.HostAccessible() || src.HostAccessible() {
			return nil
		}
		in <- struct{}{}
		select {
		case <-out:
		case <-testwait.Ctx(t).Done():
		}
		return nil
	}
	sp.beforeCopy.Store(&hook)
	var once sync.Once
	release = func() { once.Do(func() { close(out) }) }
	t.Cleanup(func() {
		release()
		sp.beforeCopy.Store(nil)
	})
	return in, release
}

// TestOneSidedDeviceRegionClose: a region closed while a mapped Put into
// it runs waits for the copy: once Close returns, the bytes are there,
// and the Put completes.
func TestOneSidedDeviceRegionClose(t *testing.T) {
	sp := newDevSpace(t)
	cs := group(t, 2, procs.Config{})
	reg, read := exposeEnd(t, cs[1], sp, endpoint{true, osDevLarge}, 1)
	src, _ := endpoint{true, osDevLarge}.make(t, sp, 8)
	entered, release := blockCopies(t, sp)
	r, err := cs[0].Put(src, reg.Key(), 0)
	require.NoError(t, err)
	testwait.Recv(t, entered, "the mapped copy")
	closing := make(chan struct{})
	closed := make(chan []byte, 1)
	go func() {
		close(closing)
		_ = reg.Close()
		closed <- read()
	}()
	testwait.Closed(t, closing, "the region's Close")
	release()
	after := testwait.Recv(t, closed, "the region's Close")
	require.True(t, bytes.Equal(devWant(osDevLarge, 8), after), "the region when its Close returned")
	_, err = r.Wait(testwait.Ctx(t))
	require.NoError(t, err)
	// The region is gone: a Put into it is refused.
	require.ErrorIs(t, putWait(t, cs[0], src, reg.Key(), 0), comm.ErrInvalidArgument)
}

// TestOneSidedDevicePeerLost: the link cut while the target copies
// through its mapping fails the transfer with ErrPeerLost and nothing
// hangs; every mapping is released once the ranks close (the device
// space checks at the test's end).
func TestOneSidedDevicePeerLost(t *testing.T) {
	sp := newDevSpace(t)
	cs := group(t, 2, procs.Config{})
	reg, _ := exposeEnd(t, cs[1], sp, endpoint{true, osDevLarge}, 1)
	src, _ := endpoint{true, osDevLarge}.make(t, sp, 9)
	entered, release := blockCopies(t, sp)
	r, err := cs[0].Put(src, reg.Key(), 0)
	require.NoError(t, err)
	testwait.Recv(t, entered, "the mapped copy")
	require.True(t, procs.CorruptShm(cs[0], 1))
	_, err = r.Wait(testwait.Ctx(t))
	require.ErrorIs(t, err, comm.ErrPeerLost)
	release()
	require.ErrorIs(t, putWait(t, cs[0], src, reg.Key(), 0), comm.ErrPeerLost, "a Put after")
}

// TestOneSidedDeviceCopyFails: a copy through the mapping that fails
// fails the transfer with ErrDeviceLost, writes nothing, and the link
// goes on.
func TestOneSidedDeviceCopyFails(t *testing.T) {
	sp := newDevSpace(t)
	cs := group(t, 2, procs.Config{})
	reg, read := exposeEnd(t, cs[1], sp, endpoint{true, osDevSmall}, 1)
	src, _ := endpoint{true, osDevSmall}.make(t, sp, 10)
	failCopies(t, sp, true)
	require.ErrorIs(t, putWait(t, cs[0], src, reg.Key(), 0), memspace.ErrDeviceLost)
	require.True(t, bytes.Equal(devWant(osDevSmall, 1), read()))
	sp.beforeCopy.Store(nil)
	require.NoError(t, putWait(t, cs[0], src, reg.Key(), 0), "the next Put")
	require.True(t, bytes.Equal(devWant(osDevSmall, 10), read()))
}

// TestOneSidedDeviceStageFails: a staged Put whose copy into its host
// stand-in fails fails with the device's error and sends nothing: at
// once over TCP, and on its request after a target that cannot map the
// block answered so; the link goes on.
func TestOneSidedDeviceStageFails(t *testing.T) {
	sp := newDevSpace(t)
	for _, links := range []procs.LinkMode{procs.LinkAuto, procs.LinkTCP} {
		t.Run(fmt.Sprint(links), func(t *testing.T) {
			cs := group(t, 2, procs.Config{Links: links})
			sp.refuse.Store(true)
			t.Cleanup(func() { sp.refuse.Store(false) })
			reg, read := exposeEnd(t, cs[1], sp, endpoint{false, osDevSmall}, 1)
			src, _ := endpoint{true, osDevSmall}.make(t, sp, 11)
			failCopies(t, sp, false)
			require.ErrorIs(t, putWait(t, cs[0], src, reg.Key(), 0), errInjected)
			require.True(t, bytes.Equal(devWant(osDevSmall, 1), read()))
			sp.beforeCopy.Store(nil)
			require.NoError(t, putWait(t, cs[0], src, reg.Key(), 0), "the next Put")
			require.True(t, bytes.Equal(devWant(osDevSmall, 11), read()))
		})
	}
}

// TestOneSidedDeviceNotify: comm.PutNotify of a device block (which
// hands the block to Put as it is) notifies the target once the bytes
// are in its region: mapped, staged over TCP, and staged after the
// target could not map the block.
func TestOneSidedDeviceNotify(t *testing.T) {
	sp := newDevSpace(t)
	for _, c := range []struct {
		name   string
		links  procs.LinkMode
		refuse bool
	}{{"mapped", procs.LinkAuto, false}, {"tcp", procs.LinkTCP, false}, {"refused", procs.LinkAuto, true}} {
		t.Run(c.name, func(t *testing.T) {
			cs := group(t, 2, procs.Config{Links: c.links})
			sp.refuse.Store(c.refuse)
			t.Cleanup(func() { sp.refuse.Store(false) })
			ctx := testwait.Ctx(t)
			for i, n := range []int{osDevSmall, osDevLarge} {
				reg, read := exposeEnd(t, cs[1], sp, endpoint{i == 1, n}, 1)
				src, _ := endpoint{true, n}.make(t, sp, 12)
				r, err := comm.PutNotify(ctx, cs[0], src, reg.Key(), 0, []byte("done"))
				require.NoError(t, err)
				note, err := cs[1].WaitNotification(ctx)
				require.NoError(t, err)
				require.Equal(t, "done", string(note.Msg))
				require.True(t, bytes.Equal(devWant(n, 12), read()), "the region when the notification came (%d)", n)
				_, err = r.Wait(ctx)
				require.NoError(t, err)
			}
		})
	}
}

// comm.Put and comm.Get hand a device origin block to procs (DeviceNative)
// instead of staging it themselves: over shared memory the target maps
// it, and both ranks report the path "ipc".
func TestOneSidedDeviceThroughComm(t *testing.T) {
	sp := newDevSpace(t)
	cs := group(t, 2, procs.Config{})
	ctx := testwait.Ctx(t)
	reg, read := exposeEnd(t, cs[1], sp, endpoint{true, 2000}, 1)
	src, _ := endpoint{true, 1000}.make(t, sp, 2)
	require.NoError(t, comm.Put(ctx, cs[0], src, reg.Key(), 10))
	require.True(t, bytes.Equal(spliced(devWant(2000, 1), devWant(1000, 2), 10), read()), "the region after comm.Put")
	require.Equal(t, procs.DevicePathIPC, cs[0].DevicePath(1), "the origin's path")
	require.Equal(t, procs.DevicePathIPC, cs[1].DevicePath(0), "the target's path")

	dst, got := endpoint{true, 1000}.make(t, sp, 3)
	require.NoError(t, comm.Get(ctx, cs[0], dst, reg.Key(), 10))
	require.True(t, bytes.Equal(devWant(1000, 2), got()), "the block after comm.Get")
	require.Equal(t, procs.DevicePathIPC, cs[0].DevicePath(1))
}
