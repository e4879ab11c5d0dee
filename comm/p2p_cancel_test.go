package comm_test

import (
	"context"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/xpu-go/xpu/comm"
	"github.com/xpu-go/xpu/memspace"
)

// stuckReq is a request that never completes and that Cancel cannot stop:
// an MPI send whose receiver never takes it (Open MPI cancels no send).
type stuckReq struct{ cancels atomic.Int32 }

func (r *stuckReq) Wait(ctx context.Context) (comm.Status, error) {
	<-ctx.Done()
	return comm.Status{}, ctx.Err()
}
func (r *stuckReq) Test() (comm.Status, bool, error) { return comm.Status{}, false, nil }
func (r *stuckReq) Cancel() error                    { r.cancels.Add(1); return nil }

// cancelableReq completes only when canceled, as Cancel promises.
type cancelableReq struct {
	once     atomic.Bool
	canceled chan struct{}
}

func newCancelable() *cancelableReq { return &cancelableReq{canceled: make(chan struct{})} }

func (r *cancelableReq) Wait(ctx context.Context) (comm.Status, error) {
	select {
	case <-r.canceled:
		return comm.Status{}, comm.ErrCanceled
	case <-ctx.Done():
		return comm.Status{}, ctx.Err()
	}
}

func (r *cancelableReq) Test() (comm.Status, bool, error) {
	select {
	case <-r.canceled:
		return comm.Status{}, true, comm.ErrCanceled
	default:
		return comm.Status{}, false, nil
	}
}

func (r *cancelableReq) Cancel() error {
	if r.once.CompareAndSwap(false, true) {
		close(r.canceled)
	}
	return nil
}

// pairComm hands out the requests of a Sendrecv: recv for Irecv, send for
// Isend.
type pairComm struct {
	recv, send comm.Request
}

func (c *pairComm) Rank() int { return 0 }
func (c *pairComm) Size() int { return 2 }
func (c *pairComm) Isend(memspace.Block, int, int) (comm.Request, error) {
	return c.send, nil
}
func (c *pairComm) Irecv(memspace.Block, int, int) (comm.Request, error) {
	return c.recv, nil
}
func (c *pairComm) Close() error { return nil }

// assertGrace checks, on the bubble's clock, that a call started at start
// whose context expired after timeout gave its canceled requests a grace,
// and that the grace was bounded although a request never settled.
func assertGrace(t *testing.T, start time.Time, timeout time.Duration, call string) {
	t.Helper()
	waited := time.Since(start) - timeout
	assert.Greater(t, waited, time.Duration(0), "%s gives the canceled requests a grace", call)
	assert.LessOrEqual(t, waited, 10*time.Second, "%s returns although a request never settles", call)
}

// The waits of Send, Recv, WaitAll and Sendrecv after ctx ends are bounded: a request
// that Cancel cannot stop no longer holds the caller forever. The bubble's
// clock shows how long they waited.
func TestCancelBoundedWait(t *testing.T) {
	const timeout = time.Second
	runWithTimeout(t, "WaitAll/stuck", timeout, func(t *testing.T, ctx context.Context) {
		stuck, other := &stuckReq{}, newCancelable()
		start := time.Now()
		err := comm.WaitAll(ctx, stuck, other)
		require.ErrorIs(t, err, context.DeadlineExceeded)
		assert.Equal(t, int32(1), stuck.cancels.Load(), "the stuck request was canceled")
		_, done, _ := other.Test()
		assert.True(t, done, "the other pending request was canceled")
		assertGrace(t, start, timeout, "WaitAll")
	})
	runWithTimeout(t, "WaitAll/cancelable", timeout, func(t *testing.T, ctx context.Context) {
		reqs := []comm.Request{newCancelable(), newCancelable()}
		start := time.Now()
		require.ErrorIs(t, comm.WaitAll(ctx, reqs...), context.DeadlineExceeded)
		assert.Equal(t, timeout, time.Since(start), "requests that settle on Cancel are not waited for longer")
	})
	runWithTimeout(t, "Sendrecv/stuck-send", timeout, func(t *testing.T, ctx context.Context) {
		send, recv := &stuckReq{}, newCancelable()
		c := &pairComm{recv: recv, send: send}
		start := time.Now()
		_, err := comm.Sendrecv(ctx, c, memspace.Block{}, 1, 0, memspace.Block{}, 1, 0)
		require.ErrorIs(t, err, context.DeadlineExceeded)
		assert.Equal(t, int32(1), send.cancels.Load(), "the send was canceled")
		_, done, _ := recv.Test()
		assert.True(t, done, "the receive was canceled")
		assertGrace(t, start, timeout, "Sendrecv")
	})
	runWithTimeout(t, "Send/stuck", timeout, func(t *testing.T, ctx context.Context) {
		send := &stuckReq{}
		c := &pairComm{send: send}
		start := time.Now()
		err := comm.Send(ctx, c, memspace.Block{}, 1, 0)
		require.ErrorIs(t, err, context.DeadlineExceeded)
		assert.Equal(t, int32(1), send.cancels.Load(), "the send was canceled")
		assertGrace(t, start, timeout, "Send")
	})
	runWithTimeout(t, "Recv/cancelable", timeout, func(t *testing.T, ctx context.Context) {
		c := &pairComm{recv: newCancelable()}
		start := time.Now()
		_, err := comm.Recv(ctx, c, memspace.Block{}, 1, 0)
		require.ErrorIs(t, err, context.DeadlineExceeded)
		assert.Equal(t, timeout, time.Since(start), "a receive that settles on Cancel is not waited for longer")
	})
	t.Run("Sendrecv/canceled-ctx", func(t *testing.T) {
		// A context canceled (not expired) while the stuck send waits.
		synctest.Test(t, func(t *testing.T) {
			ctx, cancel := context.WithCancel(context.Background())
			send := &stuckReq{}
			c := &pairComm{recv: newCancelable(), send: send}
			time.AfterFunc(timeout, cancel)
			_, err := comm.Sendrecv(ctx, c, memspace.Block{}, 1, 0, memspace.Block{}, 1, 0)
			require.ErrorIs(t, err, context.Canceled)
			assert.Equal(t, int32(1), send.cancels.Load())
		})
	})
}

// runWithTimeout runs body as subtest name inside a synctest bubble, with a context that expires after timeout.
func runWithTimeout(t *testing.T, name string, timeout time.Duration, body func(t *testing.T, ctx context.Context)) {
	t.Helper()
	t.Run(name, func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), timeout)
			defer cancel()
			body(t, ctx)
		})
	})
}
