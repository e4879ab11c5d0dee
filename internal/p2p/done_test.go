package p2p_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/xpu-go/xpu/comm"
	"github.com/xpu-go/xpu/internal/p2p"
	"github.com/xpu-go/xpu/internal/tooling/testwait"
	"github.com/xpu-go/xpu/xerr"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// TestDoneLifeCycle: pending until the first Complete, whose outcome every
// later call reports; a second Complete changes nothing; a waiter blocked
// before the completion wakes; a wait whose context ends leaves the
// request pending; a nil context is an error of the backend.
func TestDoneLifeCycle(t *testing.T) {
	var d p2p.Done
	_, done, err := d.Test()
	require.False(t, done)
	require.NoError(t, err)
	require.False(t, d.IsDone())

	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	_, err = d.Wait(ctx, "x")
	require.ErrorIs(t, err, context.DeadlineExceeded)
	require.False(t, d.IsDone(), "a wait whose context ended completed the request")
	_, err = d.Wait(nil, "x") //nolint:staticcheck // a nil context is the case under test
	require.ErrorIs(t, err, xerr.ErrInvalidArgument)
	require.ErrorContains(t, err, "x wait")

	woke := make(chan comm.Status)
	go func() {
		st, _ := d.Wait(testwait.Ctx(t), "x")
		woke <- st
	}()
	time.Sleep(10 * time.Millisecond)
	want := comm.Status{Source: 3, Tag: 7, Count: 8}
	require.True(t, d.Complete(want, nil))
	require.Equal(t, want, testwait.Recv(t, woke, "the Wait, after Complete"))
	require.False(t, d.Complete(comm.Status{}, xerr.ErrCanceled), "a second completion took effect")
	st, done, err := d.Test()
	require.True(t, done)
	require.NoError(t, err)
	require.Equal(t, want, st)
	select {
	case <-d.Chan():
	default:
		t.Fatal("the channel of a done request is open")
	}
}

// TestDoneBeginPublish: between Begin and Publish the request is finishing
// but not done, and a waiter does not return.
func TestDoneBeginPublish(t *testing.T) {
	var d p2p.Done
	ch := d.Chan()
	require.True(t, d.Begin(comm.Status{Count: 1}, nil))
	require.True(t, d.Finishing())
	require.False(t, d.IsDone())
	select {
	case <-ch:
		t.Fatal("woken before Publish")
	default:
	}
	d.Publish()
	testwait.Recv(t, ch, "the wake-up after Publish")
	require.True(t, d.IsDone())

	var c p2p.Done
	c.Completed(comm.Status{Count: 2}, xerr.ErrTruncated)
	st, err := c.Wait(testwait.Ctx(t), "x")
	require.ErrorIs(t, err, xerr.ErrTruncated)
	require.Equal(t, 2, st.Count)
	c.Forget()
	_, err = c.Result()
	require.NoError(t, err)
}

func TestOutcomeAndSelf(t *testing.T) {
	st, err := p2p.Outcome("x", 0, 1, 5, 8, 8)
	require.NoError(t, err)
	require.Equal(t, comm.Status{Source: 1, Tag: 5, Count: 8}, st)
	st, err = p2p.Outcome("x", 0, 1, 5, 10, 4)
	require.ErrorIs(t, err, xerr.ErrTruncated)
	require.Equal(t, 4, st.Count)
	require.Equal(t, comm.Status{Source: 2, Tag: 1, Count: 3}, p2p.SendStatus(2, 1, 3))

	var s p2p.Self
	require.True(t, s.Take(4, 4, 6))
	require.False(t, s.Take(4, 4, 6), "over the budget")
	require.False(t, s.Take(5, 4, 100), "over the limit")
	require.False(t, s.Take(0, -1, 100), "no eager messages")
	s.Give(4)
	require.True(t, s.Take(4, 4, 6))
}
