//go:build !cgo

package topo

import (
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/xpu-go/xpu/xerr"
)

func TestDiscoverLocalWithoutCgo(t *testing.T) {
	devs, err := DiscoverLocal()
	assert.Nil(t, devs)
	assert.ErrorIs(t, err, xerr.ErrUnavailable)
	assert.EqualError(t, err, "cuda nvml open: built without cgo, which NVML needs (CGO_ENABLED=0): backend unavailable")
}
