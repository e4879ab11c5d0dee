package executor_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/xpu-go/xpu/executor"
	"github.com/xpu-go/xpu/xerr"
)

// The sentinels are the values of package xerr, so they match across
// packages and backends.
func TestSentinels(t *testing.T) {
	assert.Same(t, xerr.ErrInvalidArgument, executor.ErrInvalidArgument)
	assert.Same(t, xerr.ErrClosed, executor.ErrClosed)
	assert.Same(t, xerr.ErrNotSupported, executor.ErrNotSupported)
	assert.Same(t, xerr.ErrDeviceLost, executor.ErrDeviceLost)
	assert.ErrorIs(t, &executor.PanicError{Value: "x"}, executor.ErrPanic)
}

// plainEvent is an Event that does not know when it completed.
type plainEvent struct{}

func (plainEvent) Wait(context.Context) error { return nil }
func (plainEvent) Query() (bool, error)       { return true, nil }

func TestElapsedNotSupported(t *testing.T) {
	_, err := executor.Elapsed(plainEvent{}, plainEvent{})
	assert.ErrorIs(t, err, executor.ErrNotSupported)
}
