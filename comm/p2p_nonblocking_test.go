package comm_test

import (
	"context"
	"fmt"
	"reflect"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/xpu-go/xpu/backends/local"
	"github.com/xpu-go/xpu/comm"
	"github.com/xpu-go/xpu/internal/tooling/testwait"
	"github.com/xpu-go/xpu/memspace"
	"github.com/xpu-go/xpu/transfer"
)

// The tests of the package functions Isend and Irecv on buffers of
// stageDev, the fake device of the staging tests.

// readDev copies b, a device buffer, to the host.
func readDev(t testing.TB, b *memspace.Buffer[int32]) []int32 {
	t.Helper()
	out := make([]int32, b.Len())
	require.NoError(t, transfer.Copy(testwait.Ctx(t), buf(t, out), b))
	return out
}

// TestNonblockingDeviceTransfers sends between every pairing of device and
// host buffers with comm.Isend and comm.Irecv, waited for by Wait, by
// WaitAll and by Await, in both protocols of the local backend.
func TestNonblockingDeviceTransfers(t *testing.T) {
	registerStagePaths(t)
	waits := map[string]func(ctx context.Context, r, s comm.Request) (comm.Status, error){
		"wait": func(ctx context.Context, r, s comm.Request) (comm.Status, error) {
			st, err := r.Wait(ctx)
			if err != nil {
				return st, err
			}
			_, err = s.Wait(ctx)
			return st, err
		},
		"wait-all": func(ctx context.Context, r, s comm.Request) (comm.Status, error) {
			if err := comm.WaitAll(ctx, r, s); err != nil {
				return comm.Status{}, err
			}
			return r.Wait(ctx) // settled: the same status again
		},
		"await": func(ctx context.Context, r, s comm.Request) (comm.Status, error) {
			st, err := comm.Await(ctx, r)
			if err == nil {
				_, err = comm.Await(ctx, s)
			}
			return st, err
		},
	}
	for _, pr := range protocols {
		for wname, wait := range waits {
			for _, sdev := range []bool{true, false} {
				for _, rdev := range []bool{true, false} {
					for _, stager := range []bool{true, false} {
						name := fmt.Sprintf("%s/%s/send-dev=%v/recv-dev=%v/stager=%v", pr.name, wname, sdev, rdev, stager)
						t.Run(name, func(t *testing.T) {
							rs := newStageRanks(2, stager)
							cs := newGroup(t, 2, pr.opts)
							const n = 37
							want := vals(3, 0, n)
							var sb, rb *memspace.Buffer[int32]
							var sdone, rdone func() []int32
							if sdev {
								sb, sdone = devBuf(t, rs[0], want)
							} else {
								sb = buf(t, append([]int32(nil), want...))
							}
							got := make([]int32, n)
							if rdev {
								rb, rdone = devBuf(t, rs[1], got)
							} else {
								rb = buf(t, got)
							}
							r, err := comm.Irecv(cs[1], rb.Block(), 0, 4)
							require.NoError(t, err)
							s, err := comm.Isend(cs[0], sb.Block(), 1, 4)
							require.NoError(t, err)
							if sdone != nil {
								sdone() // the send's copy was made: its buffer may go
							}
							st, err := wait(testwait.Ctx(t), r, s)
							require.NoError(t, err)
							assert.Equal(t, comm.Status{Source: 0, Tag: 4, Count: 4 * n}, st)
							if rdev {
								got = rdone()
							}
							assert.Equal(t, want, got)
							checkLedgers(t, rs)
						})
					}
				}
			}
		}
	}
}

