//go:build !rdma || !cgo

package verbs_test

import (
	"errors"
	"testing"

	"github.com/xpu-go/xpu/backends/rdma/internal/verbs"
	"github.com/xpu-go/xpu/xerr"
)

func TestNotBuilt(t *testing.T) {
	if verbs.Built {
		t.Fatal("Built is true in the build without RDMA")
	}
	p := verbs.Provider()
	if _, err := p.Devices(); !errors.Is(err, verbs.ErrNotBuilt) || !errors.Is(err, xerr.ErrUnavailable) {
		t.Errorf("Devices: %v, want ErrNotBuilt matching ErrUnavailable", err)
	}
	c, err := p.Open("", 64)
	if c != nil || !errors.Is(err, verbs.ErrNotBuilt) {
		t.Errorf("Open: %v, %v, want nil, ErrNotBuilt", c, err)
	}
	if got := err.Error(); got != "built without RDMA support: rebuild with -tags rdma (and libibverbs-dev, librdmacm-dev installed)" {
		t.Errorf("message %q", got)
	}
}
