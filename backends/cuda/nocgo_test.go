//go:build !cgo

package cuda_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/xpu-go/xpu"
	"github.com/xpu-go/xpu/backends/cuda"
)

// Built without cgo the backend cannot load the driver: it says so, and a
// fallback chain moves on.
func TestNoCgo(t *testing.T) {
	_, err := xpu.Open(context.Background(), cuda.Name, nil)
	assert.ErrorIs(t, err, xpu.ErrUnavailable)
	assert.Contains(t, err.Error(), "built without cgo")
	info, err := xpu.Describe(context.Background(), cuda.Name)
	assert.NoError(t, err)
	assert.False(t, info.Available)
	assert.Contains(t, info.Reason, "built without cgo")
}