// TestIrecvDeviceTestPolling polls a staged receive with Test: the bytes
// are in the device buffer when Test first reports it done, before any
// Wait, and later Tests, Waits and WaitAll report the same without
// copying again.
func TestIrecvDeviceTestPolling(t *testing.T) {
	registerStagePaths(t)
	rs := newStageRanks(2, true)
	cs := newGroup(t, 2, local.Options{})
	const n = 19
	rb, rdone := devBuf(t, rs[1], make([]int32, n))
	r, err := comm.Irecv(cs[1], rb.Block(), comm.AnySource, comm.AnyTag)
	require.NoError(t, err)
	_, done, err := r.Test()
	require.NoError(t, err)
	require.False(t, done, "Test reports a receive done before anything was sent")
	want := vals(5, 0, n)
	s, err := comm.Isend(cs[0], buf(t, want).Block(), 1, 9)
	require.NoError(t, err)
	copies := rs[1].dev.copies.Load()
	var st comm.Status
	require.NoError(t, testwait.Call(t, "Test to report the receive done", func(ctx context.Context) error {
		for !done {
			if st, done, err = r.Test(); err != nil {
				return err
			}
			if ctx.Err() != nil {
				return ctx.Err()
			}
		}
		return nil
	}))
	assert.Equal(t, comm.Status{Source: 0, Tag: 9, Count: 4 * n}, st)
	assert.Equal(t, want, readDev(t, rb), "the device buffer when Test first reported the receive done")
	afterTest := rs[1].dev.copies.Load()
	assert.Equal(t, copies+2, afterTest, "copies to the device: one copy out, and readDev's")
	st2, done, err := r.Test()
	assert.True(t, done)
	require.NoError(t, err)
	assert.Equal(t, st, st2)
	require.NoError(t, comm.WaitAll(testwait.Ctx(t), r, s))
	st3, err := r.Wait(testwait.Ctx(t))
	require.NoError(t, err)
	assert.Equal(t, st, st3)
	assert.Equal(t, afterTest, rs[1].dev.copies.Load(), "the receive copied out again")
	assert.Zero(t, rs[1].pinned.Stats().Live, "the stand-in outlived the receive")
	rdone()
	checkLedgers(t, rs)
}

// TestIrecvDeviceCopiesOutOnce waits for one staged receive from many
// goroutines at once: the bytes are copied out once, and every waiter
// returns only after that copy.
func TestIrecvDeviceCopiesOutOnce(t *testing.T) {
	registerStagePaths(t)
	rs := newStageRanks(2, true)
	cs := newGroup(t, 2, local.Options{EagerLimit: -1})
	const n, waiters = 64, 8
	rb, rdone := devBuf(t, rs[1], make([]int32, n))
	r, err := comm.Irecv(cs[1], rb.Block(), 0, 1)
	require.NoError(t, err)
	var wg, ready sync.WaitGroup
	sts := make([]comm.Status, waiters)
	errs := make([]error, waiters)
	ready.Add(waiters)
	for i := range waiters {
		wg.Go(func() {
			ready.Done()
			if i%2 == 0 {
				sts[i], errs[i] = r.Wait(testwait.Ctx(t))
				return
			}
			errs[i] = testwait.Call(t, "Test", func(ctx context.Context) error {
				for ctx.Err() == nil {
					st, done, err := r.Test()
					if done {
						sts[i] = st
						return err
					}
				}
				return ctx.Err()
			})
		})
	}
	// The waiters are started, so most are waiting when the message
	// comes: the test checks what they see either way.
	testwait.Group(t, &ready, "the waiters to start")
	copies := rs[1].dev.copies.Load()
	want := vals(2, 0, n)
	require.NoError(t, comm.Send(testwait.Ctx(t), cs[0], buf(t, want).Block(), 1, 1))
	testwait.Group(t, &wg, "every waiter of the receive")
	for i := range waiters {
		require.NoError(t, errs[i], "waiter %d", i)
		assert.Equal(t, comm.Status{Source: 0, Tag: 1, Count: 4 * n}, sts[i], "waiter %d", i)
	}
	assert.Equal(t, copies+1, rs[1].dev.copies.Load(), "copies out of the receive")
	assert.Equal(t, want, rdone())
	checkLedgers(t, rs)
}

