package rdma

import (
	"context"

	"github.com/xpu-go/xpu/backends/rdma/internal/fabric"
)

// NewGroupOn makes n ranks in this process over prov (tests).
func NewGroupOn(ctx context.Context, prov fabric.Provider, dev, host string, n int, cfg Config) ([]*Comm, error) {
	return newGroup(ctx, prov, dev, host, n, cfg)
}
