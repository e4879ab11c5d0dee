package onesided_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/xpu-go/xpu/comm"
	"github.com/xpu-go/xpu/internal/onesided"
	"github.com/xpu-go/xpu/internal/tooling/testwait"
)

func TestNotesOrderPollAndClose(t *testing.T) {
	var n onesided.Notes
	ended, cancel := context.WithCancel(context.Background())
	cancel()
	_, err := n.Wait(ended)
	assert.ErrorIs(t, err, context.Canceled, "a poll of an empty queue")

	_, ok, err := n.TryPop()
	assert.False(t, ok)
	assert.NoError(t, err)
	require.True(t, n.Push(0, []byte("z")))
	got, ok, err := n.TryPop()
	assert.True(t, ok)
	assert.NoError(t, err)
	assert.Equal(t, "z", string(got.Msg))
	require.True(t, n.Push(1, []byte("a")))
	require.True(t, n.Push(2, nil))
	got, err = n.Wait(ended)
	require.NoError(t, err, "a poll finds what is queued, though its context ended")
	assert.Equal(t, comm.Notification{Source: 1, Msg: []byte("a")}, got)
	got, err = n.Wait(testwait.Ctx(t))
	require.NoError(t, err)
	assert.Equal(t, 2, got.Source)

	// A waiter is woken by a push, and then by Close.
	ctx, stop := context.WithTimeout(context.Background(), 10*time.Second)
	defer stop()
	res := make(chan comm.Notification)
	go func() {
		got, _ := n.Wait(ctx)
		res <- got
	}()
	time.Sleep(10 * time.Millisecond)
	n.Push(3, []byte("late"))
	assert.Equal(t, "late", string((testwait.Recv(t, res, "the Wait for a notification pushed late")).Msg))

	closedErr := errors.New("closed")
	errs := make(chan error)
	go func() {
		_, err := n.Wait(ctx)
		errs <- err
	}()
	time.Sleep(10 * time.Millisecond)
	n.Push(4, nil)
	n.Close(closedErr)
	n.Close(errors.New("twice"))
	err = testwait.Recv(t, errs, "the Wait when the notes close")
	if err != nil {
		assert.ErrorIs(t, err, closedErr)
	}
	_, err = n.Wait(ended)
	assert.ErrorIs(t, err, closedErr, "after Close, even what was queued is gone")
	assert.False(t, n.Push(5, nil), "a push after Close is dropped")
	_, _, err = n.TryPop()
	assert.ErrorIs(t, err, closedErr)
}