// TestIrecvDeviceTruncated receives a message longer than the device
// buffer: the request fails with ErrTruncated, and the prefix that
// arrived is in the buffer.
func TestIrecvDeviceTruncated(t *testing.T) {
	registerStagePaths(t)
	rs := newStageRanks(2, true)
	cs := newGroup(t, 2, local.Options{})
	const n = 10
	rb, rdone := devBuf(t, rs[1], make([]int32, n))
	r, err := comm.Irecv(cs[1], rb.Block(), 0, 2)
	require.NoError(t, err)
	long := vals(4, 0, 3*n)
	require.NoError(t, comm.Send(testwait.Ctx(t), cs[0], buf(t, long).Block(), 1, 2))
	st, err := r.Wait(testwait.Ctx(t))
	require.ErrorIs(t, err, comm.ErrTruncated)
	assert.Equal(t, 4*n, min(st.Count, 4*n))
	assert.Equal(t, long[:n], rdone())
	checkLedgers(t, rs)
}

// TestIrecvDeviceCancel cancels a staged receive nothing matched: Wait
// reports ErrCanceled, the stand-in is freed at Cancel, and the device
// buffer is untouched.
func TestIrecvDeviceCancel(t *testing.T) {
	registerStagePaths(t)
	rs := newStageRanks(2, true)
	cs := newGroup(t, 2, local.Options{})
	rb, rdone := devBuf(t, rs[1], vals(1, 1, 8))
	r, err := comm.Irecv(cs[1], rb.Block(), 0, 3)
	require.NoError(t, err)
	assert.Equal(t, int64(1), rs[1].pinned.Stats().Live)
	require.NoError(t, r.Cancel())
	assert.Zero(t, rs[1].pinned.Stats().Live, "Cancel left the stand-in allocated")
	_, err = r.Wait(testwait.Ctx(t))
	require.ErrorIs(t, err, comm.ErrCanceled)
	_, done, err := r.Test()
	assert.True(t, done)
	require.ErrorIs(t, err, comm.ErrCanceled)
	assert.Equal(t, vals(1, 1, 8), rdone())
	checkLedgers(t, rs)
}

// TestNonblockingDeviceFaults: a failed copy in fails Isend before
// anything is sent; a failed copy out fails the receive's request with the
// path's error, named, once the message has arrived.
func TestNonblockingDeviceFaults(t *testing.T) {
	registerStagePaths(t)
	rs := newStageRanks(2, true)
	cs := newGroup(t, 2, local.Options{})
	sb, sdone := devBuf(t, rs[0], vals(1, 0, 16))
	rb, rdone := devBuf(t, rs[1], make([]int32, 16))
	fault := func(up bool, off int) error { return errFakeFault }
	rs[0].dev.fault.Store(&fault)
	rs[1].dev.fault.Store(&fault)

	_, err := comm.Isend(cs[0], sb.Block(), 1, 0)
	require.ErrorIs(t, err, errFakeFault)
	assert.Contains(t, err.Error(), "comm isend: ")
	ok, err := probeNone(t, cs[1])
	require.NoError(t, err)
	assert.True(t, ok, "the failed Isend delivered a message")

	r, err := comm.Irecv(cs[1], rb.Block(), 0, 0)
	require.NoError(t, err)
	require.NoError(t, comm.Send(testwait.Ctx(t), cs[0], buf(t, vals(2, 0, 16)).Block(), 1, 0))
	st, err := r.Wait(testwait.Ctx(t))
	require.ErrorIs(t, err, errFakeFault)
	assert.Contains(t, err.Error(), "comm irecv: ")
	assert.Zero(t, st.Count)
	_, done, err2 := r.Test()
	assert.True(t, done)
	assert.Equal(t, err, err2, "Test after the failed Wait")

	rs[0].dev.fault.Store(nil)
	rs[1].dev.fault.Store(nil)
	sdone()
	rdone()
	checkLedgers(t, rs)
}

// TestNonblockingHostIsTheBackends: for host buffers (and the zero
// Block) comm.Isend and comm.Irecv return the backend's own requests.
func TestNonblockingHostIsTheBackends(t *testing.T) {
	cs := newGroup(t, 2, local.Options{})
	direct, err := cs[1].Irecv(memspace.Block{}, 0, 0)
	require.NoError(t, err)
	r, err := comm.Irecv(cs[1], buf(t, make([]int32, 4)).Block(), 0, 1)
	require.NoError(t, err)
	assert.Equal(t, reflect.TypeOf(direct), reflect.TypeOf(r), "comm.Irecv of a host block")
	s, err := comm.Isend(cs[0], memspace.Block{}, 1, 0)
	require.NoError(t, err)
	assert.Equal(t, reflect.TypeOf(direct), reflect.TypeOf(s), "comm.Isend of the zero Block")
	s2, err := comm.Isend(cs[0], buf(t, make([]int32, 4)).Block(), 1, 1)
	require.NoError(t, err)
	require.NoError(t, comm.WaitAll(testwait.Ctx(t), direct, r, s, s2))
	_, err = comm.Isend(nil, memspace.Block{}, 0, 0)
	require.ErrorIs(t, err, comm.ErrInvalidArgument)
	_, err = comm.Irecv(nil, memspace.Block{}, 0, 0)
	require.ErrorIs(t, err, comm.ErrInvalidArgument)
}

// deviceTaker is a communicator that claims to move the device blocks of
// one space itself, and counts the device blocks its Isend and Irecv are
// handed (which it then stages as comm would, to move them).
type deviceTaker struct {
	comm.Comm
	space  memspace.Space
	handed *atomic.Int64
}

func (d deviceTaker) Unwrap() comm.Comm { return d.Comm }

func (d deviceTaker) TakesDevice(b memspace.Block) bool { return b.Space() == d.space }

func (d deviceTaker) Isend(b memspace.Block, dest, tag int) (comm.Request, error) {
	if !b.HostAccessible() {
		d.handed.Add(1)
	}
	return comm.Isend(d.Comm, b, dest, tag)
}

func (d deviceTaker) Irecv(b memspace.Block, source, tag int) (comm.Request, error) {
	if !b.HostAccessible() {
		d.handed.Add(1)
	}
	return comm.Irecv(d.Comm, b, source, tag)
}

// TestNonblockingHandsDeviceToNative: a DeviceNative communicator gets the
// device blocks it takes as they are, found through a wrapper.
func TestNonblockingHandsDeviceToNative(t *testing.T) {
	registerStagePaths(t)
	rs := newStageRanks(2, true)
	cs := newGroup(t, 2, local.Options{})
	var handed atomic.Int64
	var ws [2]comm.Comm
	for i := range ws {
		ws[i] = unwrapOnly{deviceTaker{cs[i], rs[i].space, &handed}}
	}
	want := vals(6, 0, 12)
	sb, sdone := devBuf(t, rs[0], want)
	rb, rdone := devBuf(t, rs[1], make([]int32, 12))
	r, err := comm.Irecv(ws[1], rb.Block(), 0, 0)
	require.NoError(t, err)
	s, err := comm.Isend(ws[0], sb.Block(), 1, 0)
	require.NoError(t, err)
	require.NoError(t, comm.WaitAll(testwait.Ctx(t), r, s))
	assert.Equal(t, int64(2), handed.Load(), "device blocks handed to the DeviceNative communicator")
	sdone()
	assert.Equal(t, want, rdone())
	checkLedgers(t, rs)
}

// unwrapOnly is a wrapper that exposes nothing but Unwrap.
type unwrapOnly struct{ c comm.Comm }

func (u unwrapOnly) Unwrap() comm.Comm { return u.c }
func (u unwrapOnly) Rank() int         { return u.c.Rank() }
func (u unwrapOnly) Size() int         { return u.c.Size() }
func (u unwrapOnly) Close() error      { return u.c.Close() }
func (u unwrapOnly) Isend(b memspace.Block, dest, tag int) (comm.Request, error) {
	return u.c.Isend(b, dest, tag)
}
func (u unwrapOnly) Irecv(b memspace.Block, source, tag int) (comm.Request, error) {
	return u.c.Irecv(b, source, tag)
}
